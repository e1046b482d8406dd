"""``overlap_policy="allow"`` inside the claim, completion and lease transactions (issue #28
item 4): the reads and writes around the pure rules of :mod:`.parallel_rules`.

* :class:`ParallelAdmission`: in a claim, counts the live occurrence leases of the batch's
  ``allow`` rows (one statement, none without such a row) and holds back the rows at their
  limit; :meth:`ParallelAdmission.write` marks them ``parallel_full_until`` (the earliest
  expiry of their leases) so later claims and an idle worker's wake-up skip them until
  then, or until one of their occurrences ends.
* :func:`write_leases`: the claim's occurrence leases inserted (:func:`.parallel_rules.detach_leases`).
* :func:`leases_of`, :func:`end_leases`: a completion's occurrence leases read and deleted.
* :func:`renew_parallel`, :func:`expire_parallel`: the worker's renewals, and the lease
  recovery of a worker that died or hung.

The discipline is the one of a row's own lease: every write of an occurrence lease happens
in a transaction that holds its schedule's row lock (a claim and a completion lock the row
first; a recovery locks the expired leases, then their rows, skipping locked ones), except
a renewal, which extends only leases still live (a recovery takes only expired ones). A
renewal's "live" is judged by the clock it read at its start, so a claim that counts a
lapsed lease out also ends it (``COUNTED_OUT``): a late renewal cannot revive it.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import Count, Min

from ..db.batch import insert_rows, update_rows
from ..db.locks import locked
from ..models import OccurrenceLease, ReceiptStatus, RunAttempt, RunReceipt, Schedule
from .alerts import write_alerts
from .bounds import UNEVALUABLE_PREFIX, describe_problem
from .columns import FINISH_FIELDS
from .enqueues import run_enqueue
from .groups import release_groups
from .machine import apply_changes, changes_of, pause_degraded
from .parallel_rules import (
    admit_parallel,
    detach_leases,
    finish_parallel,
    lease_lapsed,
    parallel_limit,
)
from .records import PAUSE_NOTE, Receipt, build_receipt
from .transitions import implements
from .values import Claim, CompletionReport, Failure, Outcome

logger = logging.getLogger(__name__)

#: The expiry a claim gives an occurrence lease it counted out as lapsed
#: (:meth:`ParallelAdmission.admit`): before any instant a renewal's clock can read, so no
#: renewal extends it, and expired for the recovery.
COUNTED_OUT = datetime(1970, 1, 1, tzinfo=UTC)


class ParallelAdmission:
    """The ``allow`` rows of one claim transaction (see the module). No statement for a
    batch without one."""

    def __init__(self, using: str) -> None:
        self.using = using
        #: The rows held back at their limit: their ``parallel_full_until`` is written.
        self.held: list[Schedule] = []
        self.until: dict[Any, datetime] = {}
        #: The ``allow`` rows admitted: their occurrences' leases move off the rows.
        self.admitted: set[Any] = set()

    def admit(self, rows: list[Schedule], now: datetime) -> list[Schedule]:
        """The rows of ``rows`` that may start at ``now``, in their order
        (:func:`.parallel_rules.admit_parallel`); the others are held back, left unleased
        and due."""
        ids = [row.pk for row in rows if parallel_limit(row) is not None]
        if not ids:
            return rows
        leases = OccurrenceLease.objects.using(self.using).filter(schedule_id__in=ids)
        # A lease that lapsed is counted out here, and ended: its expiry moves to
        # COUNTED_OUT, so that no renewal revives it - one whose clock was read before the
        # lapse and whose UPDATE comes after this claim would otherwise extend it, and its
        # run would go on beside the one admitted in its place. Its run's completion is then
        # fenced and the recovery receipts it (at once: the wake-up reads its expiry). A
        # lapsed lease another transaction holds (a renewal in flight) is not counted out:
        # it takes its place.
        lapsed = list(
            locked(leases.expired(now), self.using, skip_locked=True).values_list("pk", flat=True)
        )
        if lapsed:
            OccurrenceLease.objects.using(self.using).filter(pk__in=lapsed).update(
                lease_expires_at=COUNTED_OUT
            )
        taken = (
            leases.exclude(pk__in=lapsed)
            .values("schedule_id")
            .annotate(n=Count("pk"), first=Min("lease_expires_at"))
        )
        found = {r["schedule_id"]: r for r in taken}
        admitted, held = admit_parallel(rows, {k: v["n"] for k, v in found.items()})
        kept = {row.pk for row in held}
        self.admitted.update(pk for pk in ids if pk not in kept)
        self.held += held
        self.until.update({row.pk: found[row.pk]["first"] for row in held})
        return admitted

    def detach(self, rows: list[Schedule], claims: Sequence[Claim]) -> list[OccurrenceLease]:
        """The occurrence leases of the ``allow`` rows this admission admitted, moved off
        the rows (:func:`.parallel_rules.detach_leases`); none (and no work) without one."""
        if not self.admitted:
            return []
        return detach_leases([row for row in rows if row.pk in self.admitted], claims)

    def write(self) -> None:
        """Mark the rows held back ``parallel_full_until`` the earliest expiry of their live
        occurrence leases. One statement per row held; none without."""
        for row in self.held:
            Schedule.objects.using(self.using).filter(pk=row.pk).update(
                parallel_full_until=self.until[row.pk]
            )


def write_leases(leases: Sequence[OccurrenceLease], using: str) -> None:
    """Insert a claim's occurrence leases (no statement for none)."""
    if leases:
        OccurrenceLease.objects.using(using).bulk_create(list(leases))


