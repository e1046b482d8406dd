"""The late outcomes of a completion batch whose lease token no longer owns its row (the
lease was recovered, or the row deleted, while the run ran): receipted ``lease_lost`` unless
the recovery receipted the attempt already, dropped with a log line when retention pruned
the attempt (:func:`orphan_receipts`)."""

from __future__ import annotations

import logging
from datetime import datetime

from ..models import ReceiptStatus, RunAttempt
from .outcomes import fenced_result
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
