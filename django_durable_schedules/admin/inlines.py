"""The read-only inlines of a schedule's change page: its latest receipts, attempts and
audit events (at most :data:`INLINE_LIMIT` of each, through :class:`LatestFormSet`).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import quote
from django.db.models import QuerySet
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse
from django.utils.safestring import SafeString

from ..models import RunAttempt, RunReceipt, ScheduleEvent
from .display import render_fragment
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
    """A read-only table of a schedule's latest history rows, one line each: the first
    column links the row's own page (:meth:`row_link`), so Django's caption above each
    row (the object's name and a "Change" link) is left out (the ``dds-history`` class:
    admin.css)."""

    extra = 0
    max_num = 0
    can_delete = False
    show_change_link = False
    formset = LatestFormSet
    classes = ["dds-history"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def row_link(self, obj: Any, text: str) -> SafeString | str:
        """``text`` as a link to ``obj``'s own page (the text alone where the site has no
        such page)."""
        opts = obj._meta
        try:
            url = reverse(
                f"admin:{opts.app_label}_{opts.model_name}_change",
                args=[quote(obj.pk)],
                current_app=self.admin_site.name,
            )
        except NoReverseMatch:
            return text
        return render_fragment("row_link", {"url": url, "text": text})


class AttemptInline(AttemptColumns, _ReadOnlyInline):
    model = RunAttempt
    verbose_name = "attempt"
    verbose_name_plural = f"latest attempts (newest first, at most {INLINE_LIMIT})"
    fields = (
        "run",
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

    @admin.display(description="run")
    def run(self, obj: RunAttempt) -> SafeString | str:
        return self.row_link(obj, f"#{obj.occurrence}.{obj.attempt}")

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        queryset = super().get_queryset(request).select_related("receipt")
        return with_schedule_zone(queryset).order_by("-claimed_at")


class ReceiptInline(ReceiptColumns, _ReadOnlyInline):
    model = RunReceipt
    verbose_name = "receipt"
    verbose_name_plural = f"latest receipts (newest first, at most {INLINE_LIMIT})"
    fields = (
        "run",
        "outcome",
        "finished",
        "duration",
        "error",
        "failure_count_after",
        "slots_skipped",
        "next_run",
    )
    readonly_fields = fields

    @admin.display(description="run")
    def run(self, obj: RunReceipt) -> SafeString | str:
        return self.row_link(obj, f"#{obj.occurrence}.{obj.attempt.attempt}")

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        queryset = super().get_queryset(request).select_related("attempt")
        return with_schedule_zone(queryset).order_by("-finished_at", "-occurrence")


class EventInline(EventColumns, _ReadOnlyInline):
    """The schedule's latest control actions (the audit trail; all of them a link away)."""

    model = ScheduleEvent
    verbose_name = "event"
    verbose_name_plural = (
        f"audit trail: latest control actions (newest first, at most {INLINE_LIMIT})"
    )
    fields = ("at_link", "action", "who", "source", "what_changed")
    readonly_fields = fields

    @admin.display(description="at (its zone · UTC)")
    def at_link(self, obj: ScheduleEvent) -> SafeString | str:
        return self.row_link(obj, self.when(obj))

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return with_schedule_zone(super().get_queryset(request)).order_by("-at", "-id")
