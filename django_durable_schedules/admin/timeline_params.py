"""The admin timeline's query string, read and checked: :func:`read_params` turns the GET
parameters into :class:`TimelineParams` and a list of messages, one per value it could not
use (that value is then ignored: a bad parameter is a message on the page, never an
error page). Pure: no database; ``now`` is given.

Parameters: ``range`` (``24h``, ``7d`` or ``30d``; default ``24h``) or ``start`` and
``end`` (ISO 8601; no zone: UTC; at least a minute, at most :data:`MAX_SPAN` apart),
``schedule`` (one schedule's id), ``status``, ``callback``, ``owner`` (a username), ``group``
(a concurrency group's name), ``label`` (``key`` or ``key:value``, repeatable, all must
match), ``p`` (the page, from 0) and ``table`` (``1``: the runs drawn as a text table too).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.exceptions import ValidationError

from ..models.labels import Label, parse_labels

#: The ranges offered, by their parameter value: how far back the axis reaches.
RANGES = {"24h": timedelta(hours=24), "7d": timedelta(days=7), "30d": timedelta(days=30)}
DEFAULT_RANGE = "24h"
#: The share of a named range the axis shows ahead of now (future slots).
FUTURE_SHARE = 1 / 6
#: The longest and the shortest chosen range.
MAX_SPAN = timedelta(days=92)
MIN_SPAN = timedelta(minutes=1)
#: The longest value of a free-text filter.
MAX_TEXT = 200
#: The highest page number accepted.
MAX_PAGE = 100_000


@dataclass(frozen=True)
class TimelineParams:
    """What the timeline shows: the axis (``start``, ``end``, aware UTC), the named
    ``range`` ("" for a chosen start and end) and the filters (empty: not filtered)."""

    start: datetime
    end: datetime
    range: str = DEFAULT_RANGE
    schedule: str = ""
    status: str = ""
    callback: str = ""
    owner: str = ""
    group: str = ""
    labels: list[Label] = field(default_factory=list)
    label_texts: list[str] = field(default_factory=list)
    page: int = 0
    #: The runs drawn listed as a text table under the drawing (``?table=1``).
    table: bool = False

    def filters(self) -> dict[str, Any]:
        """The filters as query-string parameters (no range, no page): what the range
        links and the pagination keep."""
        values: dict[str, Any] = {
            name: getattr(self, name)
            for name in ("schedule", "status", "callback", "owner", "group")
            if getattr(self, name)
        }
        if self.label_texts:
            values["label"] = list(self.label_texts)
        return values


def named_range(name: str, now: datetime) -> tuple[datetime, datetime]:
    """The axis of the named range ``name`` (a key of :data:`RANGES`) at ``now``: from the
    range back to :data:`FUTURE_SHARE` of it ahead."""
    span = RANGES[name]
    return now - span, now + span * FUTURE_SHARE


def parse_instant(text: str) -> datetime:
    """An ISO 8601 instant (``2027-06-01``, ``2027-06-01T10:00``, ``...+02:00``, ``...Z``) as
    an aware UTC datetime; no zone means UTC. Raises ``ValueError`` with a message."""
    text = text.strip()
    if not text or len(text) > 40:
        raise ValueError(f"{text[:40]!r} is not an ISO 8601 date or time")
    try:
        at = datetime.fromisoformat(text.replace("Z", "+00:00").replace(" ", "T", 1))
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO 8601 date or time") from None
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.astimezone(UTC)


def _chosen_range(query: Any, errors: list[str]) -> tuple[datetime, datetime] | None:
    start_text, end_text = query.get("start", ""), query.get("end", "")
    if not start_text and not end_text:
        return None
    if not (start_text and end_text):
        errors.append("A chosen range needs both start and end: showing the last 24 hours.")
        return None
    try:
        start, end = parse_instant(start_text), parse_instant(end_text)
    except ValueError as exc:
        errors.append(f"Range not shown: {exc}. Showing the last 24 hours.")
        return None
    if end - start < MIN_SPAN:
        errors.append("Range not shown: end must be at least a minute after start.")
        return None
    if end - start > MAX_SPAN:
        errors.append(f"Range not shown: at most {MAX_SPAN.days} days at once.")
        return None
    return start, end


def _text(query: Any, name: str, errors: list[str]) -> str:
    value = str(query.get(name, "")).strip()
    if len(value) > MAX_TEXT or "\x00" in value:
        errors.append(f"The {name} filter is not valid: ignored.")
        return ""
    return value


def read_params(query: Any, now: datetime, statuses: Any = ()) -> tuple[TimelineParams, list[str]]:
    """``query`` (a ``QueryDict`` or a mapping of lists: ``getlist`` is used when present)
    read at ``now`` (aware): the params and the messages of the values ignored. ``statuses``:
    the schedule statuses the ``status`` filter accepts."""
    errors: list[str] = []
    chosen = _chosen_range(query, errors)
    name = query.get("range", "") or DEFAULT_RANGE
    if chosen is None and name not in RANGES:
        errors.append(f"Unknown range {name[:20]!r}: showing the last 24 hours.")
        name = DEFAULT_RANGE
    start, end = chosen if chosen is not None else named_range(name, now)
    status = _text(query, "status", errors)
    if status and status not in statuses:
        errors.append(f"Unknown status {status[:20]!r}: not filtered by status.")
        status = ""
    schedule = _text(query, "schedule", errors)
    if schedule:
        try:
            schedule = str(uuid.UUID(schedule))
        except ValueError:
            errors.append("The schedule filter is not a schedule's id: ignored.")
            schedule = ""
    getlist = getattr(query, "getlist", None)
    texts = [t for t in (getlist("label") if getlist else query.get("label", [])) if t]
    labels: list[Label] = []
    try:
        labels = parse_labels(texts)
    except ValidationError as exc:
        errors.append(f"Label filter ignored: {' '.join(exc.messages)}")
        texts = []
    page_text = str(query.get("p", "0") or "0")
    page = int(page_text) if page_text.isdigit() and int(page_text) <= MAX_PAGE else -1
    if page < 0:
        errors.append("Unknown page: showing the first.")
        page = 0
    params = TimelineParams(
        start=start,
        end=end,
        range="" if chosen is not None else name,
        schedule=schedule,
        status=status,
        callback=_text(query, "callback", errors),
        owner=_text(query, "owner", errors),
        group=_text(query, "group", errors),
        labels=labels,
        label_texts=texts,
        page=page,
        table=query.get("table", "") == "1",
    )
    return params, errors
