"""Hard timeouts, the child processes' ends (issue 24, items 12-14): a child never outlives
its worker, never starts a claim whose lease has lapsed, takes its own children with it
when it is killed, and each way it ends is receipted at once with its own cause.

Real ``run_scheduler`` processes (as tests/test_hard_timeouts.py). Every wait is a poll with
a deadline; the deadlines are far below the runs' ``timeout_seconds``, so a run that is
only receipted at its timeout (the old behaviour) fails the test instead of passing late.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from django_durable_schedules import state
from django_durable_schedules.models import RunAttempt, RunReceipt, Schedule
from tests.testapp.models import SideEffect

from .conftest import freeze, wait_until
from .test_hard_timeouts import alive, once, receipts
from .test_worker_process import log, wait_exit, wait_started

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]


def kill_quietly(pid: int | None) -> None:
    """SIGKILL ``pid`` if it is still there (cleanup after a failed assertion)."""
    if pid is None:
        return
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return None


def test_a_child_stuck_in_c_holding_the_gil_dies_with_its_worker(start_worker):
    """Item 12: the callback sleeps in a C call that holds the GIL, so no thread of the
    child can run; SIGKILL the worker: the kernel ends the child (Linux:
    ``PR_SET_PDEATHSIG``), it does not run on beside the retry."""
    wid = "kids-a"
    worker = start_worker("--worker-id", wid, "--max-idle", "0.5")
    wait_started(wid)
    once("kids-a-gil", "tests.hang_gil", timeout_seconds=600, max_attempts=1)
    effect = wait_until(
        lambda: SideEffect.objects.filter(schedule_name="kids-a-gil").first(),
        30,
        message=f"the run to start\n{log(worker)}",
    )
    try:
        assert effect.pid != worker.proc.pid  # it runs in a child process
        worker.signal(signal.SIGKILL)
        wait_exit(worker, 10)
        wait_until(lambda: not alive(effect.pid), 5, message="the child to die with its worker")
    finally:
        kill_quietly(effect.pid)


def test_a_frozen_workers_child_does_not_start_a_stale_claim(start_worker):
    """Item 13: the worker is frozen (SIGSTOP) while its child starts up, until the claim's
    lease has lapsed by the database clock. Resumed, it hands the claim to the child, which
    refuses it (the lease's deadline has passed): the callback never runs for that attempt;
    the occurrence is retried as a new attempt."""
    wid = "kids-b"
    worker = start_worker(
        "--worker-id",
        wid,
        "--max-idle",
        "0.5",
        "--lease-seconds",
        "2",
        env={"DDS_TEST_CHILD_START_SECONDS": "4"},  # the window to freeze the worker in
    )
    wait_started(wid)
    stale = once("kids-b-stale", "tests.record", timeout_seconds=60, max_attempts=5)
    first = wait_until(
        lambda: RunAttempt.objects.filter(schedule=stale, attempt=1).first(),
        15,
        message=f"the claim\n{log(worker)}",
    )
    freeze(worker, stale.pk)
    try:
        assert not SideEffect.objects.filter(schedule_name=stale.name).exists()
        # Frozen: no renewal. Wait until its lease has lapsed by the database clock.
        expiry = Schedule.objects.get(pk=stale.pk).lease_expires_at
        assert expiry is not None
        wait_until(lambda: state.db_now() > expiry, 10, message="the lease to lapse")
    finally:
        worker.signal(signal.SIGCONT)
    wait_until(
        lambda: (
            RunReceipt.objects.filter(attempt_id=first.id).exists()
            and SideEffect.objects.filter(schedule_name=stale.name).exists()
        ),
        30,
        message=f"the stale attempt's receipt and the retry's run\n{log(worker)}",
    )
    ran = list(
        SideEffect.objects.filter(schedule_name=stale.name).values_list("attempt", flat=True)
    )
    assert 1 not in ran, f"the stale attempt's callback ran\n{log(worker)}"
    receipt = RunReceipt.objects.get(attempt_id=first.id)
    assert receipt.status in ("lease_expired", "lease_lost"), (receipt.status, log(worker))
    assert worker.proc.poll() is None, log(worker)


def test_a_timed_out_childs_grandchildren_are_killed_too(start_worker, tmp_path):
    """Item 14: at the timeout the child's whole process group is killed, so a ``sleep``
    it started goes with it."""
    wid = "kids-c"
    pid_file = tmp_path / "grandchild.pid"
    worker = start_worker("--worker-id", wid, "--max-idle", "0.5")
    wait_started(wid)
    hung = once(
        "kids-c-hung",
        "tests.hang_grandchild",
        timeout_seconds=1,
        max_attempts=1,
        payload={"pid_file": str(pid_file)},
    )
    try:
        receipt = wait_until(
            lambda: receipts(hung).first(), 30, message=f"the receipt\n{log(worker)}"
        )
        assert (receipt.status, receipt.error_type) == ("failed", "Timeout")
        grandchild = read_pid(pid_file)
        assert grandchild is not None
        wait_until(lambda: not alive(grandchild), 5, message="the grandchild to be killed")
    finally:
        kill_quietly(read_pid(pid_file))


def test_a_child_that_dies_is_receipted_at_once_and_its_group_killed(start_worker, tmp_path):
    """Item 14: a child that kills itself while a process it started still holds its end of
    the pipe (as ``os.system("... &")`` does) is receipted at once ``WorkerProcessDied``
    with its cause, not ``Timeout`` at ``timeout_seconds``; its grandchild is killed."""
    wid = "kids-d"
    pid_file = tmp_path / "grandchild.pid"
    worker = start_worker("--worker-id", wid, "--max-idle", "0.5")
    wait_started(wid)
    dying = once(
        "kids-d-dying",
        "tests.hang_grandchild",
        timeout_seconds=600,
        max_attempts=1,
        payload={"pid_file": str(pid_file), "die": True},
    )
    try:
        receipt = wait_until(
            lambda: receipts(dying).first(), 30, message=f"the receipt\n{log(worker)}"
        )
        assert (receipt.status, receipt.error_type) == ("failed", "WorkerProcessDied")
        assert "killed by SIGKILL" in receipt.error_message, receipt.error_message
        grandchild = read_pid(pid_file)
        assert grandchild is not None
        wait_until(lambda: not alive(grandchild), 5, message="the grandchild to be killed")
    finally:
        kill_quietly(read_pid(pid_file))
    assert worker.proc.poll() is None, log(worker)


def test_an_unpicklable_retry_delay_is_receipted_at_once(start_worker):
    """Item 14: ``RetryRun(after_seconds=<a lambda>)`` in a child: the delay cannot be sent
    back as it is; the run is receipted at once as the ``RetryRun`` it was (the delay
    bounded: the backoff is used, and the receipt says why), not ``Timeout``."""
    wid = "kids-e"
    worker = start_worker("--worker-id", wid, "--max-idle", "0.5")
    wait_started(wid)
    retried = once("kids-e-retry", "tests.retry_unpicklable", timeout_seconds=600, max_attempts=1)
    receipt = wait_until(
        lambda: receipts(retried).first(), 30, message=f"the receipt\n{log(worker)}"
    )
    assert (receipt.status, receipt.error_type) == ("failed", "RetryRun"), receipt.error_message
    assert "after_seconds" in receipt.error_message, receipt.error_message
    assert "backoff" in receipt.error_message, receipt.error_message
    assert worker.proc.poll() is None, log(worker)
