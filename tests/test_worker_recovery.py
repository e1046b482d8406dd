"""A worker after a database outage and under a stepped host clock (issue 11, 4 and 5).

Outage: the worker reaches its database through a TCP proxy in this process, which the
test stops (dropping every connection, refusing new ones) and starts again; the shared
server is never touched. Runs that finished during the outage must be receipted
``succeeded`` when the database is back, while their leases still hold: the worker retries
at most ``RECONNECT_MAX_SECONDS`` apart and writes waiting outcomes first.

Clock: a ``sitecustomize`` on the worker's ``PYTHONPATH`` shifts ``django.utils.timezone.now``
by the seconds written to a file (the host clock stepped after start-up) and counts every
SQL statement the worker's connections send (a ``connection.execute_wrapper``, as
``bench/counting_worker.py`` does).

Waits are database polls with deadlines; the only sleeps set the length of the outage and
of the measuring window.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone as dj_timezone

from django_durable_schedules import state
from django_durable_schedules.models import RunAttempt, RunReceipt, Schedule, WorkerHeartbeat

from .conftest import REPO, wait_until
from .test_worker_process import (
    assert_ledger_consistent,
    log,
    once_schedule,
    wait_exit,
    wait_started,
)

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]


# ---------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------


class TcpProxy:
    """Forwards ``127.0.0.1:port`` to the database server, one thread per direction.

    :meth:`stop` is an outage as a worker sees it: the listening socket goes away (new
    connections are refused at once) and every forwarded connection is reset.
    :meth:`start` serves again on the same port.
    """

    def __init__(self, host: str, port: int):
        self.target = (host, port)
        self.port = 0
        self._serving = False
        self._listener: socket.socket | None = None
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()

    def start(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.settimeout(0.05)
        self.port = listener.getsockname()[1]
        self._listener, self._serving = listener, True
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def stop(self) -> None:
        self._serving = False
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        with self._lock:
            sockets, self._sockets = self._sockets, set()
        for sock in sockets:
            # shutdown() first: it also wakes the thread blocked in recv() on the socket,
            # which close() alone would leave holding the connection open.
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while self._serving:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            client.settimeout(None)
            upstream.settimeout(None)
            with self._lock:
                if not self._serving:
                    client.close()
                    upstream.close()
                    return
                self._sockets.update((client, upstream))
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def _via(proxy: TcpProxy) -> str:
    """The worker's DATABASE_URL: the test database, through ``proxy``."""
    s = connection.settings_dict
    scheme = "postgres" if connection.vendor == "postgresql" else "mysql"
    password = f":{s['PASSWORD']}" if s.get("PASSWORD") else ""
    return f"{scheme}://{s.get('USER') or ''}{password}@127.0.0.1:{proxy.port}/{s['NAME']}"


SITECUSTOMIZE = '''
"""Test hooks for one worker subprocess (written by tests/test_worker_recovery.py)."""
import atexit
import os
import threading
import time
from datetime import timedelta

_clock_file = os.environ.get("DDS_TEST_CLOCK_FILE")
if _clock_file:
    # The host clock, as Django reads it, is off by the seconds in the file (0 until the
    # test writes it). time.monotonic() and the database clocks are untouched.
    import django.utils.timezone as _tz

    _real_now = _tz.now
    _seen = [None, 0.0]

    def _offset():
        try:
            mtime = os.stat(_clock_file).st_mtime_ns
        except OSError:
            return 0.0
        if mtime != _seen[0]:
            with open(_clock_file) as f:
                _seen[1] = float(f.read() or 0)
            _seen[0] = mtime
        return _seen[1]

    def _stepped_now():
        return _real_now() + timedelta(seconds=_offset())

    _tz.now = _stepped_now

_count_file = os.environ.get("DDS_TEST_COUNT_FILE")
if _count_file:
    # Every SQL statement of every connection the worker opens, written to the file about
    # every 0.05 s and at exit.
    from django.db.backends.signals import connection_created

    _lock = threading.Lock()
    _total = [0]

    def _count(execute, sql, params, many, context):
        with _lock:
            _total[0] += 1
        return execute(sql, params, many, context)

    def _on_connect(sender, connection, **kwargs):
        if _count not in connection.execute_wrappers:
            connection.execute_wrappers.append(_count)

    connection_created.connect(_on_connect, weak=False)

    def _dump():
        tmp = _count_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(_total[0]))
        os.replace(tmp, _count_file)

    def _loop():
        while True:
            _dump()
            time.sleep(0.05)

    threading.Thread(target=_loop, daemon=True).start()
    atexit.register(_dump)
'''


def _hooked_env(tmp_path: Path) -> tuple[dict[str, str], Path, Path]:
    """Worker environment with the sitecustomize above; returns it, the clock file (write
    seconds into it with :func:`_step_clock`) and the statement count file."""
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(SITECUSTOMIZE)
    clock, count = tmp_path / "clock", tmp_path / "count"
    env = {
        "PYTHONPATH": f"{hooks}{os.pathsep}{REPO}",
        "DDS_TEST_CLOCK_FILE": str(clock),
        "DDS_TEST_COUNT_FILE": str(count),
    }
    return env, clock, count


