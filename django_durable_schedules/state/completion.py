"""Completion: :func:`complete` writes the one receipt of each attempt and moves its
schedule on, fenced by the exact lease token, in one transaction per batch.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from django.db import connections, transaction
from django.db.models import BooleanField, Q, QuerySet
from django.db.models.expressions import RawSQL
from django.db.models.functions import Now

from .. import timing
from ..db.batch import ROW_PROBLEMS, insert_rows, update_rows
from ..db.clock import resolve_now
from ..db.fast_orm import PLACEHOLDER, read_rows
from ..db.locks import lock_for_write, locked
from ..models import (
    AttemptOrigin,
    ReceiptStatus,
    RunReceipt,
    Schedule,
    ScheduleEvent,
    links_exist,
    load_exclusions,
    with_calendar_flag,
    with_links_flag,
)
from .alerts import write_alerts
from .backfill_claims import close_ended, settle_backfills
from .backfill_rules import backfill_receipt, complete_at_max_runs
from .bounds import UNEVALUABLE_PREFIX, bound_outcome, describe_problem
from .chains import note_chain_successes
from .columns import COMPLETE_FIELDS, FINISH_UNREAD
from .enqueues import run_enqueue
from .events import write_events
from .groups import release_groups, unstart_groups
from .machine import apply_changes, changes_of, pause_degraded
from .orphans import fence_unreadable, orphan_receipts
from .outcomes import apply_outcome, fail_attempt, fenced_result
from .parallel import end_leases, finish_occurrence, leases_of, off_row
from .previous_rules import note_success
from .records import PAUSE_NOTE, Receipt, build_receipt
from .rerun_rules import rerun_receipt
from .reruns import rerun_facts
from .transitions import implements
from .values import CompletionReport, Failure, Outcome, OutcomeStatus

logger = logging.getLogger(__name__)


def complete(
    outcomes: Sequence[Outcome], *, now: datetime | None = None, using: str = "default"
) -> CompletionReport:
    """Record the outcome of each claim (one receipt per attempt) and move its schedule on.

    Fencing: an outcome is applied only while its exact lease token still owns a live
    lease. A late outcome whose lease expired is receipted ``lease_expired`` (and the
    occurrence retried); one whose token was replaced is receipted ``lease_lost`` unless a
    receipt was already written by the recovery. Never raises for a fenced outcome.
    An outcome carrying ``enqueue`` (a task for a database queue) enqueues here, in this
    transaction and only once its lease is confirmed (see :class:`Outcome`).

    Totality: every outcome is bounded first (:func:`bound_outcome`); an outcome that
    cannot be applied to its row (its definition was made invalid behind ``save()`` while
    it ran) is receipted with its own status and the schedule paused as degraded; if the
    database still refuses the batch (``IntegrityError``, ``DataError``, a driver's
    ``ValueError``) or a row's value cannot be read at all (:data:`.db.batch.ROW_PROBLEMS`),
    each outcome is retried in its own transaction, then once without its
    result and message, and only then dropped (``report.dropped``, logged). An outcome
    whose attempt retention has pruned meanwhile is dropped with a log line. A row locked
    by another transaction (e.g. by the callback itself) is not waited for: its outcome
    is returned in ``report.deferred``. Database errors of the connection itself
    (``OperationalError``: the server is gone) propagate, and nothing is written.
    """
    if not outcomes:
        return CompletionReport()
    if now is not None:  # a caller's naive instant is its error, never an outcome's
        now = timing.require_aware(now, "now")
    bounded = [bound_outcome(o) for o in outcomes]
    try:
        report = _complete_batch(bounded, now, using)
    except ROW_PROBLEMS as exc:
        if connections[using].in_atomic_block:
            raise  # inside the caller's transaction nothing can be retried here
        logger.warning("a completion batch was refused (%s); retrying outcome by outcome", exc)
        report = CompletionReport()
        for outcome in bounded:
            report.extend(_complete_alone(outcome, now, using))
    for outcome in report.fenced:
        logger.warning(
            "fenced late outcome of %s occurrence %s attempt %s (%s)",
            outcome.claim.schedule_name,
            outcome.claim.occurrence,
            outcome.claim.attempt,
            outcome.status,
            extra={"schedule": outcome.claim.schedule_name, "occurrence": outcome.claim.occurrence},
        )
    if report.enqueue_seconds:
        # An in-transaction enqueue is said only once it has committed with its receipt.
        transaction.on_commit(lambda: _log_enqueued(report, bounded), using=using)
    return report


def _log_enqueued(report: CompletionReport, outcomes: Sequence[Outcome]) -> None:
    claims = {o.claim.attempt_id: o.claim for o in outcomes}
    for receipt in report.receipts:
        seconds = report.enqueue_seconds.get(receipt.attempt_id)
        claim = claims.get(receipt.attempt_id)
        if seconds is None or claim is None:
            continue
        logger.info(
            "run %s #%s.%s %s in %.3fs, committed with its receipt",
            claim.schedule_name,
            claim.occurrence,
            claim.attempt,
            receipt.status,
            seconds,
            extra={"schedule": claim.schedule_name, "occurrence": claim.occurrence},
        )


def _complete_alone(outcome: Outcome, now: datetime | None, using: str) -> CompletionReport:
    """:func:`complete` of one outcome after its batch was refused: as given, then stripped
    of its result and message; when its row cannot be read at all, fenced or receipted
    with the row quarantined (:func:`.orphans.fence_unreadable`); else dropped (logged;
    its lease expires and the occurrence is recovered)."""
    try:
        return _complete_batch([outcome], now, using)
    except ROW_PROBLEMS as exc:
        first = exc
    stripped = replace(
        outcome,
        result=None,
        error_message=f"the outcome could not be stored as reported ({type(first).__name__})",
        enqueue=None,
    )
    try:
        return _complete_batch([stripped], now, using)
    except ROW_PROBLEMS as exc:
        fenced = fence_unreadable(outcome, exc, now, using)
        if fenced is not None:
            return fenced
        logger.error(
            "dropped the outcome of %s occurrence %s attempt %s: the database refused it "
            "(%s; %s); its lease will expire and the occurrence be recovered",
            outcome.claim.schedule_name,
            outcome.claim.occurrence,
            outcome.claim.attempt,
            type(first).__name__,
            type(exc).__name__,
            extra={"schedule": outcome.claim.schedule_name, "occurrence": outcome.claim.occurrence},
        )
        return CompletionReport(dropped=[outcome])


def _complete_batch(
    outcomes: Sequence[Outcome], now: datetime | None, using: str
) -> CompletionReport:
    """One completion transaction over bounded outcomes (see :func:`complete`)."""
    report = CompletionReport()
    with transaction.atomic(using=using):
        lock_for_write(using)
        rows, busy, now = _lock_rows({o.claim.schedule_id for o in outcomes}, now, using)
        receipts: list[Receipt] = []
        touched: dict[uuid.UUID, Schedule] = {}
        orphans: list[Outcome] = []
        settled: list[tuple[Schedule, int, str]] = []
        events: list[ScheduleEvent] = []
        # overlap_policy allow: an occurrence's lease is a row of its own (no statement
        # when every outcome's token is its row's).
        parallel = leases_of(off_row(outcomes, rows), using)
        for outcome in outcomes:
            claim = outcome.claim
            if claim.schedule_id in busy:
                report.deferred.append(outcome)
                continue
            row = rows.get(claim.schedule_id)
            if row is not None and claim.lease_token in parallel:
                touched[row.id] = row
                receipts.append(finish_occurrence(row, outcome, parallel, now, using, report))
                continue
            if row is None or row.lease_token != claim.lease_token:
                orphans.append(outcome)
                continue
            touched[row.id] = row
            if claim.origin == AttemptOrigin.BACKFILL:
                receipts.append(_finish_aside(row, outcome, now, using, report))
                settled.append((row, claim.attempt, receipts[-1].status))
            elif claim.origin == AttemptOrigin.RERUN:
                receipts.append(_finish_aside(row, outcome, now, using, report))
            else:
                receipts.append(_finish(row, outcome, now, using, report, events))
        if orphans:
            receipts += orphan_receipts(orphans, now, using, report)
        models = [r.model() for r in receipts]
        insert_rows(RunReceipt, models, using)
        write_events(events, using)  # with their notifications and signals
        end_leases(parallel.values(), using)
        if touched:
            update_rows(list(touched.values()), COMPLETE_FIELDS, using)
            _free_groups(touched, outcomes, using)
            write_alerts(touched.values(), now, using)  # no statement unless one was noted
        if links_exist(list(rows.values())) is not False:  # the downstream schedules' slots
            note_chain_successes(outcomes, touched, models, using)
        settle_backfills(settled, now, using)
        close_ended(touched.values(), now, using)
        report.receipts = models
    return report


def _lock_rows(
    ids: set[uuid.UUID], now: datetime | None, using: str
) -> tuple[dict[uuid.UUID, Schedule], set[uuid.UUID], datetime]:
    """A completion's rows ``ids`` locked (:func:`_read_rows`, their exclusions loaded),
    the ones another transaction holds (``busy``: skipped as locked, not deleted) and the
    completion's instant (``now``, else the database clock read with the rows)."""
    read_clock = now is None and connections[using].vendor == "postgresql"
    rows = {r.id: r for r in _read_rows(ids, using, read_clock)}
    if read_clock and rows:
        # _db_now: the annotation of _read_rows (statement_timestamp()).
        now = next(iter(rows.values())).__dict__["_db_now"].astimezone(UTC)
    now = resolve_now(now, using)
    load_exclusions(list(rows.values()), using)  # the next slot skips excluded dates
    busy: set[uuid.UUID] = set()
    if len(rows) < len(ids):  # skipped as locked, or deleted: a plain read tells which
        busy = set(
            Schedule.objects.using(using)
            .filter(id__in=ids - set(rows))
            .values_list("id", flat=True)
        )
    return rows, busy, now


