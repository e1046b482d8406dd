"""The fields the schedule's serializer declares beyond the model's columns, and their order.

:data:`WRITABLE_ORDER` (the writable fields in the order the API gives them), the calendar
and window name fields (:func:`calendar_names_field`, :func:`window_names_field`: the
queryset of the names a user may give), and :class:`ScheduleFields`: the declared fields of
:class:`.serializers.ScheduleSerializer`, the definition's (``run_in_seconds``, ``cron``,
``rrule``, ``timezone``) and the computed, read-only ones with the methods that compute them
(the definition in words, ``allowed_actions``, ``running``, ``late``, ``deadline_at``).
How the schedule is validated and written is :mod:`.serializers`'.
"""

from __future__ import annotations

from typing import Any, TypeVar

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from .. import state, timing
from ..cron_words import business_in_words, schedule_description, schedule_in_words
from ..db.names import calendar_names, read_calendar_links
from ..deadlines import DeadlineState, deadline_state, read_now
from ..models import BlackoutWindow, ConcurrencyGroup, ExclusionCalendar, Schedule
from ..running import running_count
from .chain_fields import downstream_field, upstream_field
from .fields import CalendarNamesField, FlatListField, NameRelatedField, WindowNamesField
from .run_serializers import (
    LIST_RESULT_MAX_BYTES,
    PreviousSerializer,
    RunningSerializer,
    previous_data,
    running_data,
)

_F = TypeVar("_F", CalendarNamesField, WindowNamesField)


def _names_field(field: type[_F], queryset: Any, help_text: str) -> _F:
    """A many-to-many field of a schedule written and read as the names of ``queryset``'s
    rows (``field``: :class:`.fields.CalendarNamesField` or ``WindowNamesField``)."""
    return field(
        child_relation=NameRelatedField(slug_field="name", queryset=queryset),
        required=False,
        help_text=help_text,
    )


def calendar_names_field(calendars: Any) -> CalendarNamesField:
    """A schedule's ``exclusion_calendars``: names of the calendars ``calendars`` holds."""
    return _names_field(
        CalendarNamesField,
        calendars,
        "Names of the exclusion calendars whose dates (local dates in timezone) it "
        "must not fire on (calendars/); not for a once schedule. An owner-scoped user names "
        "and sees only the shared calendars.",
    )


def window_names_field(windows: Any) -> WindowNamesField:
    """A schedule's ``blackout_windows``: names of the windows ``windows`` holds."""
    return _names_field(
        WindowNamesField,
        windows,
        "Names of the blackout windows in which no run of it may start "
        "(blackouts/; see blackout_policy). An owner-scoped user names and sees only the "
        "shared windows.",
    )


#: The schedule's writable fields in the order the API gives them (its answers, its schema,
#: docs/api.md): the editable fields of :mod:`..models.choices` (``EDITABLE_FIELDS``: this
#: order holds each of them once and no other, tests/test_field_groups.py) and the
#: write-only ``run_in_seconds`` and ``run_now`` after ``run_at``. The admin shows the same groups in
#: another order, so the API's order is kept here, not derived from theirs.
WRITABLE_ORDER = (
    "name",
    "callback",
    "kind",
    "upstream",
    "interval_seconds",
    "cron",
    "rrule",
    "extra_specs",
    "timezone",
    "run_at",
    "run_in_seconds",
    "run_now",
    "start_at",
    "end_at",
    "max_runs",
    "max_attempts",
    "misfire_policy",
    "overlap_policy",
    "max_parallel",
    "misfire_grace_seconds",
    "backoff_base_seconds",
    "backoff_cap_seconds",
    "pause_after_failures",
    "timeout_seconds",
    "jitter_seconds",
    "deadline_seconds",
    "blackout_policy",
    "priority",
    "pool",
    "concurrency_group",
    "wait_seconds",
    "payload",
    "metadata",
    "exclusion_calendars",
    "exclusion_policy",
    "rrule_business_days",
    "blackout_windows",
    "owner",
)


