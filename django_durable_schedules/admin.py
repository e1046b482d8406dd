"""Django admin: schedules (actions call :mod:`.state`), read-only attempts and receipts.

Thin by design: every transition goes through the state machine.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest

from . import state
from .exceptions import StateConflict
from .models import RunAttempt, RunReceipt, Schedule, WorkerHeartbeat
from .registry import registry


class ScheduleForm(forms.ModelForm):
    """``callback`` is a choice among registered names, never a free import path."""

    callback = forms.ChoiceField(choices=())

    class Meta:
        model = Schedule
        fields = (
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
            "misfire_policy",
            "max_attempts",
            "payload",
            "metadata",
            "status",
            "owner",
        )

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        names = registry.names()
        current = self.instance.callback if self.instance and self.instance.callback else None
        if current and current not in names:
            names = [*names, current]
        self.fields["callback"].choices = [(n, n) for n in names]


def _bulk(label: str, func: Any):  # type: ignore[no-untyped-def]
    def action(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: Any) -> None:
        done, refused = 0, []
        for pk, name in queryset.values_list("pk", "name"):
            try:
                func(pk)
                done += 1
            except StateConflict as exc:
                refused.append(f"{name}: {exc.reason}")
        if done:
            modeladmin.message_user(request, f"{label}: {done} schedule(s).", messages.SUCCESS)
        if refused:
            modeladmin.message_user(request, "Refused - " + "; ".join(refused), messages.WARNING)

    action.short_description = f"{label} selected schedules"  # type: ignore[attr-defined]
    action.__name__ = label.lower().replace(" ", "_")
    return action


@admin.register(Schedule)
class ScheduleAdmin(admin.ModelAdmin):
    form = ScheduleForm
    list_display = (
        "name",
        "callback",
        "kind",
        "status",
        "next_run_at",
        "last_run_at",
        "occurrence",
        "failure_count",
    )
    list_filter = ("status", "kind")
    search_fields = ("name", "callback")
    readonly_fields = (
        "next_run_at",
        "last_run_at",
        "occurrence",
        "attempt",
        "failure_count",
        "missed_count",
        "degraded_reason",
        "lease_token",
        "lease_expires_at",
        "created_at",
        "updated_at",
    )
    actions = [
        _bulk("Enable", state.enable),
        _bulk("Disable", state.disable),
        _bulk("Cancel", state.cancel),
    ]

    def delete_model(self, request: HttpRequest, obj: Schedule) -> None:
        try:
            state.delete_schedule(obj.pk)
        except StateConflict as exc:
            self.message_user(request, f"Not deleted: {exc.reason}", messages.ERROR)

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        for obj in queryset:
            self.delete_model(request, obj)


class _ReadOnly(admin.ModelAdmin):
    """The database refuses UPDATE/DELETE on these tables; the admin does not offer them."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(RunAttempt)
class RunAttemptAdmin(_ReadOnly):
    list_display = (
        "schedule_name",
        "occurrence",
        "attempt",
        "scheduled_for",
        "claimed_at",
        "worker",
        "missed_slots",
    )
    list_filter = ("worker",)
    search_fields = ("schedule_name", "idempotency_key")
    date_hierarchy = "claimed_at"


@admin.register(RunReceipt)
class RunReceiptAdmin(_ReadOnly):
    list_display = (
        "attempt",
        "status",
        "finished_at",
        "error_type",
        "failure_count_after",
        "next_run_at",
    )
    list_filter = ("status",)
    search_fields = ("attempt__schedule_name", "error_type", "error_message")
    date_hierarchy = "finished_at"


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(_ReadOnly):
    list_display = (
        "worker_id",
        "hostname",
        "pid",
        "last_seen_at",
        "in_flight",
        "runs_finished",
        "clock_skew_seconds",
        "stopped_at",
    )
