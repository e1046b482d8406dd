"""The audit trail: one :class:`~..models.ScheduleEvent` per operator or definition change,
appended inside the transaction of the change it records.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.db import transaction

from .. import signals
from ..db.batch import insert_rows
from ..db.clock import resolve_now
from ..models import Schedule, ScheduleEvent
from .deliveries import enqueue_deliveries


def json_value(value: Any) -> Any:
    """``value`` as JSON can hold it: a datetime as ISO 8601, a UUID as text, a model row
    as its primary key, anything else unchanged."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if hasattr(value, "pk"):
        return value.pk
    return value


def as_changes(before: dict[str, Any], after: dict[str, Any]) -> dict[str, list[Any]]:
    """``{field: [old, new]}`` for the fields of ``after`` (JSON-ready)."""
    return {
        k: [json_value(before.get(k)), json_value(v)]
        for k, v in after.items()
        if before.get(k) != v
    }


def record_event(
    row: Schedule,
    action: str,
    *,
    now: datetime | None = None,
    actor: Any = None,
    source: str = "code",
    changes: dict[str, Any] | None = None,
    occurrence: int | None = None,
    using: str = "default",
) -> ScheduleEvent:
    """Append one :class:`~.models.ScheduleEvent` (called inside the transition's
    transaction, so the action and its record commit together). ``signals.schedule_changed``
    is sent once that transaction commits (only built when a receiver is connected).
    ``occurrence``: the occurrence an engine event is about. The event's notifications
    (one per ``NOTIFIERS`` entry told about its action) are queued in the same transaction
    (:func:`.deliveries.enqueue_deliveries`)."""
    event = ScheduleEvent.objects.using(using).create(
        schedule_id=row.pk,
        schedule_name=row.name,
        action=action,
        at=resolve_now(now, using),
        actor=actor if getattr(actor, "pk", None) else None,
        actor_repr=str(actor)[:200] if actor is not None else "",
        source=source[:32],
        changes=changes or {},
        occurrence=occurrence,
    )
    enqueue_deliveries(event, using)
    announce([event], using)
    return event


def write_events(events: list[ScheduleEvent], using: str = "default") -> None:
    """Insert ``events`` (built unsaved by a batch: a claim's ``excluded`` ones, a
    quarantine's) in one statement inside the caller's transaction, queue their
    notifications as :func:`record_event` does (:func:`.deliveries.enqueue_deliveries`: no
    query without ``NOTIFIERS``) and :func:`announce` them. Nothing for an empty list."""
    if not events:
        return
    insert_rows(ScheduleEvent, events, using)
    for event in events:
        enqueue_deliveries(event, using)
    announce(events, using)


def announce(events: list[ScheduleEvent], using: str = "default") -> None:
    """Send ``signals.schedule_changed`` for each of ``events`` (just written, in order)
    once the current transaction commits; nothing (not even the closure) when no receiver
    is connected or ``events`` is empty. Every writer of events calls it: an event written
    in bulk (a claim's ``excluded`` events, ...) is announced like one of
    :func:`record_event`."""
    if not events or not signals.schedule_changed.has_listeners(ScheduleEvent):
        return

    def send() -> None:
        for event in events:
            signals.send_robust(signals.schedule_changed, ScheduleEvent, event=event)

    transaction.on_commit(send, using=using)
