"""Normalisation and validation of a schedule's definition, mixed into ``Schedule``: the
default time zone, the normal form ``save()`` stores (canonical zone, whole UTC seconds,
cron and rule without stray spaces), ``clean()`` and its field messages (a ``manual``
schedule's refused fields, durations outside their bounds). No method here writes to the
database.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils import timezone as dj_timezone

from .. import timing
from ..humanize import gap_words
from ..limits import DURATION_BOUNDS
from ..payloads import metadata_errors, payload_errors
from .choices import INSTANT_FIELDS, MANUAL_REFUSES, NO_GRID, Kind, OverlapPolicy

#: How a refusal of ``overlap_policy`` replace names a dispatched callback's kind.
_DISPATCHED = {
    "django_task": "a django.tasks Task",
    "celery_task": "a Celery task",
    "command": "a management command",
}


#: How far in the past (by the database clock) a one-shot's new ``run_at`` is still taken
#: as "now" (the time it takes to type it and send the form): :func:`past_run_at_errors`.
PAST_RUN_AT_GRACE_SECONDS = 60


def past_run_at_errors(
    run_at: Any,
    now: datetime,
    *,
    kind: str,
    run_now: bool = False,
    before: tuple[str, Any] | None = None,
    remedy: str = "set run_now",
) -> dict[str, list[str]]:
    """The field message for a ``once`` schedule's ``run_at`` in the past (the API and the
    admin's form call it with the database clock's ``now``, an aware UTC datetime).

    Refused (``{"run_at": [message]}``) when ``kind`` is ``once``, ``run_at`` (aware) is more
    than :data:`PAST_RUN_AT_GRACE_SECONDS` before ``now``, and ``run_now`` is false; the
    message says the gap in words and ``remedy`` (how the caller's face says "run it at
    once"). ``before``: the edited row's ``(kind, run_at)``; an edit that leaves a one-shot's
    ``run_at`` as it was is never refused (renaming a one-shot that already ran). Else ``{}``:
    with ``run_now`` the schedule is due at once (its receipt keeps ``scheduled_for =
    run_at``, and its lateness). Pure: reads no clock, writes nothing."""
    if kind != Kind.ONCE or run_now or not isinstance(run_at, datetime):
        return {}
    if dj_timezone.is_naive(run_at) or before == (Kind.ONCE, run_at):
        return {}
    gap = (now - run_at).total_seconds()
    if gap <= PAST_RUN_AT_GRACE_SECONDS:
        return {}
    return {
        "run_at": [
            f"run_at is {gap_words(gap)} in the past; {remedy} to run it at once, "
            "or choose a future time."
        ]
    }


def default_timezone() -> str:
    """A new schedule's time zone: the project's ``TIME_ZONE``, else ``"UTC"`` (read at call
    time)."""
    return settings.TIME_ZONE or "UTC"


class ValidationMixin:
    """The normalisation and validation methods of ``Schedule`` (its fields are the
    model's): ``_normalize()`` (``save()``, ``bulk_create()`` and the previews call it),
    ``clean()``, and the field messages ``save()`` refuses a row with (``_bound_errors()``)."""

    if TYPE_CHECKING:
        callback: str
        kind: str
        cron: str
        rrule: str
        extra_specs: Any
        timezone: str
        payload: Any
        metadata: Any
        jitter_seconds: int | None
        backoff_base_seconds: float | None
        backoff_cap_seconds: float | None
        overlap_policy: str
        timeout_seconds: float | None
        max_attempts: int | None

        def spec(self, *, exclusions: bool = True) -> timing.Spec: ...

    def _normalize(self) -> None:
        if not self.timezone:
            self.timezone = default_timezone()
        self.timezone = timing.canonical_timezone(self.timezone)  # europe/paris: Europe/Paris
        if self.cron:
            self.cron = " ".join(self.cron.split())
        if isinstance(self.extra_specs, list | tuple):
            self.extra_specs = [
                " ".join(item.split()) if isinstance(item, str) else item
                for item in self.extra_specs
            ]
        if isinstance(self.rrule, str) and self.rrule != self.rrule.strip():
            self.rrule = self.rrule.strip()
        for f in INSTANT_FIELDS:
            value = getattr(self, f)
            if isinstance(value, datetime) and dj_timezone.is_aware(value):
                setattr(self, f, timing.truncate_to_second(value))

    def clean(self) -> None:
        """Validate the definition; raises ``ValidationError`` with field messages."""
        errors: dict[str, list[str]] = {}
        for f in ("run_at", "start_at", "end_at"):
            value = getattr(self, f)
            if isinstance(value, datetime) and dj_timezone.is_naive(value):
                errors.setdefault(f, []).append(
                    "An aware datetime is required (a naive one is neither UTC nor local time)."
                )
            elif isinstance(value, datetime) and not 1000 <= value.year <= timing.MAX_YEAR:
                # The API's bounds: every supported database stores these, and the engine
                # computes fire times until MAX_YEAR.
                errors.setdefault(f, []).append(
                    f"Must be between the years 1000 and {timing.MAX_YEAR}."
                )
        if errors:
            raise ValidationError(errors)
        self._normalize()
        from ..registry import registry

        if self.callback and self.callback not in registry:
            errors.setdefault("callback", []).append(
                f"{self.callback!r} is not a registered callback."
            )
        manual = self._manual_errors()
        errors.update(manual)
        try:
            if not manual:  # the spec would repeat the first of them
                self.spec().validate()
            if self.kind == Kind.RRULE or self.extra_specs:
                # The next slots from now, as save() and the worker plan them: a rule whose
                # walk from here goes over the planning budget is refused now, not degraded
                # at its first claim (RRULE_PLAN_MAX_STEPS).
                timing.upcoming(self.spec(), dj_timezone.now(), 2)
        except timing.InvalidSchedule as exc:
            errors.setdefault(exc.field, []).append(exc.message)
        for field, messages in self._bound_errors().items():
            errors.setdefault(field, []).extend(messages)
        if self.backoff_base_seconds and self.backoff_cap_seconds is not None:
            if self.backoff_cap_seconds < self.backoff_base_seconds:
                errors.setdefault("backoff_cap_seconds", []).append(
                    "Must not be shorter than backoff_base_seconds."
                )
        for field, messages in self._replace_errors().items():
            errors.setdefault(field, []).extend(messages)
        if self.overlap_policy == OverlapPolicy.ALLOW and (self.max_attempts or 1) > 1:
            # state/parallel_rules.py: later slots already run beside a failed occurrence.
            errors.setdefault("max_attempts", []).append(
                "With overlap_policy 'allow' an occurrence is not retried (later slots run "
                "beside it): leave max_attempts blank or set it to 1."
            )
        for field, messages in payload_errors(self.payload, self.metadata).items():
            errors.setdefault(field, []).extend(messages)
        if "metadata" not in errors:
            errors.update(metadata_errors(self.metadata))
        if self.jitter_seconds and not errors:
            times = timing.upcoming(self.spec(), dj_timezone.now(), 10)
            gaps = [(b - a).total_seconds() for a, b in zip(times, times[1:], strict=False)]
            if gaps and self.jitter_seconds > min(gaps) / 2:
                errors["jitter_seconds"] = [
                    f"At most half the shortest gap between slots ({min(gaps) / 2:g} seconds)."
                ]
        if errors:
            raise ValidationError(errors)

    def _manual_errors(self) -> dict[str, list[str]]:
        """Field messages for what a ``manual`` schedule cannot take: it has no spec (it
        runs only when triggered), so no interval, cron, rule, ``run_at``, window
        (``start_at``/``end_at``) or ``max_runs`` (it never completes). Exclusion calendars
        are refused by the spec (:meth:`.timing.Spec.validate`)."""
        if self.kind not in NO_GRID:
            return {}
        errors: dict[str, list[str]] = {}
        for field in MANUAL_REFUSES:
            value = getattr(self, field)
            if value is not None and value != "":
                errors[field] = [
                    f"A manual schedule runs only when triggered: it takes no {field}."
                    if self.kind == Kind.MANUAL
                    else f"A schedule of kind 'after' runs the instants of its upstream "
                    f"schedules: it takes no {field}."
                ]
        return errors

    def _replace_errors(self) -> dict[str, list[str]]:
        """Field messages for ``overlap_policy`` replace where a run cannot be stopped: it
        stops the running occurrence's child process, which only ``timeout_seconds`` gives,
        and only for a plain callable (a task or a command is dispatched from the worker
        itself, never in a child). A row written behind ``save()`` anyway behaves as
        ``skip`` (:func:`..state.replace_rules.replaces`)."""
        if self.overlap_policy != OverlapPolicy.REPLACE:
            return {}
        if not self.timeout_seconds:
            return {
                "overlap_policy": [
                    "'replace' stops the running occurrence's child process: set "
                    "timeout_seconds, which runs each occurrence in one."
                ]
            }
        from ..registry import KIND_CALLABLE, registry

        if not self.callback or self.callback not in registry:
            return {}  # the callback's own message says so
        kind = registry.get(self.callback).kind
        if kind == KIND_CALLABLE:
            return {}
        what = _DISPATCHED.get(kind, kind)
        return {
            "overlap_policy": [
                f"'replace' stops the running occurrence's child process, and "
                f"{self.callback!r} is {what}, dispatched from the worker itself, never "
                "in a child process: choose another overlap policy."
            ]
        }

    def _bound_errors(self) -> dict[str, list[str]]:
        """Field messages for durations outside their bounds (``DURATION_BOUNDS``, in
        seconds; NaN, infinities and non-numbers are outside every bound)."""
        errors: dict[str, list[str]] = {}
        for field, low, high in DURATION_BOUNDS:
            value = getattr(self, field)
            if value is None:
                continue
            valid = isinstance(value, int | float) and not isinstance(value, bool)
            if not (valid and low < value <= high):  # the comparison is also false for NaN
                least = "at least 0" if low < 0 else f"more than {low:g}"
                errors[field] = [f"Must be {least} and at most {high:g} seconds."]
        return errors
