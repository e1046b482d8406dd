"""Deadlines with real ``run_scheduler`` processes (issue #26): exactly one
``deadline_missed`` and one ``recovered`` event per late occurrence, whatever the number of
workers, and when no worker ran across the deadline."""

from __future__ import annotations

import time

import pytest

from django_durable_schedules import state
from django_durable_schedules.models import RunReceipt, Schedule, ScheduleEvent

from .conftest import wait_until
from .test_worker_process import wait_started

pytestmark = pytest.mark.django_db(transaction=True)


def alert_events(schedule):
    return list(
        ScheduleEvent.objects.filter(schedule_id=schedule.pk, source="worker")
        .order_by("at")
        .values_list("action", "occurrence")
    )


def succeeded(schedule):
    return RunReceipt.objects.filter(schedule_id=schedule.pk, status="succeeded").exists()


@pytest.mark.process
def test_a_run_longer_than_its_deadline_is_reported_once_by_four_workers(start_worker):
    s = Schedule.objects.create(
        name="long-run",
        callback="tests.slow_first",
        kind="interval",
        interval_seconds=3600,
        payload={"seconds": 15},
        deadline_seconds=2,
    )
    for i in range(4):
        start_worker("--worker-id", f"dl{i}", "--concurrency", "2")
    wait_until(lambda: succeeded(s), 60, message="the long run's success")
    time.sleep(6)  # more sweeps of every worker: nothing more is written
    assert alert_events(s) == [("deadline_missed", 1), ("recovered", 1)]
    missed = ScheduleEvent.objects.get(schedule_id=s.pk, action="deadline_missed")
    receipt = RunReceipt.objects.get(schedule_id=s.pk)
    assert missed.at < receipt.finished_at  # reported while it ran
    assert missed.changes["deadline_seconds"] == 2
    s.refresh_from_db()
    assert s.open_alerts == "" and s.deadline_missed_occurrence == 1


@pytest.mark.process
def test_a_deadline_passed_with_no_worker_is_reported_by_the_next_to_start(start_worker):
    s = Schedule.objects.create(
        name="nobody-home",
        callback="tests.noop",
        kind="interval",
        interval_seconds=3600,
        deadline_seconds=1,
    )
    # Every worker stopped across the deadline: wait (polling the database's clock) until
    # it has passed, not a fixed 2.5 s.
    wait_until(
        lambda: Schedule.objects.overdue_deadline(state.db_now()).filter(pk=s.pk).exists(),
        15,
        message="the deadline to pass with no worker",
    )
    now = state.db_now()
    assert Schedule.objects.overdue_deadline(now).filter(pk=s.pk).exists()  # late on read
    assert alert_events(s) == []
    ids = [f"late{i}" for i in range(2)]
    for wid in ids:
        start_worker("--worker-id", wid)
    wait_until(lambda: succeeded(s), 60, message="the late run's success")
    # Each worker's start-up sweep (the one that reports a deadline missed while no worker
    # ran) comes before its first heartbeat; its next sweep is DEADLINE_SWEEP_SECONDS
    # (10 s) later. Once both have a heartbeat, both have swept: a second report would be
    # written by now. (A fixed 6 s here saw no more sweeps than these.)
    wait_started(*ids, timeout=60)
    time.sleep(1)
    assert alert_events(s) == [("deadline_missed", 1), ("recovered", 1)]
    missed = ScheduleEvent.objects.get(schedule_id=s.pk, action="deadline_missed")
    attempt = s.attempts.get()
    assert missed.at <= attempt.claimed_at  # written before the late slot ran


@pytest.mark.process
def test_a_failing_schedule_alerts_once_then_is_paused_once(start_worker):
    """FAILING_AFTER (3) failed attempts in a row: one ``failing`` event; paused after 5
    failed occurrences: one ``paused`` event; never more, whatever the workers."""
    s = Schedule.objects.create(
        name="always-fails",
        callback="tests.fail",
        kind="interval",
        interval_seconds=1,
        max_attempts=1,
        pause_after_failures=5,
    )
    for i in range(2):
        start_worker("--worker-id", f"f{i}")
    wait_until(
        lambda: Schedule.objects.filter(pk=s.pk, status="paused").exists(),
        60,
        message="the pause after five failed occurrences",
    )
    time.sleep(2)
    assert alert_events(s) == [("failing", 3), ("paused", 5)]
    s.refresh_from_db()
    assert s.open_alerts == "failing"


@pytest.mark.process
def test_a_schedule_degraded_by_the_engine_alerts_once(start_worker):
    """Its callback gone (written behind ``save()``): paused as degraded at the claim, one
    ``degraded`` event however many workers look at it."""
    s = Schedule.objects.create(
        name="gone-callback", callback="tests.noop", kind="interval", interval_seconds=1
    )
    Schedule.objects.filter(pk=s.pk).update(callback="tests.not_registered")
    for i in range(2):
        start_worker("--worker-id", f"g{i}")
    wait_until(
        lambda: (
            Schedule.objects.filter(pk=s.pk, status="paused").exclude(degraded_reason="").exists()
        ),
        60,
        message="the schedule degraded",
    )
    time.sleep(3)
    assert alert_events(s) == [("degraded", 1)]
    s.refresh_from_db()
    assert s.open_alerts == "degraded"
