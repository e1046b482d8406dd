"""Values that enter the engine, bounded where they enter: whatever a callback returned or
raised, and whatever a row written behind ``save()`` holds, becomes a value a receipt can
store and a datetime can hold. Pure: no database.
"""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import datetime
from typing import Any

from .. import timing
from ..conf import app_settings
from ..projection import (
    bound_text,
    bound_traceback,
    is_storable,
    project_error,
    project_result,
)
from .values import Outcome


def bounded_seconds(value: Any, default: float | None, high: float) -> float | None:
    """``value`` as seconds in ``[0, high]``: None, NaN and non-numbers give ``default``,
    negative values 0, larger ones ``high`` (a row written behind ``save()`` may hold
    anything its column type allows)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    try:
        seconds = float(value)
    except OverflowError:  # an int beyond a float
        return high if value > 0 else 0.0
    if math.isnan(seconds):
        return default
    return min(max(seconds, 0.0), high)


def bound_retry_after(value: Any) -> tuple[float | None, str]:
    """``(seconds, note)`` for the ``after_seconds`` a callback gave ``RetryRun``.

    ``None`` means "use the backoff". A number is kept if it lies in
    ``[0, RETRY_AFTER_MAX_SECONDS]``; a larger one (``inf``, ``1.8e12`` epoch milliseconds
    read as seconds, a huge int) is clamped to that bound, a negative one (or ``-inf``) to 0;
    NaN, a bool or a non-number falls back to the backoff. ``note`` says what was changed
    and why (empty when nothing was), for the receipt's error message. Never raises.
    """
    if value is None:
        return None, ""
    high = app_settings.RETRY_AFTER_MAX_SECONDS
    shown = value if type(value) in (int, float) else type(value).__name__
    if type(value) is int and value.bit_length() > 64:
        shown = "a huge int"
    seconds = bounded_seconds(value, None, high)
    if seconds is None:
        return None, f"after_seconds={shown!s} is not a number of seconds; the backoff was used"
    if seconds == value:
        return seconds, ""
    return (
        seconds,
        f"after_seconds={shown!s} is outside [0, {high:g}] s; retried after {seconds:g} s",
    )


def bound_outcome(outcome: Outcome) -> Outcome:
    """``outcome`` with every value a callback could influence made storable: error type
    (200 characters) and message (``ERROR_MESSAGE_MAX_CHARS``) as valid text, invalid
    characters replaced and marked (:func:`.projection.bound_text`); ``result`` projected
    if it is not plain, storable JSON (:func:`.projection.project_result`); ``retry_after``
    bounded (:func:`bound_retry_after`, the reason appended to the message); ``traceback``
    bounded (:func:`.projection.bound_traceback`) and ``started_at`` kept only if it is an
    aware datetime. The state
    machine applies it to every outcome it is given, so a receipt is always writable."""
    max_chars = app_settings.ERROR_MESSAGE_MAX_CHARS
    changes: dict[str, Any] = {}
    error_type, error_message = outcome.error_type, outcome.error_message
    clean_type = bound_text(error_type, 200)
    if clean_type != error_type:
        changes["error_type"] = clean_type
    clean_message = bound_text(error_message, max_chars)
    retry_after, note = bound_retry_after(outcome.retry_after)
    if str(outcome.status) != "failed":  # only a failure is retried: nothing to bound
        retry_after, note = None, ""
    if note:
        clean_message = bound_text(
            f"{clean_message} ({note})" if clean_message else note, max_chars
        )
    if clean_message != error_message:
        changes["error_message"] = clean_message
    if retry_after != outcome.retry_after or type(retry_after) is not type(outcome.retry_after):
        changes["retry_after"] = retry_after
    max_bytes = app_settings.RESULT_MAX_BYTES
    if outcome.result is not None and not is_storable(outcome.result, max_bytes):
        changes["result"] = project_result(outcome.result, max_bytes)
    if type(outcome.terminal) is not bool:
        changes["terminal"] = bool(outcome.terminal is True)
    started_at = outcome.started_at
    if started_at is not None and not (
        type(started_at) is datetime and started_at.utcoffset() is not None
    ):
        changes["started_at"] = None  # only an aware datetime is an instant
    if outcome.traceback is not None:
        traceback = bound_traceback(outcome.traceback)
        if traceback != outcome.traceback:
            changes["traceback"] = traceback
    return replace(outcome, **changes) if changes else outcome


def describe_problem(exc: BaseException) -> str:
    """One line for a receipt or a ``degraded_reason`` saying what could not be evaluated:
    ``"<field>: <message>"`` for an :class:`~.timing.InvalidSchedule`, ``"<Type>: <message>"``
    for any other exception (its text bounded, never its ``__str__``). Never raises."""
    if isinstance(exc, timing.InvalidSchedule) and type(exc.message) is str:
        return bound_text(f"{exc.field}: {exc.message}", 450)
    error_type, message = project_error(exc, 400)
    return bound_text(f"{error_type}: {message}" if message else error_type, 450)


#: How a ``degraded_reason`` begins when the engine could not evaluate the row's definition
#: (such a schedule comes back by a valid edit and :func:`enable`, never by itself).
UNEVALUABLE_PREFIX = "cannot evaluate the schedule: "


#: The largest value an integer counter may hold so that the next increment still fits its
#: column on every database (PostgreSQL ``integer``; ``bigint`` for the two slot counts).
COUNT_MAX = 2**31 - 2
BIG_COUNT_MAX = 2**62

#: The schedule's counters a worker reads and increments, with their bounds.
SCHEDULE_COUNTERS = (
    ("occurrence", COUNT_MAX),
    ("attempt", COUNT_MAX),
    ("failure_count", COUNT_MAX),
    ("failed_occurrences", COUNT_MAX),
    ("missed_count", BIG_COUNT_MAX),
    ("excluded_count", BIG_COUNT_MAX),
    ("blackout_count", BIG_COUNT_MAX),
    ("blackout_deferred", COUNT_MAX),
)


def read_count(value: Any, field: str, high: int = COUNT_MAX) -> int:
    """``value`` if it is a count the engine can go on from: an ``int`` (not a ``bool``) in
    ``[0, high]``. Raises :class:`.timing.InvalidSchedule` naming ``field`` otherwise (a
    column written behind ``save()``: SQLite keeps text or a real in an integer column, any
    database keeps a value the next increment overflows)."""
    if type(value) is int and 0 <= value <= high:
        return value
    shown = repr(value) if type(value) in (int, float) else f"a {type(value).__name__}"
    raise timing.InvalidSchedule(field, f"{shown[:40]} is not a count in [0, {high}]")


def check_counters(row: Any) -> None:
    """Raise :class:`.timing.InvalidSchedule` for the first of ``row``'s counters
    (:data:`SCHEDULE_COUNTERS`) that :func:`read_count` refuses."""
    for field, high in SCHEDULE_COUNTERS:
        read_count(getattr(row, field), field, high)


def bad_counters(row: Any) -> list[str]:
    """The names of ``row``'s counters that :func:`read_count` refuses (none: ``[]``)."""
    bad = []
    for field, high in SCHEDULE_COUNTERS:
        value = getattr(row, field)
        if not (type(value) is int and 0 <= value <= high):
            bad.append(field)
    return bad
