"""A run of a group with a ``rate`` starts within the rate's margin of its claim, or not at
all (issue #28, "a group with rate=5/s never starts more than 5 runs in any one-second
window", under chaos too).

The claim keeps the rate over the window plus its margin (``rate_window``); a claimed run
that starts later than its claim plus the margin (a worker frozen between the claim and the
start, a slot busy) would bunch with later claims. So the claim gives such a run a start
deadline (``Claim.start_by``) and the runner hands it back unrun past it (``released``):
the slot stays due and the next claim takes it, within the rate. Claims on real databases
with an injected clock; the runner with an injected clock."""

from __future__ import annotations

import dataclasses
import time
import uuid
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from django_durable_schedules import state
from django_durable_schedules.models import ConcurrencyGroup, ReceiptStatus, RunReceipt, Schedule
from django_durable_schedules.registry import registry
from django_durable_schedules.state.group_rules import rate_margin, rate_window
from django_durable_schedules.worker.execution import runner

from .factories import T0, due_schedules

S = timedelta(seconds=1)
NOW = T0 + 3600 * S


@pytest.fixture
def calls():
    """A registered callback ``tests.counted`` that records each call."""
    seen: list[str] = []
    registry.add(
        registry.get("tests.noop").__class__(
            name="tests.counted", func=lambda ctx: seen.append(ctx.schedule_name) or "ok"
        )
    )
    yield seen
    registry.remove("tests.counted")


@pytest.mark.django_db(transaction=True)
def test_a_rated_groups_claims_carry_a_start_deadline_the_others_none():
    rated = ConcurrencyGroup.objects.create(name="mailer", rate="5/s")
    hourly = ConcurrencyGroup.objects.create(name="reports", rate="10/h")
    capped = ConcurrencyGroup.objects.create(name="capped", max_running=3)
    due_schedules(2, prefix="r", concurrency_group=rated)
    due_schedules(1, prefix="h", concurrency_group=hourly)
    due_schedules(1, prefix="c", concurrency_group=capped)
    due_schedules(1, prefix="free")
    claims = {c.schedule_name: c for c in state.claim_due(worker="w", limit=10, now=NOW)}
    assert sorted(claims) == ["c-0000", "free-0000", "h-0000", "r-0000", "r-0001"]
    for name in ("r-0000", "r-0001"):  # 5/s: a tenth of the second
        assert claims[name].start_by == claims[name].claimed_at + timedelta(seconds=0.1)
    # 10/h: a tenth of the hour, at most a second
    assert claims["h-0000"].start_by == claims["h-0000"].claimed_at + S
    assert claims["c-0000"].start_by is None and claims["free-0000"].start_by is None


@pytest.mark.django_db(transaction=True)
def test_a_run_past_its_start_deadline_is_handed_back_unrun_and_runs_later(calls):
    group = ConcurrencyGroup.objects.create(name="mailer", rate="5/s")
    due_schedules(1, prefix="r", concurrency_group=group, callback="tests.counted")
    (claim,) = state.claim_due(worker="w", limit=10, now=NOW)
    frozen = runner.execute(claim, clock=lambda: claim.start_by + timedelta(milliseconds=1))
    assert frozen.status == "released" and frozen.error_type == "StartDeadline"
    assert calls == []  # the callback never ran
    state.complete([frozen], now=NOW + 2 * S)
    receipt = RunReceipt.objects.get()
    assert receipt.status == ReceiptStatus.RELEASED and receipt.started_at is None
    row = Schedule.objects.get()
    assert row.lease_token is None and row.next_run_at <= NOW + 2 * S  # due again: not lost
    (again,) = state.claim_due(worker="w", limit=10, now=NOW + 2 * S)
    assert (again.occurrence, again.attempt) == (claim.occurrence, claim.attempt + 1)
    on_time = runner.execute(again, clock=lambda: again.claimed_at + timedelta(milliseconds=50))
    assert on_time.status == "succeeded" and calls == ["r-0000"]


def test_a_run_at_its_deadline_or_without_one_starts(calls):
    claim = _claim()
    assert runner.execute(claim, clock=lambda: claim.claimed_at + 10 * S).status == "succeeded"
    timed = dataclasses.replace(claim, start_by=claim.claimed_at + 0.1 * S)
    assert runner.execute(timed, clock=lambda: timed.start_by).status == "succeeded"
    assert len(calls) == 2


