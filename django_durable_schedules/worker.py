"""The worker loop: sleep until something is due, claim, run, complete, renew, heartbeat.

All SQL lives in :mod:`.state`; this module only decides *when* to call it. Callbacks run
in a thread pool (``concurrency`` threads) so the main thread keeps renewing leases and
heartbeating while user code runs (B21: the heartbeat stops last). Outcomes are completed
in batches by the main thread.

Signals: the first SIGTERM/SIGINT stops claiming and drains (in-flight runs finish, are
receipted, their leases kept alive until then); claims not yet started are released. A
second signal exits at once; leases still held then expire and are recovered elsewhere.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import Error as DatabaseError
from django.db import close_old_connections, connections
from django.utils import timezone as dj_timezone

from . import runner, signals, state
from .conf import app_settings
from .db import wakeups

logger = logging.getLogger(__name__)

#: Longest wait for in-flight runs before a pass completes and claims (seconds).
GATHER_SECONDS = 0.005
#: How soon the loop notices a signal while it waits (seconds).
SIGNAL_POLL_SECONDS = 0.1


def default_worker_id() -> str:
    """``host:pid:random`` - unique per process."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


@dataclass
class WorkerOptions:
    """Options of one worker (seconds for durations); ``None`` means the setting's default."""

    worker_id: str | None = None
    batch_size: int | None = None
    concurrency: int | None = None
    lease_seconds: float | None = None
    poll_max_seconds: float | None = None
    once: bool = False
    using: str = "default"


