"""The read-only inlines of a schedule's change page: its latest receipts, attempts and
audit events (at most :data:`INLINE_LIMIT` of each, through :class:`LatestFormSet`).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest

from ..models import RunAttempt, RunReceipt, ScheduleEvent
from .run_columns import AttemptColumns, EventColumns, ReceiptColumns, with_schedule_zone

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


class AttemptInline(AttemptColumns, _ReadOnlyInline):
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
        "origin",
        "missed_slots",
        "outcome",
        "payload_shown",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        queryset = super().get_queryset(request).select_related("receipt")
        return with_schedule_zone(queryset).order_by("-claimed_at")


class ReceiptInline(ReceiptColumns, _ReadOnlyInline):
    model = RunReceipt
    verbose_name = "receipt"
    verbose_name_plural = f"latest receipts (newest first, at most {INLINE_LIMIT})"
    fields = (
        "occurrence",
        "outcome",
        "finished",
        "duration",
        "error",
        "failure_count_after",
        "slots_skipped",
        "next_run",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return with_schedule_zone(super().get_queryset(request)).order_by(
            "-finished_at", "-occurrence"
        )


class EventInline(EventColumns, _ReadOnlyInline):
    """The schedule's latest control actions (the audit trail; all of them a link away)."""

    model = ScheduleEvent
    verbose_name = "event"
    verbose_name_plural = (
        f"audit trail: latest control actions (newest first, at most {INLINE_LIMIT})"
    )
    fields = ("when", "action", "who", "source", "what_changed")
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return with_schedule_zone(super().get_queryset(request)).order_by("-at", "-id")
