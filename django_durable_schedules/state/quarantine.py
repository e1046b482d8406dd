"""Quarantine: what a worker does with a row it cannot claim or recover.

A value written behind ``save()`` (``QuerySet.update()``, raw SQL) may be one that no rule
can read (SQLite text in an integer column, PostgreSQL ``-infinity`` in a lease expiry, a
backfill slot that overflows in UTC) or one the database refuses to go on from (a counter
that clashes with the attempts already written). The claim and the lease recovery
(:mod:`.runs`) meet such a row in a batch, retry the batch row by row, and hand the row
that still fails on its own to a function here, which contains it to that one schedule
or backfill with writes that read none of its values:

* :func:`quarantine_refused` - the due schedule is paused as degraded with the reason;
* :func:`repair_counters` - a counter that is not a count is replaced from the ledger (so
  the degraded attempt the claim writes for it can be numbered);
* :func:`quarantine_backfill` / :func:`quarantine_refused_backfill` - the backfill is
  cancelled, with the reason in its ``backfill_cancel`` event;
* :func:`quarantine_lease` - the expired lease is cleared, the schedule paused as degraded
  with the reason, its attempt receipted ``lease_expired`` (what is known of the run: its
  lease expired before it reported; the pause noted), its open backfill cancelled;
* :func:`quarantine_unreadable` - the same for the row of an outcome that the completion
  cannot read at all, its lease still the outcome's: the outcome is receipted with its
  own status, the pause noted.

Health counts such a schedule as degraded (``degraded_reason``); a valid edit and
``enable`` bring it back.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Case, F, QuerySet, Value, When

from ..db.batch import ROW_PROBLEMS
from ..db.clock import db_now
from ..db.locks import lock_for_write, locked
from ..models import (
    Backfill,
    BackfillStatus,
    DegradedKind,
    EventAction,
    ReceiptStatus,
    RunAttempt,
    RunReceipt,
    Schedule,
    Status,
)
from ..projection import bound_text
from .alerts import degraded_by_update
from .bounds import bad_counters, describe_problem, read_count
from .enqueues import run_enqueue
from .events import record_event
from .machine import RUNNABLE_STATUSES, degraded_columns
from .records import PAUSE_NOTE, Receipt, build_receipt
from .transitions import implements
from .values import Outcome

logger = logging.getLogger(__name__)

#: How the ``degraded_reason`` of a schedule whose expired lease could not be recovered
#: begins.
LEASE_PREFIX = "its expired lease could not be recovered: "
#: How the ``degraded_reason`` of a schedule whose completion could not read its row
#: begins.
UNREADABLE_PREFIX = "its completion could not read the row: "


@implements("claim.unevaluable")
def repair_counters(row: Schedule, using: str) -> list[str]:
    """Inside a transaction that holds ``row``'s lock: replace each of its counters that
    is not a count (:func:`.bounds.bad_counters`) by what the ledger says (``occurrence``:
    the highest occurrence of its attempts; ``attempt``: the highest attempt of that
    occurrence; the others 0), on ``row`` and in its column at once. Returns the fields
    repaired (usually none: then no query is made)."""
    bad = bad_counters(row)
    if not bad:
        return []
    attempts = RunAttempt.objects.using(using).filter(schedule_id=row.pk)
    if "occurrence" in bad:
        row.occurrence = (
            attempts.order_by("-occurrence").values_list("occurrence", flat=True).first() or 0
        )
    if "attempt" in bad:
        row.attempt = (
            attempts.filter(occurrence=row.occurrence)
            .order_by("-attempt")
            .values_list("attempt", flat=True)
            .first()
            or 0
        )
    values = {
        field: getattr(row, field) if field in ("occurrence", "attempt") else 0 for field in bad
    }
    for field, value in values.items():
        setattr(row, field, value)
    Schedule.objects.using(using).filter(pk=row.pk).update(**values)
    logger.warning(
        "schedule %s: %s not a count; taken from its attempts",
        row.name,
        ", ".join(bad),
        extra={"schedule": row.name},
    )
    return bad


@implements("claim.backfill_cancelled", "recovery.lease_unrecoverable")
def quarantine_backfill(
    row: Schedule, backfill_id: uuid.UUID, reason: str, now: datetime, using: str
) -> bool:
    """Inside a transaction that holds ``row``'s lock: cancel its open backfill
    ``backfill_id`` whose next slot cannot be claimed (``reason``), writing only its status
    and ``finished_at``; records the event ``backfill_cancel`` (by the worker) with the
    reason. Returns whether it was still open."""
    reason = bound_text(reason, 500)
    updated = (
        Backfill.objects.using(using)
        .filter(pk=backfill_id, status=BackfillStatus.ACTIVE)
        .update(status=BackfillStatus.CANCELLED, finished_at=now)
    )
    if not updated:
        return False
    logger.warning("backfill of %s cancelled: %s", row.name, reason, extra={"schedule": row.name})
    record_event(
        row,
        EventAction.BACKFILL_CANCEL,
        now=now,
        source="worker",
        changes={
            "backfill": str(backfill_id),
            "status": BackfillStatus.CANCELLED,
            "reason": reason,
        },
        using=using,
    )
    return True


@implements("claim.refused", "alert.degraded")
def quarantine_refused(pk: uuid.UUID, exc: BaseException, using: str) -> None:
    """Pause the due row ``pk`` whose claim the database refused (its attempt cannot be
    written, so no receipt can be either): the reason goes to ``degraded_reason``; its
    ``degraded`` alert opens (:func:`.alerts.degraded_by_update`)."""
    reason = f"the database refused its claim: {describe_problem(exc)}"[:500]
    with transaction.atomic(using=using):
        updated = (
            Schedule.objects.using(using)
            .filter(pk=pk, lease_token__isnull=True)
            .update(**degraded_columns(reason, DegradedKind.CLAIM))
        )
        if updated:
            name = Schedule.objects.using(using).filter(pk=pk).values_list("name", flat=True)
            row = Schedule(pk=pk, name=name.first() or "")
            degraded_by_update(row, reason, DegradedKind.CLAIM, None, using)
    if updated:
        logger.error("schedule %s paused: %s", pk, reason, extra={"schedule": str(pk)})


@implements("claim.backfill_cancelled")
def quarantine_refused_backfill(pk: uuid.UUID, exc: BaseException, using: str) -> None:
    """In its own transaction: cancel the open backfill of schedule ``pk`` whose slot
    claim the database refused on its own (its attempt cannot be written: a stored
    occurrence that clashes with the attempts, a counter beyond its column), so that it
    is not claimed again at every pass. A row locked by another worker is left alone."""
    reason = f"the database refused the claim of its next slot: {describe_problem(exc)}"
    with transaction.atomic(using=using):
        lock_for_write(using)
        rows = list(
            locked(
                Schedule.objects.using(using).filter(pk=pk).only("pk", "name"),
                using,
                skip_locked=True,
            )
        )
        backfill_id = (
            Backfill.objects.using(using)
            .open()
            .filter(schedule_id=pk)
            .values_list("pk", flat=True)
            .first()
        )
        if rows and backfill_id is not None:
            quarantine_backfill(rows[0], backfill_id, reason, db_now(using), using)


#: The receipt statuses of a displaced attempt whose occurrence still needs its retry:
#: none yet (the run is still out, or its worker died), or ``lease_lost`` (its worker
#: reported after the token was replaced).
DISPLACED = (None, ReceiptStatus.LEASE_LOST)


@implements("recovery.foreign_lease", "recovery.foreign_lease_idle")
def displaced_attempt(row: Schedule, using: str) -> tuple[RunAttempt, bool] | None:
    """The attempt whose lease a foreign token on ``row`` (one no attempt holds) replaced:
    the schedule's latest attempt, if it has no receipt or ended ``lease_lost``; with
    whether it is receipted already. None when the latest attempt is settled otherwise (the
    foreign token was written on an idle row). One query; called for foreign tokens only."""
    latest = (
        RunAttempt.objects.using(using)
        .filter(schedule_id=row.pk)
        .annotate(receipt_status=F("receipt__status"))
        .order_by("-claimed_at", "-occurrence", "-attempt")
        .first()
    )
    if latest is None or latest.receipt_status not in DISPLACED:
        return None
    return latest, latest.receipt_status is not None


@implements("recovery.lease_unrecoverable", "alert.degraded")
def quarantine_lease(pk: uuid.UUID, exc: BaseException, now: datetime, using: str) -> bool:
    """In its own transaction: the expired lease of schedule ``pk`` that could not be
    recovered on its own (``exc``: a value the engine cannot read, or the database refused
    the recovery) is cleared, and the schedule paused as degraded with the reason (one that was no longer
    active or paused keeps its status)
    (``degraded_reason`` begins with :data:`LEASE_PREFIX`); the attempt that held the
    lease, if any and not receipted yet, is receipted ``lease_expired`` at ``now``, as any
    recovered lease (the run may have run: its worker died or hung before it reported),
    the pause noted in its message, and is not retried (the schedule is paused); its open
    backfill is cancelled. Reads none of the row's values but its lease token and failure
    count, each guarded. Returns whether the row was quarantined (False: recovered or
    locked meanwhile)."""
    reason = bound_text(f"{LEASE_PREFIX}{describe_problem(exc)}", 500)
    with transaction.atomic(using=using):
        lock_for_write(using)
        qs = Schedule.objects.using(using).filter(pk=pk, lease_expires_at__isnull=False)
        found = list(locked(qs.only("pk", "name"), using, skip_locked=True))
        if not found:
            return False
        row = found[0]
        token = _guarded(lambda: qs.values_list("lease_token", flat=True).first(), using)
        failures = _guarded(lambda: qs.values_list("failure_count", flat=True).first(), using)
        _pause_leased(qs, row, reason, DegradedKind.LEASE, now, using)
        if isinstance(token, uuid.UUID):
            _receipt_expired(row, token, _count_or_zero(failures), reason, now, using)
    logger.error("schedule %s paused: %s", row.name, reason, extra={"schedule": row.name})
    return True


@implements("outcome.unappliable", "alert.degraded")
def quarantine_unreadable(
    qs: QuerySet[Schedule], outcome: Outcome, exc: BaseException, now: datetime, using: str
) -> Receipt:
    """Inside a transaction that holds the lock of the row ``qs`` selects, which the lease
    token of ``outcome`` still owns but which cannot be read at all (``exc``: a value no
    conversion reads, written behind ``save()`` while the run was out, such as
    PostgreSQL's ``-infinity``): the lease is cleared and the row paused as degraded
    with the reason (``degraded_reason`` begins with :data:`UNREADABLE_PREFIX`; a
    cancelled, completed or failed row keeps its status), its open backfill cancelled;
    returns the receipt of the outcome with its own status (an unknown status:
    ``failed``; an outcome to enqueue is enqueued first, as the completion does:
    :func:`.enqueues.run_enqueue`), the pause noted, for the caller to write. Reads none of the row's
    values but its failure count, guarded."""
    claim = outcome.claim
    reason = bound_text(f"{UNREADABLE_PREFIX}{describe_problem(exc)}", 500)
    failures = _guarded(lambda: qs.values_list("failure_count", flat=True).first(), using)
    row = Schedule(pk=claim.schedule_id, name=claim.schedule_name)
    _pause_leased(qs, row, reason, DegradedKind.DEFINITION, now, using)
    logger.error("schedule %s paused: %s", row.name, reason, extra={"schedule": row.name})
    outcome = run_enqueue(outcome, using)  # as the completion would: enqueued, or failed
    status = outcome.status if outcome.status in ReceiptStatus.values else "failed"
    return build_receipt(
        claim,
        status,
        now,
        schedule_id=claim.schedule_id,
        failure_count_after=_count_or_zero(failures),
        ran=outcome,
        note=f"{PAUSE_NOTE}{reason}",
    )


@implements("recovery.lease_unrecoverable", "outcome.unappliable", "alert.degraded")
def _pause_leased(
    qs: QuerySet[Schedule], row: Schedule, reason: str, kind: str, now: datetime, using: str
) -> None:
    """With ``row``'s lock held: clear the lease of the row ``qs`` selects and pause it as
    degraded (``reason``, ``kind``) if it could run - a cancelled, completed or failed one
    keeps its status (a cancel is never undone by a worker) - with nothing pending; open
    its ``degraded`` alert and cancel its open backfill. Writes by ``update()`` only."""
    qs.update(
        lease_token=None,
        lease_expires_at=None,
        **degraded_columns(
            reason,
            kind,
            status=Case(
                When(status__in=list(RUNNABLE_STATUSES), then=Value(Status.PAUSED)),
                default=F("status"),
            ),
        ),
    )
    degraded_by_update(row, reason, kind, now, using)
    backfill_id = (
        Backfill.objects.using(using)
        .open()
        .filter(schedule_id=row.pk)
        .values_list("pk", flat=True)
        .first()
    )
    if backfill_id is not None:
        quarantine_backfill(row, backfill_id, f"{PAUSE_NOTE}{reason}", now, using)


def _guarded(read: Any, using: str) -> Any:
    """``read()`` in a savepoint; None when the value cannot be read."""
    try:
        with transaction.atomic(using=using):
            return read()
    except ROW_PROBLEMS:
        return None


def _count_or_zero(value: Any) -> int:
    try:
        return read_count(value, "failure_count")
    except ValueError:
        return 0


def _receipt_expired(
    row: Schedule,
    token: uuid.UUID,
    failures: int,
    reason: str,
    now: datetime,
    using: str,
) -> None:
    """The ``lease_expired`` receipt of the attempt that held ``token`` (or that a foreign
    ``token`` displaced: :func:`displaced_attempt`), unless it has one: the receipt is the
    truth about the run (its lease expired before it reported an outcome, so it may have
    run), the quarantine of its row (``reason``) noted in its message; ``failures`` is the
    row's failure count as stored (the quarantine writes none of its counters)."""
    attempt = (
        RunAttempt.objects.using(using)
        .filter(lease_token=token, schedule_id=row.pk)
        .only("pk", "occurrence")
        .first()
    )
    if attempt is None:
        found = displaced_attempt(row, using)
        attempt = found[0] if found is not None and not found[1] else None
    if attempt is None or RunReceipt.objects.using(using).filter(attempt_id=attempt.pk).exists():
        return
    receipt = build_receipt(
        attempt,
        ReceiptStatus.LEASE_EXPIRED,
        now,
        schedule_id=row.pk,
        failure_count_after=failures,
        error_type="LeaseExpired",
        error_message="the lease expired before the run reported an outcome",
        note=f"{PAUSE_NOTE}{reason}",
    )
    RunReceipt.objects.using(using).bulk_create([receipt.model()])
