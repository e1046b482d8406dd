"""What a due row runs at a claim, as :func:`choose_slot` chooses it (a :class:`SlotChoice`),
in the priority order of :func:`.machine.pending`: a pending retry, a trigger (a re-run:
:mod:`.rerun_rules`), a buffered slot (``overlap_policy`` buffer_one), else the grid's
slot, which may be counted missed, skipped or excluded instead of run.

Pure: the functions read and write a locked :class:`~..models.Schedule` row as plain
attributes and build unsaved attempts and receipts; :func:`.rules.plan_claim` calls
:func:`choose_slot`, then :func:`.blackout_rules.apply_blackouts` and
:func:`.rules.grant_lease` on what it chose.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from .. import timing
from ..conf import app_settings
from ..models import (
    NO_GRID,
    AttemptOrigin,
    Kind,
    MisfirePolicy,
    ReceiptStatus,
    RunAttempt,
    RunReceipt,
    Schedule,
    ScheduleEvent,
    Status,
)
from .attempt_rules import new_attempt
from .exclusion_rules import count_excluded, excluded_at_claim
from .machine import BUFFERED, RETRY, TRIGGER, complete_if_no_slot, pending
from .overlap_rules import after_buffered, oldest_of_newest
from .overrides import effective_payload, take_override
from .records import build_receipt
from .rerun_rules import grid_next_after_rerun, rerun_numbers
from .transitions import implements
from .zone_rules import regrid_due

ONE_SECOND = timedelta(seconds=1)


@dataclass(frozen=True, slots=True)
class SlotChoice:
    """What a claim runs, as :func:`choose_slot` chose it: the ``occurrence`` and its
    ``attempt`` number, the nominal ``slot`` (UTC), the row's next run once it is claimed
    (``next_run_at``; None: none from the grid), the grid slots passed over (``missed``)
    and why it runs (``origin``, :class:`~..models.AttemptOrigin`); a grid slot's
    earliest due instant (``since``: the slots from it to ``slot`` are due) and the slots
    deferred past a blackout window it also stands for (``deferred``,
    :mod:`.blackout_rules`)."""

    occurrence: int
    attempt: int
    slot: datetime
    next_run_at: datetime | None
    missed: int = 0
    origin: str = AttemptOrigin.SCHEDULED
    #: What it runs with when not the schedule's payload (a trigger's override), else None.
    payload: Any = None
    since: datetime | None = None
    deferred: int = 0


@implements(
    "claim.retry",
    "claim.triggered_paused",
    "claim.buffered",
    "claim.rerun",
    "claim.manual_never_due",
)
def choose_slot(
    row: Schedule,
    now: datetime,
    other_rules: bool,
    worker: str,
    attempts: list[RunAttempt],
    receipts: list[RunReceipt],
    events: list[ScheduleEvent],
) -> SlotChoice | None:
    """What the due ``row`` runs at ``now``, in the priority order of :func:`.pending`:
    a pending retry (the same occurrence, attempt + 1; grid slots passed while it waited
    are counted missed), a trigger (its own occurrence; a re-run:
    :func:`.rerun_rules.grid_next_after_rerun`), a buffered slot (``overlap_policy``
    buffer_one or buffer_all, :func:`.overlap_rules.after_buffered`), else the grid's slot (:func:`_choose_grid_slot`). Excluded slots since
    the last check are counted first (``events`` appended). None: nothing runs (missed,
    skipped, excluded, re-planned). ``other_rules``: its stored fingerprint was taken
    under other zone rules. Raises :class:`~..timing.InvalidSchedule` for a definition it
    cannot evaluate."""
    spec = row.spec()
    if row.kind in (Kind.ONCE, *NO_GRID):
        # A one-shot's (and a manual row's) arithmetic never reads its zone; the admin,
        # the API and upcoming() do: an invalid one is this row's problem now, not theirs
        # later.
        spec.validate()
    count_excluded(row, spec, now, events)  # since the last check
    first = pending(row)
    if first == RETRY:
        return _choose_retry(row, spec, now)
    if first == TRIGGER and row.rerun_occurrence is not None:  # a re-run: its occurrence
        next_run_at = grid_next_after_rerun(row, spec)
        return SlotChoice(*rerun_numbers(row), next_run_at, 0, AttemptOrigin.RERUN)
    if first == TRIGGER:
        assert row.triggered_at is not None
        # A manual run (trigger): its own occurrence; the grid continues after now.
        next_run_at = _recurring_next(row, spec, now)
        return SlotChoice(
            row.occurrence + 1,
            1,
            row.triggered_at,
            next_run_at,
            0,
            AttemptOrigin.TRIGGERED,
            take_override(row, now, events),
        )
    if first == BUFFERED:
        assert row.buffered_for is not None
        # overlap_policy buffer_one / buffer_all (.overlap_rules): the slot buffered while
        # the previous run ran, as its own occurrence, due since that run finished.
        next_run_at, missed = after_buffered(row, spec, now)
        return SlotChoice(
            row.occurrence + 1, 1, row.buffered_for, next_run_at, missed, AttemptOrigin.BUFFERED
        )
    if row.kind in NO_GRID:
        manual_not_due(row)
        return None
    return _choose_grid_slot(row, spec, now, other_rules, worker, attempts, receipts)


@implements("claim.retry")
def _choose_retry(row: Schedule, spec: timing.Spec, now: datetime) -> SlotChoice:
    """:func:`choose_slot`'s pending retry of ``row`` at ``now``: the same occurrence,
    attempt + 1, at its slot ``retry_scheduled_for``; grid slots passed while it waited are
    counted missed; a triggered occurrence's retry runs with the trigger's override."""
    slot = row.retry_scheduled_for
    assert slot is not None
    missed = 0
    if row.kind != Kind.ONCE and row.status == Status.ACTIVE:
        # Grid slots that came due while the occurrence waited for its retry (backoff,
        # lease recovery, a missing callback) are passed over: counted, never dropped.
        # The previous attempt's claim (``last_run_at``) planned the grid up to its own
        # instant, so the slots to count are those after it, up to now.
        since = max(slot, timing.truncate_to_second(row.last_run_at or slot))
        missed = timing.count_slots(spec, since + ONE_SECOND, now + ONE_SECOND)
    next_run_at = _recurring_next(row, spec, now)
    # A triggered occurrence's retry runs with the trigger's override, as it did.
    payload = effective_payload(row)[0] if row.trigger_payload is not None else None
    payload = None if payload == row.payload else payload
    return SlotChoice(row.occurrence, row.attempt + 1, slot, next_run_at, missed, payload=payload)


@implements("claim.manual_never_due")
def manual_not_due(row: Schedule) -> None:
    """A ``manual`` row claimed with nothing pending (no retry, trigger or buffered slot):
    a next run written behind ``save()`` (an edit or a resume: the edit triggers make it
    due now). It is never due by itself: nothing runs, and its next run is cleared, so it
    waits for a trigger."""
    row.next_run_at = None


@implements("claim.run", "claim.skip_missed")
def _choose_grid_slot(
    row: Schedule,
    spec: timing.Spec,
    now: datetime,
    other_rules: bool,
    worker: str,
    attempts: list[RunAttempt],
    receipts: list[RunReceipt],
) -> SlotChoice | None:
    """The grid's slot of the due ``row`` at ``now``: the latest slot at or before ``now``
    (slots before it counted missed; a once schedule: its ``run_at``; ``misfire_policy``
    all: the oldest pending slot, at most ``CATCH_UP_MAX`` back, :func:`catch_up_slot`),
    or None when nothing runs: its date excluded since it was planned
    (:func:`.excluded_at_claim`), re-planned under the current zone rules
    (:func:`.regrid_due`), skipped after downtime (``misfire_policy`` skip) or too stale for ``misfire_grace_seconds``
    (receipted ``missed``, :func:`_record_missed`)."""
    occurrence, grace = row.occurrence + 1, row.misfire_grace_seconds
    due = row.next_run_at
    assert due is not None
    if row.kind == Kind.ONCE:
        slot, next_run_at, missed = row.run_at or due, None, 0
    elif excluded_at_claim(row, spec, now):
        return None  # its date was excluded after it was planned: counted, not run
    else:
        # ``due`` may include jitter: the nominal slot lies up to jitter_seconds before it.
        earliest = due - timedelta(seconds=row.jitter_bound())
        latest = timing.latest_slot_at_or_before(spec, now, not_before=earliest)
        if latest is None and other_rules:  # planned under other zone rules
            regridded = regrid_due(row, spec, due, now)
            if regridded is None:
                return None
            due = regridded
            earliest = due - timedelta(seconds=row.jitter_bound())
            latest = timing.latest_slot_at_or_before(spec, now, not_before=earliest)
        slot, after = latest or due, max(latest or due, now)
        if row.misfire_policy == MisfirePolicy.ALL and latest is not None:
            # Policy "all": the oldest pending slot runs; the next one is due at once.
            cap = app_settings.CATCH_UP_MAX
            slot = after = catch_up_slot(spec, earliest, latest, now, grace, cap)
        missed = timing.count_slots(spec, earliest, slot)
        next_run_at = row.due_at(timing.next_slot_after(spec, after))
        if row.misfire_policy == MisfirePolicy.SKIP and missed:
            # Policy "skip": after downtime, no late run at all; wait for the next slot.
            row.missed_count += missed + 1
            row.next_run_at = next_run_at
            complete_if_no_slot(row)
            return None
    if grace is not None and (now - slot).total_seconds() > grace:
        # Too stale for the catch-up window: receipt the slot 'missed', run nothing.
        _record_missed(row, occurrence, slot, now, missed, next_run_at, worker, attempts, receipts)
        return None
    since = slot if row.kind == Kind.ONCE else earliest
    return SlotChoice(occurrence, 1, slot, next_run_at, missed, since=since)


@implements("claim.catch_up")
def catch_up_slot(
    spec: timing.Spec,
    earliest: datetime,
    latest: datetime,
    now: datetime,
    grace: int | None,
    catch_up_max: int,
) -> datetime:
    """``misfire_policy`` all: the slot a claim at ``now`` runs of the pending slots from
    ``earliest`` to ``latest`` (aware UTC, whole seconds; ``latest`` is one of them): the
    oldest one, but never one older than ``now - grace`` seconds (``grace``:
    ``misfire_grace_seconds``, None: no bound) nor one before the newest ``catch_up_max``
    (>= 1), so the slots before the one returned are counted missed by the caller. When no
    pending slot is within the grace, ``latest`` (the grace rule receipts it missed).

    Bounded whatever the backlog (:func:`.overlap_rules.oldest_of_newest`). Raises
    :class:`~..timing.InvalidSchedule` like :func:`.timing.next_slot_after`."""
    start = earliest
    if grace is not None:
        oldest = now - timedelta(seconds=grace)  # a slot before it is too stale to run
        start = max(start, timing.truncate_to_second(oldest + timedelta(microseconds=999_999)))
    first = timing.next_slot_after(spec, start, inclusive=True)
    if first is None or first > latest:
        return latest
    return oldest_of_newest(spec, first, latest, catch_up_max)


@implements("claim.missed")
def _record_missed(
    row: Schedule,
    occurrence: int,
    slot: datetime,
    now: datetime,
    missed: int,
    next_run_at: datetime | None,
    worker: str,
    attempts: list[RunAttempt],
    receipts: list[RunReceipt],
) -> None:
    attempt = new_attempt(row, occurrence, 1, slot, now, now, worker, missed)
    attempts.append(attempt)
    row.occurrence, row.attempt = occurrence, 1
    row.missed_count += missed + 1
    row.next_run_at = next_run_at
    complete_if_no_slot(row, require_active=True)
    late = (now - slot).total_seconds()
    receipts.append(
        build_receipt(
            attempt,
            ReceiptStatus.MISSED,
            now,
            row=row,
            error_type="Missed",
            error_message=f"claimed {late:.0f}s after its slot, beyond misfire_grace_seconds="
            f"{row.misfire_grace_seconds}",
        ).model()
    )


def _recurring_next(row: Schedule, spec: timing.Spec, now: datetime) -> datetime | None:
    """The grid's next due instant after ``now`` for a run that is not the grid's own slot
    (a retry, a trigger, a buffered slot): None for a once or a manual schedule (a manual
    one is never due by itself) or a row not active."""
    if row.kind in (Kind.ONCE, *NO_GRID) or row.status != Status.ACTIVE:
        return None
    return row.due_at(timing.next_slot_after(spec, now))
