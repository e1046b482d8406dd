"""The schedule's add and change form: :class:`ScheduleForm` (the callback is chosen among
registered names) and the fields of its fieldsets, editable only where :mod:`..state` lets a
caller write.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django import forms

from .. import state
from ..models import Schedule
from ..registry import registry

DEFINITION_FIELDS = (
    "name",
    "callback",
    "kind",
    "interval_seconds",
    "cron",
    "timezone",
    "run_at",
    "start_at",
    "end_at",
    "max_runs",
)
#: The same fields as laid out on the form (tuples share a line).
DEFINITION_LAYOUT = (
    "name",
    "callback",
    ("kind", "timezone"),
    ("interval_seconds", "cron"),
    "run_at",
    ("start_at", "end_at"),
    "max_runs",
)
INPUT_FIELDS = ("payload", "metadata", "owner")
POLICY_FIELDS = (
    "misfire_policy",
    "max_attempts",
    "jitter_seconds",
    "misfire_grace_seconds",
    "backoff_base_seconds",
    "backoff_cap_seconds",
    "pause_after_failures",
    "timeout_seconds",
)
SUMMARY_FIELDS = (
    "status_badge",
    "next_run_detail",
    "upcoming_table",
    "recent_outcomes",
    "history_links",
)
STATE_FIELDS = (
    "degraded_reason",
    "pause_reason",
    "last_run_detail",
    "occurrence",
    "attempt",
    "failure_count",
    "failed_occurrences",
    "missed_count",
    "lease_detail",
    "created_at",
    "updated_at",
)


def _editable(fields: Iterable[str]) -> tuple[str, ...]:
    """The fields :mod:`.state` lets a caller write (run state never is)."""
    return tuple(f for f in fields if f in state.EDITABLE_FIELDS)


class ScheduleForm(forms.ModelForm):
    """``callback`` is a choice among registered names, never a free import path."""

    callback = forms.ChoiceField(choices=())

    class Meta:
        model = Schedule
        fields = _editable(DEFINITION_FIELDS + INPUT_FIELDS + POLICY_FIELDS)

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        field = self.fields.get("callback")
        if not isinstance(field, forms.ChoiceField):  # absent from a read-only form
            return
        names = registry.names()
        current = self.instance.callback if self.instance and self.instance.callback else None
        choices = [(n, n) for n in names]
        if current and current not in names:
            # Shown so the page still renders; saving it again is refused by validation.
            choices.append((current, f"{current} (not registered)"))
        field.choices = [("", "---------"), *choices]
        field.help_text = "One of the callbacks registered in code."
