"""The rules of ``overlap_policy="allow"`` (issue #28 item 4): up to ``max_parallel``
occurrences of one schedule run at once, each with its own lease and attempt. Pure: the
functions decide on rows and counts already read; :mod:`.parallel` reads and writes.

* **Claim** (:func:`admit_parallel`): a due ``allow`` row is claimed while fewer than its
  limit (:func:`parallel_limit`) of its occurrences hold a live lease; at the limit it is
  held back, unleased and due (never lost: it runs, or its slots are counted by the
  misfire policy, once one of them finishes), and the claim fills its place with other
  rows. Its claim moves the grid on at once, as any claim does; the lease is then moved
  off the schedule row onto an :class:`~..models.OccurrenceLease` (:func:`detach_leases`),
  so the row stays claimable while the occurrence runs.
* **Completion** (:func:`finish_parallel`): the receipt of the occurrence, in its own
  words (``skipped`` stays ``skipped``); the grid is left as the claims moved it. A success
  ends the failure streak (and its alert) and is the schedule's previous run; a skip keeps
  both; a failure counts a failed occurrence (``pause_after_failures``
  may pause the schedule; a terminal failure fails it) and is **not retried**: later
  slots already run beside it, and an occurrence's retry would need a place of its own
  (``Schedule.clean()`` refuses ``max_attempts`` above 1 with ``allow``). A lease that
  lapsed first is receipted ``lease_expired`` and counted the same way. A run handed back
  unrun (``released``: a worker stopping) or whose callback vanished (``degraded``, the
  schedule paused as degraded) has its slot counted in ``missed_count``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from ..limits import MAX_PARALLEL_MAX
from ..models import (
    SUCCESS_STATUSES,
    DegradedKind,
    Kind,
    OccurrenceLease,
    OverlapPolicy,
    ReceiptStatus,
    Schedule,
    Status,
)
from .alert_rules import note_failing, recover
from .machine import complete_if_no_slot, fail_schedule, mark_degraded, pause_after_failures
from .previous_rules import note_success
from .records import Receipt, build_receipt
from .transitions import implements
from .values import Claim, Failure, Outcome, OutcomeStatus

#: The origins a parallel occurrence can have: the live grid's slots and triggers (a
#: backfill slot or a re-run holds the row's own lease, as on any schedule).
PARALLEL_ORIGINS = frozenset({"scheduled", "triggered", "deferred"})


def parallel_limit(row: Schedule) -> int | None:
    """How many occurrences of ``row`` may run at once: its ``max_parallel`` (read clamped
    to ``1..MAX_PARALLEL_MAX``: a value written behind ``save()``) for ``overlap_policy``
    allow; None for every other policy (one at a time, by the row's own lease)."""
    if row.overlap_policy != OverlapPolicy.ALLOW:
        return None
    value = row.max_parallel
    if not isinstance(value, int) or isinstance(value, bool):
        return 1
    return max(1, min(value, MAX_PARALLEL_MAX))


@implements("claim.parallel_held")
def admit_parallel(
    rows: Sequence[Schedule], running: Mapping[Any, int]
) -> tuple[list[Schedule], list[Schedule]]:
    """``(admitted, held)``: the rows of ``rows`` a claim may take, in their order, and the
    ``allow`` rows it holds back because ``running[row.pk]`` (their live occurrence
    leases) reached their limit (:func:`parallel_limit`). A held row is left unleased and
    due."""
    admitted: list[Schedule] = []
    held: list[Schedule] = []
    for row in rows:
        limit = parallel_limit(row)
        if limit is not None and running.get(row.pk, 0) >= limit:
            held.append(row)
        else:
            admitted.append(row)
    return admitted, held


@implements("claim.parallel")
def detach_leases(rows: Iterable[Schedule], claims: Sequence[Claim]) -> list[OccurrenceLease]:
    """The occurrence leases of a claim's ``allow`` rows: for each row of ``rows`` that
    ``claims`` leased for an occurrence of its live grid or a trigger
    (:data:`PARALLEL_ORIGINS`), an unsaved :class:`~..models.OccurrenceLease` with the
    claim's token, expiry and occurrence, and the row's own lease columns cleared (it stays
    claimable while the occurrence runs); the claim of its ``max_runs``-th occurrence
    leaves it no next slot (no further claim; it completes when one of its runs ends). A
    backfill slot or a re-run keeps the row's lease, as on any schedule."""
    by_token = {c.lease_token: c for c in claims}
    leases: list[OccurrenceLease] = []
    for row in rows:
        claim = by_token.get(row.lease_token) if row.lease_token is not None else None
        if claim is None or parallel_limit(row) is None or claim.origin not in PARALLEL_ORIGINS:
            continue
        leases.append(
            OccurrenceLease(
                schedule_id=row.pk,
                lease_token=claim.lease_token,
                lease_expires_at=claim.lease_expires_at,
                occurrence=claim.occurrence,
                claimed_at=claim.claimed_at,
            )
        )
        row.lease_token = row.lease_expires_at = None
        if row.max_runs is not None and row.occurrence >= row.max_runs:
            row.next_run_at = None  # its last occurrence: completed when one of them ends
    return leases


def lease_lapsed(expires_at: datetime | None, now: datetime) -> bool:
    """Whether an occurrence lease expiring at ``expires_at`` had lapsed at ``now`` (an
    expiry no datetime holds, None, counts as lapsed)."""
    return expires_at is None or expires_at <= now


@implements(
    "outcome.parallel_succeeded",
    "outcome.parallel_failed",
    "outcome.parallel_unrun",
    "outcome.lease_expired",
)
def finish_parallel(
    row: Schedule, ran: Outcome | Failure, now: datetime, lapsed: bool = False
) -> Receipt:
    """The receipt of one ``allow`` occurrence's end on the locked ``row`` (see the module):
    ``ran`` is the worker's :class:`~.values.Outcome`, or the :class:`~.values.Failure` of a
    lease recovery; ``lapsed``: its lease had expired when the outcome came (fenced:
    ``lease_expired``). The grid is not moved; a schedule whose grid has no slot left (its
    last claim planned none) completes."""
    if isinstance(ran, Outcome) and lapsed:
        ran = Failure.of(
            ran.claim,
            ReceiptStatus.LEASE_EXPIRED,
            error_type="LeaseExpired",
            error_message=f"the run finished ({ran.status}) after its lease expired",
            started_at=ran.started_at,
            traceback=ran.traceback,
        )
    if isinstance(ran, Failure):
        return _failed(row, ran, ran.status, ran.occurrence, now)
    claim, status = ran.claim, ran.status
    if status == OutcomeStatus.FAILED:
        return _failed(row, ran, ReceiptStatus.FAILED, claim.occurrence, now, ran.terminal)
    if status in (OutcomeStatus.RELEASED, OutcomeStatus.DEGRADED):
        return _unrun(row, ran, now)
    if status in SUCCESS_STATUSES:  # a skip keeps the failure streak, as on any schedule
        row.failure_count = row.failed_occurrences = 0
        if row.open_alerts:
            recover(row, claim.occurrence)
    _complete_if_done(row)
    receipt = build_receipt(claim, ReceiptStatus(status), now, row=row, ran=ran)
    note_success(row, receipt, claim.scheduled_for)
    return receipt


@implements("outcome.parallel_failed", "outcome.lease_expired")
def _failed(
    row: Schedule,
    ran: Outcome | Failure,
    status: str,
    occurrence: int,
    now: datetime,
    terminal: bool = False,
) -> Receipt:
    """A failed (or lapsed) occurrence: counted, never retried (see the module)."""
    row.failure_count += 1
    row.failed_occurrences += 1
    note_failing(row, occurrence)
    if terminal or (isinstance(ran, Failure) and ran.terminal):
        fail_schedule(row)
        row.next_run_at = None
    elif row.kind == Kind.ONCE and row.status == Status.ACTIVE:
        fail_schedule(row)
        row.next_run_at = None
    else:
        limit = row.pause_after_failures
        if limit and row.failed_occurrences >= limit and row.status == Status.ACTIVE:
            pause_after_failures(row)
            row.next_run_at = None
            row.pause_reason = (
                f"paused after {row.failed_occurrences} consecutive failed occurrences"
            )
        else:
            _complete_if_done(row)
    source = ran.claim if isinstance(ran, Outcome) else ran
    return build_receipt(source, status, now, row=row, ran=ran)


@implements("outcome.parallel_unrun")
def _unrun(row: Schedule, ran: Outcome, now: datetime) -> Receipt:
    """A claim handed back unrun, or whose callback vanished: its slot is counted missed
    (later slots already run beside it); a vanished callback pauses the schedule as
    degraded, as the claim does."""
    row.missed_count += 1
    note = "its slot is counted missed (overlap_policy allow: later slots run beside it)"
    if ran.status == OutcomeStatus.DEGRADED:
        mark_degraded(row, ran.error_message[:500], DegradedKind.CALLBACK)
        status = ReceiptStatus.DEGRADED
    else:
        status = ReceiptStatus.RELEASED
        _complete_if_done(row)  # the grid's last slot counted: nothing is left to run
    return build_receipt(ran.claim, status, now, row=row, ran=ran, note=note)


@implements("outcome.parallel_succeeded", "outcome.parallel_failed", "outcome.parallel_unrun")
def _complete_if_done(row: Schedule) -> None:
    """An active row whose grid planned no slot more (``max_runs`` reached, its end
    passed, a ``once`` run) completes with this occurrence; runs still out finish with
    their own receipts."""
    if row.status == Status.ACTIVE and row.next_run_at is None and row.triggered_at is None:
        complete_if_no_slot(row)
