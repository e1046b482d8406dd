"""Row arithmetic of a claim: choose the slot, grant the lease, count what was missed.

Pure: the functions read and write a locked :class:`~..models.Schedule` row as plain
attributes and build unsaved attempts and receipts; :mod:`.runs` locks, writes and
commits them. No database access, so each rule is testable on an unsaved row.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
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
from .bounds import UNEVALUABLE_PREFIX, bounded_seconds, check_counters, describe_problem
from .exclusion_rules import count_excluded, count_excluded_to_end, excluded_at_claim
from .machine import complete_if_no_slot, mark_degraded, pause_degraded
from .records import Receipt as Receipt
from .transitions import implements
from .values import Claim
from .zone_rules import regrid_due

logger = logging.getLogger(__name__)

ONE_SECOND = timedelta(seconds=1)

#: Schedule columns a claim writes.
CLAIM_FIELDS = [
    "occurrence",
    "attempt",
    "retry_scheduled_for",
    "lease_token",
    "lease_expires_at",
    "next_run_at",
    "triggered_at",
    "buffered_for",
    "last_run_at",
    "missed_count",
    "excluded_count",
    "exclusions_checked_at",
    "status",
    "degraded_reason",
    "degraded_kind",
    "definition_hash",
]
#: Schedule columns a claim's locking read leaves out (no rule of a claim reads them).
CLAIM_UNREAD = ("metadata", "owner", "updated_at")
#: ... and those a completion's leaves out.
FINISH_UNREAD = ("payload", "metadata", "owner", "updated_at")
#: Schedule columns a completion or a recovery writes.
FINISH_FIELDS = [
    "attempt",
    "retry_scheduled_for",
    "triggered_at",
    "buffered_for",
    "lease_token",
    "lease_expires_at",
    "next_run_at",
    "failure_count",
    "failed_occurrences",
    "missed_count",
    "status",
    "degraded_reason",
    "degraded_kind",
    "pause_reason",
    "excluded_count",
    "exclusions_checked_at",
]


def ceil_second(value: datetime) -> datetime:
    """``value`` rounded up to the whole second (unchanged when it is one)."""
    if value.microsecond:
        value = value.replace(microsecond=0) + ONE_SECOND
    return value


def max_attempts_of(schedule: Schedule) -> int:
    """The attempts one occurrence may take: the schedule's ``max_attempts``, else the
    ``MAX_ATTEMPTS`` setting."""
    return schedule.max_attempts or app_settings.MAX_ATTEMPTS


def snapshot_row(row: Schedule, fields: Sequence[str]) -> dict[str, Any]:
    """``{field: value}`` of ``row`` for ``fields``, for :func:`restore_row` to undo a rule."""
    return {f: getattr(row, f) for f in fields}


def restore_row(row: Schedule, snapshot: dict[str, Any]) -> None:
    """Set back on ``row`` the values a :func:`snapshot_row` took."""
    for name, value in snapshot.items():
        setattr(row, name, value)


def safe_hash(row: Schedule) -> str:
    """``row``'s definition hash now, or the stored one when the definition is too broken
    to fingerprint."""
    try:
        return row.compute_definition_hash()
    except Exception:  # noqa: BLE001 - a definition too broken to fingerprint
        return row.definition_hash


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
) -> RunAttempt:
    """The attempt row of one claim (unsaved): a fresh lease token until
    ``lease_expires_at`` (``now`` for an attempt receipted at once: missed, degraded)."""
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
    )


def claim_of(row: Schedule, attempt: RunAttempt) -> Claim:
    """The claim a worker runs for ``attempt``, just made for ``row`` by
    :func:`new_attempt` (the timeout bounded as the limits say, blank: none)."""
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
        payload=row.payload,
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
    row.definition_hash = safe_hash(row)
    pause_degraded(row, reason)
    receipts.append(
        Receipt(
            attempt_id=attempt.id,
            schedule_id=row.id,
            occurrence=occurrence,
            status=ReceiptStatus.DEGRADED,
            finished_at=now,
            error_type="InvalidSchedule"
            if isinstance(exc, timing.InvalidSchedule)
            else bound_text(type(exc).__name__, 200),
            error_message=reason,
            failure_count_after=row.failure_count,
            next_run_at=None,
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
        Receipt(
            attempt_id=attempt.id,
            schedule_id=row.id,
            occurrence=occurrence,
            status=ReceiptStatus.MISSED,
            finished_at=now,
            error_type="Missed",
            error_message=f"claimed {late:.0f}s after its slot, beyond misfire_grace_seconds="
            f"{row.misfire_grace_seconds}",
            failure_count_after=row.failure_count,
            next_run_at=next_run_at,
        ).model()
    )


def _recurring_next(row: Schedule, spec: timing.Spec, now: datetime) -> datetime | None:
    """The grid's next due instant after ``now`` for a run that is not the grid's own slot
    (a retry, a trigger, a buffered slot): None for a once schedule or a row not active."""
    if row.kind == Kind.ONCE or row.status != Status.ACTIVE:
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


@implements(
    "claim.run",
    "claim.retry",
    "claim.buffered",
    "claim.triggered_paused",
    "claim.skip_missed",
    "claim.unregistered",
    "claim.edited",
    "claim.edited_paused",
)
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
    current_hash = row.compute_definition_hash()
    other_rules = row.definition_hash != current_hash  # the same definition: regrid_due
    if other_rules and not same_definition(row.definition_hash, current_hash):
        # Edited by QuerySet.update() or raw SQL: re-plan from now, never fire.
        row.definition_hash = current_hash
        row.retry_scheduled_for = row.triggered_at = row.buffered_for = None
        if row.status == Status.PAUSED:
            row.next_run_at = None
            return
        row.next_run_at = row.plan(timing.truncate_to_second(now))
        complete_if_no_slot(row)
        return
    row.definition_hash = current_hash
    spec = row.spec()
    if row.kind == Kind.ONCE:
        # A one-shot's arithmetic never reads its zone; the admin, the API and upcoming()
        # do: an invalid one is this row's problem now, not theirs later.
        spec.validate()
    count_excluded(row, spec, now, events)  # since the last check
    missed = 0
    origin: str = AttemptOrigin.SCHEDULED
    if row.retry_scheduled_for is not None:
        occurrence, attempt_no, slot = row.occurrence, row.attempt + 1, row.retry_scheduled_for
        provisional_next = _recurring_next(row, spec, now)
        if row.kind != Kind.ONCE and row.status == Status.ACTIVE:
            # Grid slots that came due while the occurrence waited for its retry (backoff,
            # lease recovery, a missing callback) are passed over: counted, never dropped.
            # The previous attempt's claim (``last_run_at``) planned the grid up to its own
            # instant, so the slots to count are those after it, up to now.
            since = max(slot, timing.truncate_to_second(row.last_run_at or slot))
            missed = timing.count_slots(spec, since + ONE_SECOND, now + ONE_SECOND)
    elif row.triggered_at is not None:
        # A manual run (trigger): its own occurrence; the grid continues after now.
        occurrence, attempt_no, slot = row.occurrence + 1, 1, row.triggered_at
        provisional_next = _recurring_next(row, spec, now)
        origin = AttemptOrigin.TRIGGERED
    elif row.buffered_for is not None and row.status == Status.ACTIVE:
        # overlap_policy buffer_one (plan_overlap): the slot buffered while the previous run
        # ran, as its own occurrence, due since that run finished (next_run_at).
        occurrence, attempt_no, slot = row.occurrence + 1, 1, row.buffered_for
        provisional_next = _recurring_next(row, spec, now)
        origin = AttemptOrigin.BUFFERED
        finished = timing.truncate_to_second(row.next_run_at or now)
        missed = timing.count_slots(spec, finished + ONE_SECOND, now + ONE_SECOND)
    else:
        occurrence, attempt_no = row.occurrence + 1, 1
        due = row.next_run_at
        assert due is not None
        if row.kind == Kind.ONCE:
            slot, provisional_next = row.run_at or due, None
        elif excluded_at_claim(row, spec, now):
            return  # its date was excluded after it was planned: counted above, not run
        else:
            # ``due`` may include jitter: the nominal slot lies up to jitter_seconds before it.
            earliest = due - timedelta(seconds=row.jitter_bound())
            latest = timing.latest_slot_at_or_before(spec, now, not_before=earliest)
            if latest is None and other_rules:  # planned under other zone rules
                due = regrid_due(row, spec, due, now)
                if due is None:
                    return
                earliest = due - timedelta(seconds=row.jitter_bound())
                latest = timing.latest_slot_at_or_before(spec, now, not_before=earliest)
            latest = latest or due
            missed = timing.count_slots(spec, earliest, latest)
            slot = latest
            provisional_next = row.due_at(timing.next_slot_after(spec, max(slot, now)))
            if row.misfire_policy == MisfirePolicy.SKIP and missed:
                # Policy "skip": after downtime, no late run at all; wait for the next slot.
                row.missed_count += missed + 1
                row.next_run_at = provisional_next
                complete_if_no_slot(row)
                return
        grace = row.misfire_grace_seconds
        if grace is not None and (now - slot).total_seconds() > grace:
            # Too stale for the catch-up window: receipt the slot 'missed', run nothing.
            _record_missed(
                row, occurrence, slot, now, missed, provisional_next, worker, attempts, receipts
            )
            return

    if slot > now:
        # A slot field (triggered_at, retry_scheduled_for, buffered_for, run_at) set to a
        # future instant behind save(): the row is due (next_run_at decides), and a slot is
        # never after the instant it is claimed at, so lateness is never negative.
        slot = now
    attempt = new_attempt(
        row, occurrence, attempt_no, slot, now, now + lease, worker, missed, origin
    )
    token = attempt.lease_token
    attempts.append(attempt)
    row.occurrence, row.attempt = occurrence, attempt_no
    row.retry_scheduled_for = row.triggered_at = row.buffered_for = None
    row.missed_count += missed
    row.last_run_at = now

    if row.callback not in registry:
        # The code that should run is gone: receipt it, pause the schedule with a reason,
        # and let a later registration recover it (sync_declared).
        mark_degraded(row, f"callback {row.callback!r} is not registered", DegradedKind.CALLBACK)
        row.next_run_at = None
        # The occurrence awaits its run: recover_degraded() makes it due once the callback
        # is registered again (the retry branch above then runs it, attempt + 1).
        row.retry_scheduled_for = slot
        receipts.append(
            Receipt(
                attempt_id=attempt.id,
                schedule_id=row.id,
                occurrence=occurrence,
                status=ReceiptStatus.DEGRADED,
                finished_at=now,
                error_type="NotRegistered",
                error_message=row.degraded_reason,
                failure_count_after=row.failure_count,
                next_run_at=None,
            ).model()
        )
        logger.warning(
            "schedule %s degraded: %s",
            row.name,
            row.degraded_reason,
            extra={"schedule": row.name, "occurrence": occurrence},
        )
        return

    row.lease_token, row.lease_expires_at = token, attempt.lease_expires_at
    row.next_run_at = provisional_next
    claims.append(claim_of(row, attempt))
