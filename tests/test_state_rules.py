"""State rules that every edit path must share (driven with an injected clock):

- a row paused by ``QuerySet.update(status="paused")`` runs only when triggered;
- a schedule degraded by a missing callback runs its degraded occurrence once when the
  callback is registered again, then goes on with its grid;
- enabling a failed one-shot re-arms it (never ``completed`` without a run);
- slots that come due while an occurrence waits for its retry are counted, never dropped;
- shell actions are recorded with source ``command``.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command

from django_durable_schedules import state
from django_durable_schedules.models import RunReceipt, Schedule, ScheduleEvent
from django_durable_schedules.registry import register, registry
from django_durable_schedules.worker.execution.runner import execute

from .factories import T0

pytestmark = pytest.mark.django_db(transaction=True)

S = timedelta(seconds=1)


def make(name, **kw):
    kw.setdefault("callback", "tests.noop")
    kw.setdefault("kind", "interval")
    if kw["kind"] == "interval":
        kw.setdefault("interval_seconds", 60)
    kw.setdefault("timezone", "UTC")
    kw.setdefault("created_at", T0)
    s = Schedule(name=name, **kw)
    s.save()
    return s


def run(now, took=S, outcome=None):
    claims = state.claim_due(worker="w", now=now, lease_seconds=3600)
    outcomes = [outcome(c) if outcome else execute(c) for c in claims]
    return claims, state.complete(outcomes, now=now + took)


def statuses(s):
    return list(
        RunReceipt.objects.filter(schedule_id=s.pk)
        .order_by("finished_at")
        .values_list("status", flat=True)
    )


# ---------------------------------------------------------------------------------------
# Pausing behind save()
# ---------------------------------------------------------------------------------------


def test_a_bulk_pause_stops_runs_at_the_next_pass_and_a_trigger_still_runs():
    s = make("bulk")
    assert len(run(T0)[0]) == 1
    Schedule.objects.filter(pk=s.pk).update(status="paused")
    for minute in range(1, 5):
        assert run(T0 + minute * 60 * S)[0] == []
    state.trigger(s.pk, now=T0 + 300 * S)
    [claim], _ = run(T0 + 300 * S)
    assert claim.scheduled_for == T0 + 300 * S
    assert run(T0 + 400 * S)[0] == []  # paused again after its manual run
    assert statuses(s) == ["succeeded", "succeeded"]


def test_a_triggered_run_released_at_shutdown_of_a_paused_schedule_still_runs():
    s = make("paused-trigger")
    state.disable(s.pk)
    state.trigger(s.pk, now=T0)
    [claim] = state.claim_due(worker="w", now=T0)
    state.complete([state.Outcome(claim, "released")], now=T0 + S)
    [again], _ = run(T0 + 2 * S)
    assert (again.occurrence, again.attempt) == (claim.occurrence, claim.attempt + 1)
    assert statuses(s) == ["released", "succeeded"]


# ---------------------------------------------------------------------------------------
# Degraded recovery
# ---------------------------------------------------------------------------------------


@pytest.fixture
def late_callback():
    """A callback name registered only when the test calls the returned function."""
    name = "tests.registered-late"

    def register_it():
        register(name, lambda ctx: "back")

    yield name, register_it
    registry.remove(name) if name in registry else None


def test_degraded_recovery_runs_the_degraded_one_shot_once(late_callback):
    name, register_it = late_callback
    s = make("late-once", kind="once", run_at=T0, callback=name)
    run(T0)
    s.refresh_from_db()
    assert s.status == "paused" and s.degraded_reason
    register_it()
    [recovered] = state.recover_degraded(now=T0 + 3600 * S)
    assert recovered.status == "active" and recovered.next_run_at == T0 + 3600 * S
    [claim], report = run(T0 + 3600 * S)
    assert (claim.occurrence, claim.attempt, claim.scheduled_for) == (1, 2, T0)
    s.refresh_from_db()
    assert s.status == "completed" and statuses(s) == ["degraded", "succeeded"]


def test_degraded_recovery_runs_the_occurrence_then_the_grid_goes_on(late_callback):
    name, register_it = late_callback
    s = make("late-daily", kind="cron", cron="0 9 * * *", callback=name, created_at=T0)
    first = s.next_run_at
    run(first)
    register_it()
    # Two hours later the callback is back: the 09:00 occurrence runs now, not tomorrow.
    state.recover_degraded(now=first + 7200 * S)
    [claim], _ = run(first + 7200 * S)
    assert (claim.occurrence, claim.attempt, claim.scheduled_for) == (1, 2, first)
    s.refresh_from_db()
    assert s.next_run_at == first + timedelta(days=1)
    assert statuses(s) == ["degraded", "succeeded"]


def test_slots_passed_while_degraded_are_counted(late_callback):
    name, register_it = late_callback
    s = make("late-minutely", callback=name)  # every 60 s from T0
    run(T0)
    register_it()
    state.recover_degraded(now=T0 + 305 * S)
    [claim], _ = run(T0 + 305 * S)
    assert claim.missed_slots == 5  # T0+60 ... T0+300
    s.refresh_from_db()
    assert s.missed_count == 5 and s.next_run_at == T0 + 360 * S


# ---------------------------------------------------------------------------------------
# Enabling a failed one-shot
# ---------------------------------------------------------------------------------------


def _fail_terminally(claim):
    return state.Outcome(claim, "failed", error_type="FailRun", terminal=True)


def test_enabling_a_failed_one_shot_rearms_it_due_at_once():
    s = make("once-failed", kind="once", run_at=T0, misfire_grace_seconds=60)
    run(T0, outcome=_fail_terminally)
    s.refresh_from_db()
    assert s.status == "failed"
    # An hour later, past its catch-up window: re-armed as a manual run, not a miss.
    row = state.enable(s.pk, now=T0 + 3600 * S)
    assert row.status == "active" and row.next_run_at == T0 + 3600 * S
    [claim], _ = run(T0 + 3600 * S)
    assert claim.occurrence == 2 and claim.scheduled_for == T0 + 3600 * S
    s.refresh_from_db()
    assert s.status == "completed" and statuses(s) == ["failed", "succeeded"]


def test_enabling_a_failed_one_shot_edited_behind_save_rearms_it_due_at_once():
    """enable() plans the row itself: ``save()`` does not re-plan it over that plan (it
    completed a one-shot whose ``run_at`` was moved behind ``save()``, without a run)."""
    s = make("once-edited", kind="once", run_at=T0)
    run(T0, outcome=_fail_terminally)
    Schedule.objects.filter(pk=s.pk).update(run_at=T0 + 60 * S)  # a failed row: no trigger
    s.refresh_from_db()
    assert s.definition_hash != s.compute_definition_hash()
    row = state.enable(s.pk, now=T0 + 3600 * S)
    assert row.status == "active" and row.next_run_at == T0 + 3600 * S
    s.refresh_from_db()
    assert (s.status, s.next_run_at) == ("active", T0 + 3600 * S)
    assert s.definition_hash == s.compute_definition_hash()
    [claim], _ = run(T0 + 3600 * S)
    assert claim.occurrence == 2 and claim.scheduled_for == T0 + 3600 * S


def test_a_trigger_after_an_edit_behind_save_runs_at_once():
    """trigger() makes the row due now; the re-plan of an edit made behind ``save()`` does
    not move that run to the new definition's next slot."""
    s = make("edited-then-triggered", interval_seconds=3600)
    Schedule.objects.filter(pk=s.pk).update(interval_seconds=7200)  # behind save()
    now = T0 + 10 * S
    row = state.trigger(s.pk, now=now)
    assert row.next_run_at == now
    s.refresh_from_db()
    assert s.next_run_at == now and s.triggered_at == now
    [claim], _ = run(now)
    assert claim.scheduled_for == now
    s.refresh_from_db()
    assert s.definition_hash == s.compute_definition_hash()
    assert s.next_run_at == s.plan(now)  # the edited grid's next slot after the run