class ScheduleFields(serializers.Serializer):
    """The fields :class:`.serializers.ScheduleSerializer` declares (it lists them in its
    ``Meta.fields``, which gives their order) and the ``get_*`` methods of its computed ones.
    Not a serializer of its own: a base that only declares."""

    run_in_seconds = serializers.IntegerField(
        write_only=True,
        required=False,
        min_value=0,
        max_value=timing.MAX_INTERVAL_SECONDS,
        help_text="For a once schedule: run this many seconds from now (instead of run_at).",
    )
    run_now = serializers.BooleanField(
        write_only=True,
        required=False,
        default=False,
        help_text="For a once schedule: accept a run_at more than 60 seconds in the past and "
        "run it at once (without it, such a run_at is refused).",
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
    extra_specs = FlatListField(
        child=serializers.CharField(max_length=500, allow_blank=True),
        required=False,
        allow_empty=True,
        help_text="Further specs of a cron or rrule schedule, each a cron expression or an "
        "RFC 5545 rule (starting with FREQ= or RRULE:), read in the same timezone, start_at, "
        "end_at and exclusion calendars: the schedule fires on the union of the grids, once "
        "at an instant several share. At most 10, no repeats: "
        "['0 9 * * 1-5', 'FREQ=MONTHLY;BYMONTHDAY=1;BYHOUR=9;BYMINUTE=0'].",
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
        'cron-descriptor has it ("At 09:00, Monday through Friday"), then each of '
        '"extra_specs" in words, joined by "; "; null for other kinds.'
    )
    description = serializers.SerializerMethodField(
        help_text='The definition in words, for any kind: "every 5 minutes", "cron \'0 3 * * *\' '
        '(Europe/Paris)", "once at 2027-06-01 09:00:00 UTC", "manual: runs only when '
        'triggered".'
    )
    rrule_description = serializers.SerializerMethodField(
        help_text='The rule in English words with the times it takes from its start ("every '
        '2 weeks on Tuesday at 09:00"), or the rule normalized when it has no words, then each '
        'of "extra_specs" in words, joined by "; "; null for other kinds.'
    )
    # Read from the state machine's table (state.allowed_actions, as the admin's buttons
    # are), from the row's own status and lease: no query, and no status rule typed here.
    exclusion_calendars = calendar_names_field(ExclusionCalendar.objects.all())
    blackout_windows = window_names_field(BlackoutWindow.objects.all())
    upstream = upstream_field(Schedule.objects.all())
    downstream = downstream_field()
    concurrency_group = NameRelatedField(
        slug_field="name",
        queryset=ConcurrencyGroup.objects.all(),
        required=False,
        allow_null=True,
        help_text="The concurrency group's name (groups/), or null: at most "
        "its max_running runs at once and its rate of starts, shared with its other "
        "schedules.",
    )
    allowed_actions = serializers.SerializerMethodField(
        help_text="The actions the schedule's status and lease allow now, by name: cancel, "
        "disable, enable, trigger (POST schedules/{id}/{action}/) and delete (DELETE). Any "
        "other is a 409, except enable of an active schedule and disable of a paused one "
        "(a no-op 200). A listed action can still be a 409 if the schedule changed in "
        "between, or for delete while an attempt has no receipt.",
    )

    running = serializers.SerializerMethodField(
        help_text="The run in flight (its occurrence, attempt, claimed_at: since when, and "
        "worker), read from the attempt that holds the schedule's lease; with "
        "overlap_policy allow, while only occurrences run, the oldest of them (see "
        "running_occurrences); null when idle."
    )
    running_occurrences = serializers.SerializerMethodField(
        help_text="How many runs are in flight: with overlap_policy allow, its running "
        "occurrences (each under a lease of its own, at most max_parallel), plus one for "
        "a run under the schedule's own lease (a backfill slot or a re-run); for any other "
        "schedule 1 while running (running not null), else 0. A lease that expired counts "
        "until its recovery."
    )
    previous = serializers.SerializerMethodField(
        help_text="The last successful run, as the callback reads it (ctx.previous): its "
        "occurrence, scheduled_for (its nominal instant), finished_at and result (bounded "
        "JSON); null before the first success. Read from the schedule's row. In a list of "
        f"schedules a result over {LIST_RESULT_MAX_BYTES} bytes is left out (null, "
        "result_omitted true): the schedule's own answer has it."
    )
    late = serializers.SerializerMethodField(
        help_text="Whether the occurrence the schedule owes is past its deadline "
        "(deadline_seconds after its slot) by the database clock; false without a deadline."
    )
    deadline_at = serializers.SerializerMethodField(
        help_text="The deadline of the occurrence the schedule owes (its slot, or the open "
        "run's, plus deadline_seconds); null without a deadline or an occurrence owed."
    )

    @extend_schema_field(RunningSerializer(allow_null=True))
    def get_running(self, schedule: Schedule) -> dict[str, Any] | None:
        return running_data(schedule)

    @extend_schema_field(serializers.IntegerField(min_value=0))
    def get_running_occurrences(self, schedule: Schedule) -> int:
        return running_count(schedule)

    @extend_schema_field(PreviousSerializer(allow_null=True))
    def get_previous(self, schedule: Schedule) -> dict[str, Any] | None:
        # A row of a list (the ListSerializer is its parent): the result only when small.
        return previous_data(schedule, listed=isinstance(self.parent, serializers.ListSerializer))

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_cron_description(self, schedule: Schedule) -> str | None:
        if schedule.kind != "cron":
            return None
        return self._words(schedule)

    @extend_schema_field(serializers.CharField())
    def get_description(self, schedule: Schedule) -> str:
        try:
            return schedule_description(schedule)
        except (timing.InvalidSchedule, ValueError, TypeError, OverflowError):
            return f"{schedule.kind} schedule"  # a definition written behind save()

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_rrule_description(self, schedule: Schedule) -> str | None:
        if schedule.kind != "rrule":
            return None
        return self._words(schedule)

    def _words(self, schedule: Schedule) -> str | None:
        """The schedule in words (:func:`..cron_words.schedule_in_words`), naming the
        calendars its business days come from as ``exclusion_calendars`` shows them (an
        owner-scoped user: the shared ones only). The names come from the list query's
        annotation; a row without it (the answer to a write) reads them once, only when a
        business-day rule applies."""
        names = calendar_names(schedule)
        if names is None and schedule.pk is not None and business_in_words(schedule):
            read_calendar_links(schedule)  # one query, names and weekend days
            names = calendar_names(schedule)
        visible = self.context.get("visible_calendars")
        if names is not None and visible is not None:
            shown = [n for n in names if n in visible]
            if names and not shown:  # only calendars it may not see: none named
                return schedule_in_words(schedule, name_calendars=False) or None
            names = shown
        return schedule_in_words(schedule, calendars=names) or None

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


__all__ = ["WRITABLE_ORDER", "ScheduleFields", "calendar_names_field", "window_names_field"]
