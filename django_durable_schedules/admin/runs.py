"""The read-only history: :class:`RunAttemptAdmin`, :class:`RunReceiptAdmin` and
:class:`WorkerHeartbeatAdmin`, on :class:`ReadOnlyAdmin` (no add, change or delete for
anyone).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import quote
from django.http import HttpRequest, HttpResponse
from django.urls import NoReverseMatch, reverse
from django.utils.safestring import SafeString

from ..conf import app_settings
from ..models import RunAttempt, RunReceipt, ScheduleEvent, WorkerHeartbeat
from .display import ADMIN_CSS, fmt_utc, render_fragment, safe_reverse
from .filters import WorkerFilter
from .pagination import EstimatedCountPaginator
from .reruns import RerunMixin
from .run_columns import AttemptColumns, EventColumns, ReceiptColumns, ScheduleZoneMixin


class ReadOnlyAdmin(admin.ModelAdmin):
    """No add, change or delete for anyone, superusers included (the database refuses
    UPDATE and DELETE on attempts and receipts anyway). Viewing needs view permission.

    Lists of millions of rows: no ``COUNT(*)`` of the whole table, a count that reads at
    most :data:`.pagination.EXACT_COUNT_LIMIT` rows, and no ``date_hierarchy`` (its year
    and month links are a ``SELECT DISTINCT`` over every row): a date filter instead."""

    paginator = EstimatedCountPaginator
    show_full_result_count = False

    class Media:
        css = ADMIN_CSS

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def _schedule_link(admin_site: admin.AdminSite, schedule_id: Any, name: str) -> SafeString | str:
    try:
        url = reverse(
            "admin:durable_schedules_schedule_change",
            args=[quote(schedule_id)],
            current_app=admin_site.name,
        )
    except NoReverseMatch:
        return name
    return render_fragment("schedule_link", {"url": url, "name": name})


@admin.register(RunAttempt)
class RunAttemptAdmin(RerunMixin, ScheduleZoneMixin, AttemptColumns, ReadOnlyAdmin):
    #: What fits 1280 px with the navigation sidebar open: the claim is the slot plus its
    #: lateness; the origin and the slots passed over are noted under the outcome (each
    #: a column of the detail page, the origin a filter).
    list_display = ("run", "schedule_link", "slot", "lateness_display", "worker", "outcome_noted")
    #: The row's own page is on its first column; the schedule link is a column of its own
    #: (a link inside the row link would be dropped by the browser).
    list_display_links = ("run",)
    list_select_related = ("receipt",)
    list_filter = ("origin", WorkerFilter, ("claimed_at", admin.DateFieldListFilter))
    search_fields = ("schedule_name", "idempotency_key", "=worker")
    #: The detail page: instants in the schedule's zone and UTC, the schedule as a link
    #: (it may have been deleted: the attempt outlives it).
    fields = (
        "run",
        "schedule_link",
        "slot",
        "claimed",
        "lateness_display",
        "worker",
        "lease_token",
        "lease_expires",
        "idempotency_key",
        "origin",
        "missed_slots",
        "nominal_for",
        "outcome",
        "payload_shown",
        "rerun_button",
    )
    readonly_fields = fields

    @admin.display(description="run", ordering="claimed_at")
    def run(self, obj: RunAttempt) -> str:
        return f"#{obj.occurrence}.{obj.attempt}"

    @admin.display(description="schedule", ordering="schedule_name")
    def schedule_link(self, obj: RunAttempt) -> SafeString | str:
        return _schedule_link(self.admin_site, obj.schedule_id, obj.schedule_name)


@admin.register(RunReceipt)
class RunReceiptAdmin(RerunMixin, ScheduleZoneMixin, ReceiptColumns, ReadOnlyAdmin):
    #: What fits 1280 px with the navigation sidebar open: the error is noted under the
    #: outcome; the failure count after it and the next run it planned are on its page.
    list_display = ("run", "schedule_link", "outcome_noted", "finished", "duration")
    list_display_links = ("run",)  # as for attempts: the schedule link is its own column
    list_select_related = ("attempt",)
    list_filter = ("status", ("finished_at", admin.DateFieldListFilter))
    search_fields = ("attempt__schedule_name", "error_type", "error_message")
    fields = (
        "run",
        "schedule_link",
        "outcome",
        "started",
        "finished",
        "duration",
        "error_type",
        "error_message",
        "traceback_display",
        "result",
        "failure_count_after",
        "slots_skipped",
        "next_run",
        "forced",
        "rerun_button",
    )
    readonly_fields = fields

    @admin.display(description="run", ordering="finished_at")
    def run(self, obj: RunReceipt) -> str:
        return f"#{obj.occurrence}.{obj.attempt.attempt}"

    @admin.display(description="schedule", ordering="attempt__schedule_name")
    def schedule_link(self, obj: RunReceipt) -> SafeString | str:
        return _schedule_link(self.admin_site, obj.schedule_id, obj.attempt.schedule_name)


@admin.register(ScheduleEvent)
class ScheduleEventAdmin(ScheduleZoneMixin, EventColumns, ReadOnlyAdmin):
    """The audit trail: every control action on a schedule, who did it, when (the database
    clock), from where and what changed. Append-only: the database refuses changes."""

    list_display = ("when", "schedule_link", "action", "who_from", "what_changed")
    list_display_links = ("when",)
    list_filter = ("action", "source")
    search_fields = ("schedule_name", "actor_repr")
    date_hierarchy = "at"
    fields = (
        "when",
        "schedule_link",
        "action",
        "who",
        "source",
        "what_changed",
        "changes",
        "notifications",
    )
    readonly_fields = fields

    @admin.display(description="notifications")
    def notifications(self, obj: ScheduleEvent) -> SafeString | str:
        from .notifications import deliveries_of

        return deliveries_of(obj)

    @admin.display(description="schedule", ordering="schedule_name")
    def schedule_link(self, obj: ScheduleEvent) -> SafeString | str:
        return _schedule_link(self.admin_site, obj.schedule_id, obj.schedule_name)


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(ReadOnlyAdmin):
    list_display = (
        "worker_id",
        "hostname",
        "pid",
        "last_seen",
        "in_flight",
        "runs_finished",
        "skew",
        "stopped",
    )
    change_list_template = "durable_schedules/admin/change_list.html"
    fields = (
        "worker_id",
        "hostname",
        "pid",
        "started",
        "last_seen",
        "stopped",
        "in_flight",
        "runs_finished",
        "skew",
    )
    readonly_fields = fields

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        context = {
            "dds_health_url": safe_reverse(
                "admin:durable_schedules_schedule_health", self.admin_site.name
            ),
            **(extra_context or {}),
        }
        return super().changelist_view(request, extra_context=context)

    @admin.display(description="started at (UTC)", ordering="started_at")
    def started(self, obj: WorkerHeartbeat) -> str:
        return fmt_utc(obj.started_at)

    @admin.display(description="last seen (UTC)", ordering="last_seen_at")
    def last_seen(self, obj: WorkerHeartbeat) -> str:
        return fmt_utc(obj.last_seen_at)

    @admin.display(description="stopped at (UTC)", ordering="stopped_at")
    def stopped(self, obj: WorkerHeartbeat) -> str:
        return fmt_utc(obj.stopped_at)

    @admin.display(description="clock skew", ordering="clock_skew_seconds")
    def skew(self, obj: WorkerHeartbeat) -> SafeString:
        return render_fragment(
            "clock_skew",
            {
                "bad": abs(obj.clock_skew_seconds) > app_settings.SKEW_WARN_SECONDS,
                "seconds": f"{obj.clock_skew_seconds:+.3f}",
            },
        )
