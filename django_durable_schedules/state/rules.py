"""Row arithmetic of a claim: choose the slot, grant the lease, count what was missed.

Pure: the functions read and write a locked :class:`~..models.Schedule` row as plain
attributes and build unsaved attempts and receipts; :mod:`.runs` locks, writes and
commits them. No database access, so each rule is testable on an unsaved row.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from .. import timing
from ..conf import app_settings
from ..limits import TIMEOUT_MAX_SECONDS
from ..models import (
    AttemptOrigin,
    DegradedKind,
    Kind,
    MisfirePolicy,
    ReceiptStatus,
    RunAttempt,
    RunReceipt,
    Schedule,
    ScheduleEvent,
    Status,
)
from ..models.definition import same_definition
from ..projection import bound_text
from ..registry import registry
from ..uuids import uuid4
from .blackout_rules import apply_blackouts
from .bounds import UNEVALUABLE_PREFIX, bounded_seconds, check_counters, describe_problem
from .exclusion_rules import count_excluded, count_excluded_to_end, excluded_at_claim
from .machine import (
    BUFFERED,
    RETRY,
    TRIGGER,
    clear_trigger,
    complete_if_no_slot,
    mark_degraded,
    pause_degraded,
    pending,
    plan_definition,
)
from .overrides import effective_payload, take_override
from .records import Receipt as Receipt
from .records import build_receipt
from .rerun_rules import grid_next_after_rerun, rerun_numbers, rerun_unregistered
from .transitions import implements
from .values import Claim
from .zone_rules import regrid_due

logger = logging.getLogger(__name__)

ONE_SECOND = timedelta(seconds=1)


def ceil_second(value: datetime) -> datetime:
    """``value`` rounded up to the whole second (unchanged when it is one)."""
    if value.microsecond:
        value = value.replace(microsecond=0) + ONE_SECOND
    return value


def max_attempts_of(schedule: Schedule) -> int:
    """The attempts one occurrence may take: the schedule's ``max_attempts``, else the
    ``MAX_ATTEMPTS`` setting."""
    return schedule.max_attempts or app_settings.MAX_ATTEMPTS


def new_attempt(
    row: Schedule,
    occurrence: int,
    number: int,
    slot: datetime,
    now: datetime,
    lease_expires_at: datetime,
    worker: str,
    missed: int = 0,
    origin: str = AttemptOrigin.SCHEDULED,
    payload: Any = None,
) -> RunAttempt:
    """The attempt row of one claim (unsaved): a fresh lease token until
    ``lease_expires_at`` (``now`` for an attempt receipted at once: missed, degraded);
    ``payload``: what it runs with when that is not the schedule's payload (a trigger's
    override), else None."""
    return RunAttempt.build(
        id=uuid4(),
        schedule_id=row.id,
        schedule_name=row.name,
        occurrence=occurrence,
        attempt=number,
        scheduled_for=slot,
        claimed_at=now,
        lease_token=uuid4(),
        lease_expires_at=lease_expires_at,
        worker=worker[:200],
        idempotency_key=idempotency_key(row.id, occurrence),
        missed_slots=missed,
        origin=origin,
        payload=payload,
    )


def claim_of(row: Schedule, attempt: RunAttempt) -> Claim:
    """The claim a worker runs for ``attempt``, just made for ``row`` by
    :func:`new_attempt` (the timeout bounded as the limits say, blank: none); its payload
    is the attempt's own (a trigger's override merged), else the schedule's."""
    return Claim(
        attempt_id=attempt.id,
        schedule_id=row.id,
        schedule_name=row.name,
        callback=row.callback,
        occurrence=attempt.occurrence,
        attempt=attempt.attempt,
        scheduled_for=attempt.scheduled_for,
        claimed_at=attempt.claimed_at,
        lease_token=attempt.lease_token,
        lease_expires_at=attempt.lease_expires_at,
        idempotency_key=attempt.idempotency_key,
        payload=row.payload if attempt.payload is None else attempt.payload,
        missed_slots=attempt.missed_slots,
        timeout_seconds=bounded_seconds(row.timeout_seconds, None, TIMEOUT_MAX_SECONDS) or None,
        origin=attempt.origin,
    )


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


