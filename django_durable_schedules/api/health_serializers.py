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
    pools = serializers.CharField(help_text="The pools it claims, comma-separated.")


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


class PausedScheduleSerializer(serializers.Serializer):
    """A schedule paused but not degraded: its note and the end of its pause."""

    id = serializers.UUIDField()
    name = serializers.CharField()
    pause_reason = serializers.CharField(help_text="The operator's note (or why it paused).")
    paused_until = serializers.DateTimeField(
        allow_null=True, help_text="When a worker resumes it; null: when enabled."
    )


class StalledBackfillSerializer(serializers.Serializer):
    """An open backfill with slots left and no slot claimed for longer than
    ``BACKFILL_STALL_SECONDS``."""

    id = serializers.UUIDField()
    schedule = serializers.CharField()
    done = serializers.IntegerField()
    total = serializers.IntegerField()
    since = serializers.DateTimeField(
        help_text="Its last slot's claim, or its request when no slot was claimed."
    )


class CancelledBackfillSerializer(serializers.Serializer):
    """A backfill a worker cancelled in the last 24 hours, with the reason."""

    id = serializers.UUIDField()
    schedule = serializers.CharField()
    done = serializers.IntegerField()
    total = serializers.IntegerField()
    cancelled_at = serializers.DateTimeField()
    reason = serializers.CharField()


class LateScheduleSerializer(serializers.Serializer):
    """A schedule past the deadline of the occurrence it owes."""

    id = serializers.UUIDField()
    name = serializers.CharField()
    occurrence = serializers.IntegerField(allow_null=True)
    deadline_at = serializers.DateTimeField(allow_null=True)


class GroupAtLimitSerializer(serializers.Serializer):
    """A concurrency group at its limit in the health snapshot."""

    name = serializers.CharField()
    running = serializers.IntegerField(help_text="Its live leases.")
    max_running = serializers.IntegerField(allow_null=True)
    rate = serializers.CharField(help_text="'2/s', '10/m'; empty: no rate.")
    waiting = serializers.IntegerField(help_text="Its schedules due now, held back.")
    rate_until = serializers.DateTimeField(
        allow_null=True, help_text="When its rate lets the next run start (UTC)."
    )


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
    live_leases = serializers.IntegerField(
        help_text="Leases not expired: the schedules' own and their allow occurrences'."
    )
    expired_leases = serializers.IntegerField(
        help_text="Leases expired and not recovered yet: the schedules' own and their allow "
        "occurrences'."
    )
    open_attempts = serializers.IntegerField(
        help_text="Attempts without a receipt: the runs in flight plus stray_attempts "
        "(bounded reads; see open_attempts_exact)."
    )
    missed_slots = serializers.IntegerField()
    live_workers = serializers.IntegerField()
    workers = WorkerSerializer(many=True)
    degraded_schedules = DegradedScheduleSerializer(
        many=True, help_text="Up to 20 degraded schedules by name, with the reason."
    )
    warnings = serializers.ListField(
        child=serializers.CharField(),
        help_text="What deserves a look but leaves the fleet healthy (schedules late, a "
        "stalled backfill, one a worker cancelled).",
    )
    stalled_backfills = StalledBackfillSerializer(many=True, help_text="Up to 20, oldest first.")
    cancelled_backfills = CancelledBackfillSerializer(
        many=True, help_text="Cancelled by a worker in the last 24 hours; up to 20, newest first."
    )
    late = serializers.IntegerField(
        help_text="Schedules past the deadline (deadline_seconds) of the occurrence they owe, "
        "by the database clock, reported by a worker or not (a warning)."
    )
    late_schedules = LateScheduleSerializer(many=True, help_text="Up to 20 late ones by name.")
    paused_schedules = PausedScheduleSerializer(
        many=True, help_text="Up to 20 paused (not degraded) schedules, the soonest end first."
    )
    pools_without_workers = serializers.ListField(
        child=serializers.CharField(),
        help_text="Pools with a schedule due now that no live worker claims "
        "(run_scheduler --pool), by name.",
    )
    groups_at_limit = GroupAtLimitSerializer(
        many=True,
        help_text="Concurrency groups at max_running live leases or out of their rate, by "
        "name (up to 50): information, a full group is normal operation.",
    )
    unreadable_groups = serializers.ListField(
        child=serializers.CharField(),
        help_text="Concurrency groups whose stored rate cannot be read (none of their runs "
        "starts: the problem group_unreadable), by name.",
    )
    open_attempts_in_flight = serializers.IntegerField(
        help_text="Attempts without a receipt that hold their schedule's lease (runs in flight)."
    )
    stray_attempts = serializers.IntegerField(
        help_text="Attempts without a receipt that hold no lease: left by an edit behind the "
        "engine, never finished by a worker (a warning). Looked for among the newest "
        "open_attempts_checked claims, or every attempt when open_attempts_exact."
    )
    open_attempts_exact = serializers.BooleanField(
        help_text="Whether every attempt was checked (?exact=1, or a history no longer than "
        "the claims checked); false: the newest open_attempts_checked only."
    )
    open_attempts_checked = serializers.IntegerField(
        allow_null=True,
        help_text="How many of the newest claims were checked for stray attempts (null: "
        "every attempt).",
    )


__all__ = [
    "CancelledBackfillSerializer",
    "DegradedScheduleSerializer",
    "GroupAtLimitSerializer",
    "HealthSerializer",
    "LateScheduleSerializer",
    "PausedScheduleSerializer",
    "StalledBackfillSerializer",
    "StatusCountsField",
    "WorkerSerializer",
]
