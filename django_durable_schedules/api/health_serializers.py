"""Serializers of the health snapshot (``health.snapshot().as_dict()``), for the schema."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers


class WorkerSerializer(serializers.Serializer):
    """A live worker in the health snapshot."""

    worker_id = serializers.CharField()
    hostname = serializers.CharField()
    pid = serializers.IntegerField()
    started_at = serializers.DateTimeField()
    last_seen_at = serializers.DateTimeField()
    in_flight = serializers.IntegerField()
    runs_finished = serializers.IntegerField()
    clock_skew_seconds = serializers.FloatField()
    tzdata_version = serializers.CharField()


@extend_schema_field(
    {"type": "object", "additionalProperties": {"type": "integer"}},
)
class StatusCountsField(serializers.DictField):
    """Schedules per status."""


class DegradedScheduleSerializer(serializers.Serializer):
    """A schedule paused because the engine could not run or evaluate it."""

    id = serializers.UUIDField()
    name = serializers.CharField()
    degraded_reason = serializers.CharField()


class HealthSerializer(serializers.Serializer):
    """The health snapshot (``health.snapshot().as_dict()``), for the schema."""

    healthy = serializers.BooleanField()
    problems = serializers.ListField(child=serializers.CharField())
    checked_at = serializers.DateTimeField()
    schedules = StatusCountsField()
    due = serializers.IntegerField()
    overdue = serializers.IntegerField()
    degraded = serializers.IntegerField()
    failing = serializers.IntegerField()
    live_leases = serializers.IntegerField()
    expired_leases = serializers.IntegerField()
    open_attempts = serializers.IntegerField()
    missed_slots = serializers.IntegerField()
    live_workers = serializers.IntegerField()
    workers = WorkerSerializer(many=True)
    degraded_schedules = DegradedScheduleSerializer(
        many=True, help_text="Up to 20 degraded schedules by name, with the reason."
    )


__all__ = [
    "DegradedScheduleSerializer",
    "HealthSerializer",
    "StatusCountsField",
    "WorkerSerializer",
]
