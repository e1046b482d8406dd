"""The versions of a schedule's definition (issue #29, item 3), reconstructed from its audit
trail: pure, no database access (:mod:`.restores` reads the rows and restores).

A *version* is the definition right after a ``created``, ``edited`` or ``calendars`` event.
The reconstruction walks back from the **current** definition: the newest version is the
current one, and each older one is the newer one with that newer event's changes undone
(every event's ``changes`` holds ``{field: [old, new]}``). Walking back needs no history
older than the versions shown (a bounded read) and no model defaults (a ``created`` event
names only the fields given); a deleted blackout window (a ``blackouts`` event with
``"deleted": true``, which dropped it from the schedule's list) is put back walking past it.

The definition is :data:`VERSIONED_FIELDS`: every editable field but the schedule's
``name`` and ``owner`` (who it is and whose it is, not what it does); never run state.
Values are in their JSON form (:func:`normalized`): instants as ISO 8601 UTC whole seconds,
relations as sorted lists of names, the concurrency group as its key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from django.utils.dateparse import parse_datetime

from ..models.choices import EDITABLE_ORDER, INSTANT_FIELDS, EventAction
from .events import json_value

#: The fields of a version: what the schedule does and when (not its name or owner).
VERSIONED_FIELDS: tuple[str, ...] = tuple(f for f in EDITABLE_ORDER if f not in ("name", "owner"))
#: The relations among them: lists of names, compared sorted.
RELATION_FIELDS = ("exclusion_calendars", "blackout_windows", "upstream")
#: The events that make a version (listed, restorable).
VERSION_ACTIONS = (EventAction.CREATED, EventAction.EDITED, EventAction.CALENDARS)
#: The events whose changes are undone walking back (the versions' and a window deleted).
UNDONE_ACTIONS = (*VERSION_ACTIONS, EventAction.BLACKOUTS)
#: The most versions listed (and restorable): the newest ones.
VERSIONS_LIMIT = 50
#: The most events read to list them (a window's deletion is an event too).
EVENTS_READ = 2 * VERSIONS_LIMIT
#: The key of an ``edited`` event's changes that names the version it restored:
#: ``[None, {"event": id, "at": ISO 8601}]`` (the ``{key: [old, new]}`` shape).
RESTORED_FROM = "restored_from"


class EventLike(Protocol):
    """What the reconstruction reads of a :class:`~..models.ScheduleEvent`."""

    id: Any
    action: str
    at: datetime
    actor_repr: str
    source: str
    changes: Any


@dataclass(frozen=True)
class Version:
    """The definition right after the event ``event_id`` (at ``at``, by ``actor`` from
    ``source``). ``definition``: ``{field: JSON value}`` for every :data:`VERSIONED_FIELDS`.
    ``changed``: the fields the event changed (its own keys, in definition order; a
    ``created`` event's: the fields given). ``restored_from``: the event id of the version
    this one restored, if it was a restore. ``current``: its definition is the current one
    (restoring it would change nothing)."""

    event_id: str
    action: str
    at: datetime
    actor: str
    source: str
    changed: tuple[str, ...]
    definition: Mapping[str, Any] = field(repr=False)
    restored_from: str | None = None
    current: bool = False


@dataclass(frozen=True)
class Difference:
    """One field a version holds otherwise than the current definition (JSON values)."""

    field: str
    current: Any
    version: Any


def normalized(name: str, value: Any) -> Any:
    """``value`` of the field ``name`` in the form versions compare and hold: an instant
    (a datetime or ISO 8601 text) as ISO 8601 UTC, whole seconds; a relation (names or
    rows) as a sorted list of names; a row as its key; anything else as JSON holds it. A
    text that is no instant is kept as is."""
    if name in INSTANT_FIELDS and value is not None:
        instant = value if isinstance(value, datetime) else _parsed(value)
        if instant is None or instant.tzinfo is None:
            return json_value(value)
        return instant.astimezone(UTC).replace(microsecond=0).isoformat()
    if name in RELATION_FIELDS:
        return sorted(str(getattr(v, "name", v)) for v in (value or ()))
    return json_value(value)


def _parsed(value: Any) -> datetime | None:
    try:
        return parse_datetime(value) if isinstance(value, str) else None
    except ValueError:
        return None


def definition_of(values: Mapping[str, Any]) -> dict[str, Any]:
    """``{field: normalized value}`` of every :data:`VERSIONED_FIELDS` from ``values`` (a
    schedule's current values by field name: relations as names, the group as its key)."""
    return {name: normalized(name, values.get(name)) for name in VERSIONED_FIELDS}


def _pairs(event: EventLike) -> dict[str, list[Any]]:
    """The versioned ``[old, new]`` pairs of ``event``'s changes."""
    changes = event.changes if isinstance(event.changes, Mapping) else {}
    return {
        k: v
        for k, v in changes.items()
        if k in VERSIONED_FIELDS and isinstance(v, list) and len(v) == 2
    }


def _matches(definition: Mapping[str, Any], event: EventLike) -> bool:
    """Whether ``definition`` holds every new value ``event`` wrote."""
    return all(normalized(k, new) == definition.get(k) for k, (_, new) in _pairs(event).items())


def _undo(definition: dict[str, Any], event: EventLike) -> None:
    """``definition`` as it was before ``event``."""
    for name, (old, _) in _pairs(event).items():
        definition[name] = normalized(name, old)
    changes = event.changes if isinstance(event.changes, Mapping) else {}
    if event.action == EventAction.BLACKOUTS and changes.get("deleted") and changes.get("window"):
        names = set(definition.get("blackout_windows") or ())
        definition["blackout_windows"] = sorted(names | {str(changes["window"])})


def _in_order(definition: Mapping[str, Any], tied: list[EventLike]) -> EventLike:
    """Of events written at the same instant, the newest: the one whose new values the
    definition holds (else the first)."""
    return next((e for e in tied if _matches(definition, e)), tied[0])


def versions(
    current: Mapping[str, Any], events: Iterable[EventLike], limit: int = VERSIONS_LIMIT
) -> list[Version]:
    """The versions of a definition, newest first, at most ``limit``: ``current`` (from
    :func:`definition_of`) and ``events`` (the schedule's :data:`UNDONE_ACTIONS` events,
    newest first; others are skipped). Events of the same instant are ordered by their
    values (the one whose new values the newer definition holds is the newer). Stops at
    the ``created`` event."""
    pending = [e for e in events if e.action in UNDONE_ACTIONS]
    pending.sort(key=lambda e: e.at, reverse=True)  # stable: the caller's order among ties
    current = dict(current)
    definition = dict(current)
    found: list[Version] = []
    while pending and len(found) < limit:
        tied = [e for e in pending if e.at == pending[0].at]
        event = _in_order(definition, tied)
        pending.remove(event)
        if event.action in VERSION_ACTIONS:
            found.append(_version(event, definition, current=definition == current))
        if event.action == EventAction.CREATED:
            break
        _undo(definition, event)
    return found


def _version(event: EventLike, definition: Mapping[str, Any], *, current: bool) -> Version:
    changes = event.changes if isinstance(event.changes, Mapping) else {}
    restored = changes.get(RESTORED_FROM)
    restored_from = None
    if isinstance(restored, list) and len(restored) == 2 and isinstance(restored[1], Mapping):
        restored_from = str(restored[1].get("event", "")) or None
    return Version(
        event_id=str(event.id),
        action=str(event.action),
        at=event.at,
        actor=event.actor_repr or "",
        source=event.source,
        changed=tuple(f for f in VERSIONED_FIELDS if f in _pairs(event)),
        definition=dict(definition),
        restored_from=restored_from,
        current=current,
    )


def differences(version: Mapping[str, Any], current: Mapping[str, Any]) -> list[Difference]:
    """The fields ``version`` (a definition) holds otherwise than ``current``, in
    :data:`VERSIONED_FIELDS` order. Empty: restoring it would change nothing."""
    return [
        Difference(name, current.get(name), version.get(name))
        for name in VERSIONED_FIELDS
        if version.get(name) != current.get(name)
    ]


def find(found: Sequence[Version], event_id: Any) -> Version | None:
    """The version of ``found`` made by the event ``event_id`` (text or UUID), or None."""
    wanted = str(event_id).strip().lower()
    return next((v for v in found if v.event_id.lower() == wanted), None)


__all__ = [
    "EVENTS_READ",
    "RELATION_FIELDS",
    "RESTORED_FROM",
    "UNDONE_ACTIONS",
    "VERSIONED_FIELDS",
    "VERSIONS_LIMIT",
    "VERSION_ACTIONS",
    "Difference",
    "EventLike",
    "Version",
    "definition_of",
    "differences",
    "find",
    "normalized",
    "versions",
]
