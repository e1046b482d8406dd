"""``manage.py run_scheduler``: run a scheduler worker until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from ...checks import live_sqlite_workers
from ...models import pool_validator
from ...worker import Worker, WorkerOptions
from ...worker.outage import GaveUp


def positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not an integer") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return number


def ahead_seconds(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
    if not (0 <= number <= 60):
        raise argparse.ArgumentTypeError(f"{value} must be from 0 to 60 seconds")
    return number


def positive_float(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
    if not (0 < number < 86400):
        raise argparse.ArgumentTypeError(f"{value} must be more than 0 and less than 86400 seconds")
    return number


class Command(BaseCommand):
    help = (
        "Run a durable-schedules worker: claim due schedules under leases, run their "
        "callbacks and record receipts. First SIGTERM/SIGINT drains; a second forces."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--once", action="store_true", help="Run what is due now, then exit.")
        parser.add_argument("--batch-size", type=positive_int, help="Most claims per transaction.")
        parser.add_argument(
            "--concurrency", type=positive_int, help="Callbacks run at once (threads)."
        )
        parser.add_argument(
            "--claim-ahead",
            type=ahead_seconds,
            help="Claim beyond free threads as many runs as they are expected to start within "
            "this many seconds (default CLAIM_AHEAD_SECONDS; 0: only what free threads start).",
        )
        parser.add_argument("--lease-seconds", type=positive_float, help="Lease length in seconds.")
        parser.add_argument(
            "--worker-id",
            type=worker_id,
            help="Name recorded on attempts and heartbeats (default host:pid:rand).",
        )
        parser.add_argument(
            "--max-idle",
            "--poll-max",
            dest="max_idle",
            type=positive_float,
            help="Longest sleep between checks, seconds (default POLL_MAX_SECONDS).",
        )
        parser.add_argument(
            "--pool",
            dest="pools",
            action="append",
            type=pool_name,
            metavar="NAME",
            help="Claim only the schedules of this pool (repeatable; default: the pool 'default').",
        )
        parser.add_argument("--database", default="default", help="Database alias to use.")
        parser.add_argument(
            "--metrics-port",
            type=port_number,
            help="Serve Prometheus metrics on this port (needs the 'prometheus' extra).",
        )
        parser.add_argument(
            "--metrics-addr", default="0.0.0.0", help="Address of the metrics server."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not settings.USE_TZ:
            raise CommandError(
                "django-durable-schedules requires USE_TZ = True (see check durable_schedules.E001)."
            )
        pools = tuple(dict.fromkeys(options.get("pools") or ()))
        if len(",".join(pools)) > POOLS_MAX_CHARS:
            raise CommandError(
                f"--pool: the pools' names joined by commas must fit {POOLS_MAX_CHARS} "
                f"characters (the heartbeat's column); {len(pools)} pools are too many"
            )
        if options["verbosity"] >= 1:
            _log_to_stderr(logging.DEBUG if options["verbosity"] >= 2 else logging.INFO)
        worker = Worker(
            WorkerOptions(
                worker_id=options["worker_id"],
                batch_size=options["batch_size"],
                concurrency=options["concurrency"],
                claim_ahead_seconds=options["claim_ahead"],
                lease_seconds=options["lease_seconds"],
                poll_max_seconds=options["max_idle"],
                once=options["once"],
                using=options["database"],
                pools=pools or None,
            )
        )
        worker.install_signal_handlers()
        self._warn_sqlite_workers(options["database"], logged=options["verbosity"] >= 1)
        metrics = self._start_metrics(options["metrics_port"], options["metrics_addr"])
        gave_up: GaveUp | None = None
        try:
            code = worker.run()
        except GaveUp as exc:  # --once only: an error it cannot get past
            code, gave_up = 1, exc
        finally:
            if metrics is not None:
                server, connected_here = metrics
                server.shutdown()
                server.server_close()
                if connected_here:  # leave a connect() made by the project's own code
                    _prometheus().disconnect()
        leftover = [
            t
            for t in threading.enumerate()
            if t.is_alive() and not t.daemon and t is not threading.main_thread()
        ]
        if gave_up is not None and not leftover:
            raise CommandError(str(gave_up))
        if gave_up is not None:
            self.stderr.write(f"CommandError: {gave_up}")
        elif leftover and not code:
            logging.getLogger("django_durable_schedules").warning(
                "worker stopped; leaving without waiting for %s thread(s) a callback left "
                "running: %s",
                len(leftover),
                ", ".join(t.name for t in leftover[:5]),
            )
        if code or leftover:
            # A forced stop (second signal), or a drained one with threads a callback
            # started and left running. Callbacks may still be running in the run threads
            # (an abandoned sync callback, a leaked non-daemon thread), and interpreter
            # shutdown would join them: the process would keep running user code without
            # renewing its leases, so another worker could run the same occurrence at the
            # same time, and no signal would end it. Leave now; the leases expire
            # and are recovered elsewhere.
            ours = logging.getLogger("django_durable_schedules")
            for handler in logging.getLogger().handlers + ours.handlers:
                handler.flush()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

    def _warn_sqlite_workers(self, using: str, *, logged: bool) -> None:
        """SQLite serialises writers: a second worker adds lock waits, not throughput.
        Said once: through the worker's log when it logs (verbosity >= 1), else on stderr."""
        others = live_sqlite_workers(using)
        if others:
            message = (
                f"another worker is alive on this SQLite database ({', '.join(others[:3])}); "
                "SQLite allows one writer at a time, so several workers contend for its "
                "lock (see check durable_schedules.W002)."
            )
            if logged:
                logging.getLogger("django_durable_schedules").warning(message)
            else:
                self.stderr.write(f"Warning: {message}")

    def _start_metrics(self, port: int | None, addr: str) -> Any:
        if port is None:
            return None
        prometheus = _prometheus()
        connected_here = not prometheus.is_connected()
        prometheus.connect()
        try:
            return prometheus.serve(port, addr), connected_here
        except OSError as exc:
            if connected_here:
                prometheus.disconnect()
            raise CommandError(f"cannot serve metrics on {addr}:{port}: {exc}") from exc


def worker_id(value: str) -> str:
    """A worker id: 1-200 characters that every database stores as they are (no NUL, no
    undecodable bytes from the command line), since it is written on every attempt."""
    from ...projection import safe_text

    if not 1 <= len(value) <= 200 or safe_text(value)[1]:
        raise argparse.ArgumentTypeError(
            "--worker-id must be 1-200 characters without NUL or undecodable bytes"
        )
    return value


#: The most characters of a worker's pools joined by commas (``WorkerHeartbeat.pools``).
POOLS_MAX_CHARS = 1000


def pool_name(value: str) -> str:
    """A ``--pool`` value: a pool's name (``models.pool_validator``); anything else is an
    argparse error (a ``CommandError`` through ``call_command``) naming the value."""
    try:
        pool_validator(value)
    except ValidationError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a pool name: {pool_validator.message}"
        ) from None
    return value


def port_number(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a port number") from None
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not between 0 and 65535")
    return number


def _prometheus() -> Any:
    try:
        from ...contrib import prometheus
    except ImportError as exc:
        raise CommandError(
            "--metrics-port needs prometheus-client: "
            "pip install 'django-durable-schedules[prometheus]'"
        ) from exc
    return prometheus


def _log_to_stderr(level: int) -> None:
    log = logging.getLogger("django_durable_schedules")
    if log.handlers:  # the project's LOGGING configures it: respect that
        return
    if not logging.getLogger().handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        log.addHandler(handler)
        log.propagate = False
    log.setLevel(level)
