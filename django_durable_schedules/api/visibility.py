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

import ast
import re
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


#: What a reason says, for an owner-scoped user, in place of a calendar they cannot see and
#: of all that follows it (its name, holiday codes, dates: the engine's reasons name a
#: calendar as ``calendar 'name'``, then say what is wrong with it).
HIDDEN_CALENDAR = "a calendar you cannot see cannot be evaluated (staff can see which and why)"
#: ... and in place of the hidden names of a list ``exclusion calendars (a, b) exclude``.
HIDDEN_IN_LIST = "calendars you cannot see"
_NAMED = re.compile(r"calendar (['\"])")
_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'" + r'|"(?:[^"\\]|\\.)*"')
_LISTED = re.compile(r"exclusion calendars \((?P<names>.*?)\) exclude")
_LIST_START = "exclusion calendars ("


def _quoted_name(text: str, start: int) -> str | None:
    """The name quoted (as Python's ``repr`` quotes it) at ``text[start]``, or None when it
    does not read as one (cut short by the column's length)."""
    found = _QUOTED.match(text, start)
    if found is None:
        return None
    try:
        name = ast.literal_eval(found.group())
    except (ValueError, SyntaxError):
        return None
    return name if isinstance(name, str) else None


def redact_reason(text: Any, visible: frozenset[str] | None) -> Any:
    """``text`` (a ``degraded_reason``, a receipt's ``error_message``, a 409 or 400 about a
    definition that cannot be evaluated) as a user who sees only ``visible`` calendars may
    read it: from the first mention of a calendar they cannot see (``calendar 'name'``,
    or one that cannot be read back, as a name cut short) on, the text is
    :data:`HIDDEN_CALENDAR`; in ``exclusion calendars (a, b) exclude`` the hidden names
    become :data:`HIDDEN_IN_LIST`. Unchanged for None (full access) or a text that names
    no hidden calendar. Never raises."""
    if visible is None or not isinstance(text, str) or "calendar" not in text:
        return text
    for mention in _NAMED.finditer(text):
        if _quoted_name(text, mention.start(1)) not in visible:
            text = text[: mention.start()] + HIDDEN_CALENDAR
            break
    return _redact_list(text, visible)


def _redact_list(text: str, visible: frozenset[str]) -> str:
    listed = _LISTED.search(text)
    if listed is None:
        start = text.find(_LIST_START)  # a list cut short: nothing after it is shown
        return text if start < 0 else text[: start + len(_LIST_START)] + HIDDEN_IN_LIST + ")"
    names = listed.group("names").split(", ")
    shown = [n for n in names if n in visible]
    if len(shown) == len(names):
        return text
    joined = ", ".join([*shown, HIDDEN_IN_LIST])
    return text[: listed.start("names")] + joined + text[listed.end("names") :]


def redact_detail(detail: Any, visible: frozenset[str] | None) -> Any:
    """A 400's ``detail`` (field messages: a dict of lists, a list, a text) with
    :func:`redact_reason` applied to every message."""
    if visible is None:
        return detail
    if isinstance(detail, dict):
        return {key: redact_detail(value, visible) for key, value in detail.items()}
    if isinstance(detail, list):
        return [redact_detail(value, visible) for value in detail]
    return redact_reason(str(detail), visible) if isinstance(detail, str) else detail
