"""The blackout window admin: a window's range or rule, its zone and duration, and how
many schedules name it. Saves and deletes go through :mod:`..state` (a ``blackouts``
event on each schedule that names the window); the claim reads windows per batch, so a
change applies at the next claim."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Count, QuerySet
from django.http import HttpRequest

from .. import state
from ..models import BlackoutWindow


@admin.register(BlackoutWindow)
class BlackoutWindowAdmin(admin.ModelAdmin):
    list_display = ("name", "when", "timezone", "used_by", "shared", "description")
    search_fields = ("name", "description")
    list_filter = ("shared",)
    fields = (
        "name",
        "description",
        ("start_at", "end_at"),
        "rrule",
        ("timezone", "duration_seconds"),
        "shared",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[BlackoutWindow]:
        return BlackoutWindow.objects.annotate(_schedules=Count("schedules", distinct=True))

    @admin.display(description="when")
    def when(self, obj: BlackoutWindow) -> str:
        if obj.is_recurring:
            return f"{obj.rrule}, {obj.duration_seconds} s each"
        return f"{obj.start_at:%Y-%m-%d %H:%M:%S %Z} to {obj.end_at:%Y-%m-%d %H:%M:%S %Z}"

    @admin.display(description="schedules", ordering="_schedules")
    def used_by(self, obj: Any) -> int:
        return int(obj._schedules)

    def save_model(
        self, request: HttpRequest, obj: BlackoutWindow, form: Any, change: bool
    ) -> None:
        state.save_window(obj, actor=request.user, source="admin")

    def delete_model(self, request: HttpRequest, obj: BlackoutWindow) -> None:
        state.delete_window(obj, actor=request.user, source="admin")

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        for obj in list(queryset):
            state.delete_window(obj, actor=request.user, source="admin")
