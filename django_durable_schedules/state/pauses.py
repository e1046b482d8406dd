"""Pauses with an end (issue #27): :func:`amend_pause` (a note or an end given to a
schedule already paused: :func:`.control.disable`) and :func:`resume_paused` (a worker's
duty: resume the schedules whose pause ended, by :func:`.enabling.enable`'s rule). The
checks and the predicates are :mod:`.pause_rules`.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime
from typing import Any

from django.db import transaction

from .. import timing
from ..db.batch import ROW_PROBLEMS
from ..db.clock import resolve_now
from ..db.locks import lock_for_write, locked
from ..exceptions import StateConflict
from ..models import DegradedKind, EventAction, Schedule, ScheduleEvent, Status
from .alerts import write_alerts
from .calendars import record_excluded_to_end
from .enabling import ENABLE_FIELDS, reactivate
from .events import json_value, record_event, write_events
from .machine import apply_changes, changes_of, mark_degraded
from .pause_rules import apply_pause, pause_ended
from .transitions import implements

logger = logging.getLogger(__name__)

#: Most schedules one :func:`resume_paused` resumes (the next pass takes the rest).
RESUME_LIMIT = 100


@implements("control.disable")
def amend_pause(
    row: Schedule,
    note: str | None,
    until: datetime | None,
    *,
    actor: Any = None,
    source: str = "code",
    using: str = "default",
) -> Schedule:
    """:func:`.control.disable` given a checked ``note`` or ``until``
    (:func:`.pause_rules.check_pause`) for the locked ``row``, already paused, inside the
    caller's transaction: write what changes, with one event ``disabled`` naming the
    changes (nothing when nothing changes; an ``until`` of None keeps the end it has).
    Raises :class:`StateConflict` for a degraded row (the engine paused it)."""
    if row.degraded_reason:
        raise StateConflict(
            "a degraded schedule takes no pause note or end: correct it, then enable it"
        )
    changes: dict[str, Any] = {}
    apply_pause(row, note, until, changes, fresh=False)
    if changes:
        row.save(update_fields=["pause_reason", "paused_until", "updated_at"])
        record_event(
            row, EventAction.DISABLED, actor=actor, source=source, changes=changes, using=using
        )
    return row


def resume_paused(
    *, now: datetime | None = None, limit: int = RESUME_LIMIT, using: str = "default"
) -> list[ScheduleEvent]:
    """Resume up to ``limit`` schedules whose pause ended: ``ScheduleQuerySet.resume_due``
    at ``now`` (aware; None: the database clock) finds them, earliest end first. In one
    transaction: lock them (``SKIP LOCKED`` where the database has it: a row another
    worker holds is left for the next pass), judge each again on the locked row by the
    database clock read there (:func:`.pause_rules.pause_ended`), apply
    :func:`.enabling.enable`'s rule to it (:func:`.enabling.reactivate`: active, the next
    run the first slot after now, no catch-up for the time spent paused, the pause's end
    and note cleared, a pending trigger kept) and write one event ``enabled`` (source
    ``worker``; changes: the status and the end) per row, all in one batch
    (:func:`.events.write_events`). A row whose definition cannot be evaluated (written
    behind ``save()``) is paused as degraded instead (event ``degraded``). A row whose
    values cannot be read (:data:`.db.batch.ROW_PROBLEMS`) is skipped with a log line:
    the others are resumed one transaction each. Returns the ``enabled`` events written.
    Raises ``ValueError`` (an ``InvalidSchedule``) for a naive ``now``."""
    if now is not None:
        now = timing.require_aware(now, "now")
    at = resolve_now(now, using)
    pks = list(
        Schedule.objects.using(using)
        .resume_due(at)
        .order_by("paused_until")
        .values_list("pk", flat=True)[: max(0, limit)]
    )
    if not pks:
        return []
    try:
        return _resume(pks, now, using)
    except ROW_PROBLEMS as exc:
        logger.warning("resume of paused schedules met a value it cannot read: %s", exc)
    written: list[ScheduleEvent] = []
    for pk in pks:
        try:
            written += _resume([pk], now, using)
        except ROW_PROBLEMS as exc:  # this row's values cannot be read: left alone
            logger.warning("resume skipped schedule %s: %s", pk, exc)
    return written


@implements("control.resume_until")
def _resume(pks: list[uuid.UUID], now: datetime | None, using: str) -> list[ScheduleEvent]:
    """One transaction of :func:`resume_paused` over the candidates ``pks``."""
    with transaction.atomic(using=using):
        lock_for_write(using)
        rows = list(
            locked(Schedule.objects.using(using).filter(pk__in=pks), using, skip_locked=True)
        )
        instant = resolve_now(now, using)
        second = timing.truncate_to_second(instant)
        events: list[ScheduleEvent] = []
        degraded: list[Schedule] = []
        for row in sorted(rows, key=lambda r: (r.paused_until, str(r.pk))):
            if not pause_ended(row, instant):
                continue
            changes: dict[str, Any] = {
                "status": [row.status, Status.ACTIVE],
                "paused_until": [json_value(row.paused_until), None],
            }
            try:
                _, columns = changes_of(row, reactivate, second, changes)
            except StateConflict as exc:  # a definition it cannot evaluate: degraded, kept
                mark_degraded(row, str(exc)[:500], DegradedKind.DEFINITION)
                Schedule.objects.using(using).filter(pk=row.pk).update(
                    degraded_reason=row.degraded_reason, degraded_kind=row.degraded_kind
                )
                degraded.append(row)
                continue
            apply_changes(row, columns)
            row.save(update_fields=ENABLE_FIELDS, planned=True)  # planned by reactivate
            record_excluded_to_end(row, second, using)
            events.append(_enabled_event(row, instant, changes))
        write_events(events, using)
        write_alerts(degraded, instant, using)
    for event in events:
        logger.info("schedule %s resumed: its pause ended", event.schedule_name)
    return events


def _enabled_event(row: Schedule, at: datetime, changes: dict[str, Any]) -> ScheduleEvent:
    """The unsaved ``enabled`` event of a resumed ``row`` (source ``worker``)."""
    return ScheduleEvent(
        id=uuid.uuid4(),
        schedule_id=row.pk,
        schedule_name=row.name,
        action=EventAction.ENABLED,
        at=at,
        actor_repr="",
        source="worker",
        changes=changes,
    )
