"""Serializers: validate input and shape output, nothing else.

Definition rules are the model's: a schedule is validated by building the candidate row and
calling its ``full_clean()`` (which runs :meth:`Schedule.clean` and so :mod:`.timing`), and the
``ValidationError`` it raises becomes a 400 with the same field messages. What only an HTTP
API needs is added here: aware datetimes (a naive one is refused, never guessed), a
``callback`` chosen among registered names, ``run_in_seconds`` for ``once`` schedules, and
limits on ``payload`` (size, depth) and on what any JSON string or number may hold.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from django.core.exceptions import NON_FIELD_ERRORS
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import models
from django.utils import timezone as dj_timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.settings import api_settings

from .. import state, timing
from ..models import ReceiptStatus, RunAttempt, RunReceipt, Schedule, ScheduleEvent
from ..registry import registry
from ..state import db_now

#: Largest ``payload``, as compact UTF-8 JSON (bytes).
PAYLOAD_MAX_BYTES = 64 * 1024
#: Deepest nesting accepted in ``payload``.
JSON_MAX_DEPTH = 32
#: ``upcoming/``: default and largest ``count``.
UPCOMING_DEFAULT_COUNT = 5
UPCOMING_MAX_COUNT = 100
#: Instants accepted on input (every supported database can store them).
MIN_INSTANT = datetime(1000, 1, 1, tzinfo=UTC)
MAX_INSTANT = datetime(timing.MAX_YEAR, 12, 31, 23, 59, 59, tzinfo=UTC)

AWARE_MESSAGE = (
    "An aware datetime is required: give a UTC offset or 'Z' (e.g. 2027-06-01T10:00:00Z); "
    "a naive datetime is neither UTC nor local time."
)


def _short(value: Any, limit: int = 100) -> str:
    """``repr`` of the first ``limit`` characters of ``value`` (safe to echo in an error)."""
    text = value if isinstance(value, str) else str(value)
    return repr(text[:limit]) + ("..." if len(text) > limit else "")


def field_errors(exc: DjangoValidationError) -> dict[str, list[str]]:
    """A model ``ValidationError`` as DRF field errors (``__all__`` -> non-field errors;
    ``anchor``, the interval grid origin, is reported on ``start_at``)."""
    errors: dict[str, list[str]] = {}
    rename = {NON_FIELD_ERRORS: api_settings.NON_FIELD_ERRORS_KEY, "anchor": "start_at"}
    for name, messages in exc.message_dict.items():
        errors.setdefault(rename.get(name, name), []).extend(messages)
    return errors


@contextmanager
def model_errors_as_400() -> Iterator[None]:
    """Re-raise a model ``ValidationError`` as a DRF one (a 400 with field messages)."""
    try:
        yield
    except DjangoValidationError as exc:
        raise serializers.ValidationError(field_errors(exc)) from None


def json_problem(value: Any, max_depth: int = JSON_MAX_DEPTH) -> str | None:
    """What makes ``value`` unfit to store as JSON on every backend, or None: nesting deeper
    than ``max_depth``, a NUL character or an unpaired surrogate in a string (PostgreSQL
    and UTF-8 refuse them), a non-finite number (JSON has none)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > max_depth:
            return f"nested deeper than {max_depth} levels"
        if isinstance(item, dict):
            stack.extend((k, depth) for k in item)
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list | tuple):
            stack.extend((v, depth + 1) for v in item)
        elif isinstance(item, str):
            if "\x00" in item:
                return "contains a NUL character"
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return "contains an unpaired surrogate"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return "contains a non-finite number"
        elif item is not None and not isinstance(item, bool | int):
            return f"contains a {type(item).__name__}, which is not JSON"
    return None


