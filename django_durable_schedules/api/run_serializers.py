"""Serializers of a schedule's runs and history (read-only): attempts, receipts, events."""

from __future__ import annotations

import dataclasses
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from ..models import ReceiptStatus, RunAttempt, RunReceipt, ScheduleEvent
from ..payloads import json_size
from ..projection import bound_traceback
from ..running import running_attempt
from ..state.previous_rules import previous_of
from .chain_fields import redact_upstream_changes
from .fields import AwareDateTimeField, BaseModelSerializer
from .visibility import redact_changes, redact_reason


class AttemptSerializer(BaseModelSerializer):
    """A run attempt (read-only), with its receipt's status once it has one."""

    lateness = serializers.FloatField(read_only=True, help_text="Seconds from slot to claim.")
    # A plain string in the schema: an enum here would collide with the receipt's own
    # ``status`` enum (drf-spectacular's enum naming warns when one choice set appears
    # under one name in several components).
    receipt_status = serializers.CharField(
        source="receipt.status",
        read_only=True,
        allow_null=True,
        help_text="Status of its receipt (one of: "
        + ", ".join(ReceiptStatus.values)
        + "); null while the attempt is open.",
    )
    finished_at = AwareDateTimeField(
        source="receipt.finished_at",
        read_only=True,
        allow_null=True,
        help_text="When its receipt was written; null while the attempt is open.",
    )

    class Meta:
        model = RunAttempt
        fields = [
            "id",
            "schedule",
            "schedule_name",
            "occurrence",
            "attempt",
            "scheduled_for",
            "nominal_for",
            "claimed_at",
            "lateness",
            "lease_token",
            "lease_expires_at",
            "worker",
            "idempotency_key",
            "missed_slots",
            "origin",
            "payload",
            "receipt_status",
            "finished_at",
        ]
        read_only_fields = fields


class FrameSerializer(serializers.Serializer):
    """One frame of a receipt's traceback."""

    file = serializers.CharField(read_only=True)
    line = serializers.IntegerField(read_only=True)
    function = serializers.CharField(read_only=True)


@extend_schema_field(FrameSerializer(many=True, allow_null=True))
class TracebackField(serializers.Field):
    """A stored traceback, bounded as it is read (:func:`..projection.bound_traceback`: a
    row written behind ``save()`` shows as a valid list, or null)."""

    def to_representation(self, value: Any) -> Any:
        return bound_traceback(value)


class RunningSerializer(serializers.Serializer):
    """The run a schedule has in flight (:func:`..running.running_attempt`)."""

    occurrence = serializers.IntegerField(read_only=True)
    attempt = serializers.IntegerField(read_only=True)
    claimed_at = AwareDateTimeField(read_only=True, help_text="Since when it runs.")
    worker = serializers.CharField(read_only=True, help_text="The worker holding its lease.")


#: The largest ``previous.result`` (bytes of compact UTF-8 JSON) a *list* of schedules
#: carries per row; a larger one is left out there (``result_omitted``), so a page of 100
#: rows holds at most about 25 KB of results, not 100 x ``RESULT_MAX_BYTES`` (800 KB).
LIST_RESULT_MAX_BYTES = 256


class PreviousSerializer(serializers.Serializer):
    """A schedule's last successful run, as its callback reads it (``ctx.previous``:
    :class:`..state.values.Previous`), from the row's ``previous_*`` fields. In a list of
    schedules a result over :data:`LIST_RESULT_MAX_BYTES` is left out (null, with
    ``result_omitted`` true); a schedule's own answer has it whole."""

    occurrence = serializers.IntegerField(read_only=True)
    scheduled_for = AwareDateTimeField(
        read_only=True, help_text="Its nominal instant (the slot it ran for), UTC."
    )
    finished_at = AwareDateTimeField(read_only=True, help_text="When it finished, UTC.")
    result = serializers.JSONField(
        read_only=True,
        allow_null=True,
        help_text="What it returned: the bounded JSON its receipt stores (RESULT_MAX_BYTES; "
        "a larger value is cut as a receipt's is). In a list of schedules: only when its "
        f"compact JSON is at most {LIST_RESULT_MAX_BYTES} bytes, else null with "
        "result_omitted true (GET schedules/{id}/ has it).",
    )
    result_omitted = serializers.BooleanField(
        read_only=True,
        help_text="True when result was left out (null) of a list of schedules for its size "
        f"(over {LIST_RESULT_MAX_BYTES} bytes of compact JSON): the schedule's own answer "
        "(GET schedules/{id}/) carries it. Always false there, and false when the run "
        "returned null.",
    )


