"""The read-only delivery log of alert notifications (:class:`NotificationDeliveryAdmin`)
and the deliveries of one event (:func:`deliveries_of`, shown on the event's page)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html_join
from django.utils.safestring import SafeString

from ..conf import app_settings
from ..models import EventAction, NotificationDelivery, ScheduleEvent
from ..notify.config import configured
from .display import fmt_utc, with_note
from .runs import ReadOnlyAdmin


class NotifierFilter(admin.SimpleListFilter):
    """By notifier: the names ``NOTIFIERS`` configures (no query over the log)."""

    title = "notifier"
    parameter_name = "notifier"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(c.name, c.name) for c in configured()]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        value = self.value()
        return queryset.filter(notifier=value) if value else queryset


class ActionFilter(admin.SimpleListFilter):
    """By the event's action (no query over the log)."""

    title = "event"
    parameter_name = "action"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(str(value), str(label)) for value, label in EventAction.choices]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        value = self.value()
        return queryset.filter(action=value) if value else queryset


@admin.register(NotificationDelivery)
class NotificationDeliveryAdmin(ReadOnlyAdmin):
    """Every notification of an alert to a notifier: pending (with its next try),
    delivered, or abandoned after ``NOTIFY_MAX_TRIES`` failed sends (the last error kept).
    Written by the workers only."""

    #: What fits 1280 px with the navigation sidebar open: the event noted under the
    #: schedule, the tries and last error under the status, the next try or the delivery
    #: in one column (each its own field on the delivery's page).
    list_display = ("created", "schedule_event", "notifier", "status_noted", "next_or_delivered")
    list_filter = ("status", NotifierFilter, ActionFilter)
    search_fields = ("schedule_name",)
    fields = (
        "created",
        "schedule_name",
        "action",
        "occurrence",
        "event",
        "notifier",
        "status",
        "tries",
        "max_tries",
        "next_try",
        "lease",
        "delivered",
        "last_error",
    )
    readonly_fields = fields

    @admin.display(description="created (UTC)", ordering="created_at")
    def created(self, obj: NotificationDelivery) -> str:
        return fmt_utc(obj.created_at)

    @admin.display(description="next try (UTC)", ordering="next_try_at")
    def next_try(self, obj: NotificationDelivery) -> str:
        return fmt_utc(obj.next_try_at) if obj.status == "pending" else "—"

    @admin.display(description="delivered (UTC)", ordering="delivered_at")
    def delivered(self, obj: NotificationDelivery) -> str:
        return fmt_utc(obj.delivered_at) if obj.delivered_at else "—"

    @admin.display(description="schedule · event", ordering="schedule_name")
    def schedule_event(self, obj: NotificationDelivery) -> SafeString:
        occurrence = f" #{obj.occurrence}" if obj.occurrence is not None else ""
        return with_note(obj.schedule_name, f"{obj.action}{occurrence}")

    @admin.display(description="status", ordering="status")
    def status_noted(self, obj: NotificationDelivery) -> SafeString:
        tries = f"{obj.tries} {'try' if obj.tries == 1 else 'tries'}"
        return with_note(obj.status, f"{tries}: {obj.last_error}" if obj.last_error else tries)

    @admin.display(description="next try / delivered (UTC)")
    def next_or_delivered(self, obj: NotificationDelivery) -> str:
        if obj.delivered_at:
            return f"delivered {fmt_utc(obj.delivered_at)}"
        return f"next {fmt_utc(obj.next_try_at)}" if obj.status == "pending" else "—"

    @admin.display(description="leased (UTC)")
    def lease(self, obj: NotificationDelivery) -> str:
        if not obj.lease_until:
            return "—"
        return f"until {fmt_utc(obj.lease_until)} by {obj.leased_by}"

    @admin.display(description="gives up after (tries)")
    def max_tries(self, obj: NotificationDelivery) -> int:
        return app_settings.NOTIFY_MAX_TRIES


def deliveries_of(event: ScheduleEvent) -> SafeString | str:
    """``ops: delivered · mail: pending (2 tries)`` for the event's notifications (one
    query), or ``—`` when it had none."""
    rows = list(NotificationDelivery.objects.filter(event_id=event.pk).order_by("notifier"))
    if not rows:
        return "—"
    return format_html_join(
        " · ",
        "{}: {} ({} tries)",
        ((r.notifier, r.status, r.tries) for r in rows),
    )
