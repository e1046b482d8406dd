"""Intervals: the accepted range of an interval schedule's length, in whole seconds.

Interval schedules are elapsed UTC time: slot ``n`` is ``anchor + n * interval`` (the grid
itself is computed in :mod:`.slots`).
"""

from __future__ import annotations

from .errors import InvalidSchedule

MIN_INTERVAL_SECONDS = 1
MAX_INTERVAL_SECONDS = 10 * 366 * 86400  # about ten years; bigger intervals are rejected


def validate_interval(seconds: int) -> int:
    """Return ``seconds`` if it is a valid interval length: an ``int`` (not a ``bool``) in
    ``[MIN_INTERVAL_SECONDS, MAX_INTERVAL_SECONDS]`` (1 s to about 10 years).

    Zero, negative and absurdly large intervals are refused at creation instead of
    overflowing a timer in the worker.

    Raises :class:`InvalidSchedule` ``("interval_seconds", ...)``.
    """
    if isinstance(seconds, bool) or not isinstance(seconds, int):
        raise InvalidSchedule(
            "interval_seconds",
            f"interval must be a whole number of seconds, got {type(seconds).__name__} {seconds!r}",
        )
    if seconds < MIN_INTERVAL_SECONDS:
        raise InvalidSchedule(
            "interval_seconds",
            f"interval must be at least {MIN_INTERVAL_SECONDS} second, got {seconds}",
        )
    if seconds > MAX_INTERVAL_SECONDS:
        raise InvalidSchedule(
            "interval_seconds",
            f"interval must be at most {MAX_INTERVAL_SECONDS} seconds (about 10 years), "
            f"got {seconds}",
        )
    return seconds
