"""Errors raised by django-durable-schedules, and the outcomes a callback may raise."""

from __future__ import annotations

from django.core.exceptions import ValidationError

from .timing import InvalidSchedule


def validation_text(exc: ValidationError) -> str:
    """A ``ValidationError`` as one line of text: ``"field: message message; field: ..."``
    for field errors (``error_dict``), else its messages joined by spaces. Used wherever a
    validation error becomes a reason in a receipt, an event, a check or an import result.
    """
    if hasattr(exc, "error_dict"):
        return "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())
    return " ".join(exc.messages)


class DurableSchedulesError(Exception):
    """Base class of every error this app raises on purpose."""


class StateConflict(DurableSchedulesError):
    """The requested transition is not allowed from the schedule's current state.

    The API maps it to HTTP 409; ``reason`` says why.
    """

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class NotRegistered(DurableSchedulesError, LookupError):
    """No callback is registered under the given name."""


class RunOutcome(Exception):
    """Base of the exceptions a callback raises to choose its outcome."""

    def __init__(self, reason: str = ""):
        super().__init__(reason)
        self.reason = reason


class SkipRun(RunOutcome):
    """The callback decided not to do its work this time: receipt ``skipped``.

    A skip is not a success: it does not reset ``failure_count``.
    """


class RetryRun(RunOutcome):
    """The run failed and should be retried: receipt ``failed``, same occurrence retried.

    ``after_seconds`` (float, seconds) overrides the exponential backoff delay.
    """

    def __init__(self, reason: str = "", after_seconds: float | None = None):
        super().__init__(reason)
        self.after_seconds = after_seconds


class FailRun(RunOutcome):
    """Terminal failure: receipt ``failed`` and the schedule becomes ``failed``."""


__all__ = [
    "DurableSchedulesError",
    "FailRun",
    "InvalidSchedule",
    "NotRegistered",
    "RetryRun",
    "RunOutcome",
    "SkipRun",
    "StateConflict",
]
