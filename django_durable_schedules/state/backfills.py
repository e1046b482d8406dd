"""Backfill: run every slot of a past range of a schedule, in order, one at a time, each as
its own occurrence (issue #15 item 3).

* :func:`plan_backfill` lists the slots a request would run (the dry run, the admin's
  confirmation page); :func:`request_backfill` stores it (event ``backfill``);
  :func:`cancel_backfill` stops it (event ``backfill_cancel``).
* The worker's claim (:func:`.runs.claim_due`) runs the next slot of an open backfill when
  its schedule is free: not running, no live slot due (the live grid keeps priority), no
  retry, trigger or buffered slot waiting. One run of a schedule at a time holds because
  a backfill slot is claimed under the schedule's own lease.
* Its outcome (:func:`.completion.complete`, :func:`.runs.expire_leases`) is receipted
  and moves the backfill on (:func:`.backfill_rules.settle_backfill`), never the grid.

Every write to a backfill happens under the row lock of its schedule, which is what keeps
at most one open backfill per schedule on every backend.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import transaction

from .. import timing
from ..db.clock import resolve_now
from ..db.locks import get_locked, locked
from ..exceptions import StateConflict
from ..models import (
    DEFAULT_POOL,
    SUCCESS_STATUSES,
    Backfill,
    BackfillStatus,
    EventAction,
    RunAttempt,
    RunReceipt,
    Schedule,
    Status,
    load_blackouts,
    with_blackout_flag,
)
from .backfill_rules import (
    backfill_slot_count,
    backfill_slots_in,
    check_runs_left,
    claim_backfill_slot,
    rule_start_note,
    settle_backfill,
    stored_retry_problem,
)
from .blackout_rules import blacked_out_now
from .bounds import describe_problem
from .events import record_event
from .quarantine import quarantine_backfill
from .transitions import implements
from .values import Claim

logger = logging.getLogger(__name__)

#: Schedule statuses a backfill may be requested from (and its slots run in).
BACKFILL_FROM = frozenset({Status.ACTIVE, Status.PAUSED})


@dataclass(frozen=True)
class BackfillPlan:
    """The slots a backfill of ``[start, end)`` would run (aware UTC, in order), and how
    many slots of the range it leaves out because they already succeeded."""

    start: datetime
    end: datetime
    slots: list[datetime]
    skipped_succeeded: int


def _instant(value: Any, field: str) -> datetime:
    try:
        return timing.truncate_to_second(value, field)
    except timing.InvalidSchedule as exc:
        raise ValidationError({field: [exc.message]}) from None


def plan_backfill(
    schedule: Schedule,
    start: datetime,
    end: datetime,
    *,
    include_succeeded: bool = False,
    now: datetime | None = None,
    using: str = "default",
) -> BackfillPlan:
    """The slots of ``schedule`` in ``[start, end)`` (aware datetimes, truncated to whole
    seconds) that a backfill would run, in order: all of them with ``include_succeeded``,
    else those without a ``succeeded`` (or ``enqueued``) receipt. Reads only.

    Raises ``ValidationError`` with field messages: ``start``/``end`` naive, ``end`` not
    after ``start`` or after ``now`` (the database clock: a backfill replays past slots),
    more slots than the ``BACKFILL_MAX_SLOTS`` setting (``end``), none to run (non-field);
    and :class:`StateConflict` when the schedule is not active or paused, or its stored
    definition cannot be evaluated."""
    if schedule.status not in BACKFILL_FROM:
        raise StateConflict(f"{timing.with_article(schedule.status)} schedule cannot be backfilled")
    start, end = _instant(start, "start"), _instant(end, "end")
    if end <= start:
        raise ValidationError({"end": ["Must be after start."]})
    current = timing.truncate_to_second(resolve_now(now, using))
    if end > current:
        raise ValidationError(
            {
                "end": [
                    f"Must not be after now ({current:%Y-%m-%dT%H:%M:%SZ}): a backfill runs past slots."
                ]
            }
        )
    slots = backfill_slots_in(schedule, start, end)
    skipped = 0
    if not include_succeeded and slots:
        slots, skipped = _without_succeeded(schedule, slots, using)
    check_runs_left(schedule, slots)
    if not slots:
        why = " that has not succeeded already" if skipped else ""
        raise ValidationError(
            {
                NON_FIELD_ERRORS: [
                    f"No slot of {schedule.name}{why} in [{start:%Y-%m-%dT%H:%M:%SZ}, "
                    f"{end:%Y-%m-%dT%H:%M:%SZ}).{rule_start_note(schedule, start)}"
                ]
            }
        )
    return BackfillPlan(start=start, end=end, slots=slots, skipped_succeeded=skipped)


def _without_succeeded(
    schedule: Schedule, slots: list[datetime], using: str
) -> tuple[list[datetime], int]:
    """:func:`plan_backfill`'s ``slots`` of ``schedule`` less those with a ``succeeded`` (or
    ``enqueued``) receipt, and how many were left out."""
    done = set(
        RunReceipt.objects.using(using)
        .filter(
            schedule_id=schedule.pk,
            status__in=SUCCESS_STATUSES,
            attempt__scheduled_for__in=slots,
        )
        .values_list("attempt__scheduled_for", flat=True)
    )
    kept = [s for s in slots if s not in done]
    return kept, len(slots) - len(kept)


def open_backfill(schedule_id: Any, *, using: str = "default") -> Backfill | None:
    """The open backfill of the schedule, if any (a plain read)."""
    return Backfill.objects.using(using).open().filter(schedule_id=schedule_id).first()


def latest_backfill(schedule_id: Any, *, using: str = "default") -> Backfill | None:
    """The schedule's most recently requested backfill, open or not, if any (a plain
    read)."""
    return (
        Backfill.objects.using(using)
        .filter(schedule_id=schedule_id)
        .order_by("-created_at", "-pk")
        .first()
    )


@implements("control.backfill")
def request_backfill(
    schedule_id: Any,
    start: datetime,
    end: datetime,
    *,
    include_succeeded: bool = False,
    now: datetime | None = None,
    actor: Any = None,
    source: str = "code",
    using: str = "default",
) -> Backfill:
    """Store a backfill of ``[start, end)`` (aware datetimes) of the schedule: the slots of
    :func:`plan_backfill`, run by the workers in order, one at a time, each as its own
    occurrence (own idempotency key and receipt, attempt ``origin`` ``backfill``). Records
    an event ``backfill`` with the range and the slot count.

    Raises ``Schedule.DoesNotExist``; ``ValidationError`` as :func:`plan_backfill`;
    :class:`StateConflict` when the schedule is not active or paused, or already has an
    open backfill (cancel it first)."""
    with transaction.atomic(using=using):
        row = get_locked(schedule_id, using)
        if row.status not in BACKFILL_FROM:
            raise StateConflict(f"{timing.with_article(row.status)} schedule cannot be backfilled")
        if open_backfill(row.pk, using=using) is not None:
            raise StateConflict("the schedule already has an open backfill (cancel it first)")
        instant = resolve_now(now, using)
        plan = plan_backfill(
            row, start, end, include_succeeded=include_succeeded, now=instant, using=using
        )
        backfill = Backfill.objects.using(using).create(
            schedule=row,
            schedule_name=row.name,
            start=plan.start,
            end=plan.end,
            include_succeeded=include_succeeded,
            slots=[s.isoformat() for s in plan.slots],
            skipped_succeeded=plan.skipped_succeeded,
            created_at=instant,
            created_by=actor if getattr(actor, "pk", None) else None,
            created_by_repr=str(actor)[:200] if actor is not None else "",
            source=source[:32],
        )
        record_event(
            row,
            EventAction.BACKFILL,
            now=instant,
            actor=actor,
            source=source,
            changes=_summary(backfill),
            using=using,
        )
        row.save(update_fields=["updated_at"])  # wakes idle workers (PostgreSQL NOTIFY)
    return backfill


@implements("control.backfill")
def cancel_backfill(
    schedule_id: Any, *, actor: Any = None, source: str = "code", using: str = "default"
) -> Backfill:
    """Cancel the schedule's open backfill: no further slot of it is claimed; a slot
    running now finishes and is receipted normally. Records an event ``backfill_cancel``.
    Raises ``Schedule.DoesNotExist``, and :class:`StateConflict` when there is no open
    backfill."""
    with transaction.atomic(using=using):
        row = get_locked(schedule_id, using)
        backfill = open_backfill(row.pk, using=using)
        if backfill is None:
            raise StateConflict("the schedule has no open backfill")
        instant = _close(backfill, BackfillStatus.CANCELLED, None, using)
        record_event(
            row,
            EventAction.BACKFILL_CANCEL,
            now=instant,
            actor=actor,
            source=source,
            changes=_summary(backfill),
            using=using,
        )
    return backfill


def _summary(backfill: Backfill) -> dict[str, Any]:
    return {
        "backfill": str(backfill.pk),
        "start": backfill.start.isoformat(),
        "end": backfill.end.isoformat(),
        "slots": backfill_slot_count(backfill),
        "done": min(backfill.position, backfill_slot_count(backfill)),
        "status": backfill.status,
    }


def _close(backfill: Backfill, status: str, now: datetime | None, using: str) -> datetime:
    instant = resolve_now(now, using)
    backfill.status, backfill.finished_at = status, instant
    backfill.save(using=using, update_fields=["status", "finished_at"])
    return instant


@implements("control.cancel")
def cancel_open_backfills(row: Schedule, using: str) -> None:
    """Inside a transition that holds ``row``'s lock and ends it (cancel): its open
    backfill is cancelled too."""
    backfill = open_backfill(row.pk, using=using)
    if backfill is not None:
        _close(backfill, BackfillStatus.CANCELLED, None, using)


# ---------------------------------------------------------------------------------------
# The worker's side: inside the transactions of claim_due, complete and expire_leases
# ---------------------------------------------------------------------------------------


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
    or when ``admit(rows, now)`` holds it back (concurrency groups): it waits."""
    rows = _lock_ready(due_before, limit, taken, only, using, pools) if limit > 0 else []
    now = now_of() if rows else None
    rows = admit(rows, now) if rows and admit is not None else rows  # group: held ones wait
    if not rows or now is None:
        return []
    open_ = {
        b.schedule_id: b
        for b in Backfill.objects.using(using).open().filter(schedule_id__in=[r.pk for r in rows])
    }
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
        except Exception as exc:  # noqa: BLE001 - any value of this backfill or its row
            del attempts[marks[0] :], receipts[marks[1] :], claims[marks[2] :]
            reason = f"its next slot cannot be claimed: {describe_problem(exc)}"
            quarantine_backfill(row, backfill.pk, reason, now, using)
            continue
        written.append(row)
    return written


def _lock_ready(
    due_before: Any,
    limit: int,
    taken: Sequence[Schedule],
    only: Any,
    using: str,
    pools: Sequence[str],
) -> list[Schedule]:
    """Lock (``SKIP LOCKED``, in primary key order) up to ``limit`` schedules of ``pools``
    free to run a backfill slot at ``due_before`` (``backfill_ready``), other than those
    ``taken``; ``only``: that schedule alone. Their blackout windows are attached."""
    qs = with_blackout_flag(
        Schedule.objects.using(using)
        .backfill_ready(due_before)
        .filter(Schedule.objects.group_room_q(due_before), pool__in=pools)
        .exclude(pk__in=[r.pk for r in taken])
        .order_by("pk")
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
            changes=_summary(backfill),
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
        _close(backfill, BackfillStatus.CANCELLED, now, using)
        record_event(
            row,
            EventAction.BACKFILL_CANCEL,
            now=now,
            source="worker",
            changes={**_summary(backfill), "reason": f"the schedule is {row.status}"},
            using=using,
        )


__all__ = [
    "BACKFILL_FROM",
    "BackfillPlan",
    "cancel_backfill",
    "latest_backfill",
    "open_backfill",
    "plan_backfill",
    "request_backfill",
]
