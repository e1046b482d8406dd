"""Serializers: validate input and shape output, nothing else.

Definition rules are the state package's and the model's: a schedule is built and validated
once by :func:`.state.prepare` (the model's field checks and :meth:`Schedule.clean`, so
:mod:`.timing`, and the owner policy of an owner-scoped user), and the ``ValidationError`` it
raises becomes a 400 with the same field messages; the prepared definition is what
``create()``/``update()`` hand to :mod:`.state`. What only an HTTP
API needs is added here: aware datetimes (a naive one is refused, never guessed), a
``callback`` chosen among registered names, ``run_in_seconds`` for ``once`` schedules, and
limits on ``payload`` (size, depth) and on what any JSON string or number may hold.

This module holds the schedule's serializers (and the error answer); the shared fields and
checks are in :mod:`.fields`, the runs' in :mod:`.run_serializers`, the health snapshot's
in :mod:`.health_serializers`. Every name is also importable from here.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.fields import SkipField

from .. import state, timing
from ..cron_words import cron_in_words
from ..deadlines import DeadlineState, deadline_state, read_now
from ..limits import DEADLINE_MAX_SECONDS
from ..models import BlackoutWindow, ExclusionCalendar, Schedule
from ..payloads import payload_errors
from ..registry import registry
from ..state import db_now

# The shared fields and the run and health serializers, re-exported: every name this module
# held before they moved stays importable from here (``X as X``: explicit re-exports, not
# added to ``__all__``, which is unchanged).
from .fields import AWARE_MESSAGE as AWARE_MESSAGE
from .fields import JSON_MAX_DEPTH as JSON_MAX_DEPTH
from .fields import MAX_INSTANT as MAX_INSTANT
from .fields import MIN_INSTANT as MIN_INSTANT
from .fields import PAYLOAD_MAX_BYTES as PAYLOAD_MAX_BYTES
from .fields import (
    AwareDateTimeField,
    BaseModelSerializer,
    CalendarNamesField,
    CallbackField,
    WindowNamesField,
)
from .fields import field_errors as field_errors
from .fields import json_problem as json_problem
from .fields import json_size as json_size
from .health_serializers import DegradedScheduleSerializer as DegradedScheduleSerializer
from .health_serializers import HealthSerializer
from .health_serializers import StatusCountsField as StatusCountsField
from .health_serializers import WorkerSerializer as WorkerSerializer
from .run_serializers import AttemptSerializer, ReceiptSerializer, RunningSerializer, running_data
from .run_serializers import EventSerializer as EventSerializer
from .unique_fields import UniqueAtWrite
from .upcoming_serializers import FireTimeSerializer as FireTimeSerializer
from .upcoming_serializers import UpcomingQuerySerializer, UpcomingSerializer
from .visibility import redact_detail, redact_reason

#: What showing a value written behind ``save()`` may raise (see ``to_representation``).
_UNSHOWABLE = (ValueError, TypeError, AttributeError, ArithmeticError, LookupError)


def _calendar_names_field(calendars: Any) -> CalendarNamesField:
    """A schedule's ``exclusion_calendars``: names of the calendars ``calendars`` holds."""
    return CalendarNamesField(
        child_relation=serializers.SlugRelatedField(slug_field="name", queryset=calendars),
        required=False,
        help_text="Names of the exclusion calendars whose dates (local dates in timezone) it "
        "must not fire on (calendars/); not for a once schedule. An owner-scoped user names "
        "and sees only the shared calendars.",
    )


def _window_names_field(windows: Any) -> WindowNamesField:
    """A schedule's ``blackout_windows``: names of the windows ``windows`` holds."""
    return WindowNamesField(
        child_relation=serializers.SlugRelatedField(slug_field="name", queryset=windows),
        required=False,
        help_text="Names of the blackout windows in which no run of it may start "
        "(blackouts/; see blackout_policy). An owner-scoped user names and sees only the "
        "shared windows.",
    )


#: The schedule's writable fields in the order the API gives them (its answers, its schema,
#: docs/api.md): the editable fields of :mod:`..models.choices` (``EDITABLE_FIELDS``: this
#: order holds each of them once and no other, tests/test_field_groups.py) and the
#: write-only ``run_in_seconds`` after ``run_at``. The admin shows the same groups in
#: another order, so the API's order is kept here, not derived from theirs.
WRITABLE_ORDER = (
    "name",
    "callback",
    "kind",
    "interval_seconds",
    "cron",
    "rrule",
    "timezone",
    "run_at",
    "run_in_seconds",
    "start_at",
    "end_at",
    "max_runs",
    "max_attempts",
    "misfire_policy",
    "overlap_policy",
    "misfire_grace_seconds",
    "backoff_base_seconds",
    "backoff_cap_seconds",
    "pause_after_failures",
    "timeout_seconds",
    "jitter_seconds",
    "deadline_seconds",
    "blackout_policy",
    "payload",
    "metadata",
    "exclusion_calendars",
    "blackout_windows",
    "owner",
)