def test_enabling_a_failed_one_shot_at_a_new_run_at():
    s = make("once-moved", kind="once", run_at=T0)
    run(T0, outcome=_fail_terminally)
    later = T0 + 86400 * S
    row = state.enable(s.pk, now=T0 + 10 * S, run_at=later)
    assert row.run_at == later and row.next_run_at == later
    assert run(T0 + 20 * S)[0] == []
    [claim], _ = run(later)
    assert claim.scheduled_for == later
    event = ScheduleEvent.objects.filter(schedule_id=s.pk, action="enabled").get()
    assert event.changes["run_at"][1] == later.isoformat()


def test_enable_refuses_run_at_for_a_recurring_schedule():
    from django.core.exceptions import ValidationError

    s = make("recurring")
    state.disable(s.pk)
    with pytest.raises(ValidationError) as err:
        state.enable(s.pk, run_at=T0)
    assert "run_at" in err.value.message_dict


# ---------------------------------------------------------------------------------------
# Every slot is run or counted
# ---------------------------------------------------------------------------------------


def test_slots_that_pass_during_a_retry_backoff_are_counted():
    s = make("retrying", interval_seconds=10, max_attempts=3, backoff_base_seconds=25)
    run(T0, outcome=lambda c: state.Outcome(c, "failed", error_type="Boom"))
    s.refresh_from_db()
    retry_at = s.next_run_at
    assert retry_at == T0 + 26 * S
    [claim], _ = run(retry_at)
    assert (claim.occurrence, claim.attempt, claim.missed_slots) == (1, 2, 2)  # T0+10, +20
    s.refresh_from_db()
    assert s.next_run_at == T0 + 30 * S and s.missed_count == 2


