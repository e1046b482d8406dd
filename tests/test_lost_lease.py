"""A run whose lease its worker finds lost is stopped (issue #28's chaos requirement): a
worker frozen (SIGSTOP) past its lease resumes while another worker has recovered the lease
and runs the occurrence again; a run in a child process (``timeout_seconds``) is killed at
once, with its process group, and its outcome is fenced by the completion.

:meth:`.IsolationPool.stop` directly, then real ``run_scheduler`` processes (as
tests/test_hard_timeout_children.py). Every wait is a poll with a deadline.
"""

from __future__ import annotations

import re
import signal
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone as dj_timezone

from django_durable_schedules import state
from django_durable_schedules.models import RunAttempt, RunReceipt, Schedule
from django_durable_schedules.worker.execution.isolation import IsolationPool

from .conftest import freeze, wait_until
from .test_hard_timeout_children import kill_quietly
from .test_hard_timeouts import alive, once
from .test_worker_process import log, wait_started

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]


def lines(path: Path) -> list[list[str]]:
    """The ``tests.lease_span`` lines written to ``path``: [event, attempt, pid] each."""
    try:
        return [line.split() for line in path.read_text().splitlines() if line.strip()]
    except OSError:
        return []


def span_claim(path: Path, seconds: float) -> state.Claim:
    """A claim of ``tests.lease_span`` (not in the database: the pool never looks there)."""
    now = dj_timezone.now()
    return state.Claim(
        attempt_id=uuid.uuid4(),
        schedule_id=uuid.uuid4(),
        schedule_name="lost-pool",
        callback="tests.lease_span",
        occurrence=1,
        attempt=1,
        scheduled_for=now.replace(microsecond=0),
        claimed_at=now,
        lease_token=uuid.uuid4(),
        lease_expires_at=now + timedelta(seconds=600),
        idempotency_key="lost-pool:1",
        payload={"path": str(path), "seconds": seconds},
        timeout_seconds=60,
    )


def test_stop_kills_the_child_running_a_claim_and_run_says_why(tmp_path):
    """stop(token) from another thread: run() returns within a second ``failed`` /
    ``LeaseLost`` with the reason, the child is gone, its callback never ended; the pool
    starts a fresh child for the next claim."""
    path = tmp_path / "span.txt"
    claim = span_claim(path, 30)
    pool = IsolationPool(1)
    outcomes = []
    runner = threading.Thread(target=lambda: outcomes.append(pool.run(claim)), daemon=True)
    try:
        assert not pool.stop(claim.lease_token, "nothing runs it")  # not handed to a child
        runner.start()
        started = wait_until(lambda: lines(path), 60, message="the callback to start")
        pid = int(started[0][2])
        stopped = time.monotonic()
        assert pool.stop(claim.lease_token, "the lease was lost (the worker was stalled 9.0 s)")
        runner.join(2)
        assert not runner.is_alive()
        assert time.monotonic() - stopped < 1.5
        (outcome,) = outcomes
        assert (outcome.status, outcome.error_type) == ("failed", "LeaseLost")
        assert outcome.error_message == (
            "stopped: the lease was lost (the worker was stalled 9.0 s)"
        )
        assert outcome.started_at is not None
        wait_until(lambda: not alive(pid), 2, message="the child to be gone")
        assert [event for event, *_ in lines(path)] == ["start"]
        assert not pool.stop(claim.lease_token, "again")  # its run is over
        # The next claim gets a fresh child and runs to its end.
        other = span_claim(path, 0)
        assert pool.run(other).status == "succeeded"
        assert [event for event, *_ in lines(path)] == ["start", "start", "end"]
    finally:
        pool.close(force=True)
        runner.join(5)


