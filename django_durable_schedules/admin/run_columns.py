"""The computed columns of attempts, receipts and audit events, shared by their list and
detail pages (:mod:`.runs`) and by the latest-runs tables of a schedule's change page
(:mod:`.inlines`). Instants are shown in the schedule's zone with UTC beside them: the
querysets carry the zone as ``schedule_timezone`` (:func:`with_schedule_zone`, one indexed
subquery; a deleted schedule's rows fall back to UTC).
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.db.models import OuterRef, QuerySet, Subquery
from django.utils import timezone as dj_timezone
from django.utils.safestring import SafeString
from django.utils.text import Truncator

from ..models import RunAttempt, RunReceipt, Schedule, ScheduleEvent
from ..projection import format_traceback
from .display import (
    EMPTY,
    attempt_outcome,
    fmt_duration,
    outcome_label,
    render_fragment,
    when,
    with_note,
)


def with_schedule_zone(queryset: QuerySet) -> QuerySet:
    """``queryset`` (attempts, receipts or events) annotated with ``schedule_timezone``."""
    zone = Schedule.objects.filter(pk=OuterRef("schedule_id")).values("timezone")[:1]
    annotated: QuerySet = queryset.annotate(schedule_timezone=Subquery(zone))
    return annotated


def _in_zone(obj: Any, value: Any) -> SafeString:
    """``value`` in the row's schedule zone and, below it, in UTC."""
    zone = getattr(obj, "schedule_timezone", None) or "UTC"
    return when(value, zone, now=dj_timezone.now())


class ScheduleZoneMixin:
    """``get_queryset`` adds the schedule's zone (:func:`with_schedule_zone`)."""

    def get_queryset(self, request: Any) -> QuerySet:
        return with_schedule_zone(super().get_queryset(request))  # type: ignore[misc]


class AttemptColumns:
    """``slot``, ``claimed``, ``lateness_display`` and ``outcome`` of an attempt."""

    @admin.display(description="scheduled for (its zone · UTC)", ordering="scheduled_for")
    def slot(self, obj: RunAttempt) -> SafeString:
        return _in_zone(obj, obj.scheduled_for)

    @admin.display(description="claimed at (its zone · UTC)", ordering="claimed_at")
    def claimed(self, obj: RunAttempt) -> SafeString:
        return _in_zone(obj, obj.claimed_at)

    @admin.display(description="lease as first granted, until (its zone · UTC)")
    def lease_expires(self, obj: RunAttempt) -> SafeString:
        return _in_zone(obj, obj.lease_expires_at)

    @admin.display(description="late")
    def lateness_display(self, obj: RunAttempt) -> str:
        return f"{obj.lateness:.0f} s"

    @admin.display(description="outcome")
    def outcome(self, obj: RunAttempt) -> SafeString | str:
        return attempt_outcome(obj)

    @admin.display(description="outcome")
    def outcome_noted(self, obj: RunAttempt) -> SafeString:
        """The list's outcome, with the attempt's origin (when not ``scheduled``) and the
        slots it passed over (when any) below it: their own columns on the detail page."""
        notes = [] if obj.origin == "scheduled" else [obj.get_origin_display()]
        if obj.missed_slots:
            notes.append(f"{obj.missed_slots} slot{'' if obj.missed_slots == 1 else 's'} missed")
        return with_note(attempt_outcome(obj), " · ".join(notes))

    @admin.display(description="payload (a trigger's, when not the schedule's)")
    def payload_shown(self, obj: RunAttempt) -> str:
        if obj.payload is None:
            return EMPTY
        text = json.dumps(obj.payload, sort_keys=True, ensure_ascii=False, default=str)
        return Truncator(text).chars(200)


class ReceiptColumns:
    """``outcome``, ``started``, ``finished``, ``duration``, ``error``, ``traceback_display``
    and ``next_run`` of a receipt."""

    @admin.display(description="started at (its zone · UTC)", ordering="started_at")
    def started(self, obj: RunReceipt) -> SafeString:
        return _in_zone(obj, obj.started_at)

    @admin.display(description="duration")
    def duration(self, obj: RunReceipt) -> str:
        return fmt_duration(obj.duration_seconds)

    @admin.display(description="traceback (innermost last)")
    def traceback_display(self, obj: RunReceipt) -> SafeString | str:
        lines = format_traceback(obj.traceback)
        if not lines:
            return EMPTY
        error = ": ".join(p for p in (obj.error_type, obj.error_message) if p)
        return render_fragment("traceback", {"lines": lines, "error": error})

    @admin.display(description="outcome", ordering="status")
    def outcome(self, obj: RunReceipt) -> SafeString:
        return outcome_label(obj.status)

    @admin.display(description="finished at (its zone · UTC)", ordering="finished_at")
    def finished(self, obj: RunReceipt) -> SafeString:
        return _in_zone(obj, obj.finished_at)

    @admin.display(description="error")
    def error(self, obj: RunReceipt) -> str:
        text = ": ".join(p for p in (obj.error_type, obj.error_message) if p)
        return Truncator(text).chars(120) if text else EMPTY

    @admin.display(description="outcome", ordering="status")
    def outcome_noted(self, obj: RunReceipt) -> SafeString:
        """The list's outcome with its error below it (one line; the whole of it in the
        title and on the receipt's page)."""
        text = ": ".join(p for p in (obj.error_type, obj.error_message) if p)
        return with_note(outcome_label(obj.status), Truncator(text).chars(300))

    @admin.display(description="next run (its zone · UTC)", ordering="next_run_at")
    def next_run(self, obj: RunReceipt) -> SafeString:
        return _in_zone(obj, obj.next_run_at)


def describe_changes(changes: object) -> str:
    """``{"field": [before, after], ...}`` as ``"field: before → after; ..."``."""
    if not isinstance(changes, dict) or not changes:
        return EMPTY
    parts = []
    for field, value in changes.items():
        if isinstance(value, list | tuple) and len(value) == 2:
            parts.append(f"{field}: {_shown(value[0])} → {_shown(value[1])}")
        else:
            parts.append(f"{field}: {_shown(value)}")
    return Truncator("; ".join(parts)).chars(300)


def _shown(value: object) -> str:
    return "—" if value in (None, "") else str(value)


class EventColumns:
    """``when``, ``who`` and ``what_changed`` of an audit event."""

    @admin.display(description="at (its zone · UTC)", ordering="at")
    def when(self, obj: ScheduleEvent) -> SafeString:
        return _in_zone(obj, obj.at)

    @admin.display(description="who", ordering="actor_repr")
    def who(self, obj: ScheduleEvent) -> str:
        return obj.actor_repr or EMPTY

    @admin.display(description="who · from", ordering="actor_repr")
    def who_from(self, obj: ScheduleEvent) -> SafeString:
        """The list's actor with the event's source below it."""
        return with_note(obj.actor_repr or EMPTY, obj.source)

    @admin.display(description="what changed")
    def what_changed(self, obj: ScheduleEvent) -> str:
        return describe_changes(obj.changes)
