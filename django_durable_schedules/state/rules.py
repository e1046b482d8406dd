"""Row arithmetic of a claim, in order: re-plan a row edited behind ``save()``
(:func:`replan_edited`), choose what runs (:mod:`.slot_rules`), keep runs out of blackout
windows (:mod:`.blackout_rules`), grant the lease (:func:`grant_lease`); and the
quarantine of a row the engine cannot evaluate (:func:`quarantine_claim`). The attempt it
builds is :mod:`.attempt_rules`'.

Pure: the functions read and write a locked :class:`~..models.Schedule` row as plain
attributes and build unsaved attempts and receipts; :mod:`.runs` locks, writes and
commits them. No database access, so each rule is testable on an unsaved row.

The names of :mod:`.attempt_rules` and :mod:`.slot_rules` are importable from here too, as
they were before those modules were split out.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from .. import timing
from ..models import (
    AttemptOrigin,
    DegradedKind,
    ReceiptStatus,
    RunAttempt,
    RunReceipt,
    Schedule,
    ScheduleEvent,
)
from ..models.definition import same_definition
from ..projection import bound_text
from ..registry import registry
from .attempt_rules import claim_of as claim_of
from .attempt_rules import idempotency_key as idempotency_key
from .attempt_rules import max_attempts_of as max_attempts_of
from .attempt_rules import new_attempt as new_attempt
from .blackout_rules import apply_blackouts
from .bounds import UNEVALUABLE_PREFIX, check_counters, describe_problem
from .exclusion_rules import count_excluded_to_end
from .machine import clear_trigger, mark_degraded, pause_degraded, plan_definition
from .overlap_rules import end_backlog
from .records import Receipt as Receipt
from .records import build_receipt
from .rerun_rules import rerun_unregistered
from .slot_rules import SlotChoice as SlotChoice
from .slot_rules import choose_slot as choose_slot
from .slot_rules import manual_not_due as manual_not_due
from .transitions import implements
from .values import Claim

logger = logging.getLogger(__name__)

ONE_SECOND = timedelta(seconds=1)


def ceil_second(value: datetime) -> datetime:
    """``value`` rounded up to the whole second (unchanged when it is one)."""
    if value.microsecond:
        value = value.replace(microsecond=0) + ONE_SECOND
    return value


@implements("claim.unevaluable")
def quarantine_claim(
    row: Schedule,
    exc: BaseException,
    now: datetime,
    worker: str,
    attempts: list[RunAttempt],
    receipts: list[RunReceipt],
) -> None:
    """A due row the engine could not evaluate (a value written behind ``save()``, a zone
    tzdata no longer has, ...): record its slot as one attempt with a ``degraded`` receipt
    naming the field and the problem, and pause it with that reason. The rest of the batch
    is claimed as usual."""
    occurrence = row.occurrence + 1
    slot = row.retry_scheduled_for or row.triggered_at or row.next_run_at or now
    if row.retry_scheduled_for is not None:
        occurrence = row.occurrence
    number = row.attempt + 1 if row.retry_scheduled_for is not None else 1
    reason = f"{UNEVALUABLE_PREFIX}{describe_problem(exc)}"
    attempt = new_attempt(row, occurrence, number, slot, now, now, worker)
    attempts.append(attempt)
    row.occurrence, row.attempt = occurrence, number
    row.last_run_at = now
    pause_degraded(row, reason)
    receipts.append(
        build_receipt(
            attempt,
            ReceiptStatus.DEGRADED,
            now,
            row=row,
            error_type="InvalidSchedule"
            if isinstance(exc, timing.InvalidSchedule)
            else bound_text(type(exc).__name__, 200),
            error_message=reason,
        ).model()
    )


@implements("claim.excluded_counted", "claim.excluded_now")
def plan_claim(
    row: Schedule,
    now: datetime,
    lease: timedelta,
    worker: str,
    attempts: list[RunAttempt],
    receipts: list[RunReceipt],
    claims: list[Claim],
    events: list[ScheduleEvent] | None = None,
) -> None:
    """The claim of the locked, due ``row`` at ``now``: its attempt (or receipt) appended,
    the row moved on; a row left without a slot to run gets the excluded slots of the rest
    of its grid counted (:func:`.exclusion_rules.count_excluded_to_end`)."""
    check_counters(row)  # a counter written behind save() that is no count: quarantined
    events = [] if events is None else events
    _plan_claim_row(row, now, lease, worker, attempts, receipts, claims, events)
    count_excluded_to_end(row, now, events)


def _plan_claim_row(
    row: Schedule,
    now: datetime,
    lease: timedelta,
    worker: str,
    attempts: list[RunAttempt],
    receipts: list[RunReceipt],
    claims: list[Claim],
    events: list[ScheduleEvent],
) -> None:
    """The three rules of a claim, in order: re-plan a row edited behind ``save()``
    (:func:`replan_edited`), else choose what runs (:func:`.slot_rules.choose_slot`), then
    grant its lease (:func:`grant_lease`), unless a blackout window says otherwise
    (:func:`.blackout_rules.apply_blackouts`). A differing fingerprint of the same
    definition is the zone rules' doing (:func:`.zone_rules.regrid_due`), not an edit."""
    current_hash = row.compute_definition_hash()
    other_rules = row.definition_hash != current_hash
    if replan_edited(row, current_hash, now):
        return
    row.definition_hash = current_hash
    choice = choose_slot(row, now, other_rules, worker, attempts, receipts, events)
    if choice is not None:
        choice = apply_blackouts(row, choice, now, events)  # no run starts inside a window
    if choice is not None:
        grant_lease(row, choice, now, lease, worker, attempts, receipts, claims)


