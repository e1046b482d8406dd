"""Manual-only schedules (kind ``manual``, issue #27 item 5): no spec, never due by
itself, each trigger runs one occurrence of its own, never ``completed`` for want of a
slot; "manual: runs only when triggered" wherever a definition is described."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from rest_framework.test import APIClient

from django_durable_schedules import register, state, timing
from django_durable_schedules.health import snapshot
from django_durable_schedules.models import ExclusionCalendar, RunAttempt, RunReceipt, Schedule
from django_durable_schedules.registry import registry
from django_durable_schedules.worker.execution.runner import execute

from .conftest import wait_until
from .factories import T0

pytestmark = pytest.mark.django_db(transaction=True)

S = timedelta(seconds=1)
WORDS = "manual: runs only when triggered"


def manual(name: str = "by-hand", **kw) -> Schedule:
    row = Schedule(name=name, callback="tests.noop", kind="manual", created_at=T0, **kw)
    row.full_clean()
    row.save()
    return row


def run(now):
    """Claim what is due at ``now``, run it, complete it at ``now``."""
    claims = state.claim_due(worker="w1", now=now)
    state.complete([execute(c) for c in claims], now=now)
    return claims


def test_a_manual_schedule_is_never_due_by_itself():
    row = manual()
    assert row.status == "active" and row.next_run_at is None
    assert row.upcoming(5) == [] and row.plan(T0, first=True) is None
    for hours in (0, 1, 24, 24 * 400):
        assert run(T0 + timedelta(hours=hours)) == []
    row.refresh_from_db()
    assert row.status == "active" and row.occurrence == 0 and row.next_run_at is None
    assert not RunAttempt.objects.exists()


def test_each_trigger_runs_one_occurrence_and_it_never_completes():
    row = manual(payload={"who": "ops"})
    for n in (1, 2, 3):
        now = T0 + timedelta(hours=n)
        state.trigger(row.pk, now=now)
        state.trigger(row.pk, now=now)  # pending: one run either way
        [claim] = run(now + S)
        assert (claim.occurrence, claim.scheduled_for) == (n, now)
        assert run(now + timedelta(minutes=30)) == []  # nothing by itself in between
        row.refresh_from_db()
        assert row.status == "active" and row.next_run_at is None and row.occurrence == n
    receipts = RunReceipt.objects.order_by("occurrence")
    assert [(r.occurrence, r.status) for r in receipts] == [
        (1, "succeeded"),
        (2, "succeeded"),
        (3, "succeeded"),
    ]
    assert {a.origin for a in RunAttempt.objects.all()} == {"triggered"}


def test_enable_edit_and_a_write_behind_save_never_make_it_due_or_completed():
    row = manual()
    state.disable(row.pk)
    row = state.enable(row.pk)
    assert row.status == "active" and row.next_run_at is None
    row = state.update_schedule(row.pk, payload={"x": 1})
    assert row.status == "active" and row.next_run_at is None
    # An edit and a resume behind save(): the triggers make it due now; the claim runs
    # nothing and clears it.
    Schedule.objects.filter(pk=row.pk).update(status="paused")
    Schedule.objects.filter(pk=row.pk).update(status="active")
    Schedule.objects.filter(pk=row.pk).update(timezone="Europe/Paris")
    row.refresh_from_db()
    assert row.next_run_at is not None  # made due by the edit triggers
    now = max(T0, state.db_now()) + timedelta(minutes=1)
    assert run(now) == []
    row.refresh_from_db()
    assert row.status == "active" and row.next_run_at is None and row.occurrence == 0
    assert not RunAttempt.objects.exists()


def test_an_interval_schedule_edited_into_a_manual_one_stops_running_by_itself():
    row = Schedule(name="was-interval", callback="tests.noop", kind="interval")
    row.interval_seconds = 60
    row.full_clean()
    row.save()
    row = state.update_schedule(row.pk, kind="manual", interval_seconds=None)
    assert row.status == "active" and row.next_run_at is None


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("interval_seconds", 60),
        ("cron", "0 3 * * *"),
        ("rrule", "FREQ=DAILY"),
        ("run_at", T0),
        ("start_at", T0),
        ("end_at", T0),
        ("max_runs", 3),
    ],
)
@pytest.mark.vendor_independent  # validation of an unsaved row
def test_a_manual_schedule_refuses_timing_fields_with_field_messages(field, value):
    row = Schedule(name="bad", callback="tests.noop", kind="manual", **{field: value})
    with pytest.raises(ValidationError) as caught:
        row.full_clean()
    assert list(caught.value.message_dict) == [field]
    assert "runs only when triggered" in caught.value.message_dict[field][0]


def test_a_manual_schedule_refuses_exclusion_calendars():
    calendar = ExclusionCalendar.objects.create(name="holidays")
    with pytest.raises(ValidationError) as caught:
        state.create_schedule(
            name="bad", callback="tests.noop", kind="manual", exclusion_calendars=[calendar]
        )
    assert "exclusion_calendars" in caught.value.message_dict


@pytest.mark.vendor_independent  # words rendered for a row
def test_the_words_say_manual_everywhere():
    row = manual()
    assert timing.describe(row.spec()) == WORDS
    from django_durable_schedules.admin.display import cadence

    assert str(cadence(row)) == WORDS
    from django_durable_schedules.admin.columns import upcoming_table

    assert WORDS in str(upcoming_table(row))


def test_health_calls_a_manual_schedule_with_no_next_run_healthy():
    manual()
    health = snapshot()
    assert health.healthy, health.problems


def test_a_deadline_applies_only_to_a_triggered_occurrence():
    row = manual(deadline_seconds=60)
    from django_durable_schedules.deadlines import deadline_state

    assert deadline_state(row, T0 + timedelta(days=1)).deadline_at is None
    Schedule.objects.filter(pk=row.pk).update(next_run_at=T0)  # written behind save()
    row.refresh_from_db()
    assert deadline_state(row, T0 + timedelta(days=1)).deadline_at is None
    assert not Schedule.objects.overdue_deadline(T0 + timedelta(days=1)).exists()
    state.trigger(row.pk, now=T0 + S)
    row.refresh_from_db()
    late = deadline_state(row, T0 + timedelta(days=1))
    assert late.deadline_at == T0 + 61 * S and late.late
    assert Schedule.objects.overdue_deadline(T0 + timedelta(days=1)).get() == row


def test_the_api_creates_a_manual_schedule_and_refuses_timing_fields(admin_user):
    client = APIClient()
    client.force_authenticate(admin_user)
    made = client.post(
        "/api/schedules/",
        {"name": "api-manual", "callback": "tests.noop", "kind": "manual"},
        format="json",
    )
    assert made.status_code == 201, made.json()
    body = made.json()
    assert body["next_run_at"] is None and body["status"] == "active"
    assert body["description"] == WORDS
    bad = client.post(
        "/api/schedules/",
        {"name": "api-bad", "callback": "tests.noop", "kind": "manual", "cron": "0 3 * * *"},
        format="json",
    )
    assert bad.status_code == 400 and "cron" in bad.json()
    upcoming = client.get(f"/api/schedules/{body['id']}/upcoming/")
    assert upcoming.status_code == 200


def test_schedules_show_says_manual(capsys):
    manual()
    call_command("schedules", "show", "by-hand")
    assert WORDS in capsys.readouterr().out


def test_register_manual_declares_a_manual_schedule():
    try:
        register("tests.manual_declared", lambda ctx: None, manual=True, payload={"a": 1})
        state.sync_declared()
        row = Schedule.objects.get(name="tests.manual_declared")
        assert row.kind == "manual" and row.next_run_at is None and row.payload == {"a": 1}
    finally:
        registry.remove("tests.manual_declared")


@pytest.mark.vendor_independent  # registry argument checks
@pytest.mark.parametrize("timing_arg", [{"every": 60}, {"cron": "0 3 * * *"}, {"max_runs": 2}])
def test_register_manual_with_a_timing_argument_is_a_value_error(timing_arg):
    with pytest.raises(ValueError, match="manual=True"):
        register("tests.manual_bad", lambda ctx: None, manual=True, **timing_arg)
    assert "tests.manual_bad" not in registry


@pytest.mark.process
def test_a_real_worker_runs_a_manual_schedule_only_once_triggered(start_worker):
    row = state.create_schedule(name="by-hand-live", callback="tests.noop", kind="manual")
    start_worker("--worker-id", "manual-1", "--max-idle", "0.5")
    time.sleep(3)  # several passes: nothing is due by itself
    assert not RunAttempt.objects.filter(schedule_id=row.pk).exists()
    state.trigger(row.pk)
    wait_until(
        lambda: RunReceipt.objects.filter(schedule_id=row.pk, status="succeeded").exists(),
        30,
        message="the triggered run's receipt",
    )
    time.sleep(2)  # more passes: nothing more
    attempts = RunAttempt.objects.filter(schedule_id=row.pk)
    assert [(a.occurrence, a.origin) for a in attempts] == [(1, "triggered")]
    row.refresh_from_db()
    assert row.status == "active" and row.next_run_at is None