def _free_groups(
    touched: dict[uuid.UUID, Schedule], outcomes: Sequence[Outcome], using: str
) -> None:
    """The concurrency groups of the rows a completion ``touched``: each finished run's
    place freed (:func:`.groups.release_groups`), and the rate's place of each run handed
    back unrun (``released`` with a start deadline: :func:`.groups.unstart_groups`). No
    statement for rows of no group."""
    release_groups(touched.values(), using)
    unstart_groups(
        (
            (touched[o.claim.schedule_id].concurrency_group_id, o.claim.claimed_at)
            for o in outcomes
            if o.status == OutcomeStatus.RELEASED
            and o.claim.start_by is not None
            and o.claim.schedule_id in touched
        ),
        using,
    )


def _read_rows(ids: set[uuid.UUID], using: str, read_clock: bool) -> list[Schedule]:
    """The locking read of a completion: the schedules ``ids``, locked ``SKIP LOCKED``, each
    flagged with whether it links a calendar; with ``read_clock`` (PostgreSQL) each also
    carries the database clock (``_db_now``, ``statement_timestamp()``) read in the same
    statement, whose text is then the same for every batch (``id = ANY(%s)``): compiled once
    (:func:`.db.fast_orm.read_rows`)."""

    def build(id_filter: Any) -> QuerySet[Schedule]:
        qs = Schedule.objects.using(using).filter(id_filter).defer(*FINISH_UNREAD)
        qs = with_links_flag(with_calendar_flag(qs))
        if read_clock:  # the database clock in the same round trip
            qs = qs.annotate(_db_now=Now())
        return locked(qs, using, skip_locked=True)

    if not read_clock:
        return list(build(Q(id__in=ids)))
    column = f"{_SCHEDULE_TABLE}.{connections[using].ops.quote_name('id')}"
    any_id = RawSQL(f"{column} = ANY(%s)", (PLACEHOLDER,), output_field=BooleanField())
    return read_rows(Schedule, "complete", using, lambda: build(any_id), value=list(ids))