def test_a_child_run_is_killed_when_its_lease_lapses_unrenewed(tmp_path):
    """Nothing renews the lease (the database is unreachable, or the worker's renewal hangs
    on it): the run's own thread kills its child at the lease's deadline, before another
    worker could recover the lease and run the occurrence again (chaos soak on PostgreSQL:
    during a restart, an ``allow`` run in a child outlived its lease beside the runs that
    took its place). ``failed`` / ``LeaseLost`` saying why; the callback never ended."""
    path = tmp_path / "span.txt"
    claim = span_claim(path, 30)
    pool = IsolationPool(1)
    deadline = [time.monotonic() + 600.0]  # renewed until the callback starts, then not
    outcomes = []
    runner = threading.Thread(
        target=lambda: outcomes.append(pool.run(claim, lambda: deadline[0])), daemon=True
    )
    try:
        runner.start()
        started = wait_until(lambda: lines(path), 60, message="the callback to start")
        pid = int(started[0][2])
        lapsed = time.monotonic() + 1.0
        deadline[0] = lapsed  # the last renewal: its lease lapses in 1 s
        runner.join(10)
        assert not runner.is_alive()
        assert time.monotonic() - lapsed < 1.5
        (outcome,) = outcomes
        assert (outcome.status, outcome.error_type) == ("failed", "LeaseLost")
        assert outcome.error_message.startswith("stopped: its lease lapsed unrenewed")
        wait_until(lambda: not alive(pid), 2, message="the child to be gone")
        assert [event for event, *_ in lines(path)] == ["start"]
    finally:
        pool.close(force=True)
        runner.join(5)


def test_a_child_run_whose_lease_is_renewed_runs_to_its_end(tmp_path):
    """The lease's deadline is read again each time it comes: a run whose worker keeps
    renewing (every 0.2 s, each renewal 0.5 s long) outlives many first deadlines and
    ends ``succeeded``."""
    path = tmp_path / "span.txt"
    claim = span_claim(path, 2)
    pool = IsolationPool(1)
    deadline = [time.monotonic() + 0.5]
    done = threading.Event()

    def renew() -> None:
        while not done.wait(0.2):
            deadline[0] = time.monotonic() + 0.5

    renewer = threading.Thread(target=renew, daemon=True)
    renewer.start()
    try:
        outcome = pool.run(claim, lambda: deadline[0])
        assert outcome.status == "succeeded", outcome
        assert [event for event, *_ in lines(path)] == ["start", "end"]
    finally:
        done.set()
        renewer.join(5)
        pool.close(force=True)


def test_a_frozen_workers_child_is_killed_when_it_finds_its_lease_lost(start_worker, tmp_path):
    """Worker A runs a 20 s callback in a child (timeout_seconds=60); it is frozen
    (SIGSTOP) past its 2 s lease; worker B recovers the lease and runs the occurrence
    again (attempt 2). Resumed, A kills its child at once (its run thread finds the lease
    lapsed, or its next renewal finds it lost): attempt 1 never writes its end line, its
    one receipt is the
    recovery's ``lease_expired`` (A's fenced outcome writes nothing more), and attempt 2
    succeeds."""
    path = tmp_path / "span.txt"
    lease = ("--lease-seconds", "2", "--max-idle", "0.5")
    first = start_worker("--worker-id", "lost-a", *lease)
    wait_started("lost-a")
    row = once(
        "lost-span",
        "tests.lease_span",
        timeout_seconds=60,
        max_attempts=3,
        payload={"path": str(path), "seconds": 20},
    )
    started = wait_until(lambda: lines(path), 30, message=f"attempt 1 to start\n{log(first)}")
    child = int(started[0][2])
    assert child != first.proc.pid  # it runs in a child process
    second = None
    freeze(first, row.pk)
    try:
        second = start_worker("--worker-id", "lost-b", *lease)
        wait_until(
            lambda: any(x[:2] == ["start", "2"] for x in lines(path)),
            18,
            message=f"worker B to run attempt 2\n{log(first, second)}",
        )
        assert alive(child)  # frozen worker, not a frozen child: attempt 1 runs on
    finally:
        first.signal(signal.SIGCONT)
    resumed = time.monotonic()
    wait_until(lambda: not alive(child), 3, interval=0.05, message=f"the kill\n{log(first)}")
    assert time.monotonic() - resumed < 2.5, log(first)
    try:
        attempt1 = RunAttempt.objects.get(schedule=row, attempt=1)
        wait_until(
            lambda: RunReceipt.objects.filter(schedule=row, status="succeeded").exists(),
            15,
            message=f"attempt 2's receipt\n{log(first, second)}",
        )
        # A's outcome reaches the completion (and is fenced) after the kill: by the run's
        # own thread at its lapsed deadline, or by the first renewal after the resume.
        wait_until(
            lambda: (
                "lost the lease of lost-span" in log(first)
                or "lost-span #1.1 stopped: its lease lapsed unrenewed" in log(first)
            ),
            5,
            message=f"A's log line\n{log(first)}",
        )
        receipts = list(RunReceipt.objects.filter(attempt_id=attempt1.id))
        assert len(receipts) == 1, receipts
        assert receipts[0].status in ("lease_expired", "lease_lost"), receipts[0].status
        events = lines(path)
        assert ["end", "1", str(child)] not in events, events
        assert [e[:2] for e in events] == [["start", "1"], ["start", "2"], ["end", "2"]]
        assert re.search(r"its process (\d+ )?is killed", log(first)), log(first)
        assert first.proc.poll() is None, log(first)
        assert Schedule.objects.get(pk=row.pk).lease_token is None
    finally:
        kill_quietly(child if alive(child) else None)


