"""Definition history and restore (issue #29, item 3): :func:`definition_versions` lists a
schedule's versions (read from its audit trail, :mod:`.version_rules`) and
:func:`restore_definition` makes one of them the current definition again, as an edit
(:func:`.definitions.update_schedule`: validated, re-planned from now, one ``edited``
event), never as a run.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils.dateparse import parse_datetime

from ..db.locks import get_locked
from ..models import INSTANT_FIELDS, ConcurrencyGroup, EventAction, Kind, Schedule, ScheduleEvent
from .candidates import prepare
from .definitions import update_schedule
from .events import json_value
from .transitions import implements
from .version_rules import (
    EVENTS_READ,
    RELATION_FIELDS,
    RESTORED_FROM,
    VERSION_ACTIONS,
    VERSIONED_FIELDS,
    VERSIONS_LIMIT,
    Version,
    definition_of,
    differences,
    find,
    versions,
)


def current_definition(row: Schedule) -> dict[str, Any]:
    """The definition ``row`` holds now, in the versions' form
    (:func:`.version_rules.definition_of`). Two queries (its calendars' and windows'
    names; a third for a kind ``after``'s upstreams)."""
    values: dict[str, Any] = {}
    for name in VERSIONED_FIELDS:
        if name == "upstream" and row.kind != Kind.AFTER:
            values[name] = []  # only a kind 'after' runs after others: no query
        elif name in RELATION_FIELDS:
            values[name] = [o.name for o in getattr(row, name).all()]
        elif name == "concurrency_group":
            values[name] = row.concurrency_group_id
        else:
            values[name] = getattr(row, name)
    return definition_of(values)


def definition_versions(row: Schedule, *, using: str | None = None) -> list[Version]:
    """The versions of ``row``'s definition, newest first (the first is the current
    definition), at most :data:`.version_rules.VERSIONS_LIMIT`, reconstructed from its
    newest :data:`.version_rules.EVENTS_READ` events that changed the definition (created,
    edited, calendars, a blackout window deleted). Three queries."""
    using = using or row._state.db or "default"
    # A window's own edits are blackouts events too (on each schedule naming it): only its
    # deletion changed the schedule's list.
    changed = Q(action__in=VERSION_ACTIONS) | Q(
        action=EventAction.BLACKOUTS, changes__has_key="deleted"
    )
    events = list(
        ScheduleEvent.objects.using(using)
        .filter(changed, schedule_id=row.pk)
        .order_by("-at", "-id")
        .only("id", "action", "at", "actor_repr", "source", "changes")[:EVENTS_READ]
    )
    return versions(current_definition(row), events)


def _event_id(event_id: Any) -> str:
    """``event_id`` as the text of a UUID; ``ValidationError`` (``event``) otherwise."""
    try:
        return str(event_id if isinstance(event_id, uuid.UUID) else uuid.UUID(str(event_id)))
    except (ValueError, TypeError, AttributeError):
        raise ValidationError({"event": [f"{str(event_id)[:64]!r} is not an event id."]}) from None


def _python(name: str, value: Any, using: str) -> Any:
    """A version's JSON ``value`` of the field ``name`` as an edit takes it."""
    if name in INSTANT_FIELDS and isinstance(value, str):
        return parse_datetime(value)
    if name == "concurrency_group" and value is not None:
        group = ConcurrencyGroup.objects.using(using).filter(pk=value).first()
        if group is None:
            raise ValidationError(
                {"concurrency_group": ["The concurrency group of this version was deleted."]}
            )
        return group
    return value


@implements("control.edit")
def restore_definition(
    schedule: Any,
    event_id: Any,
    *,
    actor: Any = None,
    source: str = "code",
    owner: Any = None,
    using: str = "default",
) -> Schedule:
    """Make the version of ``schedule``'s definition (a row or its id) that the event
    ``event_id`` made (one of :func:`definition_versions`) the current one again.

    An edit like any other (:func:`.definitions.update_schedule`, with the fields that
    differ): validated as a whole, so a version that no longer validates (a time zone
    removed from tzdata, a callback no longer registered, a calendar deleted) is refused
    with the fields' messages and nothing is written; ``next_run_at`` is re-planned from
    now as an edit does; no run is fired (no trigger, no claim). Records one ``edited``
    event (``actor``, ``source``) whose changes are the fields restored plus
    ``restored_from: [None, {"event": id, "at": ISO 8601}]``. A version equal to the
    current definition changes nothing and records nothing. One transaction. ``owner``:
    the user an owner-scoped request acts for (the API): the owner policy applies to the
    version restored as to any edit of theirs (:func:`.candidates.prepare`); None: full
    access.

    Returns the row. Raises ``Schedule.DoesNotExist``, and ``ValidationError``: ``event``
    for an id that is not an event's, or not one of the schedule's last
    :data:`.version_rules.VERSIONS_LIMIT` versions; else the fields' messages."""
    wanted = _event_id(event_id)
    with transaction.atomic(using=using):
        row = get_locked(getattr(schedule, "pk", schedule), using)  # the write lock first
        found = definition_versions(row, using=using)
        version = find(found, wanted)
        if version is None:
            raise ValidationError(
                {
                    "event": [
                        f"{wanted} is not a version of {row.name} (one of its last "
                        f"{VERSIONS_LIMIT} created or edited events)."
                    ]
                }
            )
        changed = differences(version.definition, current_definition(row))
        if not changed:
            return row
        fields = {d.field: _python(d.field, d.version, using) for d in changed}
        prepared = prepare(fields, row, owner=owner, using=using)  # validated as any edit
        restored = {"event": version.event_id, "at": json_value(version.at)}
        return update_schedule(
            prepared,
            actor=actor,
            source=source,
            using=using,
            extra_changes={RESTORED_FROM: [None, restored]},
        )


__all__ = ["current_definition", "definition_versions", "restore_definition"]
