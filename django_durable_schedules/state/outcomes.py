"""Row arithmetic of a finished attempt: apply an outcome, retry with backoff or give the
occurrence up, move to the next slot.

Pure: the functions move a locked :class:`~..models.Schedule` row on as plain attributes
and return the receipt to write; :mod:`.completion` and :mod:`.runs` (lease expiry) write
and commit them.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from .. import timing
from ..conf import app_settings
from ..limits import BACKOFF_BASE_MAX_SECONDS, BACKOFF_CAP_MAX_SECONDS
from ..models import (
    SUCCESS_STATUSES,
    DegradedKind,
    Kind,
    ReceiptStatus,
    Schedule,
    ScheduleEvent,
    Status,
)
from .alert_rules import note_failing, note_paused, recover
from .attempt_rules import max_attempts_of
from .bounds import bounded_seconds
from .exclusion_rules import count_excluded_to_end
from .machine import (
    complete_if_no_slot,
    fail_schedule,
    mark_degraded,
    pause_after_failures,
)
from .overlap_rules import end_backlog, plan_overlap
from .previous_rules import note_success
from .records import Receipt, build_receipt
from .rules import ceil_second
from .transitions import implements
from .values import Failure, Outcome, OutcomeStatus

logger = logging.getLogger(__name__)


def fenced_result(outcome: Outcome) -> Any:
    """A fenced outcome keeps its result only when it records a task that was already
    handed to an engine outside the transaction (so the duplicate can be traced)."""
    if outcome.status == OutcomeStatus.ENQUEUED and outcome.enqueue is None:
        return outcome.result
    return None


@implements(
    "outcome.succeeded",
    "outcome.skipped",
    "outcome.halted",
    "outcome.degraded",
    "outcome.released",
    "outcome.replaced",
)
def apply_outcome(
    row: Schedule, outcome: Outcome, now: datetime, events: list[ScheduleEvent] | None = None
) -> Receipt:
    """Apply the reported ``outcome`` of a claim to the locked ``row`` at ``now`` (UTC): the
    row moved on (released, degraded, failed, or finished and re-planned) and the receipt
    built (unsaved); events the rule records are appended to ``events``."""
    claim = outcome.claim
    status = outcome.status
    if status == OutcomeStatus.RELEASED:
        # Handed back unrun (a stop; a wait too long for a thread): due again at once.
        row.attempt = claim.attempt
        end_backlog(row, claim.origin)
        row.retry_scheduled_for = claim.scheduled_for
        row.next_run_at = timing.truncate_to_second(now)
        if row.status == Status.PAUSED:  # a triggered run: still claimable when paused
            row.triggered_at = claim.scheduled_for
        return build_receipt(claim, ReceiptStatus.RELEASED, now, row=row, ran=outcome)
    if status == OutcomeStatus.DEGRADED:
        # The callback vanished between claim and run: the occurrence awaits its run, as
        # in the claim's own not-registered path.
        mark_degraded(row, outcome.error_message[:500], DegradedKind.CALLBACK)
        end_backlog(row, claim.origin)
        row.next_run_at = None
        row.attempt = claim.attempt
        row.retry_scheduled_for = claim.scheduled_for
        return build_receipt(claim, ReceiptStatus.DEGRADED, now, row=row, ran=outcome)
    if status == OutcomeStatus.FAILED:
        failure = Failure.of(
            claim,
            ReceiptStatus.FAILED,
            error_type=outcome.error_type,
            error_message=outcome.error_message,
            terminal=outcome.terminal,
            retry_after=outcome.retry_after,
            result=outcome.result,
            started_at=outcome.started_at,
            traceback=outcome.traceback,
        )
        return fail_attempt(row, failure, now, events)
    if status in SUCCESS_STATUSES:
        row.failure_count = row.failed_occurrences = 0
        if row.open_alerts:  # an alert episode closes (none open: nothing to do)
            recover(row, claim.occurrence)
    # succeeded, enqueued, skipped, replaced (its run stopped when the next slot came due:
    # no failure, failure_count kept): the same words.
    receipt_status = ReceiptStatus(status)
    skipped = _move_on(row, claim.occurrence, now, events)
    receipt = build_receipt(claim, receipt_status, now, row=row, ran=outcome, slots_skipped=skipped)
    note_success(row, receipt, claim.scheduled_for)  # a success: the previous run
    return receipt


@implements(
    "outcome.retried",
    "outcome.given_up",
    "outcome.terminal",
    "outcome.failed_halted",
    "outcome.lease_expired",
)
def fail_attempt(
    row: Schedule, failure: Failure, now: datetime, events: list[ScheduleEvent] | None = None
) -> Receipt:
    """The receipt of ``failure`` on the locked ``row``, moved on: the same occurrence
    retried with backoff (or after ``failure.retry_after`` seconds), given up after
    ``max_attempts`` (the next slot planned; ``pause_after_failures`` may pause the
    schedule), or (``failure.terminal``) the schedule failed. The ``excluded`` events of
    a schedule left without a slot to run are appended to ``events``."""
    occurrence, attempt = failure.occurrence, failure.attempt
    row.failure_count += 1
    note_failing(row, occurrence)  # the streak's alert, once per episode
    skipped = 0
    if failure.terminal:
        fail_schedule(row)
        row.next_run_at = None
        row.retry_scheduled_for = None
    elif attempt < max_attempts_of(row) and row.status == Status.ACTIVE:
        retry_after = failure.retry_after
        if retry_after is None:
            retry_after = backoff_for(row, attempt)
        retry_after = min(
            bounded_seconds(retry_after, 0.0, app_settings.RETRY_AFTER_MAX_SECONDS) or 0.0,
            app_settings.RETRY_AFTER_MAX_SECONDS,
        )
        row.attempt = attempt
        end_backlog(row, failure.origin)
        row.retry_scheduled_for = failure.scheduled_for
        row.next_run_at = ceil_second(now + timedelta(seconds=retry_after))
    else:
        skipped = _give_up(row, occurrence, now, events)
    return build_receipt(failure, failure.status, now, row=row, ran=failure, slots_skipped=skipped)


@implements("outcome.given_up", "outcome.lease_expired")
def _give_up(
    row: Schedule, occurrence: int, now: datetime, events: list[ScheduleEvent] | None
) -> int:
    """:func:`fail_attempt`'s occurrence ``occurrence`` is given up (no attempt left, or the
    row no longer active): counted in ``failed_occurrences``; a ``once`` schedule that is
    active fails, a recurring one moves on to its next slot (:func:`_move_on`) and is
    paused once ``pause_after_failures`` occurrences failed in a row. Returns the slots
    skipped by the move on."""
    row.failed_occurrences += 1
    if row.kind == Kind.ONCE:
        row.retry_scheduled_for = None
        row.next_run_at = None
        if row.status == Status.ACTIVE:
            fail_schedule(row)
        return 0
    skipped = _move_on(row, occurrence, now, events)
    limit = row.pause_after_failures
    if limit and row.failed_occurrences >= limit and row.status == Status.ACTIVE:
        pause_after_failures(row)
        row.next_run_at = None
        row.pause_reason = f"paused after {row.failed_occurrences} consecutive failed occurrences"
        note_paused(row, occurrence)
        logger.warning(
            "schedule %s %s",
            row.name,
            row.pause_reason,
            extra={"schedule": row.name, "occurrence": occurrence},
        )
    return skipped


def backoff_for(row: Schedule, attempt: int) -> float:
    """Seconds before retry number ``attempt`` of ``row``: the exponential backoff
    (:func:`.timing.backoff_seconds`) of the row's base and cap (else the
    ``BACKOFF_BASE_SECONDS`` / ``BACKOFF_CAP_SECONDS`` settings), each bounded first as
    ``Schedule.save()`` bounds them, so a row written behind ``save()`` (``1e12``, NaN,
    negative) cannot overflow a datetime."""
    base = bounded_seconds(
        row.backoff_base_seconds, app_settings.BACKOFF_BASE_SECONDS, BACKOFF_BASE_MAX_SECONDS
    )
    cap = bounded_seconds(
        row.backoff_cap_seconds, app_settings.BACKOFF_CAP_SECONDS, BACKOFF_CAP_MAX_SECONDS
    )
    return timing.backoff_seconds(max(1, attempt), base or 0.0, cap or 0.0)


@implements(
    "outcome.succeeded",
    "outcome.skipped",
    "outcome.buffered",
    "outcome.buffered_all",
    "outcome.given_up",
    "outcome.halted",
)
def _move_on(
    row: Schedule, occurrence: int, now: datetime, events: list[ScheduleEvent] | None = None
) -> int:
    """The occurrence is finished: plan the next slot (or complete the schedule). Slots that
    passed while it ran follow the overlap rule (:func:`plan_overlap`): skipped, or one of
    them buffered; returns how many were skipped. A schedule completed for want of a slot
    gets the excluded slots of the rest of its grid counted
    (:func:`.exclusion_rules.count_excluded_to_end`; their events appended to ``events``)."""
    row.retry_scheduled_for = row.buffered_for = None
    if row.status != Status.ACTIVE:
        return 0  # paused/cancelled while running: leave it as the operator set it
    if row.kind == Kind.ONCE or (row.max_runs is not None and occurrence >= row.max_runs):
        row.next_run_at = None
        complete_if_no_slot(row)
        return 0
    overlap = plan_overlap(row, now)
    row.missed_count += overlap.skipped
    row.next_run_at, row.buffered_for = overlap.next_run_at, overlap.buffered_for
    row.buffered_through = overlap.buffered_through
    if complete_if_no_slot(row):
        count_excluded_to_end(row, now, [] if events is None else events)
    return overlap.skipped
