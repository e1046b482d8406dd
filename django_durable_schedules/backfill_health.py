"""Backfills that need a look, for the health snapshot (issue #24 item 15): one that makes
no progress (:func:`stalled_backfills`) and one a worker cancelled (:func:`cancelled_backfills`).
Read-only; listed by :func:`.health.snapshot` as warnings, which never make it unhealthy.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TypedDict

from django.db.models import Exists, OuterRef, Subquery

from .conf import app_settings
from .models import (
    AttemptOrigin,
    Backfill,
    BackfillStatus,
    EventAction,
    RunAttempt,
    RunReceipt,
    ScheduleEvent,
)


class StalledBackfillRow(TypedDict):
    """One backfill in :attr:`Health.stalled_backfills`: open, with slots left, none
    running, and no slot claimed or finished for longer than ``BACKFILL_STALL_SECONDS``."""

    id: str
    schedule: str
    done: int
    total: int
    #: The last claim or end of one of its slots, or its request when none was claimed.
    since: datetime


class CancelledBackfillRow(TypedDict):
    """One backfill in :attr:`Health.cancelled_backfills`: cancelled by a worker (a slot
    that cannot be claimed, its schedule ended) in the last 24 hours, with the reason."""

    id: str
    schedule: str
    done: int
    total: int
    cancelled_at: datetime
    reason: str


#: Most stalled or cancelled backfills a snapshot lists.
BACKFILLS_LISTED = 20

#: How far back a backfill cancelled by a worker is listed.
CANCELLED_WINDOW = timedelta(hours=24)


def _progress(backfill: Backfill) -> tuple[int, int]:
    """``(done, total)`` slots of ``backfill``; a value written behind ``save()`` that is
    no list or no count reads as nothing done of nothing."""
    total = len(backfill.slots) if isinstance(backfill.slots, list) else 0
    position = backfill.position if isinstance(backfill.position, int) else 0
    return min(max(position, 0), total), total


def stalled_backfills(now: datetime, *, using: str = "default") -> list[StalledBackfillRow]:
    """Open backfills that make no progress at ``now`` (aware): slots left, no slot of
    theirs running, and the last claim or end of one of their slots (or, none claimed,
    their request) more than ``BACKFILL_STALL_SECONDS`` ago - starved by a busy fleet or a schedule that is
    never free (see ``ScheduleQuerySet.backfill_ready``). Oldest first, at most
    :data:`BACKFILLS_LISTED`. One query, over the open backfills only."""
    attempts = RunAttempt.objects.using(using).filter(
        schedule_id=OuterRef("schedule_id"),
        origin=AttemptOrigin.BACKFILL,
        claimed_at__gte=OuterRef("created_at"),
    )
    receipts = RunReceipt.objects.using(using).filter(
        schedule_id=OuterRef("schedule_id"),
        attempt__origin=AttemptOrigin.BACKFILL,
        finished_at__gte=OuterRef("created_at"),
    )
    rows = (
        Backfill.objects.using(using)
        .open()
        .annotate(
            last_claimed=Subquery(attempts.order_by("-claimed_at").values("claimed_at")[:1]),
            last_finished=Subquery(receipts.order_by("-finished_at").values("finished_at")[:1]),
            running=Exists(attempts.filter(receipt__isnull=True)),
        )
        .filter(running=False)
        .order_by("created_at")
    )
    threshold = now - timedelta(seconds=app_settings.BACKFILL_STALL_SECONDS)
    found: list[StalledBackfillRow] = []
    for backfill in rows:
        since = max(
            (t for t in (backfill.created_at, backfill.last_claimed, backfill.last_finished) if t),
            default=None,
        )
        done, total = _progress(backfill)
        if since is None or since > threshold or done >= total:
            continue
        found.append(
            StalledBackfillRow(
                id=str(backfill.pk),
                schedule=backfill.schedule_name,
                done=done,
                total=total,
                since=since,
            )
        )
    return found[:BACKFILLS_LISTED]


def cancelled_backfills(now: datetime, *, using: str = "default") -> list[CancelledBackfillRow]:
    """Backfills a worker cancelled in the 24 hours before ``now`` (aware), with the reason
    of its event ``backfill_cancel`` (a slot that cannot be claimed, its schedule ended);
    those cancelled by a person are not listed. Newest first, at most
    :data:`BACKFILLS_LISTED`. One query, two when any backfill was cancelled."""
    since = now - CANCELLED_WINDOW
    recent = list(
        Backfill.objects.using(using)
        .filter(status=BackfillStatus.CANCELLED, finished_at__gte=since)
        .order_by("-finished_at")[: BACKFILLS_LISTED * 5]
    )
    if not recent:
        return []
    reasons: dict[str, str] = {}
    events = ScheduleEvent.objects.using(using).filter(
        schedule_id__in={b.schedule_id for b in recent},
        action=EventAction.BACKFILL_CANCEL,
        source="worker",
        at__gte=since,
    )
    for changes in events.values_list("changes", flat=True):
        if isinstance(changes, dict) and changes.get("reason"):
            reasons[str(changes.get("backfill"))] = str(changes["reason"])
    found: list[CancelledBackfillRow] = []
    for backfill in recent:
        reason = reasons.get(str(backfill.pk))
        if reason is None or backfill.finished_at is None:
            continue
        done, total = _progress(backfill)
        found.append(
            CancelledBackfillRow(
                id=str(backfill.pk),
                schedule=backfill.schedule_name,
                done=done,
                total=total,
                cancelled_at=backfill.finished_at,
                reason=reason,
            )
        )
    return found[:BACKFILLS_LISTED]


__all__ = [
    "BACKFILLS_LISTED",
    "CANCELLED_WINDOW",
    "CancelledBackfillRow",
    "StalledBackfillRow",
    "cancelled_backfills",
    "stalled_backfills",
]