class ScheduleSerializer(UniqueAtWrite, BaseModelSerializer):
    """A schedule: its definition (writable) and its run state (read-only).

    Run state changes only through the actions (``enable``, ``disable``, ``cancel``,
    ``trigger``). ``run_in_seconds`` (write-only, ``once`` only) sets ``run_at`` that many
    seconds after the database's now. ``owner`` is writable for full-access users and
    always the request user for owner-scoped ones. The name's uniqueness is the insert's
    (the unique constraint), not a probe before it (:class:`.unique_fields.UniqueAtWrite`).
    """

    unique_at_write = ("name",)
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
    rrule = serializers.CharField(
        max_length=500,
        required=False,
        allow_blank=True,
        allow_null=True,
        help_text="RFC 5545 recurrence rule (rrule schedules only), evaluated in timezone: "
        "'FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1', "
        "'FREQ=WEEKLY;INTERVAL=2;BYDAY=TU;BYHOUR=9;BYMINUTE=0'. DTSTART is start_at, else "
        "midnight of the creation day; no COUNT (use max_runs), DTSTART or TZID in the rule.",
    )
    timezone = serializers.CharField(
        max_length=64,
        required=False,
        allow_blank=True,
        allow_null=True,
        help_text="IANA time zone of a cron or rrule schedule (default: settings.TIME_ZONE).",
    )
    cron_description = serializers.SerializerMethodField(
        help_text="The cron expression in words, in the request's language where "
        'cron-descriptor has it ("At 09:00, Monday through Friday"); null for other kinds.'
    )
    description = serializers.SerializerMethodField(
        help_text='The definition in words, for any kind: "every 5 minutes", "cron \'0 3 * * *\' '
        '(Europe/Paris)", "once at 2027-06-01 09:00:00 UTC", "manual: runs only when '
        'triggered".'
    )
    rrule_description = serializers.SerializerMethodField(
        help_text='The rule in English words with the times it takes from its start ("every '
        '2 weeks on Tuesday at 09:00"), or the rule normalized when it has no words; null for '
        "other kinds."
    )
    # Read from the state machine's table (state.allowed_actions, as the admin's buttons
    # are), from the row's own status and lease: no query, and no status rule typed here.
    exclusion_calendars = _calendar_names_field(ExclusionCalendar.objects.all())
    blackout_windows = _window_names_field(BlackoutWindow.objects.all())
    allowed_actions = serializers.SerializerMethodField(
        help_text="The actions the schedule's status and lease allow now, by name: cancel, "
        "disable, enable, trigger (POST schedules/{id}/{action}/) and delete (DELETE). Any "
        "other is a 409, except enable of an active schedule and disable of a paused one "
        "(a no-op 200). A listed action can still be a 409 if the schedule changed in "
        "between, or for delete while an attempt has no receipt.",
    )

    running = serializers.SerializerMethodField(
        help_text="The run in flight (its occurrence, attempt, claimed_at: since when, and "
        "worker), read from the attempt that holds the schedule's lease; null when idle."
    )
    late = serializers.SerializerMethodField(
        help_text="Whether the occurrence the schedule owes is past its deadline "
        "(deadline_seconds after its slot) by the database clock; false without a deadline."
    )
    deadline_at = serializers.SerializerMethodField(
        help_text="The deadline of the occurrence the schedule owes (its slot, or the open "
        "run's, plus deadline_seconds); null without a deadline or an occurrence owed."
    )

    class Meta:
        model = Schedule
        fields = [
            "id",
            *WRITABLE_ORDER,
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
            fields["exclusion_calendars"] = _calendar_names_field(
                ExclusionCalendar.objects.shared()
            )
            fields["blackout_windows"] = _window_names_field(BlackoutWindow.objects.shared())
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

    @extend_schema_field(RunningSerializer(allow_null=True))
    def get_running(self, schedule: Schedule) -> dict[str, Any] | None:
        return running_data(schedule)

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_cron_description(self, schedule: Schedule) -> str | None:
        if schedule.kind != "cron":
            return None
        return cron_in_words(schedule.cron) or None

    @extend_schema_field(serializers.CharField())
    def get_description(self, schedule: Schedule) -> str:
        try:
            return timing.describe(schedule.spec(exclusions=False))
        except (timing.InvalidSchedule, ValueError, TypeError, OverflowError):
            return f"{schedule.kind} schedule"  # a definition written behind save()

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_rrule_description(self, schedule: Schedule) -> str | None:
        return timing.rrule_description(schedule.spec(exclusions=False)) or None

    def _deadline(self, schedule: Schedule) -> DeadlineState:
        """The row's deadline state at the database clock's time, read once per answer and
        only for a row with a deadline."""
        if schedule.deadline_seconds is None:
            return DeadlineState()
        context: Any = self.context  # the root's dict, shared by a list's rows
        now = read_now(schedule) or context.get("db_now")
        if now is None:
            now = context["db_now"] = state.db_now(schedule._state.db or "default")
        return deadline_state(schedule, now)

    @extend_schema_field(serializers.BooleanField())
    def get_late(self, schedule: Schedule) -> bool:
        return self._deadline(schedule).late

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_deadline_at(self, schedule: Schedule) -> str | None:
        deadline = self._deadline(schedule).deadline_at
        return serializers.DateTimeField().to_representation(deadline) if deadline else None

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_allowed_actions(self, schedule: Schedule) -> list[str]:
        return sorted(state.allowed_actions(schedule))

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
        self._keep_hidden_calendars(attrs)
        self._keep_hidden_windows(attrs)
        self._prepared = (dict(attrs), self._prepare(attrs))
        return attrs

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


class EnableSerializer(serializers.Serializer):
    """Body of ``enable/`` (optional): ``run_at`` moves a ``once`` schedule to a new
    instant as it is re-armed (without it, a past one-shot is due at once)."""

    run_at = AwareDateTimeField(
        required=False,
        help_text="Once schedules only: the new instant to run at (aware ISO 8601).",
    )


class DuplicateSerializer(serializers.Serializer):
    """Body of ``duplicate/``: the new schedule's ``name`` (the rules of
    ``Schedule.name``; a name taken is a 400 on ``name``)."""

    name = serializers.CharField(
        max_length=128, help_text="The new schedule's name (unique, as Schedule.name)."
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
