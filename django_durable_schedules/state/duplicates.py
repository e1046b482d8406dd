"""Duplicate a schedule (the admin's "Duplicate…", the API's ``schedules/{id}/duplicate/``):
a new schedule with the same definition, policies, input, owner, exclusion calendars and
blackout windows under a new name, created **paused** (no next run until enabled), with a
``created`` event that says which schedule it was duplicated from.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from ..db.locks import lock_for_write
from ..models import EDITABLE_FIELDS, Schedule
from .candidates import prepare
from .definitions import create_schedule
from .transitions import implements

#: Editable fields a duplicate copies besides these (its own name, never the source's).
NOT_COPIED = frozenset({"name"})
#: The relations among :data:`EDITABLE_FIELDS`: copied as lists of their rows.
RELATIONS = ("exclusion_calendars", "blackout_windows", "upstream")


def copied_fields(source: Schedule) -> dict[str, Any]:
    """The fields of ``source`` a duplicate is created with (its definition, policies,
    payload, metadata, owner, exclusion calendars and blackout windows), as
    :func:`.candidates.prepare` takes them; ``name`` excluded. A query for each relation
    (and the owner)."""
    fields: dict[str, Any] = {}
    for name in sorted(EDITABLE_FIELDS - NOT_COPIED):
        if name in RELATIONS:
            fields[name] = list(getattr(source, name).all())
        elif name == "owner":
            fields[name] = source.owner if source.owner_id is not None else None
        else:
            fields[name] = getattr(source, name)
    return fields


@implements("control.create")
def duplicate_schedule(
    schedule_id: Any,
    name: str,
    *,
    actor: Any = None,
    source: str = "code",
    owner: Any = None,
    using: str = "default",
) -> Schedule:
    """Create a copy of the schedule ``schedule_id`` named ``name``: the same definition
    (kind, interval, cron, rule, zone, instants, ``max_runs``), policies, payload,
    metadata, owner, exclusion calendars and blackout windows (and ``blackout_policy``),
    but none of its run state. It is created **paused**, with no next run, its
    ``pause_reason`` naming the source, until :func:`.enabling.enable`. One ``created``
    event (``actor``, ``source``) whose changes include ``duplicated_from``: ``[None,
    {"id": <source id>, "name": <source name>}]``. One transaction. ``owner``: the user
    an owner-scoped request acts for (the API): the copy is theirs and the owner policy
    applies, as to a create (:func:`.candidates.prepare`); None: full access.

    Raises ``Schedule.DoesNotExist``, and ``ValidationError`` with field messages for a
    ``name`` that is taken or not a valid name (``{"name": [...]}``), or a definition the
    source holds that is no longer valid (written behind ``save()``, a callback no longer
    registered)."""
    with transaction.atomic(using=using):
        lock_for_write(using)  # SQLite: the write lock before the reads
        original = Schedule.objects.using(using).get(pk=schedule_id)
        fields = copied_fields(original)
        fields["name"] = name
        prepared = prepare(fields, using=using, owner=owner)
        prepared.row.pause_reason = f"duplicated from {original.name}: enable it to run"
        extra = {"duplicated_from": [None, {"id": str(original.pk), "name": original.name}]}
        row = create_schedule(
            prepared,
            actor=actor,
            source=source,
            paused=True,
            using=using,
            extra_changes=extra,
        )
    return row
