"""The rules of a pause with a note and an end (issue #27): the operator's ``note`` and
``until`` checked where they enter (:func:`check_pause`), written on a row being paused or
already paused (:func:`apply_pause`), and whether a paused row's end has come
(:func:`pause_ended`). Pure: no database access.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ValidationError

from .. import timing
from ..models.choices import Status
from ..timing.instants import LAST_INSTANT
from .events import json_value
from .transitions import implements

if TYPE_CHECKING:
    from ..models import Schedule

#: The longest note (characters): the ``pause_reason`` column's length.
NOTE_MAX_CHARS = 500


def check_note(note: Any) -> str | None:
    """The operator's ``note`` as stored (stripped), or None when none was given. Raises
    ``ValidationError`` (``note``) for a value that is not text, or one longer than
    :data:`NOTE_MAX_CHARS` characters."""
    if note is None:
        return None
    if not isinstance(note, str):
        raise ValidationError({"note": [f"A text is required, got {type(note).__name__}."]})
    text: str = note.strip()
    if "\x00" in text:
        raise ValidationError({"note": ["The note cannot contain NUL characters."]})
    if len(text) > NOTE_MAX_CHARS:
        raise ValidationError(
            {"note": [f"At most {NOTE_MAX_CHARS} characters (it has {len(text)})."]}
        )
    return text


def check_until(until: Any, now: datetime | None) -> datetime | None:
    """The end of a pause as stored: the aware instant ``until`` in UTC, rounded up to the
    whole second (a schedule never resumes before it); None when none was given. ``now``:
    the database clock (aware; needed when ``until`` is given). Raises ``ValidationError``
    (``until``) for a value that is not a datetime, a naive one, one not later than
    ``now``, or one after the year :data:`.timing.MAX_YEAR`."""
    if until is None:
        return None
    try:
        value = timing.require_aware(until, "until")
    except timing.InvalidSchedule as exc:
        raise ValidationError({"until": [exc.message]}) from None
    if value > LAST_INSTANT:
        raise ValidationError({"until": [f"Too far ahead (after the year {timing.MAX_YEAR})."]})
    if value.microsecond:
        value = value.replace(microsecond=0) + timedelta(seconds=1)
    if now is None or value <= now:
        shown = now.isoformat() if now is not None else "now"
        raise ValidationError({"until": [f"Must be later than now ({shown}, database clock)."]})
    return value


def check_pause(note: Any, until: Any, now: datetime | None) -> tuple[str | None, datetime | None]:
    """:func:`check_note` and :func:`check_until` together: raises one ``ValidationError``
    with a message per field that is wrong."""
    errors: dict[str, list[str]] = {}
    checked: dict[str, Any] = {}
    for field, check, value in (
        ("note", check_note, (note,)),
        ("until", check_until, (until, now)),
    ):
        try:
            checked[field] = check(*value)
        except ValidationError as exc:
            errors.update(exc.message_dict)
    if errors:
        raise ValidationError(errors)
    return checked["note"], checked["until"]


@implements("control.disable")
def apply_pause(
    row: Schedule,
    note: str | None,
    until: datetime | None,
    changes: dict[str, Any],
    *,
    fresh: bool,
) -> None:
    """Write the checked ``note`` (into ``pause_reason``; None: unchanged) and ``until``
    (``paused_until``) on ``row``, noting each change in ``changes`` (``{field: [old,
    new]}``). ``fresh``: the row is being paused now, so its end is ``until`` even when
    None (a pause without an end); otherwise (a row already paused by an operator) an
    ``until`` of None keeps the end it has."""
    if note is not None and note != row.pause_reason:
        changes["pause_reason"] = [row.pause_reason, note]
        row.pause_reason = note
    if (fresh or until is not None) and until != row.paused_until:
        changes["paused_until"] = [json_value(row.paused_until), json_value(until)]
        row.paused_until = until


@implements("control.resume_until")
def pause_ended(row: Schedule, now: datetime) -> bool:
    """Whether the locked ``row``'s pause ends by ``now`` (aware): paused by an operator
    (not degraded) with a ``paused_until`` at or before ``now`` - the predicate
    ``ScheduleQuerySet.resume_due`` finds candidates by, judged again on the row."""
    return (
        row.status == Status.PAUSED
        and not row.degraded_reason
        and row.paused_until is not None
        and row.paused_until <= now
    )
