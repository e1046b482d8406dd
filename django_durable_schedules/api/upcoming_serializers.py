"""Serializers of ``schedules/{id}/upcoming/``: the query, one fire time, the answer (with
the slots exclusion calendars leave out, on ``?include_excluded=1``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from rest_framework import serializers

from .. import timing
from ..models import Schedule
from .fields import UPCOMING_DEFAULT_COUNT, UPCOMING_MAX_COUNT, AwareDateTimeField


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

    include_excluded = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Also list, under excluded, the slots that exclusion calendars leave out "
        "before the last fire time (at most count), each with its calendar, local date "
        "and reason.",
    )

    def validate_count(self, value: int) -> int:
        return min(value, UPCOMING_MAX_COUNT)


class FireTimeSerializer(serializers.Serializer):
    """One fire time, in UTC and in the schedule's time zone."""

    utc = serializers.DateTimeField(help_text="ISO 8601, UTC (Z).")
    local = serializers.DateTimeField(help_text="The same instant in the schedule's zone.")


class ExcludedSlotSerializer(FireTimeSerializer):
    """A slot an exclusion calendar leaves out: the instant, the calendar, the local date
    and the reason (the date's own, or the holiday's name)."""

    calendar = serializers.CharField(
        allow_null=True,
        help_text="The calendar's name; null (and no reason) for a calendar the user cannot "
        "see (owner-scoped users see only shared calendars).",
    )
    date = serializers.DateField(help_text="The local date, in the schedule's zone.")
    reason = serializers.CharField(allow_blank=True)


class BlackedOutSlotSerializer(FireTimeSerializer):
    """A slot inside one of the schedule's blackout windows: not run."""

    window = serializers.CharField(help_text="The blackout window's name.")


class MovedSlotSerializer(FireTimeSerializer):
    """A fire time that moved to a business day (``exclusion_policy``): where it runs
    (``utc``, ``local``), its nominal slot and why it moved."""

    nominal_utc = serializers.DateTimeField(help_text="The nominal slot it stands for (UTC).")
    nominal_local = serializers.DateTimeField(help_text="The nominal slot in the schedule's zone.")
    reason = serializers.CharField(help_text="Why it moved: the policy, the date and why.")


class UpcomingSerializer(serializers.Serializer):
    """Answer of ``upcoming/``: the next fire times the definition produces (a paused,
    cancelled, completed or failed schedule does not fire them)."""

    id = serializers.UUIDField()
    name = serializers.CharField()
    status = serializers.CharField()
    timezone = serializers.CharField()
    count = serializers.IntegerField()
    upcoming = FireTimeSerializer(many=True)
    excluded = ExcludedSlotSerializer(
        many=True,
        required=False,
        help_text="Only with ?include_excluded=1: the slots exclusion calendars leave out.",
    )
    blacked_out = BlackedOutSlotSerializer(
        many=True,
        required=False,
        help_text="Only with ?include_excluded=1: the slots inside a blackout window.",
    )
    moved = MovedSlotSerializer(
        many=True,
        required=False,
        help_text="Only for a schedule whose exclusion_policy moves slots: the fire times "
        "above that moved to a business day, with their nominal slot and why.",
    )

    @staticmethod
    def shape(
        schedule: Schedule,
        times: list[datetime],
        excluded: list[timing.SlotView] | None = None,
        visible: frozenset[str] | None = None,
        with_excluded: bool = True,
    ) -> dict[str, Any]:
        """The response body for ``schedule`` and its fire ``times`` (aware UTC), with
        ``excluded`` (slots and why) when given; a slot excluded by a calendar not in
        ``visible`` (None: all are) is shown without its calendar's name and reason."""
        zone = ZoneInfo(schedule.timezone or "UTC")

        def instant(t: datetime) -> dict[str, str]:
            return {
                "utc": t.astimezone(UTC).isoformat().replace("+00:00", "Z"),
                "local": t.astimezone(zone).isoformat(),
            }

        body: dict[str, Any] = {
            "id": str(schedule.pk),
            "name": schedule.name,
            "status": schedule.status,
            "timezone": schedule.timezone,
            "count": len(times),
            "upcoming": [instant(t) for t in times],
        }
        if excluded is not None and schedule.exclusion_policy != "skip":
            body["moved"] = [
                {
                    **instant(v.at),
                    "nominal_utc": instant(v.nominal)["utc"],
                    "nominal_local": instant(v.nominal)["local"],
                    "reason": v.why_moved,
                }
                for v in excluded
                if v.moved_by is not None and v.nominal is not None
            ]
        if excluded is not None and with_excluded:
            body["excluded"] = [
                _excluded_slot(instant(v.at), v.excluded_by, visible)
                for v in excluded
                if v.excluded_by is not None
            ]
            body["blacked_out"] = [
                {**instant(v.at), "window": v.blacked_out_by}
                for v in excluded
                if v.blacked_out_by is not None
            ]
        return body


def _excluded_slot(
    at: dict[str, str], why: timing.Exclusion, visible: frozenset[str] | None
) -> dict[str, Any]:
    """One excluded slot of the answer; a calendar not in ``visible`` is not named."""
    shown = visible is None or why.calendar in visible
    return {
        **at,
        "calendar": why.calendar if shown else None,
        "date": why.date.isoformat(),
        "reason": why.reason if shown else "",
    }
