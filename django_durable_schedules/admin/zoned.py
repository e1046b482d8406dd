"""Instants entered and shown in the schedule's own zone: ``run_at``, ``start_at`` and
``end_at`` on the admin form are wall times (to the second) in the zone of the schedule's
``timezone`` field, not in the site's zone, with UTC beside them.

The zone is the one submitted with the same form (so changing a schedule's zone and its
``run_at`` at once reads the time in the new zone), else the schedule's, else the default
(``TIME_ZONE``). A wall time the zone skips (spring forward: 02:30 on the night clocks go
from 02:00 to 03:00 in Europe/Paris) is refused with a message; one it repeats (fall back)
is its first occurrence, the rule cron follows too (docs/time.md). A value typed with an
explicit offset (``2027-06-01T09:00+09:00``) is that instant.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from django import forms
from django.forms.fields import BaseTemporalField
from django.utils.dateparse import parse_datetime

from .. import timing
from ..models import default_timezone
from .display import render_fragment

#: The instants of a schedule's definition, entered in its zone.
INSTANT_INPUTS = ("run_at", "start_at", "end_at")

_FORMAT = "%Y-%m-%dT%H:%M:%S"


def _zone_or_none(name: Any) -> ZoneInfo | None:
    try:
        return ZoneInfo(timing.validate_timezone(str(name)))
    except (timing.InvalidSchedule, ValueError):
        return None


def wall_time(value: datetime, zone: ZoneInfo) -> datetime:
    """``value`` (aware) as the naive wall time it is in ``zone``."""
    return value.astimezone(zone).replace(tzinfo=None)


def instant(wall: datetime, zone: ZoneInfo) -> datetime | None:
    """The aware UTC instant of the naive wall time ``wall`` in ``zone``: the first
    occurrence of a repeated one, None for one the zone skips (a DST gap)."""
    aware = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if wall_time(aware, zone) != wall:  # through UTC: astimezone(zone) on zone is a no-op
        return None
    return aware


class WallTimeInput(forms.DateTimeInput):
    """``<input type="datetime-local" step="1">``: a date and a time to the second, with
    the browser's picker, and none of the admin's site-zone shortcuts."""

    input_type = "datetime-local"

    def __init__(self, attrs: dict[str, Any] | None = None, format: str | None = None):
        super().__init__({"step": "1", **(attrs or {})}, format or _FORMAT)


class ZonedDateTimeField(forms.DateTimeField):
    """A wall time (``datetime-local`` input, to the second) that stays naive here: the
    form reads it in the schedule's zone (:class:`ZonedInstantsMixin`), never in the site's
    current zone as Django's datetime fields do. An explicit offset is kept."""

    widget = WallTimeInput
    input_formats = [_FORMAT, "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M"]

    def to_python(self, value: Any) -> datetime | None:
        if value in self.empty_values:
            return None
        if isinstance(value, datetime):
            return value
        text = str(value).strip()
        try:
            result = parse_datetime(text)
        except ValueError:
            raise forms.ValidationError(self.error_messages["invalid"], code="invalid") from None
        if result is None:
            result = BaseTemporalField.to_python(self, text)
        return result

    def prepare_value(self, value: Any) -> Any:
        return value  # a naive wall time already, or the text as typed


class ZonedInstantsMixin(forms.BaseForm):
    """Shows the instants of :data:`INSTANT_INPUTS` as wall times in the schedule's zone,
    labelled with it and with UTC beside them, and turns what is entered into instants."""

    instance: Any

    def _zone_name(self) -> str:
        submitted = self.data.get(self.add_prefix("timezone")) if self.is_bound else None
        return str(submitted or getattr(self.instance, "timezone", "") or default_timezone())

    def zone_instant_fields(self) -> None:
        """Label the instant fields with the schedule's zone and show the stored values as
        wall times in it (call from ``__init__``)."""
        shown = str(getattr(self.instance, "timezone", "") or default_timezone())
        zone = _zone_or_none(shown) or ZoneInfo("UTC")
        for name in INSTANT_INPUTS:
            field = self.fields.get(name)
            if not isinstance(field, ZonedDateTimeField):
                continue
            field.label = f"{field.label or name} (in the schedule's zone)"
            stored = getattr(self.instance, name, None)
            if isinstance(stored, datetime) and stored.tzinfo is not None:
                self.initial[name] = wall_time(stored, zone)
                field.help_text = render_fragment(
                    "stored_instant_help",
                    {
                        "zone": zone.key,
                        "local": stored.astimezone(zone).strftime("%Y-%m-%d %H:%M:%S %Z"),
                        "utc": stored.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S"),
                    },
                )
            else:
                # The zone is not named: it is whatever the Timezone field holds as the
                # form is sent (the line typed under the field says it live).
                field.help_text = (
                    "Wall time in the schedule's time zone (the Timezone field above), to "
                    "the second."
                )

    def _update_errors(self, errors: Any) -> None:
        # A time refused here (a DST gap) is missing from the instance, and the model would
        # add "a once schedule needs run_at" to it: keep the one message that says why.
        error_dict = getattr(errors, "error_dict", None)
        refused = getattr(self, "_errors", None) or {}
        if error_dict is not None:
            for name in INSTANT_INPUTS:
                if name in error_dict and name in refused:
                    del error_dict[name]
        super()._update_errors(errors)  # type: ignore[misc]

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or self.cleaned_data
        zone = _zone_or_none(self._zone_name())
        for name in INSTANT_INPUTS:
            value = cleaned.get(name)
            if not isinstance(value, datetime) or value.tzinfo is not None:
                continue
            if zone is None:
                self.add_error(name, "Give a valid time zone: this time is read in it.")
                continue
            if not 1000 <= value.year <= timing.MAX_YEAR:
                # The model's bound; beyond it a wall time may have no UTC instant at all.
                self.add_error(name, f"Must be between the years 1000 and {timing.MAX_YEAR}.")
                continue
            aware = instant(value, zone)
            if aware is None:
                self.add_error(
                    name,
                    f"{value:%Y-%m-%d %H:%M:%S} does not exist in {zone.key}: the clocks skip "
                    "it that night (daylight saving time). Give a time before or after the gap.",
                )
                continue
            cleaned[name] = aware
        if "timezone" in self.changed_data:
            # The same wall time in another zone is another instant: save it too.
            for name in INSTANT_INPUTS:
                if cleaned.get(name) is not None and name not in self.changed_data:
                    self.changed_data.append(name)
        return cleaned