class RecordingPool:
    """Stands in for the isolation pool: records stop() calls; runs ``running``."""

    def __init__(self, running: set[uuid.UUID]):
        self.running = running
        self.stops: list[tuple[uuid.UUID, str]] = []

    def stop(self, token: uuid.UUID, reason: str) -> bool:
        self.stops.append((token, reason))
        return token in self.running


def test_renew_stops_a_lost_child_run_once_and_only_logs_a_thread_run(tmp_path, caplog):
    """renew() finds two leases lost (no row holds their tokens): the run in a child is
    stopped once with how long the worker was stalled; the one in a thread is logged once;
    a later renewal does neither again."""
    from django_durable_schedules.worker.inflight import RunsInFlight
    from django_durable_schedules.worker.threads import RunFuture

    runs = RunsInFlight("w-renew", 2, 30.0, "default", threading.Event())
    child, thread = span_claim(tmp_path / "a", 1), span_claim(tmp_path / "b", 1)
    for claim in (child, thread):
        runs.in_flight[claim.lease_token] = (claim, RunFuture())
    runs.lease_deadlines[child.lease_token] = time.monotonic() + 30.0 - 7.0  # renewed 7 s ago
    pool = RecordingPool({child.lease_token})
    runs.placement.pool = pool  # type: ignore[assignment]
    with caplog.at_level("WARNING", logger="django_durable_schedules.worker"):
        runs.renew()
        runs.renew()
    assert [token for token, _ in pool.stops] == [child.lease_token, thread.lease_token]
    reason = pool.stops[0][1]
    assert reason.startswith("the lease was lost (the worker was stalled 7."), reason
    messages = [r.getMessage() for r in caplog.records if "lost the lease" in r.getMessage()]
    assert len(messages) == 2, messages
    assert "its process is killed" in messages[0]
    assert "its process is killed" not in messages[1]


def test_the_freeze_probe_sees_a_write_in_flight():
    """:func:`.conftest.freeze` stops a worker only outside a write: its probe sees
    another connection's open write transaction on the schedule row (SQLite: the database
    write lock; the others: the row lock) and sees it free again once committed."""
    from django.db import connection, transaction
    from django.db.models import F

    from .conftest import lock_free

    row = once("probe", "tests.noop")
    holding, release = threading.Event(), threading.Event()

    def writer():
        try:
            with transaction.atomic():
                Schedule.objects.filter(pk=row.pk).update(max_attempts=F("max_attempts"))
                holding.set()
                release.wait(10)
        finally:
            connection.close()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert holding.wait(10)
        assert not lock_free(row.pk)
    finally:
        release.set()
        thread.join(10)
    assert lock_free(row.pk)


_LOCK_HOLDER = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], timeout=5, isolation_level=None)
print("ready", flush=True)
while True:  # the database file locked 90 % of the time, as a busy writer would
    db.execute("BEGIN EXCLUSIVE")
    time.sleep(0.18)
    db.execute("ROLLBACK")
    time.sleep(0.02)
"""


def test_a_frozen_process_never_holds_the_sqlite_lock():
    """The CI failure's cause, made likely: a process that holds SQLite's lock 90 % of the
    time is frozen five times; a plain SIGSTOP would catch it holding the lock almost
    every time (and every other writer would wait for it), :func:`.conftest.freeze`
    never does."""
    import os
    import subprocess
    import sys

    from django.db import connection

    from .conftest import lock_free

    if connection.vendor != "sqlite":
        pytest.skip("SQLite's file lock (the servers' row lock: the probe test above)")

    holder = subprocess.Popen(
        [sys.executable, "-c", _LOCK_HOLDER, connection.settings_dict["NAME"]],
        stdout=subprocess.PIPE,
        text=True,
    )

    class Process:
        def signal(self, sig: int) -> None:
            os.kill(holder.pid, sig)

    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        for _ in range(5):
            freeze(Process())
            try:
                assert lock_free(None)
            finally:
                holder.send_signal(signal.SIGCONT)
            time.sleep(0.05)
    finally:
        holder.kill()
        holder.wait(10)
