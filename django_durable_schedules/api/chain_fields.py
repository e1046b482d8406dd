"""The schedule's chain fields (issue #30 item 1): ``upstream``, the names of the schedules
it runs after (written and read), and ``downstream``, the names of those that run after it
(read only: the edges of the chain, from both ends). Read from the names the list query
annotated (:func:`..db.names.with_link_names`: no query per row), else from the links.

An owner-scoped user names and sees only their own schedules: another name is "does not
exist" as a name no schedule has (a name cannot be probed), another user's schedule is left
out of both lists, and kept when they write ``upstream`` (:func:`keep_hidden_upstream`:
they cannot remove what they are not shown), and the events name it to them in no
``upstream`` change (:func:`redact_upstream_changes`).
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from ..db.names import link_names
from ..models import Schedule
from .fields import NameRelatedField

UPSTREAM_HELP = (
    "Kind 'after': names of the schedules it runs after (at least one; any other kind takes "
    "none). It runs each nominal instant of theirs once every one of them succeeded for it, "
    "within wait_seconds. Refused: itself, a manual schedule, a cycle, schedules on "
    "different grids. An owner-scoped user names and sees only their own schedules."
)
DOWNSTREAM_HELP = (
    "Names of the schedules of kind 'after' that run after this one (read-only: set their "
    "upstream). An owner-scoped user sees only their own schedules."
)


def _owner(context: Any) -> Any:
    """The user an owner-scoped request acts for (None: full access)."""
    request = context.get("request")
    return getattr(request, "user", None) if context.get("owner_scoped") else None


class LinkNamesField(serializers.ManyRelatedField):
    """One end of a schedule's links as names: the annotated names, else the relation's
    (one query), only the request user's schedules for an owner-scoped user."""

    def get_attribute(self, instance: Any) -> Any:
        direction = str(self.source)
        names = link_names(instance, direction)
        if names is not None:
            return names
        if instance.pk is None:
            return []
        rows = getattr(instance, direction).all()
        owner = _owner(self.context)
        if owner is not None:
            rows = rows.filter(owner=owner)
        return sorted(rows.values_list("name", flat=True))

    def to_representation(self, iterable: Any) -> list[Any]:
        return [
            value if isinstance(value, str) else self.child_relation.to_representation(value)
            for value in iterable
        ]


def upstream_field(schedules: Any) -> LinkNamesField:
    """A schedule's ``upstream``: names of the schedules ``schedules`` holds."""
    return LinkNamesField(
        child_relation=NameRelatedField(slug_field="name", queryset=schedules),
        required=False,
        help_text=UPSTREAM_HELP,
    )


def downstream_field() -> LinkNamesField:
    """A schedule's ``downstream``: read-only names."""
    return LinkNamesField(
        child_relation=NameRelatedField(slug_field="name", read_only=True),
        read_only=True,
        help_text=DOWNSTREAM_HELP,
    )


def scoped_upstream_field(context: Any) -> LinkNamesField | None:
    """The ``upstream`` field of an owner-scoped request (only their schedules may be
    named), or None for full access."""
    owner = _owner(context)
    if owner is None:
        return None
    return upstream_field(Schedule.objects.filter(owner=owner))


def keep_hidden_upstream(attrs: dict[str, Any], instance: Schedule | None, context: Any) -> None:
    """An owner-scoped user writing ``upstream`` keeps the schedule's upstreams they cannot
    see (another user's, linked by a full-access user)."""
    owner = _owner(context)
    given = attrs.get("upstream")
    if owner is None or given is None or instance is None:
        return
    hidden = list(instance.upstream.exclude(owner=owner))
    attrs["upstream"] = [*given, *hidden]


def redact_upstream_changes(changes: Any, context: Any) -> Any:
    """An event's ``changes`` as an owner-scoped user may read them: the names in
    ``upstream: [before, after]`` that are not their own schedules left out (one query for
    the names an answer's events mention, kept in ``context``). Unchanged for full access
    or an event without ``upstream``."""
    owner = _owner(context)
    pair = changes.get("upstream") if isinstance(changes, dict) else None
    if owner is None or not isinstance(pair, list):
        return changes
    named = {n for side in pair if isinstance(side, list) for n in side if isinstance(n, str)}
    known: dict[str, bool] = context.setdefault("_own_schedule_names", {})
    unknown = named - set(known)
    if unknown:
        own = set(
            Schedule.objects.filter(owner=owner, name__in=unknown).values_list("name", flat=True)
        )
        known.update({n: n in own for n in unknown})
    shown = [[n for n in side if known.get(n)] if isinstance(side, list) else side for side in pair]
    return {**changes, "upstream": shown}


__all__ = [
    "LinkNamesField",
    "downstream_field",
    "keep_hidden_upstream",
    "redact_upstream_changes",
    "scoped_upstream_field",
    "upstream_field",
]