@implements("claim.edited", "claim.edited_paused")
def replan_edited(row: Schedule, current_hash: str, now: datetime) -> bool:
    """Whether ``row`` was edited behind ``save()`` (``QuerySet.update()``, raw SQL): its
    stored ``definition_hash`` is another definition's than ``current_hash``. Then it is
    re-planned from ``now`` (UTC) and never fired, by :func:`.machine.plan_definition`
    (the plan ``Schedule.save()`` makes of an edit): nothing pending is kept, a paused row
    gets no next run, an active one its next slot or, with none left, completes. Returns
    False, changing nothing, for the same definition (under other zone rules or not)."""
    if row.definition_hash == current_hash or same_definition(row.definition_hash, current_hash):
        return False
    plan_definition(row, timing.truncate_to_second(now), current_hash, keep=False)
    return True


def nominal_of(row: Schedule, slot: datetime) -> datetime | None:
    """The nominal slot of ``slot`` when ``row``'s ``exclusion_policy`` moved it to a
    business day (:func:`.timing.moved_from`), else None; None too for a definition the
    engine cannot evaluate (the claim's own checks deal with it)."""
    try:
        return timing.moved_from(row.spec(), slot)
    except Exception:  # noqa: BLE001 - a record, never a reason for a claim to fail
        return None


@implements("claim.run", "claim.retry", "claim.buffered", "claim.triggered_paused", "claim.rerun")
def grant_lease(
    row: Schedule,
    choice: SlotChoice,
    now: datetime,
    lease: timedelta,
    worker: str,
    attempts: list[RunAttempt],
    receipts: list[RunReceipt],
    claims: list[Claim],
) -> None:
    """Run ``choice``: its attempt (appended to ``attempts``) leased to ``worker`` from
    ``now`` for ``lease``, the row moved to its occurrence with nothing pending, its next
    run ``choice.next_run_at``, and the :class:`~.values.Claim` appended to ``claims``. A
    slot after ``now`` (written behind ``save()``) runs as of ``now``. A callback no
    longer registered is not run: :func:`_pause_unregistered`. A re-run (origin
    ``rerun``) leaves the row's ``occurrence``, ``attempt``, retry and buffered slot as
    they are (they describe the grid); its unregistered callback is receipted at once
    (:func:`.rerun_rules.rerun_unregistered`)."""
    slot = min(choice.slot, now)  # never after the instant it is claimed at: never early
    attempt = new_attempt(
        row,
        choice.occurrence,
        choice.attempt,
        slot,
        now,
        now + lease,
        worker,
        choice.missed + choice.deferred,
        choice.origin,
        choice.payload,
    )
    if row.exclusion_policy != "skip" and choice.origin != AttemptOrigin.TRIGGERED:
        attempt.nominal_for = nominal_of(row, choice.slot)
    attempts.append(attempt)
    row.last_run_at = now
    if choice.origin == AttemptOrigin.RERUN:
        # The grid's counters and its pending slots stay as they are (:mod:`.rerun_rules`).
        clear_trigger(row)
        if row.callback not in registry:
            receipts.append(rerun_unregistered(row, attempt, choice.next_run_at, now))
            return
    else:
        # A trigger's payload override outlives the trigger: it is the occurrence's, and
        # a retry of the occurrence runs with it too (slot_rules.choose_slot); a new
        # occurrence of any other origin has none.
        keep = row.trigger_payload if choice.origin == AttemptOrigin.TRIGGERED else None
        if choice.attempt > 1:
            keep = row.trigger_payload
        row.occurrence, row.attempt = choice.occurrence, choice.attempt
        row.retry_scheduled_for = row.buffered_for = None
        clear_trigger(row)
        row.trigger_payload = keep
        row.missed_count += choice.missed
    row.next_run_at = choice.next_run_at
    if row.callback not in registry:
        _pause_unregistered(row, attempt, slot, now, receipts)
        return
    row.lease_token, row.lease_expires_at = attempt.lease_token, attempt.lease_expires_at
    claims.append(claim_of(row, attempt))


@implements("claim.unregistered")
def _pause_unregistered(
    row: Schedule, attempt: RunAttempt, slot: datetime, now: datetime, receipts: list[RunReceipt]
) -> None:
    """The code that should run is gone: receipt ``attempt`` ``degraded``, pause the
    schedule with a reason, and keep the occurrence as a retry of ``slot``:
    :func:`.recover_degraded` makes it due once the callback is registered again
    (:func:`.slot_rules.choose_slot`'s retry then runs it, attempt + 1). A catch-up run
    (``misfire_policy`` all) ends its backlog: the slots due behind it, from the row's
    planned ``next_run_at`` to its claim, are counted missed (:func:`.end_backlog`), as
    when its run is degraded after the claim."""
    mark_degraded(row, f"callback {row.callback!r} is not registered", DegradedKind.CALLBACK)
    end_backlog(row, attempt.origin)
    row.next_run_at = None
    row.retry_scheduled_for = slot
    receipts.append(
        build_receipt(
            attempt,
            ReceiptStatus.DEGRADED,
            now,
            row=row,
            error_type="NotRegistered",
            error_message=row.degraded_reason,
        ).model()
    )
    logger.warning(
        "schedule %s degraded: %s",
        row.name,
        row.degraded_reason,
        extra={"schedule": row.name, "occurrence": attempt.occurrence},
    )
