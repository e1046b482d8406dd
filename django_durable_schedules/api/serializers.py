"""Serializers: validate input and shape output, nothing else.

Definition rules are the state package's and the model's: a schedule is built and validated
once by :func:`.state.prepare` (the model's field checks and :meth:`Schedule.clean`, so
:mod:`.timing`, and the owner policy of an owner-scoped user), and the ``ValidationError`` it
raises becomes a 400 with the same field messages; the prepared definition is what
``create()``/``update()`` hand to :mod:`.state`. What only an HTTP
API needs is added here: aware datetimes (a naive one is refused, never guessed), a
``callback`` chosen among registered names, ``run_in_seconds`` for ``once`` schedules, and
limits on ``payload`` (size, depth) and on what any JSON string or number may hold.

This module holds the schedule's serializer: how it validates and writes (and the error
answer); the fields it declares and their order are in :mod:`.schedule_fields`, the bodies
of ``enable/`` and ``duplicate/`` in :mod:`.action_serializers`, the shared fields and
checks in :mod:`.fields`, the runs' in :mod:`.run_serializers`, the health snapshot's in
:mod:`.health_serializers`. Every name is also importable from here.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers
from rest_framework.fields import SkipField

from .. import state, timing
from ..limits import CHAIN_WAIT_MAX_SECONDS, DEADLINE_MAX_SECONDS
from ..models import BlackoutWindow, ExclusionCalendar, Schedule
from ..models.validation import past_run_at_errors
from ..payloads import payload_errors
from ..registry import registry
from ..state import db_now

# The shared fields, the schedule's declared fields, the action bodies and the run and
# health serializers, re-exported: every name this module held before they moved stays
# importable from here (``X as X``: explicit re-exports, not added to ``__all__``, which is
# unchanged).
from .action_serializers import DuplicateSerializer as DuplicateSerializer
from .action_serializers import EnableSerializer
from .chain_fields import keep_hidden_upstream, scoped_upstream_field
from .fields import AWARE_MESSAGE as AWARE_MESSAGE
from .fields import JSON_MAX_DEPTH as JSON_MAX_DEPTH
from .fields import MAX_INSTANT as MAX_INSTANT
from .fields import MIN_INSTANT as MIN_INSTANT
from .fields import PAYLOAD_MAX_BYTES as PAYLOAD_MAX_BYTES
from .fields import AwareDateTimeField, BaseModelSerializer, CallbackField
from .fields import CalendarNamesField as CalendarNamesField
from .fields import WindowNamesField as WindowNamesField
from .fields import field_errors as field_errors
from .fields import json_problem as json_problem
from .fields import json_size as json_size
from .health_serializers import DegradedScheduleSerializer as DegradedScheduleSerializer
from .health_serializers import HealthSerializer
from .health_serializers import StatusCountsField as StatusCountsField
from .health_serializers import WorkerSerializer as WorkerSerializer
from .run_serializers import AttemptSerializer, ReceiptSerializer
from .run_serializers import EventSerializer as EventSerializer
from .run_serializers import RunningSerializer as RunningSerializer
from .run_serializers import running_data as running_data
from .schedule_fields import (
    WRITABLE_ORDER,
    ScheduleFields,
    calendar_names_field,
    window_names_field,
)
from .unique_fields import UniqueAtWrite
from .upcoming_serializers import FireTimeSerializer as FireTimeSerializer
from .upcoming_serializers import UpcomingQuerySerializer, UpcomingSerializer
from .visibility import redact_detail, redact_reason

#: What showing a value written behind ``save()`` may raise (see ``to_representation``).
_UNSHOWABLE = (ValueError, TypeError, AttributeError, ArithmeticError, LookupError)


class ScheduleSerializer(ScheduleFields, UniqueAtWrite, BaseModelSerializer):
    """A schedule: its definition (writable) and its run state (read-only).

    Run state changes only through the actions (``enable``, ``disable``, ``cancel``,
    ``trigger``). ``run_in_seconds`` (write-only, ``once`` only) sets ``run_at`` that many
    seconds after the database's now. ``owner`` is writable for full-access users and
    always the request user for owner-scoped ones. The name's uniqueness is the insert's
    (the unique constraint), not a probe before it (:class:`.unique_fields.UniqueAtWrite`).
    """

    unique_at_write = ("name",)
    # Its fields beyond the model's columns (and the get_* methods of the computed ones) are
    # declared by schedule_fields.ScheduleFields (not said in this docstring: the schema's).

    class Meta:
        model = Schedule
        fields = [
            "id",
            *WRITABLE_ORDER,
            "downstream",
            "status",
            "late",
            "deadline_at",
            "allowed_actions",
            "description",
            "cron_description",
            "rrule_description",
            "degraded_reason",
            "pause_reason",
            "paused_until",
            "open_alerts",
            "deadline_missed_occurrence",
            "next_run_at",
            "last_run_at",
            "occurrence",
            "attempt",
            "failure_count",
            "failed_occurrences",
            "missed_count",
            "excluded_count",
            "blackout_count",
            "buffered_for",
            "lease_token",
            "lease_expires_at",
            "running",
            "running_occurrences",
            "previous",
            "created_at",
            "updated_at",
        ]
        read_only_fields = [
            "status",
            "open_alerts",
            "deadline_missed_occurrence",
            "degraded_reason",
            "pause_reason",
            "paused_until",
            "failed_occurrences",
            "next_run_at",
            "last_run_at",
            "occurrence",
            "attempt",
            "failure_count",
            "missed_count",
            "excluded_count",
            "blackout_count",
            "buffered_for",
            "lease_token",
            "lease_expires_at",
            "created_at",
            "updated_at",
        ]
        extra_kwargs = {
            "max_runs": {"min_value": 1},
            "max_attempts": {"min_value": 1},
            "wait_seconds": {
                "min_value": 1,
                "max_value": CHAIN_WAIT_MAX_SECONDS,
                "error_messages": {
                    "min_value": "At least {min_value} second.",
                    "max_value": "At most {max_value} seconds (31 days).",
                },
            },
            "deadline_seconds": {
                "min_value": 1,
                "max_value": DEADLINE_MAX_SECONDS,
                "error_messages": {
                    "min_value": "At least {min_value} second.",
                    "max_value": "At most {max_value} seconds (366 days).",
                },
            },
            "interval_seconds": {
                "min_value": timing.MIN_INTERVAL_SECONDS,
                "error_messages": {
                    "invalid": "A whole number of seconds is required.",
                    "min_value": "At least {min_value} second.",
                },
            },
        }

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        scoped = bool(self.context.get("owner_scoped"))
        fields["callback"] = CallbackField(
            choices=registry.owner_scoped_names() if scoped else registry.names(),
            help_text="Name of a registered callback (for an owner-scoped user: one registered "
            "with owner_scoped=True).",
        )
        if scoped:
            fields["owner"] = serializers.PrimaryKeyRelatedField(read_only=True)
            # Only the shared calendars may be named: any other name is "does not exist".
            fields["exclusion_calendars"] = calendar_names_field(ExclusionCalendar.objects.shared())
            fields["blackout_windows"] = window_names_field(BlackoutWindow.objects.shared())
            fields["upstream"] = scoped_upstream_field(self.context) or fields["upstream"]
        return fields

    def to_representation(self, instance: Schedule) -> dict[str, Any]:
        """The schedule's fields; one whose stored value cannot be shown (a value of another
        type written behind ``save()``: SQLite text in an integer column, a row read by
        ``ScheduleQuerySet.readable`` without it) is ``null``, the others as usual: a
        list never fails for one row. For an owner-scoped user (``visible_calendars`` in
        the context) the ``degraded_reason`` does not name a calendar they cannot see
        (:func:`.visibility.redact_reason`)."""
        try:
            data = dict(super().to_representation(instance))
        except _UNSHOWABLE:
            data = {}
            for field in self._readable_fields:
                try:
                    attribute = field.get_attribute(instance)
                    value = None if attribute is None else field.to_representation(attribute)
                except SkipField:
                    continue
                except _UNSHOWABLE:
                    value = None
                data[str(field.field_name)] = value
        visible = self.context.get("visible_calendars")
        if visible is not None and isinstance(data.get("degraded_reason"), str):
            data["degraded_reason"] = redact_reason(data["degraded_reason"], visible)
        return data

    def validate_cron(self, value: str | None) -> str:
        return value or ""

    def validate_rrule(self, value: str | None) -> str:
        return value or ""

    def validate_timezone(self, value: str | None) -> str:
        return timing.canonical_timezone(value) if value else ""  # europe/paris: Europe/Paris

    def validate_payload(self, value: Any) -> Any:
        problems = payload_errors(value, None).get("payload")
        if problems:  # the model's rule (payloads.py), checked before the model is built
            raise serializers.ValidationError(problems)
        return value

    def validate_metadata(self, value: Any) -> Any:
        # Shape and bounds (a flat object, 50 keys, ...) are the model's rules (clean()).
        problems = payload_errors(None, value).get("metadata")
        if problems:
            raise serializers.ValidationError(problems)
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """Shape the request (``run_in_seconds``, the calendars an owner-scoped user cannot
        see), then :func:`.state.prepare` builds and validates the definition once, with the
        owner policy of an owner-scoped user; its field messages are the 400's."""
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
        self._past_run_at(attrs, attrs.pop("run_now", False))
        self._keep_hidden_calendars(attrs)
        self._keep_hidden_windows(attrs)
        keep_hidden_upstream(attrs, self.instance, self.context)
        self._prepared = (dict(attrs), self._prepare(attrs))
        return attrs

    def _past_run_at(self, attrs: dict[str, Any], run_now: bool) -> None:
        """A ``once`` schedule's ``run_at`` in the past is a 400 unless ``run_now``
        (:func:`..models.validation.past_run_at_errors`, by the database clock, read only
        when a one-shot's ``run_at`` is written)."""
        row = self.instance
        kind = attrs.get(
            "kind", row.kind if row else Schedule._meta.get_field("kind").get_default()
        )
        if run_now and kind != "once":
            raise serializers.ValidationError({"run_now": ["Only a once schedule takes run_now."]})
        run_at = attrs.get("run_at", row.run_at if row else None)
        if kind != "once" or run_at is None or ("run_at" not in attrs and "kind" not in attrs):
            return
        before = (row.kind, row.run_at) if row else None
        errors = past_run_at_errors(run_at, db_now(), kind=kind, run_now=run_now, before=before)
        if errors:
            raise serializers.ValidationError(errors)

    def _owner(self) -> Any:
        """The user an owner-scoped request acts for (None: full access)."""
        request = self.context.get("request")
        return getattr(request, "user", None) if self.context.get("owner_scoped") else None

    def _prepare(self, attrs: dict[str, Any]) -> state.Prepared:
        try:
            return state.prepare(attrs, self.instance, owner=self._owner())
        except DjangoValidationError as exc:
            raise self._as_400(exc, attrs.get("name")) from None

    def _as_400(self, exc: DjangoValidationError, name: Any) -> serializers.ValidationError:
        """The model's field messages as a 400, never naming a calendar hidden from the
        user; a ``name`` another schedule has is reported alone, as the name's own check
        reports it (:meth:`.unique_fields.UniqueAtWrite.taken`)."""
        taken = self.taken("name", name)
        if taken:
            return serializers.ValidationError({"name": taken})
        visible = self.context.get("visible_calendars")
        return serializers.ValidationError(redact_detail(field_errors(exc), visible))

    def _keep_hidden_windows(self, attrs: dict[str, Any]) -> None:
        """An owner-scoped user writing ``blackout_windows`` keeps the windows of the
        schedule that are not shared (linked by a full-access user)."""
        given = attrs.get("blackout_windows")
        if self.context.get("visible_calendars") is None or given is None:
            return
        if self.instance is None:
            return
        hidden = [w for w in self.instance.blackout_windows.all() if not w.shared]
        attrs["blackout_windows"] = [*given, *hidden]

    def _keep_hidden_calendars(self, attrs: dict[str, Any]) -> None:
        """An owner-scoped user writing ``exclusion_calendars`` keeps the calendars of the
        schedule they cannot see (linked by a full-access user): they cannot remove what
        they are not shown."""
        visible = self.context.get("visible_calendars")
        given = attrs.get("exclusion_calendars")
        if visible is None or given is None or self.instance is None:
            return
        hidden = [c for c in self.instance.exclusion_calendars.all() if c.name not in visible]
        attrs["exclusion_calendars"] = [*given, *hidden]

    def _prepared_for(self, validated_data: dict[str, Any]) -> state.Prepared:
        """The definition :meth:`validate` prepared, or prepared again when ``save()`` was
        given other fields than were validated."""
        done: tuple[dict[str, Any], state.Prepared] | None = getattr(self, "_prepared", None)
        if done is not None and done[0] == validated_data:
            return done[1]
        return self._prepare(validated_data)

    def create(self, validated_data: dict[str, Any]) -> Schedule:
        """``state.create_schedule`` of the prepared definition; ``save(actor=,
        source=)`` passes the audit fields."""
        audit = {k: validated_data.pop(k) for k in ("actor", "source") if k in validated_data}
        prepared = self._prepared_for(validated_data)
        try:
            return state.create_schedule(prepared, **audit)
        except DjangoValidationError as exc:  # the name was taken meanwhile
            raise self._as_400(exc, validated_data.get("name")) from None

    def update(self, instance: Schedule, validated_data: dict[str, Any]) -> Schedule:
        """``state.update_schedule`` of the prepared edit; ``save(actor=, source=)`` passes
        the audit fields."""
        audit = {k: validated_data.pop(k) for k in ("actor", "source") if k in validated_data}
        prepared = self._prepared_for(validated_data)
        try:
            return state.update_schedule(prepared, **audit)
        except DjangoValidationError as exc:
            raise self._as_400(exc, validated_data.get("name")) from None


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
