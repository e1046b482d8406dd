"""Hard timeouts (issue 11, item 3): a callback past ``timeout_seconds`` is stopped, and a
hung or leaked thread never costs capacity or an exit.

Real ``run_scheduler`` processes (as tests/test_worker_process.py): every wait is a
database poll with a deadline; the few ``time.sleep`` calls only pace a signal. One test
runs the worker in-process (hard timeouts off) to see the thread path's capacity.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
from django.db import connections
from django.test import override_settings
from django.utils import timezone as dj_timezone

from django_durable_schedules.models import RunReceipt, Schedule, WorkerHeartbeat
from django_durable_schedules.worker import Worker, WorkerOptions
from tests.testapp.models import SideEffect

from .conftest import wait_until
from .test_worker_process import log, wait_exit, wait_started

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]

#: A hanging schedule's policy: stopped after 1 s, retried about a second later, for ever.
HANGING = {
    "timeout_seconds": 1,
    "max_attempts": 100,
    "backoff_base_seconds": 0.5,
    "backoff_cap_seconds": 0.5,
}


def every_second(name: str, callback: str, **fields) -> Schedule:
    return Schedule.objects.create(
        name=name,
        callback=callback,
        kind="interval",
        interval_seconds=1,
        timezone="UTC",
        **fields,
    )


def once(name: str, callback: str, **fields) -> Schedule:
    return Schedule.objects.create(
        name=name,
        callback=callback,
        kind="once",
        run_at=dj_timezone.now(),
        timezone="UTC",
        **fields,
    )


def receipts(schedule: Schedule, **filters):
    return RunReceipt.objects.filter(schedule=schedule, **filters)


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting to be reaped counts as gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def assert_capacity_survives_hangs(start_worker, callback: str, wid: str) -> None:
    """One worker, ``--concurrency 2``: a schedule whose callback hangs (stopped at 1 s,
    retried) next to a healthy 1 s schedule. Once two runs have hung (with threads kept
    busy, that was the whole capacity), the healthy one still runs about once a second."""
    worker = start_worker("--worker-id", wid, "--concurrency", "2", "--max-idle", "0.5")
    wait_started(wid)
    hanging = every_second(f"{wid}-hanging", callback, **HANGING)
    healthy = every_second(f"{wid}-healthy", "tests.record")

    second = wait_until(
        # Generous: each hung run starts a child process, slow on a loaded machine.
        lambda: receipts(hanging, status="failed").order_by("finished_at")[1:2].first(),
        40,
        message=f"two stopped runs of the hanging schedule\n{log(worker)}",
    )
    wait_until(
        lambda: receipts(healthy, finished_at__gt=second.finished_at).count() >= 4,
        15,
        message=f"4 healthy runs after the second hang\n{log(worker)}",
    )
    for r in receipts(hanging).exclude(status="released"):
        assert (r.status, r.error_type) == ("failed", "Timeout"), (r.status, r.error_message)
        assert "timeout_seconds=1" in r.error_message and "killed" in r.error_message
    assert set(receipts(healthy).values_list("status", flat=True)) == {"succeeded"}
    # The hanging callback ran in other processes, never in the worker's own.
    pids = set(SideEffect.objects.filter(schedule_name=hanging.name).values_list("pid", flat=True))
    assert pids and worker.proc.pid not in pids
    assert worker.proc.poll() is None, log(worker)
    worker.signal(signal.SIGTERM)
    assert wait_exit(worker, 15) == 0, log(worker)
    assert WorkerHeartbeat.objects.get(worker_id=wid).stopped_at is not None
    assert not [pid for pid in pids if alive(pid)], "a killed run's process is still alive"


def test_a_hanging_sync_callback_is_stopped_and_capacity_restored(start_worker):
    assert_capacity_survives_hangs(start_worker, "tests.hang", "hard-a")


def test_a_callback_spinning_in_c_is_killed_and_capacity_restored(start_worker):
    # Holds the GIL in C: no signal, exception or asyncio cancellation can reach it.
    assert_capacity_survives_hangs(start_worker, "tests.hang_spin", "hard-b")


def test_first_sigterm_exits_despite_a_hung_run_and_a_leaked_thread(start_worker):
    """A stopped run (a hung thread until now) and a callback that left a non-daemon thread
    running must not keep a drained worker alive: SIGTERM ends it, with ``stopped_at``."""
    wid = "hard-c1"
    worker = start_worker("--worker-id", wid, "--concurrency", "2", "--max-idle", "0.5")
    wait_started(wid)
    hung = once("c1-hung", "tests.hang", timeout_seconds=1, max_attempts=1)
    leak = once("c1-leak", "tests.hang_leak")
    wait_until(
        lambda: receipts(hung).exists() and receipts(leak).exists(),
        15,
        message=f"both receipts\n{log(worker)}",
    )
    assert receipts(hung).get().error_type == "Timeout"
    assert receipts(leak).get().status == "succeeded"

    worker.signal(signal.SIGTERM)
    assert wait_exit(worker, 8) == 0, log(worker)
    assert WorkerHeartbeat.objects.get(worker_id=wid).stopped_at is not None


def test_second_sigterm_exits_at_once_and_kills_the_run_process(start_worker):
    """Draining a run in a child process, with a leaked non-daemon thread in the worker:
    the second SIGTERM exits at once (1), records ``stopped_at`` and kills the child."""
    wid = "hard-c2"
    worker = start_worker(
        "--worker-id", wid, "--concurrency", "2", "--max-idle", "0.5", "--lease-seconds", "3"
    )
    wait_started(wid)
    leak = once("c2-leak", "tests.hang_leak")
    wait_until(lambda: receipts(leak).exists(), 15, message=f"the leak's receipt\n{log(worker)}")
    hung = once("c2-hung", "tests.hang", timeout_seconds=60)
    effect = wait_until(
        lambda: SideEffect.objects.filter(schedule_name="c2-hung").first(),
        15,
        message=f"the hung run to start\n{log(worker)}",
    )
    assert effect.pid != worker.proc.pid  # it runs in a child process
    worker.signal(signal.SIGTERM)  # drains: the hung run is in flight
    wait_until(lambda: "draining" in worker.output(), 10, message="the drain to start")
    time.sleep(0.3)  # pacing only: the drain is under way
    assert worker.proc.poll() is None, log(worker)
    forced_at = time.monotonic()
    worker.signal(signal.SIGTERM)
    assert wait_exit(worker, 10) == 1, log(worker)
    assert time.monotonic() - forced_at < 3, log(worker)
    beat = WorkerHeartbeat.objects.get(worker_id=wid)
    assert beat.stopped_at is not None and beat.in_flight == 1
    assert not receipts(hung).exists()  # left to lease expiry, as any forced stop
    wait_until(lambda: not alive(effect.pid), 5, message="the run's process to be gone")


def test_a_callback_that_ends_its_process_is_a_failed_run(start_worker):
    """``os._exit(3)`` in a callback with a timeout: receipted ``failed`` with the exit
    code; the worker lives on and keeps running other schedules."""
    wid = "hard-d"
    worker = start_worker("--worker-id", wid, "--concurrency", "2", "--max-idle", "0.5")
    wait_started(wid)
    dying = once("d-exit", "tests.hang_exit", timeout_seconds=30, max_attempts=1)
    receipt = wait_until(lambda: receipts(dying).first(), 15, message=f"the receipt\n{log(worker)}")
    assert (receipt.status, receipt.error_type) == ("failed", "WorkerProcessDied")
    assert "exit code 3" in receipt.error_message, receipt.error_message
    healthy = every_second("d-healthy", "tests.record")
    wait_until(lambda: receipts(healthy).count() >= 2, 8, message=f"healthy runs\n{log(worker)}")
    assert worker.proc.poll() is None, log(worker)
    worker.signal(signal.SIGTERM)
    assert wait_exit(worker, 15) == 0, log(worker)


@override_settings(DURABLE_SCHEDULES={"HARD_TIMEOUTS": False})
def test_without_isolation_an_abandoned_thread_takes_no_capacity():
    """Hard timeouts off: a sync callback past its timeout is abandoned in its thread. With
    ``concurrency=1`` the healthy schedule still runs while that thread sleeps on."""
    hung = Schedule.objects.create(
        name="e-hung",
        callback="tests.hang",
        kind="interval",
        interval_seconds=3600,
        payload={"seconds": 6},
        timeout_seconds=0.3,
        max_attempts=1,
    )
    healthy = every_second("e-healthy", "tests.record")
    worker = Worker(WorkerOptions(worker_id="hard-e", concurrency=1, poll_max_seconds=0.2))

    def run() -> None:
        try:
            worker.run()
        finally:
            connections.close_all()  # this thread's: the test database is dropped next

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        timed_out = wait_until(lambda: receipts(hung).first(), 10, message="the timeout")
        assert timed_out.error_type == "Timeout"
        # Its own process ran it (in a thread) ...
        assert SideEffect.objects.get(schedule_name="e-hung").pid == os.getpid()
        # ... and while that thread sleeps on (6 s), the one slot is free for others.
        wait_until(
            lambda: receipts(healthy, finished_at__gt=timed_out.finished_at).count() >= 2,
            4,
            message="healthy runs while the abandoned thread sleeps",
        )
    finally:
        worker.request_stop()
        thread.join(15)
    assert not thread.is_alive()