def _step_clock(clock: Path, seconds: float) -> None:
    tmp = clock.with_suffix(".tmp")
    tmp.write_text(str(seconds))
    os.replace(tmp, clock)


def _statements(count: Path) -> int:
    try:
        return int(count.read_text() or 0)
    except (OSError, ValueError):
        return 0


def _settled(count: Path, quiet: float = 0.5) -> int:
    """Wait until the worker has issued no statement for ``quiet`` seconds (its start-up
    and first pass are done); return the count."""
    seen = [_statements(count), time.monotonic()]

    def quiet_for() -> bool:
        now = _statements(count)
        if now != seen[0]:
            seen[:] = [now, time.monotonic()]
        return now > 0 and time.monotonic() - seen[1] >= quiet

    wait_until(quiet_for, 10, 0.05, message="the worker to settle")
    return int(seen[0])


def _far_schedule() -> Schedule:
    """A schedule due in half an hour: something the idle worker knows it will wait for."""
    return Schedule.objects.create(
        name="skew-later",
        callback="tests.noop",
        kind="interval",
        interval_seconds=3600,
        start_at=dj_timezone.now() + timedelta(minutes=30),
        timezone="UTC",
    )


# ---------------------------------------------------------------------------------------
# 4. Outage: runs that finished meanwhile are receipted, not re-run
# ---------------------------------------------------------------------------------------

OUTAGE_SECONDS = 8.0
LEASE_SECONDS = 15  # renewed every 5 s
RUNS = 6
STAGGER_SECONDS = 0.3  # run i finishes (i + 1) * 0.3 s into the outage


def test_runs_finished_during_an_outage_are_receipted_not_rerun(start_worker, tmp_path):
    """Lease 15 s, an 8 s outage that begins just after a renewal; the runs finish one by
    one in its first 2 s. The worker is back within ~2 s of the database and receipts them
    ``succeeded`` while their leases still hold (~5 s more): no ``lease_expired``, no re-run.

    (The old loop backed off by its count of failed passes; each run finishing woke it for
    one more failed pass, so its wait reached 30 s within 2 s of the outage and it came
    back long after the leases had expired.)"""
    if connection.vendor == "sqlite":
        pytest.skip("SQLite is a file opened in-process: there is no server connection to lose")
    settings = connection.settings_dict
    default_port = 5432 if connection.vendor == "postgresql" else 3306
    proxy = TcpProxy(settings.get("HOST") or "127.0.0.1", int(settings.get("PORT") or default_port))
    proxy.start()
    go = tmp_path / "go"  # the runs wait for it, so they finish during the outage
    try:
        worker = start_worker(
            "--worker-id",
            "outage",
            "--lease-seconds",
            str(LEASE_SECONDS),
            "--max-idle",
            "0.5",
            "--concurrency",
            str(RUNS + 2),
            env={"DATABASE_URL": _via(proxy)},
        )
        wait_started("outage")
        schedules = [
            once_schedule(
                f"outage-{i}",
                "tests.recovery.nap",
                {"after_file": str(go), "seconds": (i + 1) * STAGGER_SECONDS},
            )
            for i in range(RUNS)
        ]
        ids = [s.pk for s in schedules]
        wait_until(
            lambda: RunAttempt.objects.filter(schedule_id__in=ids).count() == RUNS,
            10,
            message=f"the claims\n{log(worker)}",
        )
        claimed = dict(
            RunAttempt.objects.filter(schedule_id__in=ids).values_list(
                "schedule_id", "lease_expires_at"
            )
        )
        # Start the outage just after a renewal, so each lease has ~15 s left.
        wait_until(
            lambda: all(
                expiry is not None and expiry > claimed[pk]
                for pk, expiry in Schedule.objects.filter(pk__in=ids).values_list(
                    "pk", "lease_expires_at"
                )
            ),
            LEASE_SECONDS / 3 + 3,
            0.02,
            message=f"a lease renewal\n{log(worker)}",
        )
        proxy.stop()
        cut_at = dj_timezone.now()
        go.touch()
        leases_until = min(
            Schedule.objects.filter(pk__in=ids).values_list("lease_expires_at", flat=True)
        )
        assert leases_until > cut_at + timedelta(seconds=LEASE_SECONDS - 2)
        time.sleep(OUTAGE_SECONDS)  # the outage's length (the runs end in its first 2 s)
        assert not RunReceipt.objects.filter(schedule_id__in=ids).exists()
        proxy.start()
        back = time.monotonic()
        wait_until(
            lambda: RunReceipt.objects.filter(schedule_id__in=ids).count() == RUNS,
            LEASE_SECONDS,
            0.05,
            message=f"the receipts after the outage\n{log(worker)}",
        )
        resumed = time.monotonic() - back
        print(f"outage: receipted {resumed:.2f}s after the database came back")
        statuses = list(
            RunReceipt.objects.filter(schedule_id__in=ids).values_list("status", flat=True)
        )
        assert statuses == ["succeeded"] * RUNS, (statuses, log(worker))
        assert resumed <= 3.0, f"receipted {resumed:.1f}s after the database came back"
        assert RunAttempt.objects.filter(schedule_id__in=ids).count() == RUNS  # none re-run
        finished = RunReceipt.objects.filter(schedule_id__in=ids).values_list(
            "finished_at", flat=True
        )
        assert max(finished) < leases_until
        worker.signal()
        assert wait_exit(worker, 20) == 0, log(worker)
    finally:
        proxy.stop()
    assert not RunReceipt.objects.filter(status="lease_expired").exists()
    assert_ledger_consistent(record_side_effects=False)