def idempotency_key(schedule_id: uuid.UUID, occurrence: int) -> str:
    """Stable key of one occurrence, the same for every attempt of it: ``"<uuid>:<n>"``."""
    return f"{schedule_id}:{occurrence}"


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
    if row.kind in (Kind.ONCE, Kind.MANUAL) or row.status != Status.ACTIVE:
        return None
    return row.due_at(timing.next_slot_after(spec, now))


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
    (:func:`replan_edited`), else choose what runs (:func:`choose_slot`), then grant its
    lease (:func:`grant_lease`), unless a blackout window says otherwise
    (:func:`.blackout_rules.apply_blackouts`). A differing fingerprint of the same definition is the
    zone rules' doing (:func:`.zone_rules.regrid_due`), not an edit."""
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
    :func:`.rerun_rules.grid_next_after_rerun`), a buffered slot
    (``overlap_policy`` buffer_one), else the grid's slot (:func:`_choose_grid_slot`). Excluded slots since the last check are
    counted first (``events`` appended). None: nothing runs (missed, skipped, excluded,
    re-planned). ``other_rules``: its stored fingerprint was taken under other zone rules.
    Raises :class:`~..timing.InvalidSchedule` for a definition it cannot evaluate."""
    spec = row.spec()
    if row.kind in (Kind.ONCE, Kind.MANUAL):
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
        # overlap_policy buffer_one (plan_overlap): the slot buffered while the previous run
        # ran, as its own occurrence, due since that run finished (next_run_at).
        next_run_at = _recurring_next(row, spec, now)
        finished = timing.truncate_to_second(row.next_run_at or now)
        missed = timing.count_slots(spec, finished + ONE_SECOND, now + ONE_SECOND)
        return SlotChoice(
            row.occurrence + 1, 1, row.buffered_for, next_run_at, missed, AttemptOrigin.BUFFERED
        )
    if row.kind == Kind.MANUAL:
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
    (slots before it counted missed; a once schedule: its ``run_at``), or None when
    nothing runs: its date excluded since it was planned (:func:`.excluded_at_claim`),
    re-planned under the current zone rules (:func:`.regrid_due`), skipped after
    downtime (``misfire_policy`` skip) or too stale for ``misfire_grace_seconds``
    (receipted ``missed``, :func:`_record_missed`)."""
    occurrence = row.occurrence + 1
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
        slot = latest or due
        missed = timing.count_slots(spec, earliest, slot)
        next_run_at = row.due_at(timing.next_slot_after(spec, max(slot, now)))
        if row.misfire_policy == MisfirePolicy.SKIP and missed:
            # Policy "skip": after downtime, no late run at all; wait for the next slot.
            row.missed_count += missed + 1
            row.next_run_at = next_run_at
            complete_if_no_slot(row)
            return None
    grace = row.misfire_grace_seconds
    if grace is not None and (now - slot).total_seconds() > grace:
        # Too stale for the catch-up window: receipt the slot 'missed', run nothing.
        _record_missed(row, occurrence, slot, now, missed, next_run_at, worker, attempts, receipts)
        return None
    since = slot if row.kind == Kind.ONCE else earliest
    return SlotChoice(occurrence, 1, slot, next_run_at, missed, since=since)


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
        # a retry of the occurrence runs with it too (choose_slot); a new occurrence of
        # any other origin has none.
        keep = row.trigger_payload if choice.origin == AttemptOrigin.TRIGGERED else None
        if choice.attempt > 1:
            keep = row.trigger_payload
        row.occurrence, row.attempt = choice.occurrence, choice.attempt
        row.retry_scheduled_for = row.buffered_for = None
        clear_trigger(row)
        row.trigger_payload = keep
        row.missed_count += choice.missed
    if row.callback not in registry:
        _pause_unregistered(row, attempt, slot, now, receipts)
        return
    row.lease_token, row.lease_expires_at = attempt.lease_token, attempt.lease_expires_at
    row.next_run_at = choice.next_run_at
    claims.append(claim_of(row, attempt))


@implements("claim.unregistered")
def _pause_unregistered(
    row: Schedule, attempt: RunAttempt, slot: datetime, now: datetime, receipts: list[RunReceipt]
) -> None:
    """The code that should run is gone: receipt ``attempt`` ``degraded``, pause the
    schedule with a reason, and keep the occurrence as a retry of ``slot``:
    :func:`.recover_degraded` makes it due once the callback is registered again
    (:func:`choose_slot`'s retry then runs it, attempt + 1)."""
    mark_degraded(row, f"callback {row.callback!r} is not registered", DegradedKind.CALLBACK)
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
