"""Real ``run_scheduler`` processes against the test database (B01, B03, B10, B21, R7).

Every test starts ``python -m django run_scheduler`` subprocesses, so the rows they must
see are committed (``transaction=True``) and every wait is a database poll with a deadline
(``wait_until``); the few ``time.sleep`` calls only pace a signal or set the length of a
load window, never decide a result.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from itertools import pairwise

import pytest
from django.db import connection
from django.utils import timezone as dj_timezone

from django_durable_schedules.models import RunAttempt, RunReceipt, Schedule, WorkerHeartbeat
from tests.testapp.models import SideEffect

from .conftest import REPO, database_url, wait_until

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]

S = timedelta(seconds=1)


# ---------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------


def start(start_worker, *args: str, **kwargs):
    return start_worker(*args, **kwargs)


def log(*workers) -> str:
    return "\n".join(
        f"--- pid {w.proc.pid}:\n" + "".join(getattr(w, "lines", []))[-4000:] for w in workers
    )


def wait_exit(worker, timeout: float = 30) -> int:
    try:
        return worker.wait(timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"worker did not exit within {timeout}s\n{log(worker)}") from None


def wait_started(*worker_ids: str, timeout: float = 30) -> None:
    """A worker writes its heartbeat once its start-up (sync, first heartbeat) is done."""
    wait_until(
        lambda: WorkerHeartbeat.objects.filter(worker_id__in=worker_ids).count() == len(worker_ids),
        timeout,
        message=f"workers {worker_ids} to start",
    )


def django_command(*args: str, settings: str = "tests.settings", timeout: float = 60):
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE=settings,
        DATABASE_URL=database_url(),
        PYTHONPATH=str(REPO),
        PYTHONUNBUFFERED="1",
    )
    return subprocess.run(
        [sys.executable, "-m", "django", *args],
        check=False,
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def interval_schedules(prefix: str, count: int, every: int, callback: str = "tests.record"):
    return [
        Schedule.objects.create(
            name=f"{prefix}-{i:03d}",
            callback=callback,
            kind="interval",
            interval_seconds=every,
            timezone="UTC",
        )
        for i in range(count)
    ]


def once_schedule(name: str, callback: str, payload=None) -> Schedule:
    return Schedule.objects.create(
        name=name,
        callback=callback,
        kind="once",
        run_at=dj_timezone.now(),
        payload=payload or {},
        timezone="UTC",
    )


def assert_ledger_consistent(record_side_effects: bool = True) -> dict[str, int]:
    """The audit-trail invariants (R7) once every worker has exited; returns status counts."""
    attempts = list(
        RunAttempt.objects.select_related("receipt").order_by(
            "schedule_id", "occurrence", "attempt"
        )
    )
    open_attempts = [a for a in attempts if not hasattr(a, "receipt")]
    assert not open_attempts, f"attempts without a receipt: {open_attempts[:5]}"
    assert RunReceipt.objects.count() == len(attempts)

    per_schedule: dict = defaultdict(list)
    for a in attempts:
        per_schedule[a.schedule_id].append(a)
    for schedule_id, rows in per_schedule.items():
        occurrences = sorted({a.occurrence for a in rows})
        assert occurrences == list(range(1, len(occurrences) + 1)), f"occurrence gap: {occurrences}"
        assert Schedule.objects.get(pk=schedule_id).occurrence == occurrences[-1]
        for occ in occurrences:
            numbers = [a.attempt for a in rows if a.occurrence == occ]
            assert numbers == list(range(1, len(numbers) + 1)), f"attempt gap in #{occ}: {numbers}"
        # Never concurrently with itself: each attempt is claimed after the previous one ended.
        for prev, nxt in pairwise(rows):
            assert nxt.claimed_at >= prev.receipt.finished_at, (
                f"overlapping attempts {prev} / {nxt}"
            )

    succeeded = Counter(
        RunReceipt.objects.filter(status="succeeded").values_list("schedule_id", "occurrence")
    )
    assert not [k for k, n in succeeded.items() if n > 1], "an occurrence succeeded twice"
    if record_side_effects:
        effects = Counter(SideEffect.objects.values_list("schedule_name", "occurrence"))
        assert not [k for k, n in effects.items() if n > 1], "a side effect ran twice"
        ran = set(SideEffect.objects.values_list("schedule_name", "occurrence", "attempt"))
        for a in attempts:
            if a.receipt.status == "succeeded":
                assert (a.schedule_name, a.occurrence, a.attempt) in ran, (
                    f"{a} succeeded without running"
                )
    return dict(Counter(RunReceipt.objects.values_list("status", flat=True)))


# ---------------------------------------------------------------------------------------
# 1. --once
# ---------------------------------------------------------------------------------------


def test_once_runs_everything_due_and_exits_0(start_worker):
    schedules = interval_schedules("once", 20, every=3600)
    worker = start(start_worker, "--once", "--worker-id", "once-1", "--concurrency", "4")
    assert wait_exit(worker, 60) == 0, log(worker)

    assert RunAttempt.objects.count() == 20
    assert set(RunAttempt.objects.values_list("worker", flat=True)) == {"once-1"}
    statuses = assert_ledger_consistent()
    assert statuses == {"succeeded": 20}, log(worker)
    assert SideEffect.objects.count() == 20
    for s in Schedule.objects.filter(pk__in=[s.pk for s in schedules]):
        assert s.occurrence == 1 and s.lease_token is None
        assert s.next_run_at == s.created_at.replace(microsecond=0) + 3600 * S
    assert WorkerHeartbeat.objects.get(worker_id="once-1").stopped_at is not None

    # A second pass finds nothing due: nothing runs, and it exits 0 at once (it does not
    # idle until the next due slot or the poll cap first).
    again = start(start_worker, "--once", "--worker-id", "once-2", "--max-idle", "60")
    assert wait_exit(again, 20) == 0, log(again)
    assert RunAttempt.objects.count() == 20


# ---------------------------------------------------------------------------------------
# 2. B21: SIGTERM while the callback runs
# ---------------------------------------------------------------------------------------


def test_sigterm_keeps_renewing_until_the_run_ends_b21(start_worker):
    opts = ("--lease-seconds", "3", "--max-idle", "0.5")
    workers = {wid: start(start_worker, *opts, "--worker-id", wid) for wid in ("b21-a", "b21-b")}
    wait_started(*workers)
    s = once_schedule("b21", "tests.sleep", payload={"seconds": 6})

    attempt = wait_until(
        lambda: RunAttempt.objects.filter(schedule=s).first(), 15, message="the claim"
    )
    claimer = workers[attempt.worker]
    [other] = [w for wid, w in workers.items() if wid != attempt.worker]
    time.sleep(1.0)  # the callback is now 1 s into its 6 s
    assert not SideEffect.objects.exists()
    claimer.signal(signal.SIGTERM)

    # Draining, it claims nothing new: a schedule due now goes to the other worker.
    later = once_schedule("b21-later", "tests.record")
    late = wait_until(
        lambda: RunAttempt.objects.filter(schedule=later).first(), 10, message="the later claim"
    )
    assert late.worker != attempt.worker
    assert claimer.proc.poll() is None  # still running its callback

    # The draining worker keeps the lease alive for the remaining ~5 s (> the 3 s lease),
    # records the success and exits 0.
    assert wait_exit(claimer, 30) == 0, log(claimer)
    receipt = RunReceipt.objects.get(attempt=attempt)
    assert receipt.status == "succeeded", (receipt.status, receipt.error_message, log(claimer))
    assert receipt.finished_at - attempt.claimed_at >= 6 * S  # outlived the first lease twice
    assert RunAttempt.objects.filter(schedule=s).count() == 1
    assert SideEffect.objects.filter(schedule_name="b21").count() == 1
    s.refresh_from_db()
    assert s.status == "completed" and s.next_run_at is None and s.lease_token is None
    assert other.proc.poll() is None, log(other)  # the other worker is still up, and idle
    assert list(RunAttempt.objects.exclude(worker=attempt.worker)) == [late]
    other.signal(signal.SIGTERM)
    assert wait_exit(other, 30) == 0, log(other)
    assert_ledger_consistent()


# ---------------------------------------------------------------------------------------
# 3. B03 variant: SIGKILL mid-run, recovery after the lease expires
# ---------------------------------------------------------------------------------------


def test_sigkill_mid_run_is_recovered_after_lease_expiry_b03(start_worker):
    lease = 3
    opts = ("--lease-seconds", str(lease), "--max-idle", "0.5")
    workers = {wid: start(start_worker, *opts, "--worker-id", wid) for wid in ("b03-a", "b03-b")}
    wait_started(*workers)
    s = once_schedule("b03", "tests.sleep", payload={"seconds": 4})

    first = wait_until(
        lambda: RunAttempt.objects.filter(schedule=s).first(), 15, message="the claim"
    )
    victim = workers[first.worker]
    [survivor_id] = [wid for wid in workers if wid != first.worker]
    time.sleep(1.0)  # kill 1 s into the 4 s callback
    victim.kill()  # SIGKILL: no drain, no release, no receipt
    killed_at = time.monotonic()
    s.refresh_from_db()
    expiry = s.lease_expires_at  # the last renewal the dead worker committed
    assert s.lease_token == first.lease_token and expiry is not None

    second = wait_until(
        lambda: RunAttempt.objects.filter(schedule=s, attempt=2).first(),
        lease + 8,
        message="the recovery",
    )
    assert time.monotonic() - killed_at <= lease + 5
    assert second.worker == survivor_id and second.occurrence == first.occurrence == 1
    assert expiry <= second.claimed_at <= expiry + 5 * S  # never before the lease expired
    r1 = RunReceipt.objects.get(attempt=first)
    assert r1.status == "lease_expired" and r1.finished_at >= expiry

    r2 = wait_until(
        lambda: RunReceipt.objects.filter(attempt=second).first(), 15, message="attempt 2's receipt"
    )
    assert r2.status == "succeeded", (r2.status, r2.error_message)
    s.refresh_from_db()
    assert s.status == "completed" and s.next_run_at is None
    assert RunAttempt.objects.filter(schedule=s).count() == 2  # never a third time
    assert list(SideEffect.objects.values_list("occurrence", "attempt")) == [(1, 2)]
    assert_ledger_consistent()
    workers[survivor_id].signal(signal.SIGTERM)
    assert wait_exit(workers[survivor_id], 30) == 0


# ---------------------------------------------------------------------------------------
# 4. Several workers on many short interval schedules
# ---------------------------------------------------------------------------------------


def test_many_workers_never_duplicate_or_lose_a_run(start_worker):
    # SQLite has one writer at a time: a smaller load. PostgreSQL: the acceptance scenario (4 workers, 200 schedules every 2 s, 30 s)
    n_workers, n_schedules, every, duration = {
        "sqlite": (2, 50, 2, 12),
        "postgresql": (4, 200, 2, 30),
    }.get(connection.vendor, (4, 200, 2, 15))
    interval_schedules("load", n_schedules, every=every)
    ids = [f"load-{i}" for i in range(n_workers)]
    workers = [
        start(start_worker, "--worker-id", wid, "--max-idle", "0.5", "--concurrency", "4")
        for wid in ids
    ]
    wait_started(*ids)
    started = time.monotonic()
    time.sleep(duration)  # the load window (the assertions below poll nothing)
    for w in workers:
        w.signal(signal.SIGTERM)
    for w in workers:
        assert wait_exit(w, 30) == 0, log(w)
    elapsed = time.monotonic() - started

    statuses = assert_ledger_consistent()
    assert set(statuses) <= {"succeeded", "released"}, statuses
    succeeded = statuses.get("succeeded", 0)
    per_worker = Counter(RunAttempt.objects.values_list("worker", flat=True))
    assert set(per_worker) <= set(ids)
    # Progress: every schedule ran at least twice in the window (slots it could not keep up
    # with are coalesced, never replayed), and at least half the workers took part.
    assert Schedule.objects.filter(name__startswith="load-", occurrence__lt=2).count() == 0
    assert len(per_worker) >= max(1, n_workers // 2), per_worker
    assert succeeded == SideEffect.objects.count()
    assert (
        WorkerHeartbeat.objects.filter(worker_id__in=ids, stopped_at__isnull=False).count()
        == n_workers
    )
    print(f"{connection.vendor}: {succeeded} runs in {elapsed:.1f}s by {dict(per_worker)}")


# ---------------------------------------------------------------------------------------
# 5. B10 A: USE_TZ = False is refused
# ---------------------------------------------------------------------------------------


def test_use_tz_false_is_refused_and_touches_nothing_b10(start_worker):
    [s] = interval_schedules("tz", 1, every=60)
    before = Schedule.objects.values().get(pk=s.pk)
    worker = start(
        start_worker, "--worker-id", "no-tz", "--max-idle", "0.5", settings="tests.settings_no_tz"
    )
    # The two ``check`` commands (they write nothing) start side by side with the refused
    # worker, not one Django start-up after the other.
    with ThreadPoolExecutor(2) as pool:
        check_no_tz = pool.submit(django_command, "check", settings="tests.settings_no_tz")
        check_default = pool.submit(django_command, "check")
        code = wait_exit(worker, 60)
        output = "".join(worker.lines)
        assert code != 0, output
        assert "USE_TZ" in output and "durable_schedules.E001" in output, output
        assert Schedule.objects.values().get(pk=s.pk) == before
        assert not RunAttempt.objects.exists() and not WorkerHeartbeat.objects.exists()

        check = check_no_tz.result()
        assert check.returncode != 0
        assert "durable_schedules.E001" in check.stderr + check.stdout, check.stderr
        assert check_default.result().returncode == 0


# ---------------------------------------------------------------------------------------
# 6. Bad options
# ---------------------------------------------------------------------------------------


@pytest.mark.vendor_independent  # argparse refuses before any connection: the CLI's words
@pytest.mark.parametrize(
    "args, message",
    [
        (("--batch-size", "0"), "--batch-size: 0 must be at least 1"),
        (("--concurrency", "two"), "--concurrency: 'two' is not an integer"),
        (("--lease-seconds", "0"), "--lease-seconds: 0 must be more than 0"),
        (("--max-idle", "nan"), "--max-idle"),
    ],
)
def test_bad_options_are_usage_errors(args, message):
    result = django_command("run_scheduler", "--once", *args)
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "usage:" in result.stderr and message in result.stderr, result.stderr
    assert not WorkerHeartbeat.objects.exists()


def test_a_forced_stop_after_an_idle_pause_still_records_the_stop(start_worker):
    """Without ``--max-idle`` (the defaults, ``CONN_MAX_AGE = 0``), a worker's idle pauses
    close its connection (``close_old_connections``): a forced stop must still say it
    stopped, or health and check W002 count it alive until its heartbeat goes stale (a
    newcomer's trial: the next worker on the same database warned about the dead one)."""
    worker = start(start_worker, "--worker-id", "forced-idle", "--lease-seconds", "6")
    wait_started("forced-idle")
    s = once_schedule("forced-idle", "tests.sleep", payload={"seconds": 30})
    wait_until(lambda: RunAttempt.objects.filter(schedule=s).exists(), 15, message="the claim")
    time.sleep(2.5)  # idle pauses of more than 0.5 s: the main thread's connection closes
    worker.signal(signal.SIGTERM)
    wait_until(lambda: "draining" in "".join(worker.lines), 10, message="the drain to start")
    forced_at = time.monotonic()
    worker.signal(signal.SIGTERM)
    assert wait_exit(worker, 10) == 1, log(worker)
    assert time.monotonic() - forced_at < 5  # did not wait for the callback
    beat = WorkerHeartbeat.objects.get(worker_id="forced-idle")
    assert beat.stopped_at is not None and beat.in_flight == 1, log(worker)


def test_second_signal_exits_at_once_with_1(start_worker):
    worker = start(
        start_worker, "--worker-id", "forced", "--lease-seconds", "3", "--max-idle", "0.5"
    )
    wait_started("forced")
    s = once_schedule("forced", "tests.sleep", payload={"seconds": 30})
    attempt = wait_until(
        lambda: RunAttempt.objects.filter(schedule=s).first(), 15, message="the claim"
    )
    worker.signal(signal.SIGTERM)  # drains: the 30 s callback keeps running
    wait_until(lambda: "draining" in "".join(worker.lines), 10, message="the drain to start")
    assert worker.proc.poll() is None
    forced_at = time.monotonic()
    worker.signal(signal.SIGTERM)
    assert wait_exit(worker, 10) == 1, log(worker)
    assert time.monotonic() - forced_at < 5  # did not wait for the callback
    assert not SideEffect.objects.exists()
    assert not RunReceipt.objects.filter(attempt=attempt).exists()  # left to lease expiry
    beat = WorkerHeartbeat.objects.get(worker_id="forced")
    assert beat.stopped_at is not None and beat.in_flight == 1  # says it left a run behind