def json_size(value: Any) -> int:
    """Bytes of ``value`` as compact UTF-8 JSON."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


class AwareDateTimeField(serializers.DateTimeField):
    """ISO 8601 datetime that must carry a UTC offset; rendered in UTC (``...Z``).

    Accepted between the years 1000 and ``timing.MAX_YEAR``.
    """

    default_error_messages = {
        "naive": AWARE_MESSAGE,
        "range": f"Out of range: give an instant between {MIN_INSTANT:%Y-%m-%d} and "
        f"{MAX_INSTANT:%Y-%m-%d}.",
    }

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("default_timezone", UTC)
        super().__init__(**kwargs)

    def enforce_timezone(self, value: datetime) -> datetime:
        if dj_timezone.is_naive(value):
            self.fail("naive")
        return super().enforce_timezone(value)

    def to_internal_value(self, value: Any) -> datetime:
        result = super().to_internal_value(value)
        if not MIN_INSTANT <= result <= MAX_INSTANT:
            self.fail("range")
        return result


class CallbackField(serializers.ChoiceField):
    """A registered callback name (never an import path); an unknown name is a 400 that
    names only the input."""

    default_error_messages = {"invalid_choice": "{input} is not a registered callback."}

    def to_internal_value(self, data: Any) -> str:
        if isinstance(data, str) and data in self.choice_strings_to_values:
            return data
        self.fail("invalid_choice", input=_short(data))


class BaseModelSerializer(serializers.ModelSerializer):
    """Model serializer whose datetimes are :class:`AwareDateTimeField`."""

    serializer_field_mapping = {
        **serializers.ModelSerializer.serializer_field_mapping,
        models.DateTimeField: AwareDateTimeField,
    }


class ScheduleSerializer(BaseModelSerializer):
    """A schedule: its definition (writable) and its run state (read-only).

    Run state changes only through the actions (``enable``, ``disable``, ``cancel``,
    ``trigger``). ``run_in_seconds`` (write-only, ``once`` only) sets ``run_at`` that many
    seconds after the database's now. ``owner`` is writable for full-access users and
    always the request user for owner-scoped ones.
    """

    run_in_seconds = serializers.IntegerField(
        write_only=True,
        required=False,
        min_value=0,
        max_value=timing.MAX_INTERVAL_SECONDS,
        help_text="For a once schedule: run this many seconds from now (instead of run_at).",
    )
    cron = serializers.CharField(
        max_length=200,
        required=False,
        allow_blank=True,
        allow_null=True,
        help_text="5-field cron expression or @daily-style macro (cron schedules only).",
    )
    timezone = serializers.CharField(
        max_length=64,
        required=False,
        allow_blank=True,
        allow_null=True,
        help_text="IANA time zone of a cron schedule (default: settings.TIME_ZONE).",
    )

    class Meta:
        model = Schedule
        fields = [
            "id",
            "name",
            "callback",
            "kind",
            "interval_seconds",
            "cron",
            "timezone",
            "run_at",
            "run_in_seconds",
            "start_at",
            "end_at",
            "max_runs",
            "max_attempts",
            "misfire_policy",
            "misfire_grace_seconds",
            "backoff_base_seconds",
            "backoff_cap_seconds",
            "pause_after_failures",
            "timeout_seconds",
            "jitter_seconds",
            "payload",
            "metadata",
            "owner",
            "status",
            "degraded_reason",
            "pause_reason",
            "next_run_at",
            "last_run_at",
            "occurrence",
            "attempt",
            "failure_count",
            "failed_occurrences",
            "missed_count",
            "lease_token",
            "lease_expires_at",
            "created_at",
            "updated_at",
        ]
        read_only_fields = [
            "status",
            "degraded_reason",
            "pause_reason",
            "failed_occurrences",
            "next_run_at",
            "last_run_at",
            "occurrence",
            "attempt",
            "failure_count",
            "missed_count",
            "lease_token",
            "lease_expires_at",
            "created_at",
            "updated_at",
        ]
        extra_kwargs = {
            "max_runs": {"min_value": 1},
            "max_attempts": {"min_value": 1},
        }

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        fields["callback"] = CallbackField(
            choices=registry.names(), help_text="Name of a registered callback."
        )
        if self.context.get("owner_scoped"):
            fields["owner"] = serializers.PrimaryKeyRelatedField(read_only=True)
        return fields

    def validate_cron(self, value: str | None) -> str:
        return value or ""

    def validate_timezone(self, value: str | None) -> str:
        return value or ""

    def validate_payload(self, value: Any) -> Any:
        problem = json_problem(value)
        if problem:
            raise serializers.ValidationError(f"The payload {problem}.")
        size = json_size(value)
        if size > PAYLOAD_MAX_BYTES:
            raise serializers.ValidationError(
                f"The payload is {size} bytes as JSON; at most {PAYLOAD_MAX_BYTES} are accepted."
            )
        return value

    def validate_metadata(self, value: Any) -> Any:
        # Shape and bounds (a flat object, 50 keys, ...) are the model's rules (clean()).
        problem = json_problem(value)
        if problem:
            raise serializers.ValidationError(f"The metadata {problem}.")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        delay = attrs.pop("run_in_seconds", None)
        if delay is not None:
            current = self.instance.kind if self.instance else None
            kind = attrs.get("kind", current or Schedule._meta.get_field("kind").get_default())
            if kind != "once":
                raise serializers.ValidationError(
                    {"run_in_seconds": ["Only a once schedule takes run_in_seconds."]}
                )
            if attrs.get("run_at") is not None:
                raise serializers.ValidationError(
                    {"run_in_seconds": ["Give run_at or run_in_seconds, not both."]}
                )
            attrs["run_at"] = timing.truncate_to_second(db_now()) + timedelta(seconds=delay)
        with model_errors_as_400():
            state.validate_schedule(self._candidate(attrs))
        return attrs

    def _candidate(self, attrs: dict[str, Any]) -> Schedule:
        """The row as it would be saved (unsaved; for validation only)."""
        if self.instance is None:
            return Schedule(**attrs)
        current = self.instance
        candidate = Schedule(
            **{f.attname: getattr(current, f.attname) for f in Schedule._meta.concrete_fields}
        )
        candidate._state.adding = False
        candidate._state.db = current._state.db
        for name, value in attrs.items():
            setattr(candidate, name, value)
        return candidate

    def create(self, validated_data: dict[str, Any]) -> Schedule:
        """``state.create_schedule``; ``save(actor=, source=)`` passes the audit fields."""
        with model_errors_as_400():
            return state.create_schedule(**validated_data)

    def update(self, instance: Schedule, validated_data: dict[str, Any]) -> Schedule:
        """``state.update_schedule``; ``save(actor=, source=)`` passes the audit fields."""
        with model_errors_as_400():
            return state.update_schedule(instance.pk, **validated_data)


class EnableSerializer(serializers.Serializer):
    """Body of ``enable/`` (optional): ``run_at`` moves a ``once`` schedule to a new
    instant as it is re-armed (without it, a past one-shot is due at once)."""

    run_at = AwareDateTimeField(
        required=False,
        help_text="Once schedules only: the new instant to run at (aware ISO 8601).",
    )


class UpcomingQuerySerializer(serializers.Serializer):
    """Query of ``upcoming/``: ``count`` (1 or more, default 5, capped at 100) and an
    optional aware ``after`` (default: now)."""

    count = serializers.IntegerField(
        min_value=1,
        required=False,
        default=UPCOMING_DEFAULT_COUNT,
        help_text=f"How many fire times (default {UPCOMING_DEFAULT_COUNT}; "
        f"more than {UPCOMING_MAX_COUNT} gives {UPCOMING_MAX_COUNT}).",
    )
    after = AwareDateTimeField(
        required=False, help_text="List fire times strictly after this instant (default: now)."
    )

    def validate_count(self, value: int) -> int:
        return min(value, UPCOMING_MAX_COUNT)


class FireTimeSerializer(serializers.Serializer):
    """One fire time, in UTC and in the schedule's time zone."""

    utc = serializers.DateTimeField(help_text="ISO 8601, UTC (Z).")
    local = serializers.DateTimeField(help_text="The same instant in the schedule's zone.")


