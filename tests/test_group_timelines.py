"""The worked timelines of docs/concepts.md, "Concurrency groups", driven claim by claim
with an injected clock (``state.claim_due(now=...)``, ``state.complete(..., now=...)``) on
a real database (run on SQLite, PostgreSQL and MariaDB): what each claim starts, what it
holds back, and that a held slot is never lost, only late."""

from __future__ import annotations

from datetime import timedelta

import pytest

from django_durable_schedules import state
from django_durable_schedules.models import ConcurrencyGroup, RunAttempt, Schedule

from .factories import T0  # 2027-06-01 10:00:00 UTC

S = timedelta(seconds=1)
MS = timedelta(milliseconds=1)
NAMES = ("a", "b", "c", "d", "e")

pytestmark = pytest.mark.django_db(transaction=True)


def five_due(group, *, free=0):
    """Schedules a..e of ``group``, due at 10:00:00 in that order (a millisecond apart),
    and ``free`` schedules of no group due at 10:00:00 too."""
    rows = [
        Schedule(
            name=name,
            callback="tests.noop",
            kind="interval",
            interval_seconds=3600,
            timezone="UTC",
            created_at=T0 - 86400 * S,
            next_run_at=T0 + i * MS,
            concurrency_group=group,
        )
        for i, name in enumerate(NAMES)
    ]
    rows += [
        Schedule(
            name=f"free-{i}",
            callback="tests.noop",
            kind="interval",
            interval_seconds=3600,
            timezone="UTC",
            created_at=T0 - 86400 * S,
            next_run_at=T0,
        )
        for i in range(free)
    ]
    Schedule.objects.bulk_create(rows)


def claim(at):
    """One claim at ``at``; leases of 60 s (a worker renews them while a callback runs)."""
    return state.claim_due(worker="w", limit=10, lease_seconds=60, now=at)


def started(claims):
    return sorted(c.schedule_name for c in claims)


def finish(claims, at):
    state.complete([state.Outcome(c, "succeeded") for c in claims], now=at)


def test_max_running_2_five_due_callbacks_of_30_seconds():
    group = ConcurrencyGroup.objects.create(name="reports", max_running=2)
    five_due(group, free=3)
    # 10:00:00: a and b start; c, d, e are held, due; the free schedules start too.
    first = claim(T0)
    assert started(first) == ["a", "b", "free-0", "free-1", "free-2"]
    group.refresh_from_db()
    assert group.full_until == T0 + 5 * S  # later claims skip the group until then
    # 10:00:01: the claim skips the group's rows (full_until), starts nothing.
    assert claim(T0 + S) == []
    # 10:00:10: full_until lapsed: the claim counts again, finds 2 live leases, holds.
    assert claim(T0 + 10 * S) == []
    group.refresh_from_db()
    assert group.full_until == T0 + 15 * S
    # Nothing is lost: c, d, e are due and unleased.
    waiting = Schedule.objects.filter(name__in=NAMES, lease_token__isnull=True)
    assert sorted(waiting.values_list("name", flat=True)) == ["c", "d", "e"]
    assert all(s.next_run_at <= T0 + 10 * MS for s in waiting)
    # 10:00:30: a and b finish (full_until cleared at once); the next claim starts c, d.
    finish([c for c in first if c.schedule_name in ("a", "b")], T0 + 30 * S)
    group.refresh_from_db()
    assert group.full_until is None
    second = claim(T0 + 30 * S)
    assert started(second) == ["c", "d"]
    # 10:01:00: c and d finish; e starts, the last.
    finish(second, T0 + 60 * S)
    third = claim(T0 + 60 * S)
    assert started(third) == ["e"]
    finish(third, T0 + 90 * S)
    # Each wait is the run's lateness: 0 s, 30 s, 60 s after the slot.
    late = {
        a.schedule.name: round((a.claimed_at - a.scheduled_for).total_seconds())
        for a in RunAttempt.objects.filter(schedule__name__in=NAMES).select_related("schedule")
    }
    assert late == {"a": 0, "b": 0, "c": 30, "d": 30, "e": 60}
    # Every slot ran once; none was missed.
    assert (
        sorted(Schedule.objects.filter(name__in=NAMES).values_list("missed_count", flat=True))
        == [0] * 5
    )


def test_rate_2_per_second_five_due():
    group = ConcurrencyGroup.objects.create(name="mailer", rate="2/s")
    five_due(group)
    # 10:00:00: a and b start; the window is 1 s + 10 % margin: the next start at 10:00:01.1.
    first = claim(T0)
    assert started(first) == ["a", "b"]
    finish(first, T0 + 100 * MS)  # finishing frees no start: the rate counts starts
    group.refresh_from_db()
    assert abs((group.rate_until - (T0 + 1100 * MS)).total_seconds()) < 0.001
    assert claim(T0 + 500 * MS) == []  # 10:00:00.5: skipped (rate_until)
    assert claim(T0 + 1000 * MS) == []  # 10:00:01.0: still inside the margin
    # 10:00:01.2: c and d start; the next start at 10:00:02.3.
    assert started(claim(T0 + 1200 * MS)) == ["c", "d"]
    assert claim(T0 + 2000 * MS) == []
    # 10:00:02.4: e starts.
    assert started(claim(T0 + 2400 * MS)) == ["e"]
    # Every slot started once (a and b finished; c, d, e run): none lost, none twice.
    ran = RunAttempt.objects.filter(schedule__name__in=NAMES)
    assert sorted(ran.values_list("schedule__name", flat=True)) == list(NAMES)


def test_a_wait_longer_than_the_misfire_grace_is_a_missed_slot_once_the_group_has_room():
    group = ConcurrencyGroup.objects.create(name="reports", max_running=1)
    five_due(group)
    Schedule.objects.update(misfire_grace_seconds=10)
    first = claim(T0)
    assert started(first) == ["a"]
    finish(first, T0 + 30 * S)
    # 10:00:30: b's slot waited 30 s, past its 10 s grace: missed, as any late claim.
    second = claim(T0 + 30 * S)
    b = Schedule.objects.get(name="b")
    assert "b" not in started(second) and b.missed_count == 1 and b.lease_token is None