@settings(max_examples=300, deadline=None)
@given(
    count=st.integers(1, 6),
    seconds=st.sampled_from([1, 2, 60]),
    claims=st.lists(st.floats(0, 3, allow_nan=False), min_size=1, max_size=30),
    delays=st.lists(st.floats(0, 1, allow_nan=False), min_size=30, max_size=30),
)
def test_starts_within_the_margin_of_claims_that_keep_the_window_keep_the_rate(
    count, seconds, claims, delays
):
    """The arithmetic the deadline rests on: claims with at most ``count`` in any window of
    ``rate_window(seconds)``, each started at most ``rate_margin(seconds)`` after it (or
    handed back), never put more than ``count`` starts in a window of ``seconds``."""
    margin, window = rate_margin(seconds), rate_window(seconds)
    kept: list[float] = []  # claim instants admitted under the lengthened window
    at = 0.0
    for gap in claims:
        at += gap
        if sum(1 for t in kept if t > at - window) < count:
            kept.append(at)
    starts = sorted(t + min(d, 1.0) * margin for t, d in zip(kept, delays, strict=False))
    for i, first in enumerate(starts):
        assert sum(1 for t in starts[i:] if t < first + seconds) <= count


def _claim():
    return state.Claim(
        attempt_id=uuid.uuid4(),
        schedule_id=uuid.uuid4(),
        schedule_name="direct",
        callback="tests.counted",
        occurrence=1,
        attempt=1,
        scheduled_for=NOW,
        claimed_at=NOW,
        lease_token=uuid.uuid4(),
        lease_expires_at=NOW + 30 * S,
        idempotency_key="direct:1",
        payload={},
    )


@pytest.mark.django_db(transaction=True)
def test_a_run_handed_back_unrun_gives_its_place_in_the_rate_back(calls):
    group = ConcurrencyGroup.objects.create(name="slow", rate="1/m")
    due_schedules(1, prefix="r", concurrency_group=group, callback="tests.counted")
    (claim,) = state.claim_due(worker="w", limit=10, now=NOW)
    assert ConcurrencyGroup.objects.get().starts == [claim.claimed_at.timestamp()]
    late = runner.execute(claim, clock=lambda: claim.start_by + S)
    state.complete([late], now=NOW + 2 * S)
    assert ConcurrencyGroup.objects.get().starts == []  # it never started
    # Within the same minute: the place is free again, so the slot runs now, not in a minute.
    (again,) = state.claim_due(worker="w", limit=10, now=NOW + 3 * S)
    assert again.attempt == claim.attempt + 1
    ran = runner.execute(again, clock=lambda: again.claimed_at)
    assert ran.status == "succeeded" and calls == ["r-0000"]
    state.complete([ran], now=NOW + 4 * S)
    assert ConcurrencyGroup.objects.get().starts == [again.claimed_at.timestamp()]


@pytest.mark.django_db(transaction=True)
def test_a_worker_frozen_after_reading_the_database_clock_still_hands_a_late_run_back(
    calls, monkeypatch
):
    """The worker checks a run's start deadline by its estimate of the database clock. A
    worker frozen (SIGSTOP, a long GIL wait) after the database answered its clock read and
    before it noted the answer must not anchor the estimate late: it would lag the
    database clock by the freeze and start a run past its deadline, bunching with later
    claims. The estimate is anchored at the instant the read was sent, so it is never
    behind: the run is handed back unrun, and its slot runs at a later claim."""
    from django_durable_schedules.worker.clock import WorkerClock

    freeze = 0.4  # > the margin of 5/s (0.1 s)
    group = ConcurrencyGroup.objects.create(name="mailer", rate="5/s")
    due_schedules(
        1,
        due=state.db_now() - 10 * S,
        prefix="r",
        concurrency_group=group,
        callback="tests.counted",
    )
    clock = WorkerClock("w", "default")
    read = state.db_now

    def read_then_freeze(using="default"):
        at = read(using)
        time.sleep(freeze)  # frozen between the database's answer and the worker's note
        return at

    monkeypatch.setattr(state, "db_now", read_then_freeze)
    now = clock.decision_now()
    monkeypatch.setattr(state, "db_now", read)
    # Never behind the database clock: the freeze after the read is counted.
    assert clock.estimate() >= now + timedelta(seconds=freeze)
    (claim,) = state.claim_due(worker="w", limit=10, now=now)
    late = runner.execute(claim, clock.estimate)
    assert late.status == "released" and late.error_type == "StartDeadline"
    assert calls == []  # the callback never ran
    state.complete([late], now=state.db_now())
    (again,) = state.claim_due(worker="w", limit=10, now=clock.decision_now())
    assert (again.occurrence, again.attempt) == (claim.occurrence, claim.attempt + 1)
    ran = runner.execute(again, clock=lambda: again.claimed_at + timedelta(milliseconds=50))
    assert ran.status == "succeeded" and calls == ["r-0000"]
