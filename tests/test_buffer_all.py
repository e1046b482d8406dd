"""``overlap_policy`` ``buffer_all`` (issue #28 item 4): every slot that comes due while a
run runs is run after it, oldest first, one occurrence after the other, at most
``BUFFER_MAX`` queued (the older ones counted skipped); every slot of the grid is run once
or counted once, whatever the run times. Through the state functions with an injected
clock (run on SQLite, PostgreSQL and MariaDB), the setting's check and the API."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.db import transaction
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_durable_schedules import checks, state, timing
from django_durable_schedules.conf import app_settings
from django_durable_schedules.db.retention import retention_gate
from django_durable_schedules.models import RunAttempt, RunReceipt, Schedule, ScheduleEvent
from django_durable_schedules.worker.execution.runner import execute

from .conftest import property_examples
from .factories import T0

pytestmark = pytest.mark.django_db(transaction=True)

S = timedelta(seconds=1)
M = timedelta(minutes=1)
H = timedelta(hours=1)


def make(name="ba", **kw):
    kw.setdefault("callback", "tests.noop")
    kw.setdefault("kind", "interval")
    kw.setdefault("interval_seconds", 3600)
    kw.setdefault("created_at", T0)  # hourly from T0
    kw.setdefault("timezone", "UTC")
    s = Schedule(name=name, overlap_policy="buffer_all", **kw)
    s.full_clean()
    s.save()
    return s


def one_pass(now: datetime, took: timedelta) -> list[tuple[datetime, str]]:
    """Claim what is due at ``now``, run it, complete it ``took`` later: the slots run
    (``scheduled_for``) with their attempts' origins."""
    claims = state.claim_due(worker="w", now=now, lease_seconds=48 * 3600)
    state.complete([execute(c) for c in claims], now=now + took)
    return [(c.scheduled_for, c.origin) for c in claims]


def drive(now: datetime, durations: list[timedelta], limit: int = 500):
    """Worker passes from ``now``, each run taking the next of ``durations`` (the last one
    repeated), each pass right after the previous run finished, until nothing is due.
    Returns the slots run, their origins and the instant it ended."""
    ran: list[datetime] = []
    origins: list[str] = []
    for i in range(limit):
        took = durations[min(i, len(durations) - 1)]
        done = one_pass(now, took)
        if not done:
            return ran, origins, now
        ran += [slot for slot, _ in done]
        origins += [origin for _, origin in done]
        now += took
    raise AssertionError("the queue never ended")


def test_the_slots_passed_during_a_long_run_each_run_after_it_oldest_first():
    make()
    ran, origins, ended = drive(T0, [3 * H + 30 * M, 5 * M])
    # T0 ran 3.5 h: 1 h, 2 h and 3 h came due meanwhile; each runs after it, in order.
    assert ran == [T0, T0 + H, T0 + 2 * H, T0 + 3 * H]
    assert origins == ["scheduled", "buffered", "buffered", "buffered"]
    assert ended == T0 + 3 * H + 45 * M
    s = Schedule.objects.get()
    assert (s.next_run_at, s.missed_count, s.buffered_for) == (T0 + 4 * H, 0, None)
    assert [r.slots_skipped for r in RunReceipt.objects.order_by("occurrence")] == [0] * 4
    assert one_pass(T0 + 4 * H, 0 * S) == [(T0 + 4 * H, "scheduled")]  # on time again


def test_a_slot_due_while_the_queue_runs_joins_it():
    make()
    # T0 runs 2.5 h (1 h, 2 h queued); the 1 h slot's run takes 1 h, so 3 h comes due.
    ran, _, _ = drive(T0, [2 * H + 30 * M, H, 5 * M])
    assert ran == [T0, T0 + H, T0 + 2 * H, T0 + 3 * H]
    assert Schedule.objects.get().missed_count == 0


@override_settings(DURABLE_SCHEDULES={"BUFFER_MAX": 2})
def test_at_most_buffer_max_slots_are_queued_the_older_ones_counted():
    make(interval_seconds=60)
    ran, _, _ = drive(T0, [10 * M + 30 * S, 0 * S])
    # 1..10 minutes came due during the first run: the newest two run, eight are counted.
    assert ran == [T0, T0 + 9 * M, T0 + 10 * M]
    s = Schedule.objects.get()
    assert s.missed_count == 8
    first = RunReceipt.objects.order_by("occurrence").first()
    assert first.slots_skipped == 8


def test_a_huge_queue_is_bounded():
    """A 1 s interval whose run took a day: the completion finds the newest BUFFER_MAX
    slots without walking the 86,400 before them."""
    make(interval_seconds=1)
    one_pass(T0, timedelta(days=1))
    s = Schedule.objects.get()
    assert s.buffered_for == T0 + timedelta(days=1) - 99 * S
    assert s.missed_count == 86400 - 100