_SCHEDULE_TABLE = f'"{Schedule._meta.db_table}"'


@implements("outcome.lease_expired", "outcome.unappliable")
def _finish(
    row: Schedule,
    outcome: Outcome,
    now: datetime,
    using: str,
    report: CompletionReport,
    events: list[ScheduleEvent],
) -> Receipt:
    """The receipt of ``outcome`` on the locked ``row`` that its lease token still owns;
    moves the row on (or pauses it as degraded when its definition cannot be evaluated);
    the row's ``excluded`` events are appended to ``events``."""
    claim = outcome.claim
    row.lease_token = None
    lease_expires_at, row.lease_expires_at = row.lease_expires_at, None
    if lease_expires_at is None or lease_expires_at <= now:
        report.fenced.append(outcome)
        failure = Failure.of(
            claim,
            ReceiptStatus.LEASE_EXPIRED,
            error_type="LeaseExpired",
            error_message=f"the run finished ({outcome.status}) after its lease expired",
            retry_after=0.0,
            result=fenced_result(outcome),
            started_at=outcome.started_at,  # it ran: its duration is known
            traceback=outcome.traceback,
        )
        return fail_contained(row, failure, now, events)
    if outcome.enqueue is not None:
        started = time.monotonic()
        outcome = run_enqueue(outcome, using)
        report.enqueue_seconds[claim.attempt_id] = time.monotonic() - started
    made: list[ScheduleEvent] = []
    try:  # on a copy of the row: a rule that raises leaves it as it was
        receipt, changes = changes_of(row, apply_outcome, outcome, now, made)
    except Exception as exc:  # noqa: BLE001 - the row's own bad value: pause that row only
        reason = f"{UNEVALUABLE_PREFIX}{describe_problem(exc)}"
        pause_degraded(row, reason)
        status = outcome.status if outcome.status in ReceiptStatus.values else "failed"
        note = f"{PAUSE_NOTE}{reason}"
        receipt = build_receipt(claim, status, now, row=row, ran=outcome, note=note)
        note_success(row, receipt, claim.scheduled_for)  # a success all the same
        return receipt
    apply_changes(row, changes)
    events.extend(made)
    return receipt