def test_every_slot_is_run_or_counted_over_failures_and_lease_recoveries():
    every = 10
    s = make("books", interval_seconds=every, max_attempts=3, backoff_base_seconds=13)
    now = T0
    end = T0 + 600 * S
    step = 0
    while now < end:
        step += 1
        claims = state.claim_due(worker="w", now=now, lease_seconds=17)
        outcomes = []
        for c in claims:
            if step % 5 == 0:
                continue  # the worker dies: the lease expires and the occurrence is retried
            outcomes.append(
                state.Outcome(c, "failed", error_type="Boom") if step % 3 == 0 else execute(c)
            )
        state.complete(outcomes, now=now + 2 * S)
        state.expire_leases(now=now + 3 * S)
        now += 7 * S
    s.refresh_from_db()
    assert s.lease_token is None or s.lease_expires_at is not None
    # Slots of the grid from T0 to the schedule's next slot: each is an occurrence that was
    # claimed, or is counted as missed.
    slots = int((s.next_run_at - T0).total_seconds()) // every
    if s.retry_scheduled_for is not None:  # the current occurrence still waits for a retry
        slots = int((s.retry_scheduled_for - T0).total_seconds()) // every + 1
    assert s.occurrence + s.missed_count == slots, (s.occurrence, s.missed_count, slots)


# ---------------------------------------------------------------------------------------
# Where an action came from
# ---------------------------------------------------------------------------------------


def test_shell_actions_are_recorded_as_command():
    s = make("shell")
    call_command("schedules", "disable", "shell", stdout=None)
    call_command("schedules", "enable", "shell", stdout=None)
    sources = set(ScheduleEvent.objects.filter(schedule_id=s.pk).values_list("source", flat=True))
    assert {"command"} <= sources
    assert set(
        ScheduleEvent.objects.filter(
            schedule_id=s.pk, action__in=["enabled", "disabled"]
        ).values_list("source", flat=True)
    ) == {"command"}
