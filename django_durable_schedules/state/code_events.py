"""The events of schedules created and deleted from code below the state functions:
``Schedule.save()`` of a new row, ``Schedule.objects.bulk_create()``, ``Model.delete()`` and
``QuerySet.delete()`` each leave one ``created`` / ``deleted`` event per row, source
``code``, no actor, no changes, in the transaction of the write.

The database's audit triggers (:mod:`..db.audit`) are muted around the write, so a row
gets Python's event and not the trigger's too. A state function that writes its own event
(who, from where, what changed) passes ``audit=False`` down (``save(audit=False)``,
``delete(audit=False)``): the trigger stays muted and no ``code`` event is written.

Cost (on top of the write itself): one statement to mute and one to unmute the triggers,
one read of the database clock when the caller has none, and one ``INSERT`` of events
per :data:`EVENT_BATCH` rows (one per row of the batch on backends where
``bulk_create`` splits it). A ``QuerySet.delete()`` first reads the rows it deletes, locked,
in one ``SELECT`` (their ids and names: the events say which rows went); Django then deletes
them as it always does (one ``DELETE`` per 100 rows, and the rows of their many-to-many
links).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import QuerySet, signals
from django.db.models.deletion import Collector

from ..db import audit
from ..db.clock import resolve_now
from ..db.locks import lock_for_write, locked
from ..models import EventAction, Schedule, ScheduleEvent
from .events import write_events

#: Events written per ``INSERT`` (a bulk create or delete of many rows).
EVENT_BATCH = 1000
SOURCE = "code"


def _write(rows: Sequence[tuple[Any, str]], action: str, now: datetime | None, using: str) -> None:
    """One ``action`` event per ``(id, name)`` of ``rows`` (source ``code``), at ``now``
    (the database clock when None), :data:`EVENT_BATCH` per statement."""
    if not rows:
        return
    at = resolve_now(now, using)
    for start in range(0, len(rows), EVENT_BATCH):
        events = [
            ScheduleEvent(
                schedule_id=pk,
                schedule_name=name,
                action=action,
                at=at,
                source=SOURCE,
                changes={},
            )
            for pk, name in rows[start : start + EVENT_BATCH]
        ]
        write_events(events, using)


@contextmanager
def inserting(
    rows: Sequence[Schedule], using: str, *, now: datetime | None = None, audit_rows: bool = True
) -> Iterator[None]:
    """Around the ``INSERT`` of the new ``rows`` (``save()``, ``bulk_create()``): the audit
    triggers muted, then one ``created`` event per row (source ``code``, at ``now``: the
    database clock read for the rows' ``created_at``), unless ``audit_rows`` is False (the
    caller, a state function, writes its own). In one transaction with the insert."""
    with transaction.atomic(using=using, savepoint=False):
        with audit.muted(using):
            yield
        if audit_rows:
            _write([(r.pk, r.name) for r in rows], EventAction.CREATED, now, using)


def delete_rows(
    rows: Sequence[Schedule],
    using: str,
    *,
    origin: Any = None,
    keep_parents: bool = False,
    audit_rows: bool = True,
) -> tuple[int, dict[str, int]]:
    """Delete ``rows`` as Django's ``Model.delete()`` does (a ``Collector``: their
    many-to-many links go too; attempts, receipts and events stay), the audit triggers
    muted, and write one ``deleted`` event (source ``code``) per row when a row was deleted
    (not for a row already gone), unless ``audit_rows`` is False (the caller, a state
    function, wrote its own). Returns Django's ``(total, {model label: count})``."""
    with transaction.atomic(using=using, savepoint=False):
        collector = Collector(using=using, origin=origin)
        collector.collect(list(rows), keep_parents=keep_parents)
        gone = [(row.pk, row.name) for row in rows]  # the collector clears the ids
        with audit.muted(using):
            result = collector.delete()
        if audit_rows and result[1].get(Schedule._meta.label, 0):
            _write(gone, EventAction.DELETED, None, using)
    return result


def delete_queryset(qs: QuerySet[Schedule]) -> tuple[int, dict[str, int]]:
    """``QuerySet.delete()`` of schedules with one ``deleted`` event per row: the rows are
    read once, locked (their id and name; whole rows when a ``pre_delete``/``post_delete``
    receiver of ``Schedule`` is connected, which Django hands them to), then deleted by
    :func:`delete_rows`. The queryset's own restrictions (slicing, ``distinct(fields)``,
    ``values()``) are refused as Django refuses them."""
    if qs.query.is_sliced:
        raise TypeError("Cannot use 'limit' or 'offset' with delete().")
    if qs.query.distinct_fields:
        raise TypeError("Cannot call delete() after .distinct(*fields).")
    if getattr(qs, "_fields", None) is not None:
        raise TypeError("Cannot call delete() after .values() or .values_list()")
    if qs.query.combinator:
        raise TypeError(
            f"Calling QuerySet.delete() after {qs.query.combinator}() is not supported."
        )
    using = qs.db
    model = qs.model
    whole = signals.pre_delete.has_listeners(model) or signals.post_delete.has_listeners(model)
    with transaction.atomic(using=using, savepoint=False):
        lock_for_write(using)
        read = model._base_manager.using(using).filter(pk__in=qs.values("pk")).order_by()
        if not whole:
            read = read.only("pk", "name")
        rows = list(locked(read, using, skip_locked=False))
        return delete_rows(rows, using, origin=qs)
