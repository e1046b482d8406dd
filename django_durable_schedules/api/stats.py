"""``GET schedules/{id}/stats/`` (issue #29, item 2): a schedule's runs, success rate,
duration p50/p95/max and lateness p50/p95 over the last 24 hours and 7 days
(:func:`..stats.schedule_stats`), as :class:`StatsSerializer` documents them; the
``stats`` action :class:`ScheduleStatsMixin` gives the schedules viewset."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from ..stats import STATS_SAMPLE, schedule_stats
from .schema import extend_schema

_SECONDS = "Seconds; null when the window has no value."
_SAMPLED = f"over the latest {STATS_SAMPLE} receipts of the window"


class WindowStatsSerializer(serializers.Serializer):
    """One window's figures (seconds; rates as fractions)."""

    window_seconds = serializers.IntegerField(help_text="The window's length, in seconds.")
    runs = serializers.IntegerField(
        help_text="Receipts finished in the window, except released ones (handed back "
        "unrun at shutdown)."
    )
    succeeded = serializers.IntegerField(help_text="Runs that succeeded or were enqueued.")
    success_rate = serializers.FloatField(
        allow_null=True, help_text="succeeded / runs, from 0 to 1; null with no run."
    )
    duration_p50 = serializers.FloatField(
        allow_null=True, help_text=f"Median run duration, {_SAMPLED}. {_SECONDS}"
    )
    duration_p95 = serializers.FloatField(
        allow_null=True, help_text=f"95th percentile of the run durations, {_SAMPLED}. {_SECONDS}"
    )
    duration_max = serializers.FloatField(
        allow_null=True, help_text=f"Longest run of the whole window. {_SECONDS}"
    )
    lateness_p50 = serializers.FloatField(
        allow_null=True,
        help_text=f"Median lateness (claim minus slot; backfills and re-runs left out), "
        f"{_SAMPLED}. {_SECONDS}",
    )
    lateness_p95 = serializers.FloatField(
        allow_null=True, help_text=f"95th percentile of the lateness, {_SAMPLED}. {_SECONDS}"
    )
    durations_counted = serializers.IntegerField(
        help_text="How many durations the duration percentiles were computed from."
    )
    lateness_counted = serializers.IntegerField(
        help_text="How many lateness values the lateness percentiles were computed from."
    )
    outcomes = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="Receipts finished in the window per status (released included).",
    )


class StatsSerializer(serializers.Serializer):
    """A schedule's statistics at ``as_of`` (the database clock)."""

    as_of = serializers.DateTimeField(help_text="The end of both windows (database clock).")
    sample_limit = serializers.IntegerField(
        help_text="Most receipts per window the percentiles are computed from (the latest)."
    )
    last_24h = WindowStatsSerializer(help_text="The last 24 hours.")
    last_7d = WindowStatsSerializer(help_text="The last 7 days.")


class ScheduleStatsMixin:
    """The ``stats`` action of the schedules viewset: the same permissions and owner
    scoping as reading the schedule (its ``get_object``), 404 for an unknown id."""

    get_object: Any

    @extend_schema(responses={200: StatsSerializer})
    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=None)
    def stats(self, request: Request, pk: Any = None) -> Response:
        """Runs, success rate, duration p50/p95/max and lateness p50/p95 over the last
        24 hours and the last 7 days, in seconds, by the database clock; the percentiles
        over the latest ``sample_limit`` receipts of each window. A fixed number of
        queries, whatever the number of receipts."""
        schedule = self.get_object()
        return Response(StatsSerializer(schedule_stats(schedule.pk).as_dict()).data)