def leases_of(tokens: Iterable[uuid.UUID], using: str) -> dict[uuid.UUID, OccurrenceLease]:
    """The occurrence leases named by ``tokens``, by token (one statement; none for no
    token). The caller holds their schedules' row locks."""
    tokens = list(tokens)
    if not tokens:
        return {}
    found = OccurrenceLease.objects.using(using).filter(lease_token__in=tokens)
    return {lease.lease_token: lease for lease in found}


def end_leases(leases: Iterable[OccurrenceLease], using: str) -> None:
    """Delete the occurrence leases ``leases`` (their runs ended) and clear
    ``parallel_full_until`` on their schedules: a place is free. Two statements; none for
    no lease."""
    leases = list(leases)
    if not leases:
        return
    OccurrenceLease.objects.using(using).filter(pk__in=[x.pk for x in leases]).delete()
    Schedule.objects.using(using).filter(
        pk__in={x.schedule_id for x in leases}, parallel_full_until__isnull=False
    ).update(parallel_full_until=None)


@implements("outcome.unappliable")
def finish_contained(
    row: Schedule, ran: Outcome | Failure, now: datetime, *, lapsed: bool = False
) -> Receipt:
    """:func:`.parallel_rules.finish_parallel` on the locked ``row`` with the row's bad
    value contained: a row the rule cannot move on (a counter that is no number, written
    behind ``save()``) is paused as degraded with the reason and the occurrence still
    receipted, so the rest of the batch commits. Never raises for the row's values."""
    try:  # on a copy of the row: a rule that raises leaves it as it was
        receipt, changes = changes_of(row, finish_parallel, ran, now, lapsed)
    except Exception as exc:  # noqa: BLE001 - the row's own bad value: pause that row only
        reason = f"{UNEVALUABLE_PREFIX}{describe_problem(exc)}"
        pause_degraded(row, reason)
        status = ran.status if ran.status in ReceiptStatus.values else "failed"
        source = ran.claim if isinstance(ran, Outcome) else ran
        note = f"{PAUSE_NOTE}{reason}"
        return build_receipt(source, status, now, row=row, ran=ran, note=note)
    apply_changes(row, changes)
    return receipt


