"""The late outcomes of a completion batch whose lease token no longer owns its row (the
lease was recovered, or the row deleted, while the run ran): receipted ``lease_lost`` unless
the recovery receipted the attempt already, dropped with a log line when retention pruned
the attempt (:func:`orphan_receipts`). The outcome of a row the completion cannot read at
all (:func:`fence_unreadable`) is fenced the same way when the row's token, read alone, is
not the outcome's, else receipted with its own status and the row quarantined."""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction

from ..db.batch import ROW_PROBLEMS, insert_rows
from ..db.clock import resolve_now
from ..db.locks import lock_for_write, locked
from ..models import ReceiptStatus, RunAttempt, RunReceipt, Schedule
from .outcomes import fenced_result
from .quarantine import quarantine_unreadable
from .records import Receipt, build_receipt
from .transitions import implements
from .values import CompletionReport, Outcome

logger = logging.getLogger(__name__)


@implements("outcome.lease_lost")
def orphan_receipts(
    orphans: list[Outcome], now: datetime, using: str, report: CompletionReport
) -> list[Receipt]:
    """Receipts of outcomes whose lease token no longer owns its row: ``lease_lost``, unless
    the recovery already receipted the attempt. An attempt that retention pruned meanwhile
    (a worker stalled past its lease, then ``prune_runs``) has nothing left to receipt: its
    outcome is dropped with a log line (``report.dropped``)."""
    known = dict(
        RunAttempt.objects.using(using)
        .filter(id__in=[o.claim.attempt_id for o in orphans])
        .values_list("id", "receipt__id")
    )
    receipts = []
    for outcome in orphans:
        claim = outcome.claim
        if claim.attempt_id not in known:
            report.dropped.append(outcome)
            logger.warning(
                "dropped the late outcome (%s) of %s occurrence %s attempt %s: its attempt "
                "was pruned by retention",
                outcome.status,
                claim.schedule_name,
                claim.occurrence,
                claim.attempt,
                extra={"schedule": claim.schedule_name, "occurrence": claim.occurrence},
            )
            continue
        report.fenced.append(outcome)
        if known[claim.attempt_id] is not None:
            continue
        receipts.append(
            build_receipt(
                claim,
                ReceiptStatus.LEASE_LOST,
                now,
                schedule_id=claim.schedule_id,
                result=fenced_result(outcome),
                error_type="LeaseLost",
                error_message=f"the lease was lost before the run reported {outcome.status}",
            )
        )
    return receipts


@implements("outcome.lease_lost", "outcome.unappliable")
def fence_unreadable(
    outcome: Outcome, exc: BaseException, now: datetime | None, using: str
) -> CompletionReport | None:
    """The outcome of a row the completion cannot read (``exc``: a value no conversion
    takes, written behind ``save()``, such as PostgreSQL's ``-infinity``). The row's
    lease token, read alone, decides: not the outcome's, the outcome is fenced as any
    late outcome (:func:`orphan_receipts`: ``lease_lost``), the row left to the lease
    recovery (which contains it); the outcome's, the row is paused as degraded and the
    outcome receipted with its own status, the pause noted
    (:func:`.quarantine.quarantine_unreadable`). Deferred when the row is locked; None
    when the token cannot be read either, or the receipt cannot be written (the outcome
    is then dropped: its lease expires and the recovery receipts it)."""
    report = CompletionReport()
    try:
        with transaction.atomic(using=using):
            lock_for_write(using)
            qs = Schedule.objects.using(using).filter(pk=outcome.claim.schedule_id)
            if not locked(qs.only("pk"), using, skip_locked=True):
                report.deferred.append(outcome)  # or deleted: the batch fenced it then
                return report
            token = qs.values_list("lease_token", flat=True).first()
            at = resolve_now(now, using)
            if token == outcome.claim.lease_token:
                receipts = [quarantine_unreadable(qs, outcome, exc, at, using)]
            else:
                receipts = orphan_receipts([outcome], at, using, report)
            report.receipts = [r.model() for r in receipts]
            insert_rows(RunReceipt, report.receipts, using)
    except ROW_PROBLEMS:
        return None
    return report
