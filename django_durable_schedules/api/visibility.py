"""Which exclusion calendars an API user may see, and the answers with the others left out.

The rule (docs/api.md, *Owner-scoped users and calendars*): a full-access (staff) user sees
every calendar. An owner-scoped user sees only the **shared** ones
(``ExclusionCalendar.shared``): only those are listed and read at ``calendars/`` (read-only
for them), only those may be named in a schedule's ``exclusion_calendars`` (any other name
is refused with the same message as a name no calendar has, so a name cannot be probed),
and a calendar they cannot see is never named to them: it is left out of a schedule's
``exclusion_calendars`` (and kept when they write the list: they cannot remove what they
cannot see), a slot it excludes is listed by ``upcoming/?include_excluded=1`` with
``calendar`` null and no reason, and the audit events name neither it nor its reasons.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import QuerySet
from rest_framework.request import Request

from ..models import ExclusionCalendar
from .permissions import owner_scoped

#: What a calendar the user cannot see is shown as (``calendar``) in an answer.
HIDDEN = None


def visible_calendars(request: Request) -> QuerySet[ExclusionCalendar]:
    """The calendars ``request``'s user may see and name: every one for full access, the
    shared ones for an owner-scoped user."""
    calendars = ExclusionCalendar.objects.all()
    return calendars.shared() if owner_scoped(request) else calendars


def visible_names(request: Request) -> frozenset[str] | None:
    """The names of the calendars an owner-scoped user may see (one query), or None for a
    full-access user (every calendar: nothing to leave out)."""
    if not owner_scoped(request):
        return None
    return frozenset(visible_calendars(request).values_list("name", flat=True))


def only_visible(names: Iterable[str], visible: frozenset[str] | None) -> list[str]:
    """``names`` without those not in ``visible`` (None: all of them kept)."""
    return [n for n in names if visible is None or n in visible]


def redact_changes(action: str, changes: Any, visible: frozenset[str] | None) -> Any:
    """An event's ``changes`` as a user who sees only ``visible`` calendars may read them:
    an ``excluded`` event of a hidden calendar without its name and reason, and the
    hidden names left out of ``exclusion_calendars: [before, after]`` (``calendars``,
    ``edited`` and ``created`` events). Unchanged for None (full access)."""
    if visible is None or not isinstance(changes, dict):
        return changes
    if action == "excluded" and "calendar" in changes:
        if changes["calendar"] not in visible:
            return {**changes, "calendar": HIDDEN, "reason": ""}
        return changes
    pair = changes.get("exclusion_calendars")
    if isinstance(pair, list):
        shown = [only_visible(v, visible) if isinstance(v, list) else v for v in pair]
        return {**changes, "exclusion_calendars": shown}
    return changes
