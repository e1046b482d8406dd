"""``misfire_policy`` ``all`` (issue #28 item 5): after downtime every missed slot runs,
oldest first, one run after the other, at most ``CATCH_UP_MAX`` of them (the older ones
counted missed), under ``misfire_grace_seconds`` and the overlap policy; through the state
functions with an injected clock, the setting's check and the API."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import transaction
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_durable_schedules import state, timing
from django_durable_schedules.db.retention import retention_gate
from django_durable_schedules.models import RunAttempt, RunReceipt, Schedule, ScheduleEvent
from django_durable_schedules.worker.execution.runner import execute

from .conftest import property_examples
from .factories import T0

pytestmark = pytest.mark.django_db(transaction=True)

S = timedelta(seconds=1)
H = timedelta(hours=1)
M = timedelta(minutes=1)


def make(name="cu", **kw):
    kw.setdefault("callback", "tests.noop")
    kw.setdefault("kind", "interval")
    if kw["kind"] == "interval":
        kw.setdefault("interval_seconds", 3600)
    kw.setdefault("created_at", T0 - H)  # hourly from 09:00
    kw.setdefault("timezone", "UTC")
    s = Schedule(name=name, misfire_policy="all", **kw)
    s.full_clean()
    s.save()
    return s


def run_at(now, took=timedelta(0)):
    """One worker pass at ``now``: claim what is due, run it, complete it ``took`` later.
    Returns the slots it ran (``scheduled_for``)."""
    claims = state.claim_due(worker="w", now=now, lease_seconds=4 * 3600)
    state.complete([execute(c) for c in claims], now=now + took)
    return [c.scheduled_for for c in claims]


def catch_up(now, took=5 * M, limit=1000):
    """Workers back at ``now``: pass after pass, each claim after the previous run
    finished, until nothing is due. Returns the slots run and the instant it ended."""
    ran: list[datetime] = []
    for _ in range(limit):
        slots = run_at(now, took)
        if not slots:
            return ran, now
        ran += slots
        now += took
    raise AssertionError("the catch-up never ended")


def test_the_hourly_timeline_runs_every_missed_slot_oldest_first_then_on_time():
    make()
    assert run_at(T0 - H) == [T0 - H]  # 09:00 on time; workers down 10:00-13:30
    s = Schedule.objects.get()
    assert s.next_run_at == T0
    ran, ended = catch_up(T0 + 3 * H + 30 * M)  # back at 13:30
    assert ran == [T0, T0 + H, T0 + 2 * H, T0 + 3 * H]  # 10, 11, 12, 13
    assert ended == T0 + 3 * H + 50 * M
    s = Schedule.objects.get()
    assert (s.next_run_at, s.missed_count) == (T0 + 4 * H, 0)
    assert run_at(T0 + 4 * H) == [T0 + 4 * H]  # 14:00 on time
    attempts = list(RunAttempt.objects.order_by("occurrence"))
    assert [a.missed_slots for a in attempts] == [0] * 6
    claimed = [a.claimed_at for a in attempts[1:5]]
    assert claimed == [T0 + 3 * H + 30 * M + i * 5 * M for i in range(4)]
    assert all(r.status == "succeeded" for r in RunReceipt.objects.all())


@override_settings(DURABLE_SCHEDULES={"CATCH_UP_MAX": 2})
def test_catch_up_max_counts_the_oldest_missed_and_runs_the_newest():
    make()
    run_at(T0 - H)
    ran, _ = catch_up(T0 + 3 * H + 30 * M)
    assert ran == [T0 + 2 * H, T0 + 3 * H]  # 10:00 and 11:00 counted missed
    s = Schedule.objects.get()
    assert (s.next_run_at, s.missed_count) == (T0 + 4 * H, 2)
    first = RunAttempt.objects.get(scheduled_for=T0 + 2 * H)
    assert first.missed_slots == 2
    assert not RunReceipt.objects.filter(status="missed").exists()


def test_a_backlog_run_longer_than_the_interval_keeps_the_backlog():
    """A backlog slot due before the claim is no overlap; a slot that came due while the
    last backlog run ran follows the overlap policy (skip: counted)."""
    make()
    run_at(T0 - H)
    assert run_at(T0 + 2 * H + 30 * M, took=80 * M) == [T0]  # 10:00, ends 13:50
    assert Schedule.objects.get().next_run_at == T0 + H  # 11:00 still due: kept
    assert run_at(T0 + 3 * H + 50 * M, took=5 * M) == [T0 + H]
    assert run_at(T0 + 3 * H + 55 * M, took=5 * M) == [T0 + 2 * H]
    # 13:00, claimed at 13:59, runs past 14:00
    assert run_at(T0 + 3 * H + 59 * M, took=30 * M) == [T0 + 3 * H]
    s = Schedule.objects.get()  # 14:00 came due while 13:00 ran: skipped, counted
    assert (s.next_run_at, s.missed_count) == (T0 + 5 * H, 1)


def test_a_failed_catch_up_run_is_retried_and_its_backlog_counted():
    """A catch-up run that fails ends the catch-up: the slots already due at its claim
    are counted missed, its retry runs, and the grid goes on: each slot once."""
    make(callback="tests.fail", max_attempts=2, backoff_base_seconds=60)
    run_at(T0 - H)  # 09:00 fails; its retry at 09:01 fails too: given up
    run_at(T0 - H + M)
    assert run_at(T0 + 3 * H + 30 * M) == [T0]  # 10:00 fails: 11, 12, 13 counted
    s = Schedule.objects.get()
    assert (s.missed_count, s.next_run_at) == (3, T0 + 3 * H + 31 * M)
    assert run_at(T0 + 3 * H + 31 * M) == [T0]  # its retry, given up
    assert run_at(T0 + 4 * H) == [T0 + 4 * H]  # 14:00 on time
    s = Schedule.objects.get()
    assert s.missed_count == 3 and s.occurrence == 3


def test_grace_with_all_counts_the_stale_slots_together_and_runs_the_rest():
    make(misfire_grace_seconds=90 * 60)  # slots older than 1.5 h are not run
    run_at(T0 - H)
    ran, _ = catch_up(T0 + 3 * H + 30 * M)  # 12:00 and 13:00 are within the grace
    assert ran == [T0 + 2 * H, T0 + 3 * H]
    s = Schedule.objects.get()
    assert s.missed_count == 2 and s.next_run_at == T0 + 4 * H
    assert not RunReceipt.objects.filter(status="missed").exists()  # not one by one


def test_grace_with_all_and_every_slot_stale_receipts_the_latest_missed():
    make(misfire_grace_seconds=60)
    run_at(T0 - H)
    assert run_at(T0 + 3 * H + 30 * M) == []
    s = Schedule.objects.get()
    assert s.missed_count == 4 and s.next_run_at == T0 + 4 * H
    assert RunReceipt.objects.get(status="missed").attempt.scheduled_for == T0 + 3 * H


def test_a_once_schedule_is_unaffected():
    make(kind="once", interval_seconds=None, run_at=T0)
    assert run_at(T0 + 3 * H) == [T0]
    s = Schedule.objects.get()
    assert s.status == "completed" and s.next_run_at is None and s.missed_count == 0


def test_a_cron_schedule_across_a_dst_change_runs_each_missed_slot_once():
    """Hourly in Europe/Paris, down across the night clocks go back (2027-10-31, 03:00
    CEST is 02:00 CET): each slot of the grid in the outage runs once, in order."""
    start = datetime(2027, 10, 30, 22, 0, tzinfo=UTC)  # 00:00 CEST
    s = make(
        kind="cron",
        interval_seconds=None,
        cron="0 * * * *",
        timezone="Europe/Paris",
        created_at=start - S,
    )
    Schedule.objects.filter(pk=s.pk).update(next_run_at=start)  # planned at 23:59:59
    back = start + 6 * H + 30 * M
    expected = [start, *timing.upcoming(s.spec(), start, 10)]
    expected = [t for t in expected if t <= back]
    ran, ended = catch_up(back, took=M)
    tail = [t for t in timing.upcoming(s.spec(), back, 3) if t <= ended]
    assert ran == expected + tail and len(set(ran)) == len(ran)
    assert Schedule.objects.get().missed_count == 0


@pytest.mark.vendor_independent  # a settings check: no query
@pytest.mark.parametrize("value", [0, -1, 1.5, "3", True, None, 10**7])
def test_catch_up_max_is_checked_and_bounded(value):
    from django_durable_schedules import checks
    from django_durable_schedules.conf import app_settings

    with override_settings(DURABLE_SCHEDULES={"CATCH_UP_MAX": value}):
        assert "durable_schedules.E006" in [m.id for m in checks.check_setting_types()]
        assert 1 <= app_settings.CATCH_UP_MAX <= 10**6
    assert app_settings.CATCH_UP_MAX == 100
    with override_settings(DURABLE_SCHEDULES={"CATCH_UP_MAX": 5}):
        assert checks.check_setting_types() == [] and app_settings.CATCH_UP_MAX == 5


def test_the_api_accepts_all(admin_client):
    body = {"name": "api-all", "callback": "tests.noop", "kind": "interval"}
    body |= {"interval_seconds": 60, "misfire_policy": "all"}
    created = admin_client.post("/api/schedules/", body, content_type="application/json")
    assert created.status_code == 201, created.content
    assert created.json()["misfire_policy"] == "all"
    assert Schedule.objects.get(name="api-all").misfire_policy == "all"
    body |= {"name": "api-bad", "misfire_policy": "every"}
    bad = admin_client.post("/api/schedules/", body, content_type="application/json")
    assert bad.status_code == 400 and "misfire_policy" in bad.json()


def test_a_huge_backlog_is_bounded():
    """A 1 s interval down for a day: the claim finds the newest CATCH_UP_MAX slots
    without walking the 86,400 before them."""
    make(interval_seconds=1, created_at=T0)
    run_at(T0)
    now = T0 + timedelta(days=1)
    assert run_at(now) == [now - 99 * S]
    assert Schedule.objects.get().missed_count == 86400 - 100


def test_catch_up_slot_bisects_a_cron_grid():
    spec = Schedule(kind="cron", cron="*/5 * * * *", timezone="Europe/Paris").spec()
    latest = T0 + 1000 * 5 * M
    assert state.slot_rules.catch_up_slot(spec, T0, latest, latest, None, 7) == latest - 30 * M
    assert state.slot_rules.catch_up_slot(spec, T0, latest, latest, None, 2000) == T0
    # a grace of an hour: the oldest slot within it
    got = state.slot_rules.catch_up_slot(spec, T0, latest, latest + 30 * S, 3600, 2000)
    assert got == latest - 55 * M


@settings(
    max_examples=property_examples(25),  # 5 on PostgreSQL and MariaDB: tests/conftest.py
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    interval=st.integers(60, 7200),
    outage=st.integers(0, 40 * 3600),
    cap=st.integers(1, 12),
)
def test_property_every_slot_of_an_outage_runs_once_or_is_counted_once(interval, outage, cap):
    """Whatever the interval, the outage and CATCH_UP_MAX: every slot passed is run
    exactly once or counted missed exactly once (runs + missed_count == slots passed),
    the runs oldest first, the ones missed the oldest of the outage."""
    try:
        with override_settings(DURABLE_SCHEDULES={"CATCH_UP_MAX": cap}):
            make("prop", interval_seconds=interval, created_at=T0)
            assert run_at(T0) == [T0]
            back = T0 + outage * S
            pending = timing.count_slots(Schedule.objects.get().spec(), T0 + S, back + S, cap=10**6)
            ran, ended = catch_up(back, took=timedelta(0))
            s = Schedule.objects.get()
            passed = timing.count_slots(s.spec(), T0, ended + S, cap=10**6)
            assert 1 + len(ran) + s.missed_count == passed
            assert ran == sorted(set(ran))  # oldest first, none twice
            assert s.missed_count == max(0, pending - cap)
            if ran:  # the missed ones are the oldest: the first run is the first kept
                assert ran[0] == T0 + (1 + s.missed_count) * interval * S
            assert s.next_run_at > ended
    finally:
        with transaction.atomic(), retention_gate():
            RunReceipt.objects.all().delete()
            RunAttempt.objects.all().delete()
            ScheduleEvent.objects.all().delete()
            Schedule.objects.all().delete()


def test_a_catch_up_run_whose_callback_is_gone_counts_its_backlog():
    """The claim of a catch-up run whose callback is no longer registered pauses the
    schedule (degraded) and keeps that occurrence; the slots due behind it end with the
    catch-up and are counted missed, as for a catch-up run that fails: once the callback
    is back, the kept occurrence runs and the grid goes on; every slot runs or is counted
    once."""
    make()
    run_at(T0 - H)  # 09:00 on time; workers down 10:00-13:30, the callback renamed
    Schedule.objects.update(callback="tests.gone")
    assert run_at(T0 + 3 * H + 30 * M) == []  # 10:00 claimed: degraded, paused
    s = Schedule.objects.get()
    assert (s.status, s.retry_scheduled_for, s.missed_count) == ("paused", T0, 3)
    Schedule.objects.update(callback="tests.noop")  # registered again
    assert len(state.recover_degraded(now=T0 + 3 * H + 40 * M)) == 1
    ran, ended = catch_up(T0 + 3 * H + 40 * M)
    assert ran == [T0]  # the kept occurrence, its second attempt
    ran += run_at(T0 + 4 * H)  # 14:00 on time
    s = Schedule.objects.get()
    passed = timing.count_slots(s.spec(), T0 - H, T0 + 4 * H + S, cap=10**6)
    assert 1 + len(ran) + s.missed_count == passed  # 09:00 + runs + counted
    assert (s.missed_count, s.next_run_at) == (3, T0 + 5 * H)
