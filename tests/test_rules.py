"""The pure row arithmetic (``state/rules.py``, ``state/outcomes.py``) on unsaved rows:
no database (pytest-django refuses any query here, as no test is marked ``django_db``)."""

from __future__ import annotations

from datetime import timedelta

from django_durable_schedules.models import Schedule
from django_durable_schedules.state import OutcomeStatus, outcomes, rules
from django_durable_schedules.state.values import Outcome

from .factories import T0

S = timedelta(seconds=1)
LEASE = timedelta(seconds=30)


def row(**kw):
    kw.setdefault("callback", "tests.noop")
    kw.setdefault("kind", "interval")
    kw.setdefault("interval_seconds", 60)
    kw.setdefault("timezone", "UTC")
    kw.setdefault("created_at", T0)
    s = Schedule(name="pure", **kw)
    s.next_run_at = T0
    s.definition_hash = s.compute_definition_hash()
    return s


def claim(s, now):
    attempts, receipts, claims = [], [], []
    rules._plan_claim(s, now, LEASE, "w", attempts, receipts, claims)
    return attempts, receipts, claims


def test_a_due_row_is_claimed_with_a_lease_and_moves_to_the_next_slot():
    s = row()
    attempts, receipts, [c] = claim(s, T0 + 5 * S)
    assert (c.occurrence, c.attempt, c.scheduled_for) == (1, 1, T0)
    assert s.lease_token == c.lease_token and s.lease_expires_at == T0 + 5 * S + LEASE
    assert s.next_run_at == T0 + 60 * S and receipts == [] and len(attempts) == 1


def test_missed_slots_are_coalesced_into_one_run_of_the_latest():
    s = row()
    _, _, [c] = claim(s, T0 + 150 * S)
    assert c.scheduled_for == T0 + 120 * S and c.missed_slots == 2
    assert s.next_run_at == T0 + 180 * S


def test_an_unregistered_callback_pauses_as_degraded_and_keeps_the_occurrence():
    s = row(callback="tests.not-registered")
    _, [receipt], claims = claim(s, T0)
    assert claims == [] and receipt.status == "degraded"
    assert (s.status, s.next_run_at, s.retry_scheduled_for) == ("paused", None, T0)


def test_a_success_moves_on_and_a_failure_retries_with_backoff():
    s = row(backoff_base_seconds=10, backoff_cap_seconds=100)
    _, _, [c] = claim(s, T0)
    s.failure_count = 2
    receipt = outcomes._apply(s, Outcome(c, OutcomeStatus.SUCCEEDED), T0 + S)
    assert receipt.status == "succeeded" and s.failure_count == 0
    assert s.next_run_at == T0 + 60 * S

    s = row(backoff_base_seconds=10, backoff_cap_seconds=100)
    _, _, [c] = claim(s, T0)
    receipt = outcomes._apply(s, Outcome(c, "failed"), T0 + S)  # a plain string works too
    assert receipt.status == "failed" and s.failure_count == 1
    assert s.retry_scheduled_for == T0 and s.next_run_at == T0 + 11 * S


# -- planning (Schedule.plan / timing.planned_slot): pure, the caller reads the clock --------


def test_a_new_interval_is_due_at_its_anchor_even_when_created_at_was_set_before_now():
    s = row(created_at=T0)
    assert s.plan(T0 + 5 * S, first=True) == T0  # slot 0 is the creation time
    assert s.plan(T0 + 5 * S) == T0 + 60 * S  # an edit: strictly after now


def test_a_new_interval_anchored_later_waits_for_its_anchor():
    s = row(created_at=T0, start_at=T0 + 600 * S)
    assert s.plan(T0, first=True) == T0 + 600 * S


def test_a_new_once_runs_at_run_at_even_if_past_and_a_replan_never_fires_it():
    s = row(kind="once", interval_seconds=None, run_at=T0)
    assert s.plan(T0 + 3600 * S, first=True) == T0
    assert s.plan(T0 + 3600 * S) is None  # past, not new: never again


def test_a_new_cron_is_planned_to_its_first_slot_at_or_after_now():
    s = row(kind="cron", interval_seconds=None, cron="0 * * * *")
    top = T0.replace(minute=0, second=0) + timedelta(hours=1)
    assert s.plan(top, first=True) == top
    assert s.plan(top) == top + timedelta(hours=1)
