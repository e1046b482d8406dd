"""The computed columns of attempts, receipts and audit events, shared by their list pages
(:mod:`.runs`) and by the latest-runs tables of a schedule's change page (:mod:`.inlines`).
"""

from __future__ import annotations

from django.contrib import admin
from django.utils.safestring import SafeString
from django.utils.text import Truncator

from ..models import RunAttempt, RunReceipt, ScheduleEvent
from .display import _EMPTY, _attempt_outcome, fmt_utc, outcome_label


class AttemptColumns:
    """``slot``, ``claimed``, ``lateness_display`` and ``outcome`` of an attempt."""

    @admin.display(description="scheduled for (UTC)", ordering="scheduled_for")
    def slot(self, obj: RunAttempt) -> str:
        return fmt_utc(obj.scheduled_for)

    @admin.display(description="claimed at (UTC)", ordering="claimed_at")
    def claimed(self, obj: RunAttempt) -> str:
        return fmt_utc(obj.claimed_at)

    @admin.display(description="late")
    def lateness_display(self, obj: RunAttempt) -> str:
        return f"{obj.lateness:.0f} s"

    @admin.display(description="outcome")
    def outcome(self, obj: RunAttempt) -> SafeString | str:
        return _attempt_outcome(obj)


class ReceiptColumns:
    """``outcome``, ``finished``, ``error`` and ``next_run`` of a receipt."""

    @admin.display(description="outcome", ordering="status")
    def outcome(self, obj: RunReceipt) -> SafeString:
        return outcome_label(obj.status)

    @admin.display(description="finished at (UTC)", ordering="finished_at")
    def finished(self, obj: RunReceipt) -> str:
        return fmt_utc(obj.finished_at)

    @admin.display(description="error")
    def error(self, obj: RunReceipt) -> str:
        text = ": ".join(p for p in (obj.error_type, obj.error_message) if p)
        return Truncator(text).chars(120) if text else _EMPTY

    @admin.display(description="next run (UTC)", ordering="next_run_at")
    def next_run(self, obj: RunReceipt) -> str:
        return fmt_utc(obj.next_run_at)


def describe_changes(changes: object) -> str:
    """``{"field": [before, after], ...}`` as ``"field: before → after; ..."``."""
    if not isinstance(changes, dict) or not changes:
        return _EMPTY
    parts = []
    for field, value in changes.items():
        if isinstance(value, list | tuple) and len(value) == 2:
            parts.append(f"{field}: {_shown(value[0])} → {_shown(value[1])}")
        else:
            parts.append(f"{field}: {_shown(value)}")
    return Truncator("; ".join(parts)).chars(300)


def _shown(value: object) -> str:
    return "—" if value in (None, "") else str(value)


class EventColumns:
    """``when``, ``who`` and ``what_changed`` of an audit event."""

    @admin.display(description="at (UTC)", ordering="at")
    def when(self, obj: ScheduleEvent) -> str:
        return fmt_utc(obj.at)

    @admin.display(description="who", ordering="actor_repr")
    def who(self, obj: ScheduleEvent) -> str:
        return obj.actor_repr or _EMPTY

    @admin.display(description="what changed")
    def what_changed(self, obj: ScheduleEvent) -> str:
        return describe_changes(obj.changes)
