"""Instants: the UTC zone, the bounds of the searchable range, aware datetimes truncated to
whole seconds, and conversions to and from whole seconds since the Unix epoch.

Every instant that goes in must be an aware ``datetime``; every instant that comes out is an
aware UTC ``datetime`` with whole seconds. Instants are truncated (never rounded up) to whole
seconds before any arithmetic.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from .errors import InvalidSchedule

UTC = timezone.utc  # noqa: UP017 (the same object as datetime.UTC)
MAX_YEAR = 9000  # fire times later than this year are "never" (None), never an OverflowError

SECOND = timedelta(seconds=1)
MINUTE = timedelta(minutes=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
LAST_INSTANT = datetime(MAX_YEAR, 12, 31, 23, 59, 59, tzinfo=UTC)
FIRST_INSTANT = datetime(2, 1, 1, tzinfo=UTC)  # cron searches never start earlier (no underflow)


def require_aware(value: datetime, field: str) -> datetime:
    """Return ``value`` converted to UTC, refusing naive datetimes.

    A naive datetime is neither UTC nor local time, so it is never guessed at.
    Microseconds are kept (see :func:`truncate_to_second`).

    Raises :class:`InvalidSchedule` ``(field, "aware datetime required ...")`` for a naive
    datetime or a non-datetime, and for an instant that cannot be expressed in UTC.
    """
    if type(value) is datetime and value.tzinfo is UTC:  # already UTC (the common case)
        return value
    if not isinstance(value, datetime):
        raise InvalidSchedule(
            field, f"aware datetime required, got {type(value).__name__} {value!r}"
        )
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidSchedule(
            field,
            f"aware datetime required, got naive {value.isoformat()}; "
            "give its UTC offset or time zone (it is never read as UTC or as local time)",
        )
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise InvalidSchedule(field, f"datetime {value.isoformat()} is out of range") from None


def truncate_to_second(value: datetime, field: str = "datetime") -> datetime:
    """Return the aware ``value`` in UTC with ``microsecond=0``.

    Truncates, never rounds up, so a slot can never move into the future (MySQL
    rounding ``.999999`` up skipped runs). Raises :class:`InvalidSchedule` ``(field, ...)``
    for a naive datetime, like :func:`require_aware`.
    """
    value = require_aware(value, field)
    return value.replace(microsecond=0) if value.microsecond else value


def to_seconds(value: datetime) -> int:
    """Whole seconds since the Unix epoch of an aware UTC datetime without microseconds."""
    return (value - _EPOCH) // SECOND


def from_seconds(seconds: int) -> datetime | None:
    """The UTC instant ``seconds`` after the epoch, or None when it lies after MAX_YEAR."""
    if seconds > _LAST_SECONDS:
        return None
    return _EPOCH + timedelta(seconds=seconds)


_LAST_SECONDS = to_seconds(LAST_INSTANT)