@implements("outcome.lease_expired", "outcome.unappliable")
def fail_contained(
    row: Schedule, failure: Failure, now: datetime, events: list[ScheduleEvent]
) -> Receipt:
    """The receipt of ``failure`` on the locked ``row`` (already unleased), as
    :func:`.outcomes.fail_attempt` moves it on (retried, or given up and the next slot
    planned), with the row's bad value contained: when the row cannot be evaluated as it
    moves on (a calendar made invalid behind ``save()`` while the run was out), the
    attempt is still receipted with ``failure.status`` (the pause noted in its message)
    and the row alone is paused as degraded with the reason, as the claim quarantines a
    row, so the rest of its batch (a completion, a lease recovery) commits. The
    ``excluded`` events of a row left without a slot are appended to ``events``. Never
    raises for the row's values."""
    made: list[ScheduleEvent] = []
    try:  # on a copy of the row: a rule that raises leaves it as it was
        receipt, changes = changes_of(row, fail_attempt, failure, now, made)
    except Exception as exc:  # noqa: BLE001 - the row's own bad value: pause that row only
        reason = f"{UNEVALUABLE_PREFIX}{describe_problem(exc)}"
        pause_degraded(row, reason)
        note = f"{PAUSE_NOTE}{reason}"
        return build_receipt(failure, failure.status, now, row=row, ran=failure, note=note)
    apply_changes(row, changes)
    events.extend(made)
    return receipt


@implements("outcome.backfill", "outcome.rerun")
def _finish_aside(
    row: Schedule, outcome: Outcome, now: datetime, using: str, report: CompletionReport
) -> Receipt:
    """The receipt of the ``outcome`` of a backfill slot or a re-run on the locked ``row``
    its lease token still owns: its own status (``lease_expired`` once the lease has
    lapsed: fenced). The lease is cleared; the live grid is left as it is (see
    :mod:`.backfill_rules`, :mod:`.rerun_rules`)."""
    claim = outcome.claim
    row.lease_token = None
    lease_expires_at, row.lease_expires_at = row.lease_expires_at, None
    status = None
    if lease_expires_at is None or lease_expires_at <= now:
        report.fenced.append(outcome)
        status = ReceiptStatus.LEASE_EXPIRED
        outcome = replace(
            outcome,
            result=fenced_result(outcome),
            error_type="LeaseExpired",
            error_message=f"the run finished ({outcome.status}) after its lease expired",
        )
    elif outcome.enqueue is not None:
        started = time.monotonic()
        outcome = run_enqueue(outcome, using)
        report.enqueue_seconds[claim.attempt_id] = time.monotonic() - started
    if claim.origin == AttemptOrigin.RERUN:
        forced, nominal = rerun_facts(claim.schedule_id, claim.occurrence, using)
        return rerun_receipt(row, outcome, now, forced=forced, status=status, nominal=nominal)
    if status is None:
        complete_at_max_runs(row)
    return backfill_receipt(row, outcome, now, status=status)
