"""The exclusion calendar admin: a calendar's holiday country and subdivision, and its own
dates as an inline. Each save and delete re-plans the schedules that name the calendar
through :mod:`..state`, once the dates are written, so a change takes effect at once."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Count, QuerySet
from django.http import HttpRequest

from .. import state
from ..models import ExclusionCalendar, ExclusionDate


class ExclusionDateInline(admin.TabularInline):
    model = ExclusionDate
    extra = 1
    fields = ("date", "reason")


@admin.register(ExclusionCalendar)
class ExclusionCalendarAdmin(admin.ModelAdmin):
    list_display = ("name", "holidays", "own_dates", "used_by", "shared", "description")
    search_fields = ("name", "description")
    fields = (
        "name",
        "description",
        "holidays_country",
        "holidays_subdivision",
        "weekend_days",
        "shared",
    )
    inlines = (ExclusionDateInline,)

    def get_queryset(self, request: HttpRequest) -> QuerySet[ExclusionCalendar]:
        counts = {
            "_dates": Count("dates", distinct=True),
            "_schedules": Count("schedules", distinct=True),
        }
        return ExclusionCalendar.objects.annotate(**counts)

    @admin.display(description="public holidays")
    def holidays(self, obj: ExclusionCalendar) -> str:
        if not obj.holidays_country:
            return "-"
        return "-".join(p for p in (obj.holidays_country, obj.holidays_subdivision) if p)

    @admin.display(description="own dates", ordering="_dates")
    def own_dates(self, obj: Any) -> int:
        return int(obj._dates)

    @admin.display(description="schedules", ordering="_schedules")
    def used_by(self, obj: Any) -> int:
        return int(obj._schedules)

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        state.calendars_changed([form.instance.pk])  # the dates are written: re-plan

    def delete_model(self, request: HttpRequest, obj: ExclusionCalendar) -> None:
        state.delete_calendar(obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        for obj in list(queryset):
            state.delete_calendar(obj)
