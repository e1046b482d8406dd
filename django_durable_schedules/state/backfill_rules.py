"""Row arithmetic of a backfill: its slots, the claim of its next slot, and what a
finished (or lost) attempt of a slot does to it.

Pure: the functions read and write a locked schedule row and its open
:class:`~..models.Backfill` as plain attributes and build unsaved attempts and receipts;
:mod:`.backfills` locks, writes and commits them. A backfill run never moves the
schedule's live grid (``next_run_at``, retries, failure counters): only its lease, its
occurrence count and ``last_run_at``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from django.core.exceptions import ValidationError

from .. import timing
from ..conf import app_settings
from ..exceptions import StateConflict
from ..models import (
    AttemptOrigin,
    Backfill,
    BackfillStatus,
    Kind,
    ReceiptStatus,
    RunAttempt,
    RunReceipt,
    Schedule,
    Status,
)
from ..registry import registry
from .attempt_rules import claim_of, max_attempts_of, new_attempt
from .bounds import describe_problem, read_count
from .machine import clear_trigger, complete_if_no_slot
from .previous_rules import note_success
from .records import Receipt, build_receipt
from .transitions import implements
from .values import Claim, Outcome

ONE_SECOND = timedelta(seconds=1)


def backfill_slots(spec: timing.Spec, start: datetime, end: datetime, cap: int) -> list[datetime]:
    """The slots ``s`` of ``spec`` with ``start <= s < end`` (aware UTC, whole seconds), in
    order, at most ``cap + 1`` of them (so a caller can tell "more than ``cap``").

    Raises :class:`.timing.InvalidSchedule` for a definition the engine cannot evaluate or
    a naive instant."""
    slots: list[datetime] = []
    slot = timing.next_slot_after(spec, start, inclusive=True)
    while slot is not None and slot < end and len(slots) <= cap:
        slots.append(slot)
        slot = timing.next_slot_after(spec, slot)
    return slots


@implements("claim.backfill", "claim.backfill_unregistered", "claim.backfill_cancelled")
def claim_backfill_slot(
    row: Schedule,
    backfill: Backfill,
    now: datetime,
    lease: timedelta,
    worker: str,
    attempts: list[RunAttempt],
    receipts: list[RunReceipt],
    claims: list[Claim],
) -> str | None:
    """Claim the next slot of ``backfill`` on its locked, free ``row`` (see
    ``ScheduleQuerySet.backfill_ready``) at ``now`` (aware UTC).

    A backfill with no slot left (its last slot ended before this change completed
    backfills at once) is completed (``finished_at`` = ``now``). Otherwise its
    slot at ``position`` is claimed as its own occurrence (``row.occurrence + 1``, or the
    same occurrence's next attempt when its previous attempt was released or lost), with
    ``origin`` ``backfill`` and a lease of ``lease``. A callback no longer registered is
    receipted ``degraded`` at once and the backfill moves on (the live schedule is left
    to its own claim to pause). A stored slot that is not an instant (written behind
    ``save()``) cancels the backfill: returns the reason, else None. A stored position or
    counter that is not a count raises :class:`.timing.InvalidSchedule` naming it (the
    caller cancels the backfill)."""
    if read_count(backfill.position, "position") >= backfill_slot_count(backfill):
        backfill.status, backfill.finished_at = BackfillStatus.COMPLETED, now
        return None
    slot = _next_slot(backfill)
    if slot is None:
        # Its stored slots were written behind save(): this backfill stops, with a reason;
        # the claim of every other schedule goes on.
        backfill.status, backfill.finished_at = BackfillStatus.CANCELLED, now
        return f"its slot {backfill.position + 1} is not a stored instant"
    # Counters written behind save() that are no count raise InvalidSchedule naming them.
    if backfill.occurrence is None:
        occurrence, number = read_count(row.occurrence, "occurrence") + 1, 1
    else:
        occurrence = read_count(backfill.occurrence, "backfill occurrence")
        number = read_count(backfill.attempt, "backfill attempt") + 1
    registered = row.callback in registry
    expires = now + lease if registered else now
    attempt = new_attempt(
        row, occurrence, number, slot, now, expires, worker, origin=AttemptOrigin.BACKFILL
    )
    attempts.append(attempt)
    row.occurrence = max(row.occurrence, occurrence)
    row.last_run_at = now
    backfill.occurrence, backfill.attempt = occurrence, number
    if not registered:
        receipts.append(_unregistered_receipt(row, attempt, now))
        _advance(backfill, now)
        return None
    row.lease_token, row.lease_expires_at = attempt.lease_token, attempt.lease_expires_at
    claims.append(claim_of(row, attempt))
    return None


def _unregistered_receipt(row: Schedule, attempt: RunAttempt, now: datetime) -> RunReceipt:
    """The ``degraded`` receipt (unsaved) of a backfill ``attempt`` whose callback is no
    longer registered, finished at ``now``; the row's next run is left as it is."""
    return build_receipt(
        attempt,
        ReceiptStatus.DEGRADED,
        now,
        row=row,
        error_type="NotRegistered",
        error_message=f"callback {row.callback!r} is not registered",
    ).model()


def stored_retry_problem(
    backfill: Backfill, last: RunAttempt | None, succeeded: bool
) -> str | None:
    """Why the occurrence a backfill stored as its current slot's (``occurrence``, set by a
    claim whose attempt was released or whose lease expired) cannot take a next attempt, or
    None when it can (or none is stored). ``last``: the schedule's last attempt of that
    occurrence; ``succeeded``: whether the occurrence has a successful receipt. The rule:
    only the slot's own last attempt is retried - an occurrence written behind ``save()``
    would re-run another one (already succeeded: its receipt refused, its outcome lost)."""
    if backfill.occurrence is None:
        return None
    where = f"its stored occurrence {backfill.occurrence}"
    if last is None:
        return f"{where} has no attempt"
    if (
        last.origin != AttemptOrigin.BACKFILL
        or last.attempt != backfill.attempt
        or last.scheduled_for != _next_slot(backfill)
    ):
        return f"{where} (attempt {backfill.attempt}) is not the last attempt of its slot"
    if succeeded:
        return f"{where} has already succeeded"
    return None


def backfill_slot_count(backfill: Backfill) -> int:
    """How many slots the backfill holds (none when its stored list is not a list)."""
    return len(backfill.slots) if isinstance(backfill.slots, list) else 0


def _next_slot(backfill: Backfill) -> datetime | None:
    """The slot at ``position`` as an aware UTC instant, or None when the stored value is
    not an ISO 8601 instant with an offset (a row written behind ``save()``)."""
    try:
        slot = datetime.fromisoformat(backfill.slots[backfill.position])
        if slot.tzinfo is None or slot.utcoffset() is None:
            return None
        return slot.astimezone(UTC)
    except (TypeError, ValueError, LookupError, OverflowError):  # before year 1 in UTC
        return None


def rule_start_note(schedule: Schedule, start: datetime) -> str:
    """Why a calendar rule has no slot before its DTSTART, when the range starts there."""
    if schedule.kind != Kind.RRULE:
        return ""
    try:
        dtstart = timing.rrule_dtstart(schedule.timezone, schedule.start_at, schedule.created_at)
        local = start.astimezone(ZoneInfo(schedule.timezone)).replace(tzinfo=None)
    except (timing.InvalidSchedule, ValueError, OverflowError, LookupError):
        return ""
    if local >= dtstart:
        return ""
    origin = "start_at" if schedule.start_at is not None else "midnight of its creation day"
    return (
        f" A calendar rule has no slot before its start (DTSTART: {origin}, "
        f"{dtstart:%Y-%m-%d %H:%M:%S} {schedule.timezone}); set start_at earlier to "
        "backfill before it."
    )


@implements("outcome.backfill")
def backfill_receipt(
    row: Schedule, outcome: Outcome, now: datetime, *, status: str | None = None
) -> Receipt:
    """The receipt of a backfill attempt's ``outcome`` finished at ``now``: its own status
    (or ``status``: ``lease_expired`` for a run that outlived its lease). The schedule row
    is left as it is (its lease is cleared by the caller): a backfill failure neither
    retries with backoff nor counts in ``failure_count``, and ``FailRun`` does not fail
    the schedule. A success becomes the row's previous run unless the row holds a success
    of a later slot (:func:`.previous_rules.note_success`)."""
    status = status or ReceiptStatus(outcome.status)
    receipt = build_receipt(outcome.claim, status, now, row=row, ran=outcome)
    note_success(row, receipt, outcome.claim.scheduled_for)  # unless a later one is held
    return receipt


@implements("outcome.backfill")
def complete_at_max_runs(row: Schedule) -> bool:
    """After a backfill slot's run: backfill occurrences count towards ``max_runs``, so a
    run that used the last one completes the schedule (no next run), as the live grid's
    last run does. Returns whether it did."""
    if row.max_runs is None or row.occurrence < row.max_runs:
        return False
    if row.status not in (Status.ACTIVE, Status.PAUSED):
        return False
    row.next_run_at = None
    row.retry_scheduled_for = row.buffered_for = None
    clear_trigger(row)
    return complete_if_no_slot(row)


@implements("outcome.backfill")
def settle_backfill(
    backfill: Backfill, row: Schedule, attempt: int, status: str, now: datetime
) -> None:
    """Move ``backfill`` on after its current slot's attempt number ``attempt`` ended with
    receipt ``status`` at ``now`` (aware UTC): a ``released`` slot (handed back unrun) runs
    again as the next attempt of the same occurrence, and so does a ``lease_expired`` one
    while attempts are left (``max_attempts``: at-least-once, as the live grid); any other
    ends the slot (a failed slot is not retried: backfill the range again to re-run it,
    slots that succeeded are skipped). Ending the last slot completes the backfill
    (``finished_at`` = ``now``)."""
    if backfill.status != BackfillStatus.ACTIVE:
        return
    if status == ReceiptStatus.RELEASED or (
        status == ReceiptStatus.LEASE_EXPIRED and attempt < max_attempts_of(row)
    ):
        backfill.attempt = attempt
        return
    _advance(backfill, now)


def _advance(backfill: Backfill, now: datetime) -> None:
    """The current slot is over: on to the next one, or, after the last, completed."""
    backfill.position += 1
    backfill.occurrence, backfill.attempt = None, 0
    if backfill.position >= backfill_slot_count(backfill):
        backfill.status, backfill.finished_at = BackfillStatus.COMPLETED, now


def backfill_slots_in(schedule: Schedule, start: datetime, end: datetime) -> list[datetime]:
    """:func:`.backfills.plan_backfill`'s slots of ``schedule`` in ``[start, end)``. Raises
    :class:`StateConflict` for a stored definition the engine cannot evaluate, and
    ``ValidationError`` (``end``) for more than ``BACKFILL_MAX_SLOTS`` slots."""
    cap = app_settings.BACKFILL_MAX_SLOTS
    try:
        slots = backfill_slots(schedule.spec(), start, end, cap)
    except (timing.InvalidSchedule, ValueError, OverflowError) as exc:
        raise StateConflict(
            f"the stored definition cannot be evaluated ({describe_problem(exc)})"
        ) from None
    if len(slots) > cap:
        raise ValidationError(
            {
                "end": [
                    f"The range holds more than {cap} slots (BACKFILL_MAX_SLOTS); choose a shorter one."
                ]
            }
        )
    return slots


def check_runs_left(schedule: Schedule, slots: list[datetime]) -> None:
    """Raise ``ValidationError`` (``end``) when ``slots`` hold more runs than ``schedule``'s
    ``max_runs`` leaves: backfill occurrences count towards ``max_runs``."""
    left = None if schedule.max_runs is None else max(0, schedule.max_runs - schedule.occurrence)
    if left is not None and len(slots) > left:
        # Backfill occurrences count towards max_runs, as the live grid's do.
        raise ValidationError(
            {
                "end": [
                    f"{schedule.name} has max_runs={schedule.max_runs} and "
                    f"{schedule.occurrence} occurrence{'' if schedule.occurrence == 1 else 's'} "
                    f"fired: {left} run{'' if left == 1 else 's'} left, and the range holds "
                    f"{len(slots)} slot{'' if len(slots) == 1 else 's'} to run; choose a "
                    "shorter range or raise max_runs."
                ]
            }
        )
