"""Blackout windows at the claim (state.blackout_rules): no run starts inside a window;
``skip`` counts the slots, ``defer`` runs them once at the window's end; a retry or a
trigger waits for the end, a trigger with ``trigger_ignores_blackout`` does not; edits
to windows take effect at the next claim; a window the engine cannot read degrades only
the schedules that name it. Every slot of the grid is run or counted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.core.exceptions import ValidationError

from django_durable_schedules import state
from django_durable_schedules.models import (
    AttemptOrigin,
    BlackoutWindow,
    EventAction,
    RunAttempt,
    Schedule,
    ScheduleEvent,
)
from django_durable_schedules.worker.execution.runner import execute

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2027, 3, 1, 12, tzinfo=UTC)
M = timedelta(minutes=1)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def window(name: str, start: float, end: float) -> BlackoutWindow:
    w = BlackoutWindow(name=name, start_at=at(start), end_at=at(end))
    w.full_clean()
    w.save()
    return w


def make(name: str = "every-minute", policy: str = "skip", windows=()) -> Schedule:
    """A 1-minute interval schedule whose slots are T0 + n minutes, first due at T0."""
    row = Schedule(
        name=name,
        callback="tests.noop",
        kind="interval",
        interval_seconds=60,
        start_at=T0,
        created_at=T0 - M,
        blackout_policy=policy,
    )
    row.full_clean()
    row.save()
    row.blackout_windows.set(windows)
    Schedule.objects.filter(pk=row.pk).update(next_run_at=T0)
    return Schedule.objects.get(pk=row.pk)


def run_at(now: datetime) -> list:
    claims = state.claim_due(worker="w1", now=now)
    state.complete([execute(c) for c in claims], now=now)
    return claims


def attempts(row: Schedule) -> list[RunAttempt]:
    return list(RunAttempt.objects.filter(schedule_id=row.pk).order_by("claimed_at"))


def blackout_events(row: Schedule) -> list[ScheduleEvent]:
    return list(ScheduleEvent.objects.filter(schedule_id=row.pk, action=EventAction.BLACKOUT))


def test_skip_counts_the_slots_inside_a_window_and_runs_none():
    w = window("db-maintenance", 3, 6)
    row = make(windows=[w])
    for minute in range(9):
        run_at(at(minute))
    row.refresh_from_db()
    started = [a.claimed_at for a in attempts(row)]
    assert started == [at(m) for m in (0, 1, 2, 6, 7, 8)]
    assert not [s for s in started if w.start_at <= s < w.end_at]
    assert row.blackout_count == 3
    # Every slot of the grid (minutes 0 to 8) is run or counted.
    assert len(started) + row.missed_count + row.blackout_count == 9
    (event,) = blackout_events(row)
    assert event.source == "worker"
    assert event.changes["window"] == "db-maintenance" and event.changes["slots"] == 3


def test_defer_runs_the_slots_of_a_window_once_at_its_end():
    w = window("freeze", 3, 5.5)  # covers the slots of minutes 3, 4 and 5
    row = make(policy="defer", windows=[w])
    for now in [at(m) for m in range(6)] + [at(5.5), at(6), at(7)]:
        run_at(now)
    row.refresh_from_db()
    runs = attempts(row)
    assert [a.claimed_at for a in runs] == [at(m) for m in (0, 1, 2)] + [at(5.5), at(6), at(7)]
    deferred = runs[3]
    assert deferred.origin == AttemptOrigin.DEFERRED
    assert deferred.missed_slots == 3
    assert [a.origin for a in runs[4:]] == [AttemptOrigin.SCHEDULED] * 2
    assert row.blackout_count == 3 and row.blackout_deferred == 0
    assert row.next_run_at == at(8)


def test_defer_at_an_end_on_the_grid_is_that_slot_standing_for_the_window():
    row = make(policy="defer", windows=[window("freeze", 3, 6)])
    for minute in range(8):
        run_at(at(minute))
    runs = attempts(row)
    assert [a.claimed_at for a in runs] == [at(m) for m in (0, 1, 2, 6, 7)]
    assert (runs[3].origin, runs[3].missed_slots) == (AttemptOrigin.DEFERRED, 3)


def test_a_worker_back_after_a_window_counts_its_slots():
    # Nobody claimed during the window: the late claim counts the slots it covered.
    row = make(windows=[window("night", 1, 3)])
    run_at(at(0))
    run_at(at(3))
    row.refresh_from_db()
    (late,) = attempts(row)[1:]
    assert late.claimed_at == at(3) and late.missed_slots == 0
    assert row.blackout_count == 2 and row.missed_count == 0


def test_a_retry_due_inside_a_window_waits_for_its_end():
    row = make(windows=[window("db", 3, 6)])
    run_at(at(0))
    # The first occurrence failed and its retry comes due at 4 minutes, inside the window.
    Schedule.objects.filter(pk=row.pk).update(retry_scheduled_for=at(4), next_run_at=at(4))
    assert state.claim_due(worker="w1", now=at(4)) == []
    row.refresh_from_db()
    assert row.retry_scheduled_for == at(4) and row.next_run_at == at(6)
    (claim,) = state.claim_due(worker="w1", now=at(6))
    assert (claim.occurrence, claim.attempt, claim.claimed_at) == (1, 2, at(6))


def test_a_trigger_waits_unless_it_ignores_the_blackout():
    row = make(windows=[window("db", 3, 6)])
    run_at(at(0))
    Schedule.objects.filter(pk=row.pk).update(triggered_at=at(4), next_run_at=at(4))
    assert state.claim_due(worker="w1", now=at(4)) == []
    row.refresh_from_db()
    assert row.triggered_at == at(4) and row.next_run_at == at(6)
    Schedule.objects.filter(pk=row.pk).update(trigger_ignores_blackout=True, next_run_at=at(4.5))
    (claim,) = state.claim_due(worker="w1", now=at(4.5))
    assert claim.origin == AttemptOrigin.TRIGGERED and claim.claimed_at == at(4.5)
    row.refresh_from_db()
    assert row.trigger_ignores_blackout is False  # the next trigger must say so again


def test_a_window_edited_between_claims_takes_effect():
    row = make()
    run_at(at(0))
    w = window("late-freeze", 1, 2)
    row.blackout_windows.add(w)  # linked after the schedule was planned: no restart
    assert run_at(at(1)) == []
    row.refresh_from_db()
    assert (row.blackout_count, row.next_run_at) == (1, at(2))
    BlackoutWindow.objects.filter(pk=w.pk).update(end_at=at(4))  # extended behind save()
    assert run_at(at(2)) == []
    row.refresh_from_db()
    assert (row.blackout_count, row.next_run_at) == (3, at(4))
    BlackoutWindow.objects.filter(pk=w.pk).delete()
    assert len(run_at(at(4))) == 1


def test_a_recurring_window_over_several_windows():
    # Every 5 minutes from T0, a window of 2 minutes: slots 0,1 5,6 10,11 blacked out.
    w = BlackoutWindow(
        name="every-five", rrule="FREQ=MINUTELY;INTERVAL=5", duration_seconds=120, start_at=T0
    )
    w.full_clean()
    w.save()
    row = make(windows=[w])
    for minute in range(12):
        run_at(at(minute))
    row.refresh_from_db()
    assert [a.claimed_at for a in attempts(row)] == [at(m) for m in (2, 3, 4, 7, 8, 9)]
    assert row.blackout_count == 6
    assert len(blackout_events(row)) == 3


def test_a_window_the_engine_cannot_read_degrades_only_its_schedules():
    good = window("good", 30, 40)
    bad = BlackoutWindow.objects.create(
        name="bad", rrule="FREQ=DAILY", duration_seconds=60, start_at=T0
    )
    BlackoutWindow.objects.filter(pk=bad.pk).update(rrule="FREQ=FORTNIGHTLY")  # behind save()
    broken = make("broken", windows=[bad, good])
    fine = make("fine", windows=[good])
    plain = make("plain")
    claims = state.claim_due(worker="w1", now=at(0))
    assert {c.schedule_name for c in claims} == {"fine", "plain"}
    broken.refresh_from_db()
    assert broken.status == "paused"
    assert "bad" in broken.degraded_reason and "FORTNIGHTLY" in broken.degraded_reason
    for row in (fine, plain):
        row.refresh_from_db()
        assert row.status == "active" and not row.degraded_reason


def test_the_claim_reads_windows_in_one_query_per_batch(django_assert_max_num_queries):
    ws = [window(f"w{i}", 30 + i, 31 + i) for i in range(3)]
    for i in range(5):
        make(f"s{i}", windows=ws)
    for i in range(5):
        make(f"plain{i}")
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as seen:
        assert len(state.claim_due(worker="w1", now=at(0))) == 10
    reads = [q["sql"] for q in seen.captured_queries if "blackoutwindow" in q["sql"].lower()]
    assert len(reads) == 1


@pytest.mark.parametrize(
    ("fields", "errors"),
    [
        ({"start_at": T0}, {"end_at"}),
        ({"start_at": T0, "end_at": T0 - M}, {"end_at"}),
        ({"rrule": "FREQ=DAILY"}, {"duration_seconds"}),
        ({"rrule": "FREQ=DAILY", "duration_seconds": 40 * 86400}, {"duration_seconds"}),
        ({"rrule": "FREQ=FORTNIGHTLY", "duration_seconds": 60}, {"rrule"}),
        ({"rrule": "FREQ=DAILY", "duration_seconds": 60, "timezone": "Mars/X"}, {"timezone"}),
        ({"start_at": T0, "end_at": at(1), "duration_seconds": 60}, {"duration_seconds"}),
    ],
)
@pytest.mark.vendor_independent  # validation of an unsaved row
def test_clean_gives_field_messages(fields, errors):
    with pytest.raises(ValidationError) as err:
        BlackoutWindow(name="w", **fields).full_clean()
    assert errors <= set(err.value.message_dict)


@pytest.mark.vendor_independent  # validation of an unsaved row
def test_clean_normalizes_a_valid_rule_and_zone():
    w = BlackoutWindow(
        name="w", rrule="freq=daily;byhour=2", duration_seconds=3600, timezone="europe/paris"
    )
    w.full_clean()
    assert (w.rrule, w.timezone) == ("FREQ=DAILY;BYHOUR=2", "Europe/Paris")


@pytest.mark.process
def test_a_real_worker_starts_no_run_inside_a_window(start_worker):
    """A 1-second schedule of each policy, with a real ``run_scheduler``; once it runs,
    three short windows are linked (no restart): no attempt is claimed inside a window;
    ``skip`` counts the slots they cover, ``defer`` runs once at each window's end."""
    import time

    from .conftest import wait_until

    rows = {}
    for policy in ("skip", "defer"):
        rows[policy] = Schedule.objects.create(
            name=f"each-second-{policy}",
            callback="tests.noop",
            kind="interval",
            interval_seconds=1,
            blackout_policy=policy,
        )
    start_worker("--worker-id", "blackout", "--max-idle", "0.2", "--concurrency", "4")
    wait_until(lambda: all(attempts(r) for r in rows.values()), 30, 0.2, "the first runs")
    base = state.db_now().replace(microsecond=0) + timedelta(seconds=2)
    spans = [(0, 2), (4, 6), (8, 10)]  # seconds after base; two slots between each
    windows = []
    for i, (start, end) in enumerate(spans):
        w = BlackoutWindow(
            name=f"short-{i}",
            start_at=base + timedelta(seconds=start),
            end_at=base + timedelta(seconds=end),
        )
        w.full_clean()
        w.save()
        windows.append(w)
    for row in rows.values():
        row.blackout_windows.set(windows)
    last_end = base + timedelta(seconds=spans[-1][1])
    wait_until(lambda: state.db_now() > last_end + timedelta(seconds=1.5), 30, 0.2)
    time.sleep(0.5)
    covered = [(w.start_at, w.end_at) for w in windows]
    for policy, row in rows.items():
        row.refresh_from_db()
        runs = attempts(row)
        inside = [a.claimed_at for a in runs if any(s <= a.claimed_at < e for s, e in covered)]
        assert inside == [], policy
        assert row.blackout_count == sum(e - s for s, e in spans), policy
    deferred = [a for a in attempts(rows["defer"]) if a.origin == AttemptOrigin.DEFERRED]
    assert [a.missed_slots for a in deferred] == [e - s for s, e in spans]
    for attempt, (_, end) in zip(deferred, covered, strict=True):
        assert end <= attempt.claimed_at < end + timedelta(seconds=1.5)
    skip_runs = [a.claimed_at for a in attempts(rows["skip"])]
    assert any(covered[0][1] <= t < covered[1][0] for t in skip_runs)  # the slots between


@pytest.mark.parametrize("policy", ["skip", "defer"])
def test_a_once_schedule_inside_a_window(policy):
    w = window("freeze", 1, 3)
    row = Schedule(
        name="once", callback="tests.noop", kind="once", run_at=at(2), blackout_policy=policy
    )
    row.full_clean()
    row.save()
    row.blackout_windows.set([w])
    Schedule.objects.filter(pk=row.pk).update(next_run_at=at(2))
    for now in (at(2), at(3)):
        run_at(now)
    row.refresh_from_db()
    runs = attempts(row)
    assert row.blackout_count == 1 and row.status == "completed"
    if policy == "skip":
        assert runs == []
    else:
        assert [(a.claimed_at, a.origin, a.missed_slots) for a in runs] == [
            (at(3), AttemptOrigin.DEFERRED, 1)
        ]
