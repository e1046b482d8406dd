"""Overlap policy ``replace`` (issue #28 item 4): the pure rules, the state machine with an
injected clock, the validation of every definition path, and a real worker that stops a
slow run in its child process when the next slot comes due."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from hypothesis import given
from hypothesis import strategies as st

from django_durable_schedules import register_command, state, timing
from django_durable_schedules.models import RunAttempt, RunReceipt, Schedule
from django_durable_schedules.registry import registry
from django_durable_schedules.state.replace_rules import newest_passed_slot, replace_at, replaces
from django_durable_schedules.worker.execution.runner import execute

from .conftest import wait_until
from .factories import T0

S = timedelta(seconds=1)
MESSAGE = (
    "'replace' stops the running occurrence's child process: set timeout_seconds, which "
    "runs each occurrence in one."
)


def make(name="rp", **kw):
    kw.setdefault("callback", "tests.noop")
    kw.setdefault("overlap_policy", "replace")
    kw.setdefault("timeout_seconds", 300)
    s = Schedule(
        name=name, kind="interval", interval_seconds=60, timezone="UTC", created_at=T0, **kw
    )
    s.full_clean()
    s.save()
    return s


def unsaved(**kw):
    fields = dict(
        name="rp",
        callback="tests.noop",
        kind="interval",
        interval_seconds=60,
        timezone="UTC",
        overlap_policy="replace",
        timeout_seconds=300,
        created_at=T0,
        start_at=T0,
        next_run_at=T0 + 60 * S,
        max_runs=None,
    )
    fields.update(kw)
    return Schedule(**fields)


@pytest.fixture
def cleanup_registry():
    before = set(registry.names())
    yield
    for name in set(registry.names()) - before:
        registry.remove(name)


# -- the pure rules ------------------------------------------------------------------------


def test_replace_needs_timeout_seconds_to_be_in_effect():
    assert replaces(unsaved())
    assert not replaces(unsaved(timeout_seconds=None))  # behind save(): as skip
    assert not replaces(unsaved(overlap_policy="skip"))


@pytest.mark.parametrize(
    ("kw", "origin", "occurrence", "expected"),
    [
        ({}, "scheduled", 1, T0 + 60 * S),
        ({}, "triggered", 1, T0 + 60 * S),
        ({}, "buffered", 1, T0 + 60 * S),
        ({}, "backfill", 1, None),  # a backfill slot never moves the grid
        ({}, "rerun", 1, None),
        ({"max_runs": 3}, "scheduled", 3, None),  # the last run: no slot to give way to
        ({"timeout_seconds": None}, "scheduled", 1, None),
        ({"overlap_policy": "buffer_one"}, "scheduled", 1, None),
        ({"next_run_at": None}, "scheduled", 1, None),
        ({"next_run_at": T0}, "scheduled", 1, None),  # already due: a catch-up backlog
    ],
)
def test_replace_at_is_the_planned_next_slot_of_a_recurring_live_run(
    kw, origin, occurrence, expected
):
    assert replace_at(unsaved(**kw), occurrence, origin, T0) == expected


def test_the_newest_passed_slot_runs_and_the_earlier_ones_are_counted():
    row = unsaved(next_run_at=T0 + 60 * S)
    assert newest_passed_slot(row, T0 + 60 * S) == (T0 + 60 * S, 0)  # replaced at the slot
    assert newest_passed_slot(row, T0 + 200 * S) == (T0 + 180 * S, 2)  # 60, 120 counted


@given(
    interval=st.integers(min_value=2, max_value=7200),
    jitter_share=st.floats(min_value=0, max_value=0.5),
    late=st.integers(min_value=0, max_value=50_000),
)
def test_every_passed_slot_is_run_or_counted_whatever_the_grid_and_jitter(
    interval, jitter_share, late
):
    """The stop at ``now`` (the planned next run, or later: a stalled worker): exactly one
    passed slot runs (the newest, due at once) and every other is counted."""
    jitter = int(interval * jitter_share) or None
    row = unsaved(interval_seconds=interval, jitter_seconds=jitter)
    nominal = T0 + interval * S
    row.next_run_at = row.due_at(nominal)
    now = row.next_run_at + late * S
    due, skipped = newest_passed_slot(row, now)
    spec = row.spec()
    passed = timing.count_slots(spec, nominal, now + S)
    newest = nominal + (passed - 1) * interval * S
    assert skipped == passed - 1
    assert due == row.due_at(newest) and newest <= now
    assert timing.next_slot_after(spec, newest) > now  # nothing newer was left behind


# -- the state machine, injected clock -----------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_replaced_run_is_no_failure_and_the_new_slot_runs_at_once():
    s = make()
    [first] = state.claim_due(worker="w", now=T0, lease_seconds=600)
    assert first.replace_at == T0 + 60 * S
    replaced = state.Outcome(first, "replaced", error_type="Replaced", started_at=T0)
    [receipt] = state.complete([replaced], now=T0 + 60 * S).receipts
    assert (receipt.status, receipt.slots_skipped, receipt.next_run_at) == (
        "replaced",
        0,
        T0 + 60 * S,
    )
    s.refresh_from_db()
    assert (s.failure_count, s.missed_count, s.lease_token, s.status) == (0, 0, None, "active")
    [second] = state.claim_due(worker="w", now=T0 + 60 * S, lease_seconds=600)
    assert (second.occurrence, second.attempt, second.scheduled_for) == (2, 1, T0 + 60 * S)
    assert second.replace_at == T0 + 120 * S


@pytest.mark.django_db(transaction=True)
def test_when_several_slots_passed_the_latest_runs_and_the_others_are_counted_skipped():
    s = make()
    [first] = state.claim_due(worker="w", now=T0, lease_seconds=600)
    # The worker stopped it late (stalled): slots 60, 120 and 180 have passed.
    report = state.complete([state.Outcome(first, "replaced")], now=T0 + 200 * S)
    [receipt] = report.receipts
    assert (receipt.status, receipt.slots_skipped) == ("replaced", 2)
    s.refresh_from_db()
    assert (s.missed_count, s.next_run_at, s.failure_count) == (2, T0 + 180 * S, 0)
    [second] = state.claim_due(worker="w", now=T0 + 201 * S, lease_seconds=600)
    assert (second.scheduled_for, second.missed_slots) == (T0 + 180 * S, 0)
    state.complete([execute(second)], now=T0 + 202 * S)
    statuses = list(RunReceipt.objects.order_by("finished_at").values_list("status", flat=True))
    assert statuses == ["replaced", "succeeded"]
    # Every slot of the grid run or counted: 0 and 180 ran, 60 and 120 counted.
    assert Schedule.objects.get().missed_count == 2


@pytest.mark.django_db(transaction=True)
def test_a_failure_streak_is_kept_across_a_replaced_run():
    s = make(callback="tests.fail", max_attempts=1)
    [first] = state.claim_due(worker="w", now=T0, lease_seconds=600)
    state.complete([execute(first)], now=T0 + S)
    assert Schedule.objects.get().failure_count == 1
    [second] = state.claim_due(worker="w", now=T0 + 60 * S, lease_seconds=600)
    state.complete([state.Outcome(second, "replaced")], now=T0 + 120 * S)
    s.refresh_from_db()
    assert (s.failure_count, s.next_run_at) == (1, T0 + 120 * S)  # kept, not reset nor added


@pytest.mark.django_db(transaction=True)
def test_a_row_written_behind_save_without_timeout_behaves_as_skip():
    s = make()
    Schedule.objects.filter(pk=s.pk).update(timeout_seconds=None)
    [first] = state.claim_due(worker="w", now=T0, lease_seconds=600)
    assert first.replace_at is None  # never stopped
    [receipt] = state.complete([execute(first)], now=T0 + 200 * S).receipts
    assert (receipt.status, receipt.slots_skipped) == ("succeeded", 3)
    assert Schedule.objects.get().next_run_at == T0 + 240 * S


# -- validation: clean(), the API, a declared schedule -------------------------------------


@pytest.mark.django_db
def test_clean_refuses_replace_without_timeout_seconds():
    bad = Schedule(name="bad", callback="tests.noop", interval_seconds=60, overlap_policy="replace")
    with pytest.raises(ValidationError) as info:
        bad.full_clean()
    assert info.value.message_dict["overlap_policy"] == [MESSAGE]
    make(name="good")  # with timeout_seconds: accepted


@pytest.mark.django_db
def test_clean_refuses_replace_for_a_dispatched_callback(cleanup_registry):
    register_command("t.replace-cmd", "check")
    bad = Schedule(
        name="bad",
        callback="t.replace-cmd",
        interval_seconds=60,
        overlap_policy="replace",
        timeout_seconds=30,
    )
    with pytest.raises(ValidationError) as info:
        bad.full_clean()
    [message] = info.value.message_dict["overlap_policy"]
    assert "a management command" in message and "never in a child process" in message


@pytest.mark.django_db
def test_the_api_refuses_replace_without_timeout_seconds(admin_client):
    body = {"name": "api-rp", "callback": "tests.noop", "kind": "interval", "interval_seconds": 60}
    bad = admin_client.post(
        "/api/schedules/", {**body, "overlap_policy": "replace"}, content_type="application/json"
    )
    assert bad.status_code == 400 and bad.json()["overlap_policy"] == [MESSAGE]
    good = admin_client.post(
        "/api/schedules/",
        {**body, "overlap_policy": "replace", "timeout_seconds": 30},
        content_type="application/json",
    )
    assert good.status_code == 201, good.content
    dropped = admin_client.patch(
        f"/api/schedules/{good.json()['id']}/",
        {"timeout_seconds": None},
        content_type="application/json",
    )
    assert dropped.status_code == 400 and dropped.json()["overlap_policy"] == [MESSAGE]


@pytest.mark.django_db
def test_the_state_functions_refuse_replace_without_timeout_seconds():
    s = make(overlap_policy="skip", timeout_seconds=None)
    with pytest.raises(ValidationError, match="set timeout_seconds"):
        state.update_schedule(s.pk, overlap_policy="replace")
    state.update_schedule(s.pk, overlap_policy="replace", timeout_seconds=30)
    assert Schedule.objects.get().overlap_policy == "replace"


# -- a real worker -------------------------------------------------------------------------


@pytest.mark.process
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_replaces_a_slow_run_when_the_next_slot_comes_due(start_worker):
    """A 2 s interval whose first run sleeps 10 s in its child process (timeout 30 s): at
    the next slot the child is killed, the run receipted ``replaced`` (no failure), and
    the new slot runs at once."""
    s = Schedule.objects.create(
        name="slow-replace",
        callback="tests.slow_first",
        kind="interval",
        interval_seconds=2,
        overlap_policy="replace",
        timeout_seconds=30,
        payload={"seconds": 10},
    )
    worker = start_worker("--worker-id", "rp", "--lease-seconds", "60")
    # From the worker's start: its import and its run's child process's (both import
    # Django: seconds each on a loaded machine; MariaDB lane, 2026-12-07: over 8 s), then
    # the next slot. Not replaced, the run would end "succeeded" after its 10 s sleep: the
    # status and the bound on its duration below are the test, not this wait.
    first = wait_until(
        lambda: RunReceipt.objects.filter(schedule=s, attempt__occurrence=1).first(),
        30,
        message="the first run receipted",
    )
    wait_until(
        lambda: RunAttempt.objects.filter(schedule=s, occurrence__gte=2).exists(),
        6,
        message="a later occurrence started",
    )
    worker.stop()
    first_attempt = first.attempt
    assert first.status == "replaced" and first.error_type == "Replaced"
    # Stopped at the next slot (2 s after its own), long before its 10 s sleep ended.
    took = (first.finished_at - first_attempt.scheduled_for).total_seconds()
    assert took < 6
    second = RunAttempt.objects.get(schedule=s, occurrence=2)
    # The slot after the first's, or on a loaded machine a later one (the kill, the
    # receipt and the next claim took past it: CI, 2026-12-07, ran 28:38 after 28:34):
    # the slots between are counted, none run: missed in its attempt (misfire coalesce)
    # when the replaced run was receipted before them, else skipped in that receipt (the
    # newest passed slot runs: the full suite's SQLite lane, 2026-12-07, receipted it
    # after the next slot had passed too: slots_skipped 1, missed_slots 0).
    gap = (second.scheduled_for - first_attempt.scheduled_for) // (2 * S)
    assert gap >= 1 and second.scheduled_for == first_attempt.scheduled_for + gap * 2 * S
    assert second.missed_slots + first.slots_skipped == gap - 1
    assert second.claimed_at >= first.finished_at
    s.refresh_from_db()
    assert s.failure_count == 0
    assert not RunReceipt.objects.filter(schedule=s, status="failed").exists()


@pytest.mark.django_db
def test_the_admin_form_refuses_replace_without_timeout_seconds(admin_client):
    from django.urls import reverse

    from .test_admin import _form_data

    add = reverse("admin:durable_schedules_schedule_add")
    refused = admin_client.post(add, _form_data(overlap_policy="replace"))
    assert refused.status_code == 200  # the form again, with the message
    assert "set timeout_seconds, which runs each occurrence in one" in refused.content.decode()
    assert not Schedule.objects.exists()
    accepted = admin_client.post(add, _form_data(overlap_policy="replace", timeout_seconds="30"))
    assert accepted.status_code == 302, accepted.content.decode()[:2000]
    assert Schedule.objects.get().overlap_policy == "replace"
