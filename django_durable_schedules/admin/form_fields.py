"""The schedule form's own fields and widgets: bounded JSON text
(:class:`BoundedJSONField`), the zone input with every IANA name offered
(:class:`ZoneInput`), ``extra_specs`` one spec a line (:class:`SpecLinesField`) and the
cron and rule inputs with their words below (:class:`CronInput`, :class:`RruleInput`).
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.forms.fields import InvalidJSONInput

from .. import timing
from ..cron_words import cron_in_words
from ..models import Schedule
from ..payloads import JSON_MAX_DEPTH, PAYLOAD_MAX_BYTES, json_problem

#: Longest JSON text the payload and metadata fields parse (four times the payload bound:
#: room for indentation and escapes; the model then bounds the value itself).
JSON_TEXT_MAX_CHARS = 4 * PAYLOAD_MAX_BYTES


class BoundedJSONField(forms.JSONField):
    """Django's JSON form field, bounded: text longer than :data:`JSON_TEXT_MAX_CHARS` or
    nested too deeply for the parser (``RecursionError``) is a field error, never a 500;
    what the model cannot store (NaN, NUL, too deep: :mod:`..payloads`) is refused by the
    model's ``clean()`` with the API's messages."""

    default_error_messages = {
        "too_long": "At most %(limit)s characters of JSON are accepted.",
        "too_deep": f"The JSON is nested deeper than {JSON_MAX_DEPTH} levels.",
        "too_long_number": "A number in the JSON has more than 4300 digits.",
    }

    def to_python(self, value: Any) -> Any:
        if isinstance(value, str) and len(value) > JSON_TEXT_MAX_CHARS:
            raise forms.ValidationError(
                self.error_messages["too_long"],
                code="too_long",
                params={"limit": JSON_TEXT_MAX_CHARS},
            )
        try:
            return super().to_python(value)
        except RecursionError:
            raise forms.ValidationError(self.error_messages["too_deep"], code="too_deep") from None
        except ValueError:  # an integer of more than 4,300 digits (Python's conversion limit)
            raise forms.ValidationError(
                self.error_messages["too_long_number"], code="number"
            ) from None

    def bound_data(self, data: Any, initial: Any) -> Any:
        # Re-rendering an invalid form parses the text again: show it as it was typed.
        if isinstance(data, str) and len(data) > JSON_TEXT_MAX_CHARS:
            return InvalidJSONInput(data)
        try:
            value = super().bound_data(data, initial)
        except (RecursionError, ValueError):
            return InvalidJSONInput(data)
        if json_problem(value):  # NaN, a NUL, a lone surrogate: show the text as typed
            return InvalidJSONInput(data)
        return value


class ZoneInput(forms.TextInput):
    """A text input that offers every IANA zone name as you type (an HTML ``datalist``);
    any case is accepted and stored in the IANA spelling (``europe/paris``)."""

    template_name = "durable_schedules/widgets/zone_input.html"

    def get_context(self, name: str, value: Any, attrs: dict[str, Any] | None) -> dict[str, Any]:
        attrs = {**(attrs or {}), "list": f"dds-zones-{name}", "autocomplete": "off"}
        context = super().get_context(name, value, attrs)
        context["widget"]["zones"] = timing.zone_names()
        return context


class SpecLinesField(forms.CharField):
    """``Schedule.extra_specs`` as text, one cron expression or rule a line: blank lines are
    dropped, each line stripped. The spec validates the items (:meth:`.timing.Spec.validate`,
    field ``extra_specs``); a value that is no list of texts (written behind ``save()``) is
    shown as its JSON."""

    widget = forms.Textarea

    def __init__(self, *, encoder: Any = None, decoder: Any = None, **kwargs: Any) -> None:
        # A JSON model field's formfield() passes its encoder and decoder: not used here.
        kwargs["help_text"] = (
            "Further specs of a cron or rrule schedule, one a line: a cron expression, or a "
            "rule starting with FREQ=. Read in the same zone, window and exclusion calendars; "
            "the schedule fires on the union, once at an instant they share. At most 10."
        )
        super().__init__(**kwargs)
        self.widget.attrs.update({"rows": "3", "class": "vLargeTextField"})

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            return "\n".join(value)
        if isinstance(value, str) or value is None:
            return value
        return json.dumps(value, default=repr)

    def to_python(self, value: Any) -> list[str]:  # type: ignore[override]
        text = super().to_python(value) or ""
        return [line.strip() for line in text.splitlines() if line.strip()]

    def has_changed(self, initial: Any, data: Any) -> bool:
        try:
            return bool(self.to_python(data) != (initial or []))
        except forms.ValidationError:
            return True


class CronInput(forms.TextInput):
    """A text input with the expression in words below it, updated as you type
    (``cron_words.js`` asks the admin's ``describe-cron/`` view)."""

    template_name = "durable_schedules/widgets/cron_input.html"

    def get_context(self, name: str, value: Any, attrs: dict[str, Any] | None) -> dict[str, Any]:
        context = super().get_context(name, value, attrs)
        context["widget"]["words"] = cron_in_words(value) if isinstance(value, str) else ""
        return context


class RruleInput(CronInput):
    """A text input with the rule in words below it (:func:`..timing.rrule_description`,
    with the times it takes from the schedule's start), updated as you type
    (``cron_words.js`` asks the admin's ``describe-rrule/`` view)."""

    #: The schedule being edited (set by :class:`ScheduleForm`): its zone and start.
    instance: Schedule | None = None

    def __init__(self, attrs: dict[str, Any] | None = None) -> None:
        # Wide enough for a typical rule (FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1).
        super().__init__({"class": "vLargeTextField", "size": "64", **(attrs or {})})

    def get_context(self, name: str, value: Any, attrs: dict[str, Any] | None) -> dict[str, Any]:
        context = super(CronInput, self).get_context(name, value, attrs)
        row = self.instance or Schedule()
        spec = timing.Spec(
            kind="rrule",
            rrule=value if isinstance(value, str) else None,
            timezone=row.timezone or "UTC",
            start_at=row.start_at,
            anchor=row.anchor,
        )
        context["widget"]["words"] = timing.rrule_description(spec)
        return context


__all__ = [
    "JSON_TEXT_MAX_CHARS",
    "BoundedJSONField",
    "CronInput",
    "RruleInput",
    "SpecLinesField",
    "ZoneInput",
]
