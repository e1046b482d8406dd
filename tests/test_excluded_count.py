"""One count of excluded slots, whatever the path (issue #24, item 10).

A daily 07:00 Paris schedule ends on 2027-07-19 (``end_at``); a calendar excludes every
date from 07-14 to 07-19, so after the run of 07-13 no slot is left to run. Whether a
worker was up as the slots passed, came late, or the calendar's dates were known before
(planned past), added behind the state functions (re-checked at a claim) or through them
(re-planned at once), the schedule completes with the same ``excluded_count``: the six
slots its calendar excluded, counted once, with one ``excluded`` event per date.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from django_durable_schedules import state
from django_durable_schedules.models import (
    ExclusionCalendar,
    ExclusionDate,
    RunAttempt,
    Schedule,
    ScheduleEvent,
)
from django_durable_schedules.state.exclusion_rules import count_excluded, count_excluded_to_end
from django_durable_schedules.worker.execution.runner import execute

pytestmark = pytest.mark.django_db(transaction=True)

S = timedelta(seconds=1)
H = timedelta(hours=1)
# 07:00 Paris in July 2027 (CEST, UTC+2) is 05:00Z.
JUL = {d: datetime(2027, 7, d, 5, tzinfo=UTC) for d in range(10, 25)}
END = datetime(2027, 7, 19, 20, tzinfo=UTC)  # 22:00 Paris on the last day
SHUTDOWN = [date(2027, 7, d) for d in range(14, 20)]  # 07-14 .. 07-19: six slots
EXCLUDED = len(SHUTDOWN)


def calendar(dates=SHUTDOWN) -> ExclusionCalendar:
    return state.save_calendar(
        ExclusionCalendar(name="shutdown"), dates=[(d, "plant shutdown") for d in dates]
    )


def make(calendars=("shutdown",), end_at=END, **kw) -> Schedule:
    """The schedule, planned from 07-12 12:00Z (the test's clock)."""
    created = datetime(2027, 7, 12, 12, tzinfo=UTC)
    kw.setdefault("kind", "cron")
    kw.setdefault("cron", "0 7 * * *")
    row = Schedule(
        name="daily",
        callback="tests.noop",
        timezone="Europe/Paris",
        created_at=created,
        end_at=end_at,
        **kw,
    )
    cals = state.calendars.resolve_calendars(calendars)
    state.calendars.attach_calendars(row, cals)
    row.full_clean()
    row.save()
    row.exclusion_calendars.set(cals)
    row.next_run_at = row.plan(created)
    row.save(update_fields=["next_run_at"])
    return Schedule.objects.get(pk=row.pk)


def run_at(now):
    claims = state.claim_due(worker="w1", now=now)
    state.complete([execute(c) for c in claims], now=now)
    return [c.scheduled_for for c in claims]


def walk(start, end, step=H):
    """A worker up from ``start`` to ``end``, claiming every ``step``: the slots it ran."""
    ran, now = [], start
    while now <= end:
        ran += run_at(now)
        now += step
    return ran


def assert_counted_once(expected=EXCLUDED, ran=1):
    row = Schedule.objects.get(name="daily")
    assert row.status == "completed" and row.next_run_at is None
    assert row.excluded_count == expected
    events = ScheduleEvent.objects.filter(schedule=row, action="excluded")
    assert sum(e.changes["slots"] for e in events) == expected
    assert (
        sorted(e.changes["date"] for e in events) == [d.isoformat() for d in SHUTDOWN][-expected:]
    )
    assert RunAttempt.objects.filter(schedule=row).count() == ran
    # Nothing is counted again: later claims, a pause and an enable leave the count.
    run_at(JUL[24])
    row.refresh_from_db()
    assert row.excluded_count == expected


def test_worker_up_dates_known_before():
    """Planned past the dates: the claim of 07-13 leaves no slot to run."""
    calendar()
    make()
    assert walk(JUL[12] + 18 * H, JUL[21]) == [JUL[13]]
    assert_counted_once()


def test_worker_up_dates_added_behind_the_state_functions():
    """Re-checked at the claim of 07-14 (was: 1, the other five dropped)."""
    cal = calendar(dates=[])
    make()
    assert walk(JUL[12] + 18 * H, JUL[13]) == [JUL[13]]
    ExclusionDate.objects.bulk_create(ExclusionDate(calendar=cal, date=d) for d in SHUTDOWN)
    assert walk(JUL[13] + H, JUL[21]) == []
    assert_counted_once()


def test_no_worker_dates_added_behind_claimed_late():
    """The workers down from 07-13 to 07-20: one late claim re-checks the dates."""
    cal = calendar(dates=[])
    make()
    assert run_at(JUL[13]) == [JUL[13]]
    ExclusionDate.objects.bulk_create(ExclusionDate(calendar=cal, date=d) for d in SHUTDOWN)
    assert run_at(JUL[20] + 7 * H) == []
    assert_counted_once()


def test_no_worker_dates_known_before_claimed_late():
    """The slot of 07-13 run late (07-20): its claim leaves no slot to run."""
    calendar()
    make()
    assert run_at(JUL[20] + 7 * H) == [JUL[13]]
    assert_counted_once()


def test_dates_added_through_the_state_functions_replan_and_complete():
    """The re-plan of add_dates completes it at once (was: 0)."""
    calendar(dates=[])
    make()
    assert run_at(JUL[13]) == [JUL[13]]
    state.add_dates("shutdown", [(d, "plant shutdown") for d in SHUTDOWN], now=JUL[13] + H)
    assert_counted_once()


def test_calendar_attached_through_the_state_functions():
    calendar()
    s = make(calendars=())
    assert run_at(JUL[13]) == [JUL[13]]
    state.set_schedule_calendars(s.pk, ["shutdown"], now=JUL[13] + H)
    assert_counted_once()


def test_a_run_that_outlasts_the_grid_completes_it():
    """Claimed at 07-13 with 07-14 still ahead; the run reports on 07-20: 07-14 is
    skipped (missed), 07-15 .. 07-19 excluded, counted at the completion."""
    cal = calendar(dates=[])
    make()
    [claim] = state.claim_due(worker="w1", now=JUL[13], lease_seconds=8 * 86400)
    ExclusionDate.objects.bulk_create(ExclusionDate(calendar=cal, date=d) for d in SHUTDOWN[1:])
    state.complete([execute(claim)], now=JUL[20])
    assert Schedule.objects.get(name="daily").missed_count == 1
    assert_counted_once(expected=EXCLUDED - 1)


def test_an_expired_lease_recovered_after_the_grid():
    cal = calendar(dates=[])
    make(max_attempts=1)
    [claim] = state.claim_due(worker="w1", now=JUL[13], lease_seconds=60)
    ExclusionDate.objects.bulk_create(ExclusionDate(calendar=cal, date=d) for d in SHUTDOWN[1:])
    assert state.expire_leases(now=JUL[20]) == 1
    assert_counted_once(expected=EXCLUDED - 1)


def test_enable_that_completes_it():
    calendar()
    s = make(end_at=None)
    assert run_at(JUL[13]) == [JUL[13]]
    state.disable(s.pk)
    Schedule.objects.filter(pk=s.pk).update(end_at=END)  # behind save(): enable re-plans
    state.enable(s.pk, now=JUL[13] + H)
    assert_counted_once()


def test_an_rrule_with_until_counts_the_same():
    calendar()
    make(
        kind="rrule",
        cron="",
        rrule="FREQ=DAILY;BYHOUR=7;UNTIL=20270719T050000Z",
        start_at=JUL[13],
        end_at=None,
    )
    assert walk(JUL[12] + 18 * H, JUL[21]) == [JUL[13]]
    assert_counted_once()


def test_the_pure_rule_counts_once_whatever_the_order():
    """count_excluded to now, then to the end, then again: each slot once; and a count to
    now after the end never moves the mark back."""
    calendar()
    row = make()
    row.last_run_at = JUL[13]
    row.next_run_at = None
    events: list[ScheduleEvent] = []
    assert count_excluded(row, row.spec(), JUL[15] + H, events) == 2
    assert count_excluded_to_end(row, JUL[15] + H, events) == EXCLUDED - 2
    assert row.exclusions_checked_at == JUL[19]
    assert count_excluded_to_end(row, JUL[16], events) == 0
    assert count_excluded(row, row.spec(), JUL[16], events) == 0
    assert row.exclusions_checked_at == JUL[19] and row.excluded_count == EXCLUDED
    assert sum(e.changes["slots"] for e in events) == EXCLUDED
    # Ended by max_runs: the slots after its last run are not its to count.
    row.excluded_count, row.exclusions_checked_at = 0, JUL[13]
    row.max_runs, row.occurrence = 1, 1
    assert count_excluded_to_end(row, JUL[13] + H, []) == 0


def test_an_edit_that_leaves_no_slot_counts_the_rest():
    """update_schedule re-plans from the database clock: an end_at moved before the first
    slot the calendar leaves completes it, and the excluded slots up to it are counted."""
    from django_durable_schedules.db.clock import db_now

    today = db_now("default").date()
    days = [today + timedelta(days=i) for i in range(7)]
    calendar(dates=days)
    row = state.create_schedule(
        name="daily",
        callback="tests.noop",
        kind="cron",
        cron="0 12 * * *",
        timezone="UTC",
        exclusion_calendars=["shutdown"],
        end_at=datetime.combine(today + timedelta(days=30), datetime.min.time(), UTC),
    )
    assert row.status == "active"
    last = datetime.combine(days[-1], datetime.min.time(), UTC) + timedelta(hours=23)
    row = state.update_schedule(row.pk, end_at=last)
    assert row.status == "completed"
    slots = [datetime.combine(d, datetime.min.time(), UTC) + timedelta(hours=12) for d in days]
    expected = sum(1 for at in slots if at > row.created_at)
    row.refresh_from_db()
    assert row.excluded_count == expected
    events = ScheduleEvent.objects.filter(schedule=row, action="excluded")
    assert sum(e.changes["slots"] for e in events) == expected
