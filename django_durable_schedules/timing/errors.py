"""The one error of the time math: :class:`InvalidSchedule`, raised for a schedule
definition (or an instant given to this package) that is not acceptable."""

from __future__ import annotations


class InvalidSchedule(ValueError):
    """A schedule definition (or an instant given to this module) is not acceptable.

    ``field`` names the offending schedule field (``"cron"``, ``"timezone"``,
    ``"interval_seconds"``, ``"run_at"``, ...) so that callers can turn it into a
    field-keyed ``ValidationError`` or an HTTP 400 body; ``message`` is the human text and
    also what ``str()`` returns.
    """

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
        self.message = message

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[type[InvalidSchedule], tuple[str, str]]:
        # keep both arguments when pickled (e.g. across processes)
        return (type(self), (self.field, self.message))


# Public under its package's name, as before the split: the name stays
# ``django_durable_schedules.timing.InvalidSchedule`` in pickles, tracebacks and the
# ``error_type`` of a receipt (projection.project_error records the qualified name).
InvalidSchedule.__module__ = "django_durable_schedules.timing"


class PlanningBudgetExceeded(InvalidSchedule):
    """A rule whose expansion examined more candidate times between two of its occurrences
    than the planning budget allows (:data:`..limits.RRULE_PLAN_MAX_STEPS`): refused as a
    field error on ``rrule`` at save, and a schedule holding one (written behind ``save()``)
    is paused ``degraded`` with this message at the claim. An :class:`InvalidSchedule`, so
    every caller that handles those handles it."""


PlanningBudgetExceeded.__module__ = "django_durable_schedules.timing"
