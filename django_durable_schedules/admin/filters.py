"""The schedule list's filters beyond status and kind: degraded, failing, running (the
:class:`..models.ScheduleQuerySet` predicates that health and the API use too), and the
attempt list's worker filter.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from ..models import ScheduleQuerySet, WorkerHeartbeat


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


class WorkerFilter(admin.SimpleListFilter):
    """The attempts of one worker. Its choices are the workers that registered a heartbeat
    (newest first, at most :data:`WORKER_CHOICES`): Django's default, every distinct value
    of the column, would read the whole attempt table on every page."""

    title = "worker"
    parameter_name = "worker"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        workers = WorkerHeartbeat.objects.order_by("-last_seen_at").values_list(
            "worker_id", flat=True
        )
        return [(w, w) for w in workers[:WORKER_CHOICES]]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        value = self.value()
        return queryset.filter(worker=value) if value else queryset


#: Workers offered by :class:`WorkerFilter`.
WORKER_CHOICES = 50
