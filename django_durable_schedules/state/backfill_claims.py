"""The worker's side of a backfill, inside the transactions of :func:`.runs.claim_due`,
:func:`.completion.complete` and :func:`.leases.expire_leases` (the requests are in
:mod:`.backfills`): :func:`claim_backfills` claims the next slot of each open backfill whose
schedule is free, :func:`settle_backfills` moves a backfill on after its slot's attempt
ended, and :func:`close_ended` cancels the open backfill of a schedule a completion ended.
Every write here holds the row lock of the backfill's schedule.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import F

from ..db.locks import locked
from ..models import (
    DEFAULT_POOL,
    SUCCESS_STATUSES,
    Backfill,
    BackfillStatus,
    EventAction,
    RunAttempt,
    RunReceipt,
    Schedule,
    load_blackouts,
    with_blackout_flag,
)
from .backfill_rules import claim_backfill_slot, settle_backfill, stored_retry_problem
from .backfills import BACKFILL_FROM, backfill_summary, close_backfill
from .blackout_rules import blacked_out_now
from .bounds import describe_problem
from .chains import write_chain_slots
from .events import record_event
from .quarantine import quarantine_backfill
from .transitions import implements
from .values import Claim

#: The logger of .backfills, where these functions were before the split (same name, so
#: a logging configuration that names it still applies).
logger = logging.getLogger("django_durable_schedules.state.backfills")


@implements("claim.backfill", "claim.backfill_cancelled")
def claim_backfills(
    due_before: Any,
    limit: int,
    taken: Sequence[Schedule],
    now_of: Any,
    lease: timedelta,
    worker: str,
    attempts: list[RunAttempt],
    receipts: list[RunReceipt],
    claims: list[Claim],
    using: str,
    only: Any = None,
    pools: Sequence[str] = (DEFAULT_POOL,),
    admit: Any = None,
) -> list[Schedule]:
    """Inside the claim transaction: lock (``SKIP LOCKED``) up to ``limit`` schedules of
    ``pools`` free to run a backfill slot (``backfill_ready``; ``only``: that schedule
    alone), other than those the live claim just ``taken``, and claim the next slot of
    each one's open backfill at ``now_of()`` (the claim's instant). Returns the schedule
    rows to write; the backfill rows are written here. Finished backfills are completed
    (``backfill_done``). A backfill whose slot no rule can read is cancelled with the
    reason (:func:`.quarantine.quarantine_backfill`); none runs inside a blackout window
    or when ``admit(rows, now)`` holds it back (groups): it waits (``cascade``: _cascade)."""
    rows = _lock_ready(due_before, limit, taken, only, using, pools) if limit > 0 else []
    now = now_of() if rows else None
    rows = admit(rows, now) if rows and admit is not None else rows  # group: held ones wait
    if not rows or now is None:
        return []
    open_ = {b.schedule_id: b for b in Backfill.objects.using(using).open_of(rows)}
    written = []
    for row in rows:
        backfill = open_.get(row.pk)
        if backfill is None:  # closed since the locking read
            continue
        marks = len(attempts), len(receipts), len(claims)
        try:
            # A savepoint: a write of this backfill that fails (a value Django cannot
            # prepare marks the transaction for rollback) leaves the claim usable.
            with transaction.atomic(using=using):
                if blacked_out_now(row, now):
                    continue  # no run starts inside its blackout window: it waits
                problem = _retry_problem(row, backfill, using)
                if problem is not None:
                    reason = f"its next slot cannot be claimed: {problem}"
                    quarantine_backfill(row, backfill.pk, reason, now, using)
                    continue
                refused = claim_backfill_slot(
                    row, backfill, now, lease, worker, attempts, receipts, claims
                )
                _save_progress(row, backfill, now, using, refused)
                _cascade(row, backfill, claims[marks[2] :], now, using)
        except Exception as exc:  # noqa: BLE001 - any value of this backfill or its row
            del attempts[marks[0] :], receipts[marks[1] :], claims[marks[2] :]
            reason = f"its next slot cannot be claimed: {describe_problem(exc)}"
            quarantine_backfill(row, backfill.pk, reason, now, using)
            continue
        written.append(row)
    return written


def _cascade(row: Schedule, backfill: Backfill, made: list[Claim], now: Any, using: str) -> None:
    """A slot of a backfill with ``cascade`` just claimed (``made``: its claim, none when
    it was refused): its instant opened again on the schedules downstream of ``row``
    (:func:`.chains.write_chain_slots` with ``reopen_at``), so the chain below runs again."""
    if backfill.cascade and made:
        write_chain_slots([(row.pk, made[-1].scheduled_for)], using, reopen_at=now)


def _lock_ready(
    due_before: Any,
    limit: int,
    taken: Sequence[Schedule],
    only: Any,
    using: str,
    pools: Sequence[str],
) -> list[Schedule]:
    """Lock (``SKIP LOCKED``) up to ``limit`` schedules of ``pools`` free to run a
    backfill slot at ``due_before`` (``backfill_ready``), other than those ``taken``;
    ``only``: that schedule alone. Their blackout windows are attached.

    The schedule run least recently first (``last_run_at``, never run first; a backfill
    claim sets it), then primary key order: open backfills share the batches' reserve in
    turns, none waiting for the others to end."""
    qs = with_blackout_flag(
        Schedule.objects.using(using)
        .backfill_ready(due_before)
        .filter(Schedule.objects.group_room_q(due_before), pool__in=pools)
        .exclude(pk__in=[r.pk for r in taken])
        .order_by(F("last_run_at").asc(nulls_first=True), "pk")
    )
    if only is not None:
        qs = qs.filter(pk=only)
    rows = list(locked(qs, using, skip_locked=True)[:limit])
    load_blackouts(rows, using)  # the rows that link a blackout window: one query
    return rows


def _retry_problem(row: Schedule, backfill: Backfill, using: str) -> str | None:
    """:func:`.backfill_rules.stored_retry_problem` of ``backfill``, read from the run
    tables: one query, only when the backfill stored a slot to run again (a retry)."""
    if backfill.occurrence is None:
        return None
    last = (
        RunAttempt.objects.using(using)
        .filter(schedule_id=row.pk, occurrence=backfill.occurrence)
        .order_by("-attempt")
        .first()
    )
    succeeded = (
        last is not None
        and RunReceipt.objects.using(using)
        .filter(schedule_id=row.pk, occurrence=backfill.occurrence, status__in=SUCCESS_STATUSES)
        .exists()
    )
    return stored_retry_problem(backfill, last, succeeded)


@implements("outcome.backfill")
def settle_backfills(
    finished: Iterable[tuple[Schedule, int, str]], now: datetime, using: str
) -> None:
    """Inside a completion or lease-recovery transaction that holds the schedules' locks:
    move each open backfill on after its slot's attempt (number, receipt status) ended at
    ``now``; a backfill whose last slot ended is completed (event ``backfill_done``)."""
    finished = list(finished)
    if not finished:
        return
    open_ = {
        b.schedule_id: b
        for b in Backfill.objects.using(using)
        .open()
        .filter(schedule_id__in=[row.pk for row, _, _ in finished])
    }
    for row, attempt, status in finished:
        backfill = open_.get(row.pk)
        if backfill is None:
            continue  # cancelled while its slot ran
        settle_backfill(backfill, row, attempt, status, now)
        _save_progress(row, backfill, now, using)


def _save_progress(
    row: Schedule, backfill: Backfill, now: datetime, using: str, refused: str | None = None
) -> None:
    """Write the backfill's progress after a claim or an outcome of its slot; one that this
    completed records the event ``backfill_done`` (by the worker) on ``row``, one it
    cancelled (``refused``: why) the event ``backfill_cancel`` with that reason."""
    backfill.save(
        using=using,
        update_fields=["position", "occurrence", "attempt", "status", "finished_at"],
    )
    if refused is not None:
        logger.warning("backfill of %s cancelled: %s", row.name, refused)
        record_event(
            row,
            EventAction.BACKFILL_CANCEL,
            now=now,
            source="worker",
            changes={"backfill": str(backfill.pk), "status": backfill.status, "reason": refused},
            using=using,
        )
    elif backfill.status == BackfillStatus.COMPLETED:
        record_event(
            row,
            EventAction.BACKFILL_DONE,
            now=now,
            source="worker",
            changes=backfill_summary(backfill),
            using=using,
        )


@implements("outcome.backfill_ended")
def close_ended(rows: Iterable[Schedule], now: datetime, using: str) -> None:
    """Inside a completion transaction that holds the rows' locks: a schedule this
    completion ended (completed after its last slot, ``end_at`` or ``max_runs``, or
    failed) runs no more backfill slots, so its open backfill is cancelled (event
    ``backfill_cancel`` by the worker, with the reason). One read, only when a row ended."""
    ended = {row.pk: row for row in rows if row.status not in BACKFILL_FROM}
    if not ended:
        return
    for backfill in Backfill.objects.using(using).open().filter(schedule_id__in=list(ended)):
        row = ended[backfill.schedule_id]
        close_backfill(backfill, BackfillStatus.CANCELLED, now, using)
        record_event(
            row,
            EventAction.BACKFILL_CANCEL,
            now=now,
            source="worker",
            changes={**backfill_summary(backfill), "reason": f"the schedule is {row.status}"},
            using=using,
        )