class UpcomingSerializer(serializers.Serializer):
    """Answer of ``upcoming/``: the next fire times the definition produces (a paused,
    cancelled, completed or failed schedule does not fire them)."""

    id = serializers.UUIDField()
    name = serializers.CharField()
    status = serializers.CharField()
    timezone = serializers.CharField()
    count = serializers.IntegerField()
    upcoming = FireTimeSerializer(many=True)

    @staticmethod
    def shape(schedule: Schedule, times: list[datetime]) -> dict[str, Any]:
        """The response body for ``schedule`` and its fire ``times`` (aware UTC)."""
        zone = ZoneInfo(schedule.timezone or "UTC")
        return {
            "id": str(schedule.pk),
            "name": schedule.name,
            "status": schedule.status,
            "timezone": schedule.timezone,
            "count": len(times),
            "upcoming": [
                {
                    "utc": t.astimezone(UTC).isoformat().replace("+00:00", "Z"),
                    "local": t.astimezone(zone).isoformat(),
                }
                for t in times
            ],
        }


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
            "claimed_at",
            "lateness",
            "lease_token",
            "lease_expires_at",
            "worker",
            "idempotency_key",
            "missed_slots",
            "receipt_status",
            "finished_at",
        ]
        read_only_fields = fields


class ReceiptSerializer(BaseModelSerializer):
    """A run receipt (read-only): the one outcome of one attempt."""

    schedule_name = serializers.CharField(source="attempt.schedule_name", read_only=True)
    attempt_number = serializers.IntegerField(source="attempt.attempt", read_only=True)
    worker = serializers.CharField(source="attempt.worker", read_only=True)
    result = serializers.JSONField(read_only=True, allow_null=True)

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
        ]
        read_only_fields = fields


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


class DetailSerializer(serializers.Serializer):
    """An error answer: ``{"detail": reason}`` (409 state conflict, 403, 404)."""

    detail = serializers.CharField()


__all__ = [
    "AttemptSerializer",
    "AwareDateTimeField",
    "CallbackField",
    "DetailSerializer",
    "EnableSerializer",
    "HealthSerializer",
    "ReceiptSerializer",
    "ScheduleSerializer",
    "UpcomingQuerySerializer",
    "UpcomingSerializer",
]
