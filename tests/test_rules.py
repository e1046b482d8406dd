"""The pure row arithmetic (``state/rules.py``, ``state/outcomes.py``) on unsaved rows:
no database (pytest-django refuses any query here, as no test is marked ``django_db``)."""

from __future__ import annotations

from datetime import timedelta

from django_durable_schedules.models import Schedule
from django_durable_schedules.state import OutcomeStatus, outcomes, overlap_rules, rules
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
    rules.plan_claim(s, now, LEASE, "w", attempts, receipts, claims)
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
    receipt = outcomes.apply_outcome(s, Outcome(c, OutcomeStatus.SUCCEEDED), T0 + S)
    assert receipt.status == "succeeded" and s.failure_count == 0
    assert s.next_run_at == T0 + 60 * S

    s = row(backoff_base_seconds=10, backoff_cap_seconds=100)
    _, _, [c] = claim(s, T0)
    receipt = outcomes.apply_outcome(s, Outcome(c, "failed"), T0 + S)  # a plain string works too
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


# -- the overlap rule (overlap_rules.plan_overlap): slots that came due while a run ran ----------


def test_overlap_skip_counts_the_passed_slots_and_waits_for_the_next():
    s = row()
    s.next_run_at = T0 + 60 * S  # planned by the claim at T0
    overlap = overlap_rules.plan_overlap(s, T0 + 200 * S)  # 60, 120, 180 passed while it ran
    assert overlap == overlap_rules.Overlap(next_run_at=T0 + 240 * S, buffered_for=None, skipped=3)


def test_overlap_buffer_one_buffers_the_first_passed_slot_and_skips_the_others():
    s = row(overlap_policy="buffer_one")
    s.next_run_at = T0 + 60 * S
    overlap = overlap_rules.plan_overlap(s, T0 + timedelta(seconds=200, microseconds=500))
    assert overlap == overlap_rules.Overlap(
        next_run_at=T0 + 200 * S, buffered_for=T0 + 60 * S, skipped=2
    )


def test_overlap_nothing_passed_leaves_the_next_slot_under_either_policy():
    for policy in ("skip", "buffer_one"):
        s = row(overlap_policy=policy)
        s.next_run_at = T0 + 60 * S
        assert overlap_rules.plan_overlap(s, T0 + 59 * S) == overlap_rules.Overlap(T0 + 60 * S)


def test_overlap_buffer_one_with_jitter_buffers_the_nominal_slot():
    s = row(overlap_policy="buffer_one", jitter_seconds=10)
    s.next_run_at = s.due_at(T0 + 60 * S)
    overlap = overlap_rules.plan_overlap(s, T0 + 100 * S)
    assert overlap.buffered_for == T0 + 60 * S and overlap.skipped == 0


def test_a_buffered_slot_is_claimed_as_its_own_occurrence_then_the_grid_goes_on():
    s = row(overlap_policy="buffer_one")
    _, _, [first] = claim(s, T0)
    receipt = outcomes.apply_outcome(s, Outcome(first, OutcomeStatus.SUCCEEDED), T0 + 200 * S)
    assert receipt.slots_skipped == 2 and receipt.next_run_at == T0 + 200 * S
    assert (s.buffered_for, s.next_run_at, s.missed_count) == (T0 + 60 * S, T0 + 200 * S, 2)
    [attempt], _, [buffered] = claim(s, T0 + 230 * S)  # 240 not due yet: nothing more passed
    assert (buffered.occurrence, buffered.attempt, buffered.scheduled_for) == (2, 1, T0 + 60 * S)
    assert buffered.idempotency_key == f"{s.id}:2" and attempt.origin == "buffered"
    assert attempt.lateness == 170 and buffered.missed_slots == 0
    assert s.buffered_for is None and s.next_run_at == T0 + 240 * S
    # Finished before 240: the grid goes on at 240, nothing buffered.
    outcomes.apply_outcome(s, Outcome(buffered, OutcomeStatus.SUCCEEDED), T0 + 235 * S)
    assert (s.buffered_for, s.next_run_at, s.missed_count) == (None, T0 + 240 * S, 2)


