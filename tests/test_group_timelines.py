"""The worked timelines of docs/concepts.md, "Concurrency groups", driven claim by claim
with an injected clock (``state.claim_due(now=...)``, ``state.complete(..., now=...)``) on
a real database (run on SQLite, PostgreSQL and MariaDB): what each claim starts, what it
holds back, and that a held slot is never lost, only late."""

from __future__ import annotations

from datetime import timedelta

import pytest

from django_durable_schedules import state
from django_durable_schedules.models import ConcurrencyGroup, RunAttempt, Schedule

from .factories import T0, due_schedules  # T0: 2027-06-01 10:00:00 UTC

S = timedelta(seconds=1)
MS = timedelta(milliseconds=1)
NAMES = ("a", "b", "c", "d", "e")

pytestmark = pytest.mark.django_db(transaction=True)


def five_due(group, *, free=0):
    """Schedules a..e of ``group`` and ``free`` schedules of no group, all due at 10:00:00
    (which of a tie a claim takes first is not defined: the tests name them by start)."""
    due_schedules(NAMES, concurrency_group=group)
    due_schedules(free, prefix="free")


def claim(at):
    """One claim at ``at``; leases of 60 s (a worker renews them while a callback runs)."""
    return state.claim_due(worker="w", limit=10, lease_seconds=60, now=at)


def grouped(claims):
    """The names of the group's schedules among ``claims`` (a set)."""
    return {c.schedule_name for c in claims if c.schedule_name in NAMES}


def finish(claims, at):
    state.complete([state.Outcome(c, "succeeded") for c in claims], now=at)


def test_max_running_2_five_due_callbacks_of_30_seconds():
    group = ConcurrencyGroup.objects.create(name="reports", max_running=2)
    five_due(group, free=3)
    # 10:00:00: two of the five start ("a" and "b" in the docs); the other three are held,
    # due; the schedules of no group due then start in the same claim.
    first = claim(T0)
    ab = grouped(first)
    assert len(ab) == 2 and len(first) == 5
    group.refresh_from_db()
    assert group.full_until == T0 + 5 * S  # later claims skip the group until then
    # 10:00:01: the claim skips the group's rows (full_until), starts nothing.
    assert claim(T0 + S) == []
    # 10:00:10: full_until lapsed: the claim counts again, finds 2 live leases, holds.
    assert claim(T0 + 10 * S) == []
    group.refresh_from_db()
    assert group.full_until == T0 + 15 * S
    # Nothing is lost: the three held are due (their 10:00:00 slot) and unleased.
    waiting = Schedule.objects.filter(name__in=NAMES, lease_token__isnull=True)
    assert {s.name for s in waiting} == set(NAMES) - ab
    assert all(s.next_run_at == T0 for s in waiting)
    # 10:00:30: a and b finish (full_until cleared at once); the next claim starts c, d.
    finish([c for c in first if c.schedule_name in ab], T0 + 30 * S)
    group.refresh_from_db()
    assert group.full_until is None
    second = claim(T0 + 30 * S)
    cd = grouped(second)
    assert len(cd) == 2 and len(second) == 2 and not cd & ab
    # 10:01:00: c and d finish; e starts, the last.
    finish(second, T0 + 60 * S)
    third = claim(T0 + 60 * S)
    (e,) = grouped(third)
    assert len(third) == 1 and e not in ab | cd
    finish(third, T0 + 90 * S)
    # Each wait is the run's lateness: 0 s, 30 s, 60 s after the slot.
    late = {
        a.schedule.name: round((a.claimed_at - a.scheduled_for).total_seconds())
        for a in RunAttempt.objects.filter(schedule__name__in=NAMES).select_related("schedule")
    }
    assert late == {**dict.fromkeys(ab, 0), **dict.fromkeys(cd, 30), e: 60}
    # Every slot ran once; none was missed.
    missed = Schedule.objects.filter(name__in=NAMES).values_list("missed_count", flat=True)
    assert list(missed) == [0] * 5


def test_rate_2_per_second_five_due():
    group = ConcurrencyGroup.objects.create(name="mailer", rate="2/s")
    five_due(group)
    # 10:00:00: two start; the window is 1 s + 10 % margin: the next start at 10:00:01.1.
    first = claim(T0)
    assert len(first) == 2
    finish(first, T0 + 100 * MS)  # finishing frees no start: the rate counts starts
    group.refresh_from_db()
    assert abs((group.rate_until - (T0 + 1100 * MS)).total_seconds()) < 0.001
    assert claim(T0 + 500 * MS) == []  # 10:00:00.5: skipped (rate_until)
    assert claim(T0 + 1000 * MS) == []  # 10:00:01.0: still inside the margin
    # 10:00:01.2: two more start; the next start at 10:00:02.3.
    assert len(claim(T0 + 1200 * MS)) == 2
    assert claim(T0 + 2000 * MS) == []
    # 10:00:02.4: the fifth starts.
    assert len(claim(T0 + 2400 * MS)) == 1
    # Every slot started once: none lost, none twice.
    ran = RunAttempt.objects.filter(schedule__name__in=NAMES)
    assert sorted(ran.values_list("schedule__name", flat=True)) == list(NAMES)


def test_a_wait_longer_than_the_misfire_grace_is_a_missed_slot_once_the_group_has_room():
    group = ConcurrencyGroup.objects.create(name="reports", max_running=1)
    five_due(group)
    Schedule.objects.update(misfire_grace_seconds=10)
    first = claim(T0)
    assert len(first) == 1
    finish(first, T0 + 30 * S)
    # From 10:00:30: the others' slots waited 30 s and more, past their 10 s grace: each is
    # receipted missed, as any late claim, and goes on to its next slot; none runs. A
    # missed slot takes no lease, so it gives the group's place back at once: the next
    # claim, at the same instant, takes the next one (the group never waits 5 s for it).
    others = Schedule.objects.filter(name__in=NAMES).exclude(name=first[0].schedule_name)
    at = T0 + 30 * S
    for _ in range(4):
        assert claim(at) == []
        if all(s.missed_count == 1 for s in others.all()):
            break
    assert [(s.missed_count, s.lease_token) for s in others.all()] == [(1, None)] * 4


def test_a_claim_whose_now_precedes_a_later_claims_start_still_keeps_the_rate():
    """A claim reads its ``now`` before it waits for the group's lock, so claims commit in
    an order their instants need not follow. Found by the chaos soak on PostgreSQL (4
    claims of a 3/s group in one window): a claim at 10:00:01.15 recorded its start and let
    the three starts of 10:00:00 go (outside its own window); a claim whose ``now`` was
    10:00:00.05, read before that one but admitted after it, no longer saw them and
    started two more inside the window of 10:00:00."""
    group = ConcurrencyGroup.objects.create(name="mailer", rate="3/s")
    due_schedules(8, prefix="m", concurrency_group=group)
    assert len(state.claim_due(worker="w", limit=3, lease_seconds=60, now=T0)) == 3
    assert len(state.claim_due(worker="w", limit=1, lease_seconds=60, now=T0 + 1150 * MS)) == 1
    state.claim_due(worker="w", limit=10, lease_seconds=60, now=T0 + 50 * MS)  # the late one
    claimed = sorted(RunAttempt.objects.values_list("claimed_at", flat=True))
    window = 1100 * MS  # the rate's second and its margin
    worst = max(sum(1 for t in claimed if first <= t < first + window) for first in claimed)
    assert worst == 3