class Worker:
    """One scheduler process's loop. Build it, then call :meth:`run` (blocks)."""

    def __init__(self, options: WorkerOptions | None = None):
        o = options or WorkerOptions()
        self.worker_id = o.worker_id or default_worker_id()
        self.batch_size = o.batch_size or app_settings.BATCH_SIZE
        self.concurrency = o.concurrency or app_settings.CONCURRENCY
        self.lease_seconds = o.lease_seconds or app_settings.LEASE_SECONDS
        self.renew_every = min(app_settings.RENEW_EVERY_SECONDS, self.lease_seconds / 3)
        self.poll_max = o.poll_max_seconds or app_settings.POLL_MAX_SECONDS
        self.once = o.once
        self.using = o.using
        self._in_flight: dict[uuid.UUID, tuple[state.Claim, Future[state.Outcome]]] = {}
        self._done: queue.SimpleQueue[state.Outcome] = queue.SimpleQueue()
        self._wake = threading.Event()
        # Stop state is plain attributes, not Events: a signal handler may write them (see
        # install_signal_handlers).
        self._stopping = False
        self._forced = False
        self._signals: list[tuple[int, bool]] = []  # (signum, forced) noted by the handler
        self._runs_finished = 0
        # The earliest lease expiry seen by the last look (db clock); an idle worker only
        # runs the recovery query when it has passed (leases are re-read at every sleep).
        self._expiry_known = False
        self._next_expiry: datetime | None = None
        # Likewise the earliest due slot: the claim transaction runs only when it has come
        # (a schedule created or triggered meanwhile is seen by the look before the sleep).
        self._due_known = False
        self._next_due: datetime | None = None
        self._deadlines: dict[uuid.UUID, float] = {}  # lease token -> monotonic deadline
        self._abandoned: set[uuid.UUID] = set()  # timed-out runs whose outcome is discarded
        # lease token -> [monotonic start, monotonic end or None] of the callback (signals)
        self._run_times: dict[uuid.UUID, list[float | None]] = {}
        self._skew = timedelta(0)  # host clock minus database clock
        self._started_at: datetime | None = None
        self.on_idle: Callable[[], None] | None = None  # test seam
        # PostgreSQL: a LISTEN thread that ends the idle sleep when a schedule changes.
        self._listener = (
            wakeups.Listener() if self.once else wakeups.listener(self.using, self._on_wakeup)
        )

    # -- control ---------------------------------------------------------------------

    def request_stop(self, force: bool = False) -> None:
        """Stop claiming and drain; with ``force`` (or on a second request) stop at once.
        Safe from any thread; a signal handler uses :meth:`_note_stop` instead."""
        self._note_stop(force)
        self._wake.set()

    def _note_stop(self, force: bool = False) -> bool:
        """Record a stop request with plain attribute writes only; returns ``forced``."""
        if self._stopping or force:
            self._forced = True
        self._stopping = True
        return self._forced

    def install_signal_handlers(self) -> None:
        """SIGTERM/SIGINT: first drains, second forces (main thread only).

        The handler takes no lock: it runs in the main thread between two bytecodes, maybe
        while that thread holds ``_wake``'s lock (``Event.set`` would deadlock) or is inside
        a logging handler. It only notes the request; the loop polls for it (:meth:`_pause`)
        and logs it.
        """

        def handler(signum: int, frame: Any) -> None:
            self._signals.append((signum, self._note_stop()))

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)

    # -- the loop --------------------------------------------------------------------

    def run(self) -> int:
        """Run until stopped (or one pass with ``once``); returns the process exit code."""
        logger.info(
            "worker %s starting (concurrency %s, batch %s, lease %ss)",
            self.worker_id,
            self.concurrency,
            self.batch_size,
            self.lease_seconds,
        )
        executor = ThreadPoolExecutor(self.concurrency, thread_name_prefix="durable-run")
        errors = 0
        last_renew = last_beat = 0.0
        claimed_total = 0
        released = False
        pass_done = False  # --once: claimed what was due; finish those runs, then exit
        self._listener.start()  # before the first look at what is due: no change is missed
        self._startup()
        try:
            while not self._forced:
                self._log_signals()
                if self._stopping and not released:
                    # A stop request hands back claims whose callback has not started. (Not
                    # the end of a --once pass: its claims were made to be run.)
                    self._release_unstarted()
                    released = True
                try:
                    self._enforce_timeouts()
                    self._gather()
                    self._complete_finished()
                    if (self._stopping or pass_done) and not self._in_flight:
                        break
                    mono = time.monotonic()
                    if mono - last_renew >= self.renew_every:
                        self._renew()
                        last_renew = mono
                    if mono - last_beat >= self.renew_every:
                        self._heartbeat()
                        last_beat = mono
                    full = False
                    if not (self._stopping or pass_done):
                        now = self._decision_now()
                        if self._lease_check_due(now):
                            state.expire_leases(limit=self.batch_size, now=now, using=self.using)
                            self._expiry_known = False
                        free = self.concurrency - len(self._in_flight) - len(self._abandoned)
                        if free > 0 and self._claim_due(now):
                            self._due_known = False
                            # No ``now``: claim_due judges "due" and stamps the claim by the
                            # database clock after its locking read, so a run released or
                            # finished by another worker meanwhile is never re-claimed at an
                            # instant before that receipt (R7).
                            claims = state.claim_due(
                                worker=self.worker_id,
                                limit=min(self.batch_size, free),
                                lease_seconds=self.lease_seconds,
                                using=self.using,
                            )
                            for claim in claims:
                                self._submit(executor, claim)
                            if claims and signals.run_claimed.has_listeners(Worker):
                                self._send_claimed(claims)
                            claimed_total += len(claims)
                            full = len(claims) == free
                        if self.once and (
                            claimed_total >= self.batch_size or (free > 0 and not full)
                        ):
                            pass_done = True  # --once: one pass over what is due now
                    errors = 0
                    finishing = self._stopping or pass_done
                    if not full and not (finishing and not self._in_flight):
                        self._sleep()
                except DatabaseError as exc:
                    errors += 1
                    delay = min(30.0, 0.5 * 2 ** min(errors, 6))
                    logger.error(
                        "database error in worker %s (retry in %.1fs): %s",
                        self.worker_id,
                        delay,
                        exc,
                    )
                    self._reset_connection()
                    self._pause(delay)
                    self._wake.clear()
        finally:
            self._log_signals()
            self._listener.stop()
            executor.shutdown(wait=not self._forced, cancel_futures=True)
            # A forced stop still says it stopped (health and check W002 would otherwise
            # count this worker alive until its heartbeat goes stale), but only over a
            # connection already open: a forced exit never waits for a database to answer.
            if not self._forced or connections[self.using].connection is not None:
                self._final_heartbeat(in_flight=len(self._in_flight) if self._forced else 0)
        logger.info("worker %s stopped (%s runs)", self.worker_id, self._runs_finished)
        return 1 if self._forced else 0

    # -- steps -------------------------------------------------------------------------

    def _startup(self) -> None:
        attempt = 0
        while not self._stopping:
            self._log_signals()
            try:
                state.sync_declared(using=self.using)
                self._heartbeat()
                return
            except DatabaseError as exc:
                attempt += 1
                delay = min(30.0, 0.5 * 2 ** min(attempt, 6))
                logger.error(
                    "worker %s cannot reach the database (retry in %.1fs): %s",
                    self.worker_id,
                    delay,
                    exc,
                )
                self._reset_connection()
                self._pause(delay)

    def _submit(self, executor: ThreadPoolExecutor, claim: state.Claim) -> None:
        future = executor.submit(self._execute, claim)
        self._in_flight[claim.lease_token] = (claim, future)
        if claim.timeout_seconds:
            # Async callbacks cancel themselves at the timeout; this is the sync backstop.
            self._deadlines[claim.lease_token] = time.monotonic() + claim.timeout_seconds + 0.5

        def done(f: Future[state.Outcome]) -> None:
            if f.cancelled() or claim.lease_token in self._abandoned:
                self._abandoned.discard(claim.lease_token)
                return
            exc = f.exception()
            if exc is not None:  # runner.execute never raises; be safe anyway
                self._done.put(state.Outcome(claim, "failed", error_type=type(exc).__name__))
            else:
                self._done.put(f.result())
            self._wake.set()

        future.add_done_callback(done)

    def _execute(self, claim: state.Claim) -> state.Outcome:
        """``runner.execute`` in a pool thread, timing the callback (for ``run_finished``)."""
        times: list[float | None] = [time.monotonic(), None]
        self._run_times[claim.lease_token] = times
        try:
            return runner.execute(claim)
        finally:
            times[1] = time.monotonic()

    def _send_claimed(self, claims: list[state.Claim]) -> None:
        """Send ``run_claimed`` for committed claims (main thread, robust)."""
        for claim in claims:
            signals.send_robust(signals.run_claimed, Worker, claim=claim, worker_id=self.worker_id)

    def _send_finished(self, outcomes: list[state.Outcome], receipts: list[Any]) -> None:
        """Send ``run_finished`` for each receipt :func:`.state.complete` committed."""
        claims = {o.claim.attempt_id: o.claim for o in outcomes}
        now = time.monotonic()
        for receipt in receipts:
            claim = claims.get(receipt.attempt_id)
            if claim is None:  # pragma: no cover - complete() writes receipts of these only
                continue
            times = self._run_times.get(claim.lease_token)
            duration = None if times is None else (times[1] or now) - (times[0] or now)
            signals.send_robust(
                signals.run_finished,
                Worker,
                receipt=receipt,
                claim=claim,
                schedule_name=claim.schedule_name,
                duration=duration,
                worker_id=self.worker_id,
            )

    def _gather(self) -> None:
        """Give runs still in flight a moment (at most ``GATHER_SECONDS``) to finish, so one
        pass completes and claims a whole batch instead of settling into half batches
        (docs/benchmarks.md: fixed costs per transaction dominate short runs)."""
        deadline = time.monotonic() + GATHER_SECONDS
        while self._in_flight and self._done.qsize() < len(self._in_flight):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._signals:
                return
            self._wake.wait(remaining)
            self._wake.clear()

    def _complete_finished(self) -> None:
        outcomes: list[state.Outcome] = []
        while True:
            try:
                outcomes.append(self._done.get_nowait())
            except queue.Empty:
                break
        if not outcomes:
            return
        try:
            report = state.complete(outcomes, using=self.using)
        except DatabaseError:
            for outcome in outcomes:  # keep them; completion is retried after reconnecting
                self._done.put(outcome)
            raise
        for outcome in outcomes:
            self._in_flight.pop(outcome.claim.lease_token, None)
            self._deadlines.pop(outcome.claim.lease_token, None)
        self._runs_finished += len(outcomes)
        if report.receipts and signals.run_finished.has_listeners(Worker):
            self._send_finished(outcomes, report.receipts)
        for outcome in outcomes:
            self._run_times.pop(outcome.claim.lease_token, None)
        for receipt in report.receipts:
            logger.debug(
                "receipt %s occurrence %s: %s",
                receipt.schedule_id,
                receipt.occurrence,
                receipt.status,
                extra={"occurrence": receipt.occurrence},
            )

    def _decision_now(self) -> datetime:
        """The database clock for this pass's decisions (R8). Idle, when the next due slot
        and the next lease expiry are both known and still ahead by the host clock
        corrected for the measured skew, nothing can be due: the estimate is returned and
        the round trip saved (G7: an idle tick is then just the wake-up reads). Whenever
        either may have come, the database is asked, so a claim or a recovery is always
        decided and stamped by the database clock."""
        if self._due_known and self._expiry_known:
            estimate = dj_timezone.now() - self._skew
            if not (self._claim_due(estimate) or self._lease_check_due(estimate)):
                return estimate
        return state.db_now(self.using)

    def _claim_due(self, now: datetime) -> bool:
        if not self._due_known:
            return True
        return self._next_due is not None and self._next_due <= now

    def _lease_check_due(self, now: datetime) -> bool:
        if not self._expiry_known:
            return True
        return self._next_expiry is not None and self._next_expiry <= now

    def _enforce_timeouts(self) -> None:
        """A sync callback past its timeout cannot be stopped (threads cannot be killed):
        receipt it ``failed`` (Timeout) now and stop renewing its lease; whatever it returns
        later is discarded. Its thread keeps a pool slot until it returns."""
        now = time.monotonic()
        for token, deadline in list(self._deadlines.items()):
            if deadline > now or token not in self._in_flight:
                continue
            claim, future = self._in_flight[token]
            del self._deadlines[token]
            if future.done():
                continue
            self._abandoned.add(token)
            logger.warning(
                "run %s #%s.%s passed timeout_seconds=%g: receipted failed, "
                "its thread is abandoned",
                claim.schedule_name,
                claim.occurrence,
                claim.attempt,
                claim.timeout_seconds,
                extra={"schedule": claim.schedule_name, "occurrence": claim.occurrence},
            )
            self._done.put(
                state.Outcome(
                    claim,
                    "failed",
                    error_type="Timeout",
                    error_message=f"still running after timeout_seconds={claim.timeout_seconds:g}; "
                    "the thread was abandoned",
                )
            )

    def _renew(self) -> None:
        tokens = list(self._in_flight)
        if not tokens:
            return
        owned = state.renew_leases(tokens, lease_seconds=self.lease_seconds, using=self.using)
        for token in set(tokens) - owned:
            claim = self._in_flight[token][0]
            logger.warning(
                "worker %s lost the lease of %s occurrence %s",
                self.worker_id,
                claim.schedule_name,
                claim.occurrence,
                extra={"schedule": claim.schedule_name, "occurrence": claim.occurrence},
            )

    def _heartbeat(self) -> None:
        db_now = state.heartbeat(
            self.worker_id,
            in_flight=len(self._in_flight),
            runs_finished=self._runs_finished,
            started_at=self._started_at,
            using=self.using,
        )
        self._started_at = self._started_at or db_now
        self._skew = dj_timezone.now() - db_now

    def _final_heartbeat(self, in_flight: int = 0) -> None:
        try:
            state.heartbeat(
                self.worker_id,
                in_flight=in_flight,
                runs_finished=self._runs_finished,
                stopping=True,
                using=self.using,
            )
        except DatabaseError:
            logger.warning("worker %s could not record its stop", self.worker_id)

    def _release_unstarted(self) -> None:
        released = []
        for claim, future in list(self._in_flight.values()):
            if future.cancel():
                released.append(state.Outcome(claim, "released"))
        if released:
            for outcome in released:
                self._done.put(outcome)

    def _sleep(self) -> None:
        wakeup = state.next_wakeup(using=self.using)
        self._expiry_known, self._next_expiry = True, wakeup.lease_expiry
        self._due_known, self._next_due = True, wakeup.due
        db_now_estimate = dj_timezone.now() - self._skew
        delay = min(self.poll_max, state.seconds_until(wakeup.earliest, db_now_estimate))
        if self._in_flight:
            delay = min(delay, self.renew_every)
        if self._deadlines:
            delay = min(delay, max(0.0, min(self._deadlines.values()) - time.monotonic()))
        if delay > 0:
            if self.on_idle is not None:
                self.on_idle()
            self._pause(delay)
        self._wake.clear()
        if delay > 0.5:
            close_old_connections()

    def _on_wakeup(self, payload: str | None) -> None:
        """A schedule changed (called from the listener thread): look again at once."""
        self._due_known = False
        self._wake.set()

    def _pause(self, delay: float) -> None:
        """Wait up to ``delay`` seconds for ``_wake``, or until a signal is pending (noticed
        within ``SIGNAL_POLL_SECONDS``: the handler cannot set the event)."""
        deadline = time.monotonic() + delay
        while not self._signals:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._wake.wait(min(remaining, SIGNAL_POLL_SECONDS)):
                return

    def _log_signals(self) -> None:
        """Log (and so clear) the signals the handler noted."""
        while self._signals:
            signum, forced = self._signals.pop(0)
            logger.warning(
                "worker %s got signal %s: %s",
                self.worker_id,
                signum,
                "forcing exit" if forced else "draining",
            )

    def _reset_connection(self) -> None:
        try:
            connections[self.using].close()
        except DatabaseError:
            pass