def test_a_buffered_slot_claimed_late_counts_the_slots_after_the_run_that_buffered_it():
    s = row(overlap_policy="buffer_one")
    _, _, [first] = claim(s, T0)
    outcomes.apply_outcome(s, Outcome(first, OutcomeStatus.SUCCEEDED), T0 + 70 * S)
    assert s.buffered_for == T0 + 60 * S
    _, _, [buffered] = claim(s, T0 + 190 * S)  # 120 and 180 passed before this claim
    assert buffered.scheduled_for == T0 + 60 * S and buffered.missed_slots == 2
    assert s.next_run_at == T0 + 240 * S and s.missed_count == 2


def test_a_failed_run_retried_does_not_buffer_and_a_given_up_one_does():
    s = row(overlap_policy="buffer_one", max_attempts=1)
    _, _, [first] = claim(s, T0)
    outcomes.apply_outcome(s, Outcome(first, OutcomeStatus.FAILED), T0 + 130 * S)
    assert (s.buffered_for, s.next_run_at, s.missed_count) == (T0 + 60 * S, T0 + 130 * S, 1)


# -- backfill arithmetic (state/backfill_rules.py) on unsaved rows --------------------------


def test_backfill_slots_are_the_grid_slots_of_the_range_in_order_capped():
    from django_durable_schedules.state.backfill_rules import backfill_slots

    spec = row().spec()
    assert backfill_slots(spec, T0, T0 + 180 * S, 10) == [T0, T0 + 60 * S, T0 + 120 * S]
    assert backfill_slots(spec, T0 + S, T0 + 60 * S, 10) == []  # [start, end): 60 excluded
    assert len(backfill_slots(spec, T0, T0 + 3600 * S, 5)) == 6  # cap + 1: "more than 5"


def test_a_backfill_slot_is_its_own_occurrence_and_a_released_one_runs_again():
    from django_durable_schedules.models import Backfill
    from django_durable_schedules.state import backfill_rules

    s = row()
    s.occurrence, s.next_run_at = 7, T0 + 3600 * S
    b = Backfill(schedule_id=s.id, slots=[T0.isoformat(), (T0 + 60 * S).isoformat()])
    attempts, receipts, claims = [], [], []
    backfill_rules.claim_backfill_slot(s, b, T0 + 4000 * S, LEASE, "w", attempts, receipts, claims)
    [c] = claims
    assert (c.occurrence, c.attempt, c.scheduled_for, c.origin) == (8, 1, T0, "backfill")
    assert attempts[0].origin == "backfill" and s.next_run_at == T0 + 3600 * S
    backfill_rules.settle_backfill(b, s, 1, "released", T0 + 4000 * S)
    assert (b.position, b.occurrence, b.attempt) == (0, 8, 1)
    backfill_rules.settle_backfill(b, s, 2, "failed", T0 + 4000 * S)  # a failure ends the slot
    assert (b.position, b.occurrence, b.attempt) == (1, None, 0)
    b.position = 2
    backfill_rules.claim_backfill_slot(s, b, T0 + 4001 * S, LEASE, "w", [], [], claims)
    assert b.status == "completed" and b.finished_at == T0 + 4001 * S and len(claims) == 1


def test_a_rule_runs_on_a_copy_and_its_changes_apply_only_once_it_returned():
    """``machine.changes_of``: the claim's and the completion's rules never need undoing."""
    from django_durable_schedules.state.machine import apply_changes, changes_of

    s = row()
    attempts, receipts, claims = [], [], []
    _, changes = changes_of(s, rules.plan_claim, T0 + 5 * S, LEASE, "w", attempts, receipts, claims)
    assert s.lease_token is None and s.occurrence == 0  # the row itself is untouched
    [c] = claims
    assert changes["lease_token"] == c.lease_token and changes["occurrence"] == 1
    assert "name" not in changes  # only what the rule set
    apply_changes(s, changes)
    assert (s.lease_token, s.occurrence, s.next_run_at) == (c.lease_token, 1, T0 + 60 * S)

    def broken(draft):
        draft.occurrence = 99
        raise ValueError("a value written behind save()")

    before = dict(vars(s))
    try:
        changes_of(s, broken)
    except ValueError:
        pass
    assert vars(s) == before  # nothing to restore
