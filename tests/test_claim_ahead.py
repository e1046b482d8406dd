"""Claiming ahead of free threads (``CLAIM_AHEAD_SECONDS``, django_durable_schedules/worker/inflight.py).

At most ``concurrency`` callbacks run at once; a worker may claim more than its free
threads, as many as they are expected to start within ``CLAIM_AHEAD_SECONDS`` by the
observed run time, so that short callbacks are claimed and completed in whole batches.
Long runs add no room, and a claim that waits too long for a thread is handed back.
"""

from __future__ import annotations

import threading
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from django_durable_schedules.state import Claim, Outcome
from django_durable_schedules.worker import inflight
from django_durable_schedules.worker.inflight import RunsInFlight
from django_durable_schedules.worker.threads import RunThreads

T0 = datetime(2027, 1, 1, tzinfo=UTC)


def claim(n: int, timeout_seconds: float | None = None) -> Claim:
    return Claim(
        attempt_id=uuid.uuid4(),
        schedule_id=uuid.uuid4(),
        schedule_name=f"s{n}",
        callback="tests.noop",
        occurrence=1,
        attempt=1,
        scheduled_for=T0,
        claimed_at=T0,
        lease_token=uuid.uuid4(),
        lease_expires_at=T0 + timedelta(seconds=30),
        idempotency_key=f"s{n}:1",
        payload={},
        timeout_seconds=timeout_seconds,
    )


class Gated(RunsInFlight):
    """Runs whose callback waits for its gate (``release(name)``), counting how many run at
    once; nothing touches a database."""

    def __init__(self, concurrency: int, claim_ahead_seconds: float = 0.05):
        super().__init__("w", concurrency, 30, "default", threading.Event(), claim_ahead_seconds)
        self.gates: dict[str, threading.Event] = {}
        self.started: list[str] = []
        self.now_running = 0
        self.most_running = 0
        self.count_lock = threading.Lock()

    def gate(self, name: str) -> threading.Event:
        return self.gates.setdefault(name, threading.Event())

    def release(self, *names: str) -> None:
        for name in names:
            self.gate(name).set()

    def execute(self, claim, pool=None):
        times: list[float | None] = [time.monotonic(), None]
        self.run_times[claim.lease_token] = times
        with self.count_lock:
            self.started.append(claim.schedule_name)
            self.now_running += 1
            self.most_running = max(self.most_running, self.now_running)
        try:
            self.gate(claim.schedule_name).wait(10)
            return Outcome(claim, "succeeded")
        finally:
            with self.count_lock:
                self.now_running -= 1
            times[1] = time.monotonic()


def outcomes(runs: RunsInFlight, count: int, timeout: float = 10) -> list[Outcome]:
    got: list[Outcome] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        try:
            got.append(runs.done.get(timeout=0.05))
        except Exception:  # queue.Empty
            pass
    return got


def wait_for(predicate, timeout: float = 5) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


@pytest.fixture
def executor():
    pool = RunThreads("test-run")
    yield pool
    pool.shutdown()


def test_at_most_concurrency_callbacks_run_and_the_rest_wait_in_claim_order(executor):
    runs = Gated(concurrency=2)
    for n in range(5):
        runs.submit(executor, claim(n))
    wait_for(lambda: len(runs.started) == 2)
    assert runs.running == 2 and len(runs.waiting) == 3
    runs.release("s0", "s1", "s2", "s3", "s4")
    done = outcomes(runs, 5)
    assert sorted(o.claim.schedule_name for o in done) == ["s0", "s1", "s2", "s3", "s4"]
    assert all(o.status == "succeeded" for o in done)
    assert runs.most_running == 2
    assert runs.started[2:] == ["s2", "s3", "s4"]  # the line is served in claim order
    wait_for(lambda: runs.running == 0)
    assert not runs.waiting


def test_the_room_is_the_free_threads_until_a_run_time_is_known(executor):
    runs = Gated(concurrency=4)
    assert runs.claim_room(batch_size=100) == 4
    runs.submit(executor, claim(0))
    assert runs.claim_room(batch_size=100) == 3
    assert runs.claim_room(batch_size=2) == 2  # never more than one batch
    runs.release("s0")
    outcomes(runs, 1)


def test_short_runs_widen_the_room_up_to_one_batch():
    runs = Gated(concurrency=4, claim_ahead_seconds=0.05)
    runs.run_seconds = 0.005  # each thread starts ~10 runs in 50 ms
    assert runs.claim_room(batch_size=100) == 4 + 40
    runs.run_seconds = 0.0001
    assert runs.claim_room(batch_size=100) == 100
    assert runs.claim_room(batch_size=7) == 7


def test_without_claiming_ahead_only_free_threads_are_claimed_for():
    runs = Gated(concurrency=4, claim_ahead_seconds=0)
    runs.run_seconds = 0.0001
    assert runs.claim_room(batch_size=100) == 4


def test_a_slow_run_stops_claiming_ahead_at_once_and_fast_ones_restore_it_gradually():
    runs = Gated(concurrency=2)
    token = uuid.uuid4()
    for seconds in (0.001, 0.001):
        runs.run_times[token] = [0.0, seconds]
        runs._note_run_time(token)
    assert runs.run_seconds == pytest.approx(0.001)
    runs.run_times[token] = [0.0, 2.0]  # one callback took 2 s
    runs._note_run_time(token)
    assert runs.run_seconds == 2.0
    assert runs.claim_room(batch_size=100) == 2  # the free threads only
    for _ in range(3):
        runs.run_times[token] = [0.0, 0.001]
        runs._note_run_time(token)
    assert 0.001 < runs.run_seconds < 2.0


