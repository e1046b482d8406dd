"""Issue acceptance for time: DST instants computed by hand, no drift over 1,000 runs,
one catch-up run after a 3-hour stop. Expected values are written out, never computed by
the code under test."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from django_durable_schedules import state
from django_durable_schedules.models import Schedule
from django_durable_schedules.worker.execution.runner import execute

S = timedelta(seconds=1)


def z(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def cron(expr: str, zone: str = "America/New_York") -> Schedule:
    return Schedule(name="x", callback="tests.noop", kind="cron", cron=expr, timezone=zone)


def test_new_york_fixed_time_in_the_gap_runs_once_at_0300_edt():
    runs = cron("30 2 * * *").upcoming(4, after=z(2027, 3, 12, 12))
    # 03-13 02:30 EST = 07:30Z; 03-14 02:30 does not exist -> 03:00 EDT = 07:00Z;
    # then 02:30 EDT = 06:30Z daily
    assert runs == [
        z(2027, 3, 13, 7, 30),
        z(2027, 3, 14, 7, 0),
        z(2027, 3, 15, 6, 30),
        z(2027, 3, 16, 6, 30),
    ]


def test_new_york_fixed_time_in_the_overlap_runs_once_at_the_first_reading():
    runs = cron("30 1 * * *").upcoming(3, after=z(2027, 11, 6, 12))
    # 11-07 01:30 happens twice (EDT 05:30Z, EST 06:30Z): once, at EDT; then 06:30Z daily
    assert runs == [z(2027, 11, 7, 5, 30), z(2027, 11, 8, 6, 30), z(2027, 11, 9, 6, 30)]


def test_new_york_wildcard_fires_in_both_readings_of_the_repeated_hour():
    runs = cron("*/30 * * * *").upcoming(6, after=z(2027, 11, 7, 4, 45))
    # 00:30 EDT ... 01:00 EDT, 01:30 EDT, 01:00 EST, 01:30 EST, 02:00 EST
    assert runs == [
        z(2027, 11, 7, 5, 0),
        z(2027, 11, 7, 5, 30),
        z(2027, 11, 7, 6, 0),
        z(2027, 11, 7, 6, 30),
        z(2027, 11, 7, 7, 0),
        z(2027, 11, 7, 7, 30),
    ]


@pytest.mark.django_db(transaction=True)
@pytest.mark.vendor_independent  # time arithmetic, injected clock
def test_no_drift_over_1000_runs_with_callbacks_taking_0_to_50_seconds():
    Schedule.objects.create(
        name="grid",
        callback="tests.noop",
        kind="interval",
        interval_seconds=60,
        created_at=z(2027, 6, 1),
    )
    rnd = random.Random(7)
    now, slots = z(2027, 6, 1), []
    while len(slots) < 1000:
        claims = state.claim_due(worker="w", now=now, lease_seconds=120)
        took = timedelta(seconds=rnd.uniform(0, 50))
        state.complete([execute(c) for c in claims], now=now + took)
        slots += [c.scheduled_for for c in claims]
        now += took + timedelta(seconds=rnd.uniform(0.1, 2))  # the next poll
        now = max(now, Schedule.objects.get().next_run_at)
    assert slots == [z(2027, 6, 1) + n * 60 * S for n in range(1000)]


@pytest.mark.django_db(transaction=True)
@pytest.mark.vendor_independent  # time arithmetic, injected clock
def test_after_a_three_hour_stop_an_every_minute_schedule_runs_once_then_on_the_grid():
    Schedule.objects.create(
        name="minutely",
        callback="tests.noop",
        kind="cron",
        cron="* * * * *",
        timezone="UTC",
        created_at=z(2027, 6, 1, 9),
    )
    Schedule.objects.update(next_run_at=z(2027, 6, 1, 9))
    restart = z(2027, 6, 1, 12, 0, 20)
    claims = state.claim_due(worker="w", now=restart)
    state.complete([execute(c) for c in claims], now=restart + S)
    assert [c.scheduled_for for c in claims] == [z(2027, 6, 1, 12)]
    assert claims[0].missed_slots == 180
    later = []
    for minute in range(1, 4):
        t = z(2027, 6, 1, 12, minute, 0, 300000)
        cs = state.claim_due(worker="w", now=t)
        state.complete([execute(c) for c in cs], now=t)
        later += [c.scheduled_for for c in cs]
    assert later == [z(2027, 6, 1, 12, m) for m in range(1, 4)]
