"""The schedule list's filters beyond status and kind: degraded, failing, running (the
:class:`..models.ScheduleQuerySet` predicates that health and the API use too).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from ..models import ScheduleQuerySet


class DegradedFilter(admin.SimpleListFilter):
    title = "degraded"
    parameter_name = "degraded"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Degraded"), ("no", "Not degraded")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == "yes":
            return queryset.filter(ScheduleQuerySet.degraded_q())
        if self.value() == "no":
            return queryset.exclude(ScheduleQuerySet.degraded_q())
        return queryset


class FailingFilter(admin.SimpleListFilter):
    title = "failing"
    parameter_name = "failing"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Failing (consecutive failures)"), ("no", "Not failing")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == "yes":  # the same predicate health counts
            return queryset.filter(ScheduleQuerySet.failing_q())
        if self.value() == "no":
            return queryset.exclude(ScheduleQuerySet.failing_q())
        return queryset


class RunningFilter(admin.SimpleListFilter):
    title = "running"
    parameter_name = "running"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Running (lease held)"), ("no", "Idle")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == "yes":
            return queryset.filter(ScheduleQuerySet.leased_q())
        if self.value() == "no":
            return queryset.exclude(ScheduleQuerySet.leased_q())
        return queryset
