"""``manage.py schedules disable NAME [NAME ...] --note TEXT --until WHEN`` (issue #27):
the ``--until`` argument (:func:`pause_end`) and the pause of each schedule named
(:func:`disable_each`), through :func:`..state.disable`."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError
from django.utils.dateparse import parse_datetime

from .. import state
from ..exceptions import StateConflict
from ..models import Schedule

#: A duration from now: a whole number and a unit (seconds, minutes, hours, days).
_DURATION = re.compile(r"\s*(\d{1,9})\s*([smhd])\s*\Z", re.IGNORECASE)
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
#: The longest duration ``--until`` takes (days): a pause's end is at most this far.
MAX_DAYS = 36600


def pause_end(value: str) -> datetime | timedelta:
    """argparse type of ``--until``: an ISO 8601 instant with an offset
    (``2026-12-03T18:00:00Z``), or a duration from now (``30m``, ``2h``, ``1d``; units
    ``s m h d``, at most :data:`MAX_DAYS` days), returned as a ``timedelta`` that
    :func:`disable_each` adds to the database clock. Raises ``ArgumentTypeError``."""
    duration = _DURATION.match(value)
    if duration:
        delta = timedelta(**{_UNITS[duration.group(2).lower()]: int(duration.group(1))})
        if not timedelta(0) < delta <= timedelta(days=MAX_DAYS):
            raise argparse.ArgumentTypeError(
                f"{value!r}: a duration between 1s and {MAX_DAYS}d is required"
            )
        return delta
    try:
        parsed = parse_datetime(value.strip())
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise argparse.ArgumentTypeError(
            f"{value!r} is neither an ISO 8601 datetime with an offset "
            "(2026-12-03T18:00:00Z) nor a duration such as 30m, 2h or 1d"
        )
    return parsed


def disable_each(names: list[str], note: str | None, until: Any) -> Iterator[str]:
    """Pause each schedule of ``names`` (source ``command``) with ``note`` and ``until``
    (from :func:`pause_end`: a duration is counted from the database clock, read once),
    yielding one line per schedule. Every name is looked up before any is paused; raises
    ``CommandError`` for an unknown name, a bad note or end (nothing is paused then), or,
    after pausing the others, naming each schedule refused."""
    rows = []
    for name in dict.fromkeys(names):
        try:
            rows.append(Schedule.objects.get(name=name))
        except Schedule.DoesNotExist:
            raise CommandError(f"no schedule named {name!r}") from None
    if isinstance(until, timedelta):
        until = state.db_now() + until
    try:
        state.check_pause(note, until, state.db_now() if until is not None else None)
    except ValidationError as exc:
        raise CommandError(_messages(exc)) from None
    refused = []
    for schedule in rows:
        try:
            row = state.disable(schedule.pk, note=note, until=until, source="command")
        except (StateConflict, ValidationError) as exc:
            reason = exc.reason if isinstance(exc, StateConflict) else _messages(exc)
            refused.append(f"{schedule.name}: {reason}")
            continue
        end = row.paused_until.strftime("%Y-%m-%dT%H:%M:%SZ") if row.paused_until else "enabled"
        note_text = f" ({row.pause_reason})" if row.pause_reason else ""
        yield f"{row.name}: {row.status} until {end}{note_text}"
    if refused:
        raise CommandError("refused: " + "; ".join(refused))


def _messages(exc: ValidationError) -> str:
    """``field: message`` pairs of a ``ValidationError``."""
    if not hasattr(exc, "error_dict"):
        return " ".join(exc.messages)
    return "; ".join(f"{f}: {' '.join(m)}" for f, m in exc.message_dict.items())