def test_a_buffered_run_that_is_retried_counts_the_queue_behind_it():
    make(max_attempts=2, backoff_base_seconds=1, backoff_cap_seconds=1)
    one_pass(T0, 3 * H + 30 * M)  # 1 h, 2 h, 3 h queued
    now = T0 + 3 * H + 31 * M
    [claim] = state.claim_due(worker="w", now=now, lease_seconds=3600)
    assert (claim.scheduled_for, claim.origin) == (T0 + H, "buffered")
    state.complete([state.Outcome(claim, "failed", error_message="boom")], now=now + S)
    s = Schedule.objects.get()
    # The queue behind it (2 h, 3 h, already due at its claim) is counted, not dropped;
    # its retry runs the same occurrence, then the grid goes on at 4 h.
    assert (s.missed_count, s.retry_scheduled_for) == (2, T0 + H)
    ran, _, _ = drive(now + 3 * S, [0 * S])
    assert ran == [T0 + H]
    assert Schedule.objects.get().missed_count == 2
    assert one_pass(T0 + 4 * H, 0 * S) == [(T0 + 4 * H, "scheduled")]


@pytest.mark.vendor_independent  # a settings check: no query
def test_the_setting_is_checked_and_bounded():
    for value in ("3", 0, -1, 2.5, True, None):
        with override_settings(DURABLE_SCHEDULES={"BUFFER_MAX": value}):
            assert 1 <= app_settings.BUFFER_MAX <= 10**6
            assert [e.id for e in checks.check_setting_types()] == ["durable_schedules.E006"]
    assert app_settings.BUFFER_MAX == 100


def test_the_api_accepts_buffer_all(admin_client):
    body = {
        "name": "api-buffer-all",
        "callback": "tests.noop",
        "kind": "interval",
        "interval_seconds": 60,
        "overlap_policy": "buffer_all",
    }
    created = admin_client.post("/api/schedules/", body, content_type="application/json")
    assert created.status_code == 201, created.json()
    assert created.json()["overlap_policy"] == "buffer_all"


@settings(
    max_examples=property_examples(25),  # 5 on PostgreSQL and MariaDB: tests/conftest.py
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    interval=st.integers(60, 7200),
    durations=st.lists(st.integers(0, 6 * 3600), min_size=1, max_size=6),
    cap=st.integers(1, 12),
)
def test_property_every_slot_runs_once_or_is_counted_once(interval, durations, cap):
    """Whatever the interval, the run times and BUFFER_MAX: every slot from the first to
    the end is run exactly once or counted exactly once (runs + missed_count == slots
    passed), the runs oldest first."""
    try:
        with override_settings(DURABLE_SCHEDULES={"BUFFER_MAX": cap}):
            make("prop", interval_seconds=interval)
            ran, _, ended = drive(T0, [d * S for d in durations] + [0 * S])
            s = Schedule.objects.get()
            passed = timing.count_slots(s.spec(), T0, ended + S, cap=10**6)
            assert len(ran) + s.missed_count == passed
            assert ran == sorted(set(ran))  # oldest first, none twice
            assert s.next_run_at > ended
    finally:
        with transaction.atomic(), retention_gate():
            RunReceipt.objects.all().delete()
            RunAttempt.objects.all().delete()
            ScheduleEvent.objects.all().delete()
            Schedule.objects.all().delete()


def test_a_pause_counts_the_whole_queue():
    make()
    one_pass(T0, 3 * H + 30 * M)  # 1 h, 2 h, 3 h queued
    s = Schedule.objects.get()
    assert (s.buffered_for, s.buffered_through) == (T0 + H, T0 + 3 * H)
    state.disable(s.pk, now=T0 + 3 * H + 31 * M)
    s = Schedule.objects.get()
    assert (s.buffered_for, s.missed_count) == (None, 3)


def test_a_policy_edited_while_a_queue_waits_loses_no_slot():
    """The claim after the completion reads the queue, not the policy: the edit applies
    from the next completion on (the slots still queued then are counted by it)."""
    s = make()
    one_pass(T0, 3 * H + 30 * M)  # 1 h, 2 h, 3 h queued
    s.refresh_from_db()
    s.overlap_policy = "skip"
    s.save()
    now = T0 + 3 * H + 31 * M
    assert one_pass(now, 0 * S) == [(T0 + H, "buffered")]
    s = Schedule.objects.get()
    # 2 h and 3 h: counted by the completion under the new policy, not lost.
    assert s.missed_count == 2 and s.next_run_at == T0 + 4 * H


def test_schedules_show_names_the_queue():
    from io import StringIO

    from django.core.management import call_command

    make()
    one_pass(T0, 3 * H + 30 * M)  # 1 h, 2 h, 3 h queued
    out = StringIO()
    call_command("schedules", "show", "ba", stdout=out)
    assert "overlap=buffer_all" in out.getvalue()
    assert "runs next, then the queue through" in out.getvalue()
