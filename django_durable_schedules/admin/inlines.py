"""The read-only inlines of a schedule's change page: its latest attempts and receipts
(at most :data:`INLINE_LIMIT` of each, through :class:`LatestFormSet`).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest
from django.utils.safestring import SafeString
from django.utils.text import Truncator

from ..models import RunAttempt, RunReceipt
from .display import _EMPTY, _attempt_outcome, fmt_utc, outcome_label

#: Latest attempts and receipts shown on a schedule's change page.
INLINE_LIMIT = 20


class LatestFormSet(BaseInlineFormSet):
    """Only the newest :data:`INLINE_LIMIT` related rows (the full history is a link away)."""

    def get_queryset(self) -> QuerySet:
        if not hasattr(self, "_queryset"):
            self._queryset = super().get_queryset()[:INLINE_LIMIT]
        return self._queryset


class _ReadOnlyInline(admin.TabularInline):
    extra = 0
    max_num = 0
    can_delete = False
    show_change_link = True
    formset = LatestFormSet

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class AttemptInline(_ReadOnlyInline):
    model = RunAttempt
    verbose_name = "attempt"
    verbose_name_plural = f"latest attempts (newest first, at most {INLINE_LIMIT})"
    fields = (
        "occurrence",
        "attempt",
        "slot",
        "claimed",
        "lateness_display",
        "worker",
        "missed_slots",
        "outcome",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).select_related("receipt").order_by("-claimed_at")

    @admin.display(description="scheduled for (UTC)")
    def slot(self, obj: RunAttempt) -> str:
        return fmt_utc(obj.scheduled_for)

    @admin.display(description="claimed at (UTC)")
    def claimed(self, obj: RunAttempt) -> str:
        return fmt_utc(obj.claimed_at)

    @admin.display(description="late")
    def lateness_display(self, obj: RunAttempt) -> str:
        return f"{obj.lateness:.0f} s"

    @admin.display(description="outcome")
    def outcome(self, obj: RunAttempt) -> SafeString | str:
        return _attempt_outcome(obj)


class ReceiptInline(_ReadOnlyInline):
    model = RunReceipt
    verbose_name = "receipt"
    verbose_name_plural = f"latest receipts (newest first, at most {INLINE_LIMIT})"
    fields = (
        "occurrence",
        "outcome",
        "finished",
        "error",
        "failure_count_after",
        "slots_skipped",
        "next_run",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).order_by("-finished_at", "-occurrence")

    @admin.display(description="outcome")
    def outcome(self, obj: RunReceipt) -> SafeString:
        return outcome_label(obj.status)

    @admin.display(description="finished at (UTC)")
    def finished(self, obj: RunReceipt) -> str:
        return fmt_utc(obj.finished_at)

    @admin.display(description="error")
    def error(self, obj: RunReceipt) -> str:
        text = ": ".join(p for p in (obj.error_type, obj.error_message) if p)
        return Truncator(text).chars(120) if text else _EMPTY

    @admin.display(description="next run (UTC)")
    def next_run(self, obj: RunReceipt) -> str:
        return fmt_utc(obj.next_run_at)