@implements("recovery.renew")
def renew_parallel(
    tokens: Iterable[uuid.UUID], now: datetime, lease: timedelta, using: str
) -> set[uuid.UUID]:
    """Inside a renewal: extend the live occurrence leases named by ``tokens`` to ``now +
    lease`` and return the tokens still owned. No statement for no token."""
    tokens = list(tokens)
    if not tokens:
        return set()
    live = OccurrenceLease.objects.using(using).live(now).filter(lease_token__in=tokens)
    owned = set(live.values_list("lease_token", flat=True))
    if owned:
        OccurrenceLease.objects.using(using).filter(lease_token__in=owned).live(now).update(
            lease_expires_at=now + lease
        )
    return owned


@implements("outcome.lease_expired")
def recover_parallel(*, limit: int, now: datetime, using: str) -> int:
    """Inside a lease recovery's transaction (:func:`.leases.expire_leases`): recover up
    to ``limit`` occurrence leases that expired at ``now`` (their worker died or hung):
    each occurrence is receipted ``lease_expired`` and counted as a failed occurrence
    (:func:`.parallel_rules.finish_parallel`: never retried), its lease deleted. A lease
    or a schedule locked by another transaction is left for the next pass. One statement
    when none expired. Returns the number recovered."""
    expired = OccurrenceLease.objects.using(using).expired(now).order_by("lease_expires_at")
    leases = list(locked(expired, using, skip_locked=True)[:limit])
    if not leases:
        return 0
    rows = {
        r.pk: r
        for r in locked(
            Schedule.objects.using(using).filter(pk__in={x.schedule_id for x in leases}),
            using,
            skip_locked=True,
        )
    }
    leases = [x for x in leases if x.schedule_id in rows]
    attempts = {
        a.lease_token: a
        for a in RunAttempt.objects.using(using).filter(
            lease_token__in=[x.lease_token for x in leases]
        )
    }
    receipts = []
    for lease in leases:
        attempt = attempts.get(lease.lease_token)
        if attempt is None:  # written behind save(): no run holds it
            continue
        failure = Failure.of(
            attempt,
            "lease_expired",
            error_type="LeaseExpired",
            error_message="the lease expired before the run reported an outcome",
        )
        receipts.append(finish_contained(rows[lease.schedule_id], failure, now).model())
        logger.warning(
            "lease expired: %s occurrence %s (overlap_policy allow)",
            rows[lease.schedule_id].name,
            lease.occurrence,
            extra={"schedule": rows[lease.schedule_id].name, "occurrence": lease.occurrence},
        )
    insert_rows(RunReceipt, receipts, using)
    touched = [rows[pk] for pk in {x.schedule_id for x in leases}]
    update_rows(touched, FINISH_FIELDS, using)
    end_leases(leases, using)
    release_groups(touched, using)
    write_alerts(touched, now, using)
    return len(receipts)  # a lease no attempt holds (behind save()) is only dropped


def off_row(outcomes: Sequence[Outcome], rows: dict[uuid.UUID, Schedule]) -> list[uuid.UUID]:
    """The lease tokens of ``outcomes`` that their schedule's row (read) does not hold."""
    return [
        o.claim.lease_token
        for o in outcomes
        if (row := rows.get(o.claim.schedule_id)) is not None
        and row.lease_token != o.claim.lease_token
    ]


@implements("outcome.parallel_succeeded", "outcome.parallel_failed")
def finish_occurrence(
    row: Schedule,
    outcome: Outcome,
    leases: dict[uuid.UUID, OccurrenceLease],
    now: datetime,
    using: str,
    report: CompletionReport,
) -> Receipt:
    """The receipt of an ``allow`` occurrence's ``outcome`` on the locked ``row``
    (:func:`.parallel.finish_contained`), its lease (in ``leases``) lapsed or not: fenced
    once lapsed, else its in-transaction enqueue run first."""
    lapsed = lease_lapsed(leases[outcome.claim.lease_token].lease_expires_at, now)
    if lapsed:
        report.fenced.append(outcome)
    elif outcome.enqueue is not None:
        started = time.monotonic()
        outcome = run_enqueue(outcome, using)
        report.enqueue_seconds[outcome.claim.attempt_id] = time.monotonic() - started
    return finish_contained(row, outcome, now, lapsed=lapsed)