def test_threads_busy_with_long_runs_add_no_room(executor):
    runs = Gated(concurrency=2, claim_ahead_seconds=0.02)
    runs.run_seconds = 0.001
    runs.submit(executor, claim(0))
    runs.submit(executor, claim(1))
    wait_for(lambda: len(runs.started) == 2)
    time.sleep(0.05)  # both have now run longer than CLAIM_AHEAD_SECONDS
    assert runs.claim_room(batch_size=100) == 0
    runs.release("s0", "s1")
    outcomes(runs, 2)
    runs.in_flight.clear()  # receipted (RunsInFlight.complete)
    runs.run_seconds = 0.001
    assert runs.claim_room(batch_size=100) == 2 + 40


def test_a_claim_that_waits_too_long_for_a_thread_is_handed_back(executor, monkeypatch):
    monkeypatch.setattr(inflight, "HAND_BACK_SECONDS", 0.05)
    runs = Gated(concurrency=1)
    for n in range(3):
        runs.submit(executor, claim(n))
    wait_for(lambda: runs.started == ["s0"])
    runs.hand_back_waiting()
    assert runs.done.empty()  # not waited long enough yet
    time.sleep(0.08)
    runs.hand_back_waiting()
    released = outcomes(runs, 2)
    assert [(o.claim.schedule_name, o.status) for o in released] == [
        ("s1", "released"),
        ("s2", "released"),
    ]
    assert runs.handed_back == 2
    runs.release("s0")
    (finished,) = outcomes(runs, 1)
    assert finished.claim.schedule_name == "s0" and finished.status == "succeeded"
    wait_for(lambda: runs.running == 0)
    assert runs.started == ["s0"]  # the handed-back claims never ran here
    # The thread that took them off the line afterwards handed nothing back again: one
    # outcome per claim (a second "released" would be a second receipt for one attempt).
    runs.release_unstarted()
    assert runs.done.empty() and runs.handed_back == 2


def test_an_abandoned_run_hands_its_thread_slot_to_the_next_claim(executor, settings):
    settings.DURABLE_SCHEDULES = {"HARD_TIMEOUTS": False}  # the thread path
    runs = Gated(concurrency=1)
    runs.submit(executor, claim(0, timeout_seconds=0.05))  # will hang past its timeout
    runs.submit(executor, claim(1))
    wait_for(lambda: runs.started == ["s0"])
    wait_for(lambda: runs.deadlines and min(runs.deadlines.values()) < time.monotonic())
    runs.enforce_timeouts()
    timeout = outcomes(runs, 1)[0]
    assert (timeout.claim.schedule_name, timeout.error_type) == ("s0", "Timeout")
    wait_for(lambda: "s1" in runs.started)  # s1 got the slot while s0 still hangs
    runs.release("s1")
    (second,) = outcomes(runs, 1)
    assert second.claim.schedule_name == "s1" and second.status == "succeeded"
    runs.release("s0")  # the abandoned callback returns at last: its outcome is dropped
    wait_for(lambda: runs.running == 0 and not runs.abandoned_slots)
    assert runs.done.empty()
    runs.submit(executor, claim(2))  # the slot count is right: one runs at once again
    wait_for(lambda: "s2" in runs.started)
    assert runs.running == 1
    runs.release("s2")
    outcomes(runs, 1)


@pytest.mark.django_db(transaction=True)
def test_a_worker_claims_short_runs_in_batches_larger_than_its_threads():
    from django_durable_schedules.models import RunAttempt, RunReceipt, Schedule
    from django_durable_schedules.worker import Worker, WorkerOptions

    for n in range(40):
        Schedule.objects.create(
            name=f"n{n}", callback="tests.noop", kind="interval", interval_seconds=3600
        )
    worker = Worker(WorkerOptions(once=True, concurrency=2, batch_size=100))
    assert worker.run() == 0
    assert RunReceipt.objects.filter(status="succeeded").count() == 40
    # One claim transaction stamps its attempts with one database time.
    claims = RunAttempt.objects.values("claimed_at").distinct().count()
    assert claims < 40 / 2, claims


@pytest.mark.django_db(transaction=True)
def test_slow_callbacks_are_claimed_no_faster_than_threads_free_up():
    from collections import Counter

    from django_durable_schedules.models import RunAttempt, RunReceipt, Schedule
    from django_durable_schedules.worker import Worker, WorkerOptions

    for n in range(6):
        Schedule.objects.create(
            name=f"slow{n}",
            callback="tests.sleep",
            payload={"seconds": 0.2},
            kind="interval",
            interval_seconds=3600,
        )
    worker = Worker(WorkerOptions(once=True, concurrency=2, batch_size=100))
    assert worker.run() == 0
    assert RunReceipt.objects.filter(status="succeeded").count() == 6
    per_claim = Counter(RunAttempt.objects.values_list("claimed_at", flat=True))
    assert max(per_claim.values()) <= 2, per_claim  # never more claims than free threads
    assert len(per_claim) >= 3


def test_a_claim_that_waited_too_long_is_not_started_by_the_thread_that_frees_up(
    executor, monkeypatch
):
    """The process may have been stopped (SIGSTOP) meanwhile, and the lease recovered:
    the thread that frees up hands such a claim back instead of starting it."""
    monkeypatch.setattr(inflight, "HAND_BACK_SECONDS", 0.05)
    runs = Gated(concurrency=1)
    runs.submit(executor, claim(0))
    runs.submit(executor, claim(1))
    wait_for(lambda: runs.started == ["s0"])
    time.sleep(0.08)
    runs.release("s0")  # no hand_back_waiting() call from the main thread
    got = {o.claim.schedule_name: o.status for o in outcomes(runs, 2)}
    assert got == {"s0": "succeeded", "s1": "released"}
    assert runs.started == ["s0"] and runs.handed_back == 1
    wait_for(lambda: runs.running == 0)