def previous_data(schedule: Any, *, listed: bool = False) -> dict[str, Any] | None:
    """The ``previous`` object of a schedule's representation (read from its row: no
    query), or None before its first success: ``occurrence``, ``scheduled_for``,
    ``finished_at``, ``result`` and ``result_omitted``. ``listed`` (a row of a list): a
    result over :data:`LIST_RESULT_MAX_BYTES` bytes of compact JSON is left out (``result``
    None, ``result_omitted`` True)."""
    found = previous_of(schedule)
    if found is None:
        return None
    data = dataclasses.asdict(found)
    omitted = listed and found.result is not None
    omitted = omitted and json_size(found.result) > LIST_RESULT_MAX_BYTES
    data["result"] = None if omitted else found.result
    data["result_omitted"] = omitted
    return dict(PreviousSerializer(data).data)


def running_data(schedule: Any) -> dict[str, Any] | None:
    """The ``running`` object of a schedule's representation, or None when it is idle."""
    run = running_attempt(schedule)
    return None if run is None else dict(RunningSerializer(run.as_dict()).data)


class ReceiptSerializer(BaseModelSerializer):
    """A run receipt (read-only): the one outcome of one attempt."""

    schedule_name = serializers.CharField(source="attempt.schedule_name", read_only=True)
    attempt_number = serializers.IntegerField(source="attempt.attempt", read_only=True)
    worker = serializers.CharField(source="attempt.worker", read_only=True)
    result = serializers.JSONField(read_only=True, allow_null=True)
    started_at = AwareDateTimeField(
        read_only=True,
        allow_null=True,
        help_text="When the callback (or the dispatch of a task) started, by the database "
        "clock; null when it never ran (missed, released, a lease recovered, degraded).",
    )
    duration_seconds = serializers.FloatField(
        read_only=True,
        allow_null=True,
        help_text="finished_at minus started_at, in seconds; null when it never ran.",
    )
    traceback = TracebackField(
        read_only=True,
        allow_null=True,
        help_text="A failed run's stack, innermost frame last: [{file, line, function}], "
        "at most 50 frames (the first may say how many outer ones were left out); never the "
        "value of a variable. Null otherwise.",
    )

    class Meta:
        model = RunReceipt
        fields = [
            "id",
            "attempt",
            "schedule",
            "schedule_name",
            "occurrence",
            "attempt_number",
            "worker",
            "status",
            "finished_at",
            "result",
            "error_type",
            "error_message",
            "failure_count_after",
            "next_run_at",
            "slots_skipped",
            "started_at",
            "duration_seconds",
            "traceback",
            "forced",
        ]
        read_only_fields = fields

    def to_representation(self, instance: Any) -> Any:
        """As DRF's; for an owner-scoped user (``visible_calendars`` in the context) the
        message does not name a calendar they cannot see (:func:`.visibility.redact_reason`)."""
        data = super().to_representation(instance)
        visible = self.context.get("visible_calendars")
        if visible is not None:
            data["error_message"] = redact_reason(data["error_message"], visible)
        return data


class EventSerializer(BaseModelSerializer):
    """One audit event (read-only): who did what to a schedule, when, from where."""

    changes = serializers.JSONField(read_only=True)

    class Meta:
        model = ScheduleEvent
        fields = [
            "id",
            "schedule",
            "schedule_name",
            "action",
            "at",
            "actor",
            "actor_repr",
            "source",
            "changes",
        ]
        read_only_fields = fields

    def to_representation(self, instance: Any) -> Any:
        """As DRF's; for an owner-scoped user (``visible_calendars`` in the context) the
        calendars they cannot see are not named (:func:`.visibility.redact_changes`), nor
        the schedules of others (:func:`.chain_fields.redact_upstream_changes`)."""
        data = super().to_representation(instance)
        visible = self.context.get("visible_calendars")
        if visible is not None:
            data["changes"] = redact_changes(instance.action, data["changes"], visible)
        data["changes"] = redact_upstream_changes(data["changes"], self.context)
        return data


__all__ = [
    "AttemptSerializer",
    "EventSerializer",
    "ReceiptSerializer",
    "RunningSerializer",
    "running_data",
]