@pytest.mark.vendor_independent  # a pure function
def test_reconnect_delay_grows_with_the_outage_and_is_capped():
    from django_durable_schedules.worker.outage import (
        RECONNECT_MAX_SECONDS,
        RECONNECT_MIN_SECONDS,
        reconnect_delay,
    )

    assert reconnect_delay(0) == RECONNECT_MIN_SECONDS == 0.2
    assert reconnect_delay(0.8) == 0.8
    assert reconnect_delay(3600) == RECONNECT_MAX_SECONDS == 2.0
    # Waiting as long as the outage has lasted doubles the elapsed time at each attempt.
    t, waits = 0.0, []
    while t < 10:
        waits.append(reconnect_delay(t))
        t += waits[-1]
    assert waits[:6] == pytest.approx([0.2, 0.2, 0.4, 0.8, 1.6, 2.0])


# ---------------------------------------------------------------------------------------
# 5. Clock steps: the idle loop keeps its statement rate and its timing
# ---------------------------------------------------------------------------------------

WINDOW_SECONDS = 6.5


def test_host_clock_stepped_forward_does_not_make_an_idle_worker_spin(start_worker, tmp_path):
    """The host clock jumps an hour ahead of the database clock just after start-up (the
    skew was measured at 0 by then). Over the next 6.5 s - which hold the first idle
    wake-up (5 s, ``POLL_MAX_SECONDS``) and not the next heartbeat (10 s) - the worker
    stays at its idle rate (<= 1 statement/s), then still claims a due run."""
    env, clock, count = _hooked_env(tmp_path)
    _far_schedule()
    worker = start_worker("--worker-id", "skew-ahead", env=env)
    wait_started("skew-ahead")
    before = _settled(count, quiet=0.3)
    _step_clock(clock, 3600)
    time.sleep(WINDOW_SECONDS)  # the measuring window
    issued = _statements(count) - before
    rate = issued / WINDOW_SECONDS
    print(f"clock step: {issued} statements in {WINDOW_SECONDS}s idle ({rate:.2f}/s)")
    assert rate <= 1.0, f"{issued} statements in {WINDOW_SECONDS}s idle\n{log(worker)}"

    # Decisions still follow the database clock: a run due now is claimed (at the next
    # poll at the latest), neither early nor lost.
    due = once_schedule("skew-due", "tests.noop")
    attempt = wait_until(
        lambda: RunAttempt.objects.filter(schedule=due).first(), 8, message="the claim"
    )
    assert attempt.claimed_at >= due.next_run_at
    worker.signal()
    assert wait_exit(worker, 20) == 0, log(worker)
    assert WorkerHeartbeat.objects.get(worker_id="skew-ahead").clock_skew_seconds > 3500


def test_host_clock_stepped_back_does_not_delay_a_due_run(start_worker, tmp_path):
    """The host clock jumps an hour behind the database clock just after start-up: a
    schedule due now is still claimed at the next 1 s poll, not after the next heartbeat
    has re-measured the skew (10 s)."""
    env, clock, _count = _hooked_env(tmp_path)
    worker = start_worker("--worker-id", "skew-behind", "--max-idle", "1", env=env)
    wait_started("skew-behind")
    _step_clock(clock, -3600)
    stepped = time.monotonic()
    due = once_schedule("skew-behind-due", "tests.noop")
    wait_until(
        lambda: RunAttempt.objects.filter(schedule=due).exists(),
        12,
        0.05,
        message=f"the claim\n{log(worker)}",
    )
    waited = time.monotonic() - stepped
    assert waited <= 3.0, f"claimed {waited:.1f}s after it was due\n{log(worker)}"
    worker.signal()
    assert wait_exit(worker, 20) == 0, log(worker)


def test_worker_decisions_use_the_database_clock_not_the_host_clock(monkeypatch):
    """Between readings the worker advances its last database reading by the monotonic
    clock: stepping the host clock changes nothing; a reading re-anchors it."""
    from django_durable_schedules.worker import Worker, WorkerOptions

    worker = Worker(WorkerOptions(once=True))
    db_time = state.db_now()
    worker._clock.note_reading(db_time)
    real_now = dj_timezone.now
    monkeypatch.setattr(dj_timezone, "now", lambda: real_now() + timedelta(hours=1))
    assert abs((worker._clock.estimate() - db_time).total_seconds()) < 1
    later = db_time + timedelta(minutes=5)  # as if the database clock had been stepped
    worker._clock.note_reading(later)
    assert abs((worker._clock.estimate() - later).total_seconds()) < 1
    assert worker._clock.skew > timedelta(minutes=50)
