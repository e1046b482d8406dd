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

This module owns the requests (plan, request, cancel, and a cancel transition's
:func:`cancel_open_backfills`); the worker's side, inside the transactions of claim_due,
complete and expire_leases, is in :mod:`.backfill_claims`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import transaction

from .. import timing
from ..db.clock import resolve_now
from ..db.locks import get_locked
from ..exceptions import StateConflict
from ..models import (
    SUCCESS_STATUSES,
    Backfill,
    BackfillStatus,
    EventAction,
    RunReceipt,
    Schedule,
    Status,
)
from .backfill_rules import (
    backfill_slot_count,
    backfill_slots_in,
    check_runs_left,
    rule_start_note,
)
from .events import record_event
from .transitions import implements

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
    cascade: bool = False,
    now: datetime | None = None,
    actor: Any = None,
    source: str = "code",
    using: str = "default",
) -> Backfill:
    """Store a backfill of ``[start, end)`` (aware datetimes) of the schedule: the slots of
    :func:`plan_backfill`, run by the workers in order, one at a time, each as its own
    occurrence (own idempotency key and receipt, attempt ``origin`` ``backfill``). Records
    an event ``backfill`` with the range and the slot count. ``cascade``: each slot's
    claim opens its instant again on every schedule downstream of this one (kind
    ``after``, the whole closure), due by the claim plus each one's ``wait_seconds``, so
    they run again once the slot succeeded (:func:`.chains.write_chain_slots`).

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
            cascade=bool(cascade),
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
            changes=backfill_summary(backfill),
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
        instant = close_backfill(backfill, BackfillStatus.CANCELLED, None, using)
        record_event(
            row,
            EventAction.BACKFILL_CANCEL,
            now=instant,
            actor=actor,
            source=source,
            changes=backfill_summary(backfill),
            using=using,
        )
    return backfill


def backfill_summary(backfill: Backfill) -> dict[str, Any]:
    """What an event says of ``backfill``: its id, range, slot count, slots done, status."""
    return {
        "backfill": str(backfill.pk),
        "start": backfill.start.isoformat(),
        "end": backfill.end.isoformat(),
        "slots": backfill_slot_count(backfill),
        "done": min(backfill.position, backfill_slot_count(backfill)),
        "status": backfill.status,
        **({"cascade": True} if backfill.cascade else {}),
    }


def close_backfill(backfill: Backfill, status: str, now: datetime | None, using: str) -> datetime:
    """Close ``backfill`` with ``status`` at ``now`` (None: the database clock of ``using``);
    returns the instant it finished at."""
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
        close_backfill(backfill, BackfillStatus.CANCELLED, None, using)


__all__ = [
    "BACKFILL_FROM",
    "BackfillPlan",
    "cancel_backfill",
    "latest_backfill",
    "open_backfill",
    "plan_backfill",
    "request_backfill",
]
