"""``overlap_policy`` ``allow`` (issue #28 item 4): up to ``max_parallel`` occurrences of one
schedule run at once, each with its own lease (``OccurrenceLease``) and attempt; a slot due
while they all run waits, due, and never blocks another schedule; an occurrence is never
retried; every slot of the grid is run or counted. Through the state functions with an
injected clock (run on SQLite, PostgreSQL and MariaDB)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_durable_schedules import state
from django_durable_schedules.models import (
    ConcurrencyGroup,
    OccurrenceLease,
    RunAttempt,
    RunReceipt,
    Schedule,
)
from django_durable_schedules.state import Outcome

from .conftest import property_examples
from .factories import T0

pytestmark = pytest.mark.django_db(transaction=True)

S = timedelta(seconds=1)
M = timedelta(minutes=1)
LEASE = 3600.0


def make(name="par", max_parallel=2, **kw):
    kw.setdefault("callback", "tests.noop")
    kw.setdefault("kind", "interval")
    kw.setdefault("interval_seconds", 60)
    kw.setdefault("created_at", T0)  # every minute from T0
    kw.setdefault("timezone", "UTC")
    kw.setdefault("max_attempts", 1)
    s = Schedule(name=name, overlap_policy="allow", max_parallel=max_parallel, **kw)
    s.full_clean()
    s.save()
    return s


def claim(now, limit=10, lease=LEASE):
    return state.claim_due(worker="w", now=now, limit=limit, lease_seconds=lease)


def done(c, status="succeeded", **kw):
    return Outcome(c, status, **kw)


def test_two_occurrences_run_at_once_then_the_third_slot_waits_due():
    make()
    first = claim(T0)
    assert [c.scheduled_for for c in first] == [T0]
    row = Schedule.objects.get()
    assert row.lease_token is None  # the row stays claimable while it runs
    assert OccurrenceLease.objects.count() == 1
    second = claim(T0 + M)  # the first still runs
    assert [c.scheduled_for for c in second] == [T0 + M]
    assert claim(T0 + 2 * M) == []  # two running: the third slot waits
    row.refresh_from_db()
    assert row.next_run_at == T0 + 2 * M  # still due: nothing lost
    assert row.parallel_full_until == T0 + LEASE * S  # the earliest lease's expiry
    state.complete([done(first[0])], now=T0 + 2 * M + 10 * S)
    row.refresh_from_db()
    assert row.parallel_full_until is None  # a place is free
    third = claim(T0 + 2 * M + 10 * S)
    assert [(c.occurrence, c.scheduled_for) for c in third] == [(3, T0 + 2 * M)]
    state.complete([done(second[0]), done(third[0])], now=T0 + 3 * M - S)
    assert OccurrenceLease.objects.count() == 0
    statuses = list(RunReceipt.objects.order_by("occurrence").values_list("occurrence", "status"))
    assert statuses == [(1, "succeeded"), (2, "succeeded"), (3, "succeeded")]
    row.refresh_from_db()
    assert (row.next_run_at, row.missed_count, row.status) == (T0 + 3 * M, 0, "active")
    assert row.previous_occurrence == 3


def test_a_held_row_never_blocks_the_other_schedules_of_its_batch():
    make(max_parallel=1)
    claim(T0)  # its one place is taken
    Schedule.objects.create(
        name="other", callback="tests.noop", kind="interval", interval_seconds=60, created_at=T0
    )
    # Due first (T0 + 1 min, the other at T0 + 1 min too): a batch of one still gets the other.
    got = claim(T0 + M, limit=1)
    assert [c.schedule_name for c in got] == ["other"]


def test_a_failed_occurrence_is_counted_not_retried():
    make(callback="tests.fail")
    c = claim(T0)[0]
    state.complete([done(c, "failed", error_type="E", error_message="boom")], now=T0 + 5 * S)
    row = Schedule.objects.get()
    assert (row.failure_count, row.failed_occurrences, row.retry_scheduled_for) == (1, 1, None)
    assert row.next_run_at == T0 + M  # the grid goes on
    assert RunReceipt.objects.get().status == "failed"
    assert [c.attempt for c in claim(T0 + M)] == [1]  # the next occurrence, no retry


def test_a_skipped_occurrence_is_receipted_skipped_not_succeeded():
    """``SkipRun`` in an occurrence is a skip, as on every schedule: receipted ``skipped``
    (the chaos soak found it receipted ``succeeded``), the failure streak kept, no previous
    run moved."""
    make()
    a = claim(T0)[0]
    state.complete([done(a, "failed", error_type="E", error_message="boom")], now=T0 + S)
    b = claim(T0 + M)[0]
    state.complete([done(b, "skipped", error_type="SkipRun")], now=T0 + M + S)
    statuses = list(RunReceipt.objects.order_by("occurrence").values_list("occurrence", "status"))
    assert statuses == [(1, "failed"), (2, "skipped")]
    row = Schedule.objects.get()
    assert (row.failure_count, row.failed_occurrences) == (1, 1)
    assert row.previous_occurrence is None


def test_pause_after_failures_pauses_an_allow_schedule():
    make(pause_after_failures=2)
    a = claim(T0)[0]
    b = claim(T0 + M)[0]
    state.complete([done(a, "failed"), done(b, "failed")], now=T0 + M + S)
    row = Schedule.objects.get()
    assert (row.status, row.failed_occurrences) == ("paused", 2)
    assert "consecutive failed" in row.pause_reason


def test_an_expired_occurrence_lease_is_receipted_and_counted():
    make()
    c = claim(T0, lease=30)[0]
    assert state.expire_leases(now=T0 + 29 * S) == 0
    assert state.expire_leases(now=T0 + 31 * S) == 1
    receipt = RunReceipt.objects.get()
    assert (receipt.status, receipt.occurrence) == ("lease_expired", 1)
    assert OccurrenceLease.objects.count() == 0
    row = Schedule.objects.get()
    assert (row.failed_occurrences, row.next_run_at) == (1, T0 + M)
    # The worker's late outcome is fenced: no second receipt.
    state.complete([done(c)], now=T0 + 40 * S)
    assert RunReceipt.objects.count() == 1


def test_a_late_outcome_before_the_recovery_is_fenced():
    make()
    c = claim(T0, lease=30)[0]
    report = state.complete([done(c)], now=T0 + 31 * S)
    assert report.fenced and RunReceipt.objects.get().status == "lease_expired"
    assert OccurrenceLease.objects.count() == 0


def test_renewals_extend_an_occurrence_lease():
    make()
    c = claim(T0, lease=30)[0]
    owned = state.renew_leases([c.lease_token], lease_seconds=30, now=T0 + 20 * S)
    assert owned == {c.lease_token}
    assert OccurrenceLease.objects.get().lease_expires_at == T0 + 50 * S
    assert state.expire_leases(now=T0 + 40 * S) == 0
    state.complete([done(c)], now=T0 + 45 * S)
    assert RunReceipt.objects.get().status == "succeeded"


def test_a_run_handed_back_unrun_has_its_slot_counted():
    make()
    c = claim(T0)[0]
    claim(T0 + M)
    state.complete([done(c, "released")], now=T0 + M + S)
    receipt = RunReceipt.objects.get()
    assert receipt.status == "released"
    assert Schedule.objects.get().missed_count == 1


def test_a_concurrency_group_counts_the_occurrences():
    group = ConcurrencyGroup.objects.create(name="g", max_running=2)
    make(max_parallel=5, concurrency_group=group)
    assert len(claim(T0)) == 1
    assert len(claim(T0 + M)) == 1
    assert claim(T0 + 2 * M) == []  # the group is full, not the schedule
    assert OccurrenceLease.objects.count() == 2


def test_a_triggered_run_runs_beside_the_running_one():
    s = make()
    claim(T0)
    state.trigger(s.pk, now=T0 + 10 * S)
    got = claim(T0 + 10 * S)
    assert [c.origin for c in got] == ["triggered"]
    assert OccurrenceLease.objects.count() == 2


def test_the_last_of_max_runs_completes_the_schedule():
    make(max_runs=2)
    a = claim(T0)[0]
    b = claim(T0 + M)[0]
    state.complete([done(b)], now=T0 + M + S)
    assert Schedule.objects.get().status == "completed"
    state.complete([done(a)], now=T0 + M + 2 * S)  # still receipted
    assert RunReceipt.objects.count() == 2


def test_the_last_occurrence_handed_back_unrun_completes_the_schedule():
    """The grid's last claim planned no slot more: its occurrence handed back unrun
    (``released``) has its slot counted and completes the schedule, as a success or a
    failure does; it was left ``active`` with no next run, for ever (found by the chaos
    soak: ``chaos-par-end``)."""
    make(max_runs=2)
    claim(T0)
    b = claim(T0 + M)[0]
    state.complete([done(b, "released")], now=T0 + M + S)
    row = Schedule.objects.get()
    assert (row.status, row.next_run_at, row.missed_count) == ("completed", None, 1)


def test_allow_refuses_retries_and_bounds_max_parallel():
    with pytest.raises(ValidationError) as e:
        Schedule(
            name="x",
            callback="tests.noop",
            kind="interval",
            interval_seconds=60,
            overlap_policy="allow",
            max_attempts=3,
        ).full_clean()
    assert "max_attempts" in e.value.message_dict
    with pytest.raises(ValidationError) as e:
        make(max_parallel=101)
    assert "max_parallel" in e.value.message_dict
    s = make(name="ok")
    with pytest.raises(IntegrityError), transaction.atomic():
        Schedule.objects.filter(pk=s.pk).update(max_parallel=0)


def test_a_max_parallel_written_behind_save_is_read_clamped():
    s = make(max_parallel=2)
    # The database refuses 0 and 101; the engine still bounds what it reads.
    from django_durable_schedules.state.parallel_rules import parallel_limit

    s.max_parallel = 10_000
    assert parallel_limit(s) == 100
    s.max_parallel = None
    assert parallel_limit(s) == 1


@settings(
    max_examples=property_examples(15),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    limit=st.integers(1, 3),
    durations=st.lists(st.integers(5, 400), min_size=12, max_size=12),
)
def test_never_more_than_max_parallel_and_every_slot_run_or_counted(limit, durations):
    Schedule.objects.all().delete()
    OccurrenceLease.objects.all().delete()
    make(name="prop", max_parallel=limit)
    running: list[tuple[datetime, object]] = []  # (ends at, claim)
    most = 0
    now = T0
    end = T0 + 12 * M
    i = 0
    while now < end:
        finished = [c for at, c in running if at <= now]
        running = [(at, c) for at, c in running if at > now]
        if finished:
            state.complete([done(c) for c in finished], now=now)
        for c in claim(now):
            running.append((now + durations[i % len(durations)] * S, c))
            i += 1
        most = max(most, len(running))
        assert len(running) <= limit
        now += 10 * S
    state.complete([done(c) for _, c in running], now=now)
    row = Schedule.objects.get(name="prop")
    slots = int((row.next_run_at - T0) / M)  # the grid's slots decided so far
    run = RunAttempt.objects.filter(schedule=row).count()
    assert run + row.missed_count == slots
    assert RunReceipt.objects.filter(schedule_id=row.pk).count() == run
    assert OccurrenceLease.objects.count() == 0


def test_a_policy_changed_behind_save_while_occurrences_run_still_finishes_them():
    s = make()
    a = claim(T0)[0]
    b = claim(T0 + M)[0]
    Schedule.objects.filter(pk=s.pk).update(overlap_policy="skip")  # behind the engine
    state.complete([done(a), done(b)], now=T0 + M + 5 * S)
    assert sorted(RunReceipt.objects.values_list("status", flat=True)) == ["succeeded"] * 2
    assert OccurrenceLease.objects.count() == 0
    # From now on one at a time, by the row's own lease.
    c = claim(T0 + 2 * M)[0]
    assert Schedule.objects.get().lease_token == c.lease_token
    assert claim(T0 + 3 * M) == []


def test_a_schedule_deleted_while_its_occurrences_run_leaves_orphan_receipts():
    s = make()
    a = claim(T0)[0]
    Schedule.objects.filter(pk=s.pk).delete()
    assert OccurrenceLease.objects.count() == 0  # its leases go with it
    state.complete([done(a)], now=T0 + 5 * S)
    assert RunReceipt.objects.get().attempt_id == a.attempt_id  # one receipt, not lost


def test_an_occurrence_lease_written_behind_save_with_no_run_is_dropped_by_recovery():
    s = make()
    OccurrenceLease.objects.create(
        schedule=s, lease_expires_at=T0 + 5 * S, occurrence=9, claimed_at=T0
    )
    assert state.expire_leases(now=T0 + 10 * S) == 0  # no attempt holds it: nothing to receipt
    assert RunReceipt.objects.count() == 0


def test_a_lease_counted_out_by_a_claim_is_not_revived_by_a_late_renewal():
    """A renewal reads its clock first, then extends the leases live by it. If it read the
    clock before an occurrence's lease lapsed and its UPDATE comes after a claim that
    counted that lease out and admitted the next slot in its place, it extended the lapsed
    lease: two occurrences live under ``max_parallel`` 1, the first receipted
    ``succeeded`` (CI's chaos soak, 2026-12-07: ``parallel_claims_over_max``). The claim
    now ends the lease it counts out: the late renewal finds it lost, the run's outcome is
    fenced, and the recovery receipts it ``lease_expired``."""
    make(max_parallel=1, interval_seconds=10)
    first = claim(T0, lease=30)[0]
    [second] = claim(T0 + 40 * S, lease=30)  # the first's lease lapsed at T0 + 30
    owned = state.renew_leases([first.lease_token], lease_seconds=30, now=T0 + 29 * S)
    assert first.lease_token not in owned
    assert OccurrenceLease.objects.live(T0 + 41 * S).count() == 1
    report = state.complete([done(first)], now=T0 + 42 * S)
    assert report.fenced
    assert RunReceipt.objects.get(attempt_id=first.attempt_id).status == "lease_expired"
    state.complete([done(second)], now=T0 + 43 * S)
    assert RunReceipt.objects.get(attempt_id=second.attempt_id).status == "succeeded"
    assert OccurrenceLease.objects.count() == 0
