"""Fields and checks the serializers share: what only an HTTP API adds to the model's rules.

Aware datetimes (a naive one is refused, never guessed, and only instants every supported
database can store), a ``callback`` chosen among registered names, the limits on what any
JSON string or number may hold (re-exported from :mod:`..payloads`), the bounds
constants, and a model ``ValidationError`` turned into a 400 with the same field messages
(:func:`field_errors`, :func:`model_errors_as_400`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from django.core.exceptions import NON_FIELD_ERRORS
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import models
from django.utils import timezone as dj_timezone
from rest_framework import serializers
from rest_framework.settings import api_settings

from .. import timing
from ..payloads import JSON_MAX_DEPTH, PAYLOAD_MAX_BYTES, json_problem, json_size
from .strict import RejectUnknownFields

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


def shortened(value: Any, limit: int = 100) -> str:
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


class FlatListField(serializers.ListField):
    """A list field whose items' errors are one flat list of messages, each naming its item
    from 1 (``"item 2: Null characters are not allowed."``, as the model's own messages
    for the same field say it), not DRF's ``{index: [...]}``: every field's errors have the
    one shape the schema's error body declares (a list of strings)."""

    def run_child_validation(self, data: list[Any]) -> list[Any]:
        try:
            return super().run_child_validation(data)
        except serializers.ValidationError as exc:
            if not isinstance(exc.detail, dict):
                raise
            messages = [
                f"item {int(index) + 1}: {message}"
                for index, errors in exc.detail.items()
                for message in (errors if isinstance(errors, list) else [errors])
            ]
            raise serializers.ValidationError(messages) from None


class CallbackField(serializers.ChoiceField):
    """A registered callback name (never an import path); an unknown name is a 400 that
    names only the input."""

    default_error_messages = {"invalid_choice": "{input} is not a registered callback."}

    def to_internal_value(self, data: Any) -> str:
        if isinstance(data, str) and data in self.choice_strings_to_values:
            return data
        self.fail("invalid_choice", input=shortened(data))


class NameRelatedField(serializers.SlugRelatedField):
    """A row named by its ``name`` (a calendar, window or group); a name holding a NUL
    character is "does not exist" without a query (PostgreSQL refuses NUL in text: a
    lookup would be a 500, not a 400)."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, str) and "\x00" in data:
            self.fail("does_not_exist", slug_name=self.slug_field, value=shortened(data))
        return super().to_internal_value(data)


class BaseModelSerializer(RejectUnknownFields, serializers.ModelSerializer):
    """Model serializer whose datetimes are :class:`AwareDateTimeField`; a key of its
    input that is none of its fields is a 400 (:class:`.strict.RejectUnknownFields`)."""

    serializer_field_mapping = {
        **serializers.ModelSerializer.serializer_field_mapping,
        models.DateTimeField: AwareDateTimeField,
    }


__all__ = [
    "AWARE_MESSAGE",
    "JSON_MAX_DEPTH",
    "MAX_INSTANT",
    "MIN_INSTANT",
    "PAYLOAD_MAX_BYTES",
    "UPCOMING_DEFAULT_COUNT",
    "UPCOMING_MAX_COUNT",
    "AwareDateTimeField",
    "BaseModelSerializer",
    "CallbackField",
    "NameRelatedField",
    "field_errors",
    "json_problem",
    "json_size",
    "model_errors_as_400",
]


class CalendarNamesField(serializers.ManyRelatedField):
    """A schedule's exclusion calendars by name: written as a list of names, read from
    the names the list query annotated (:func:`..db.names.with_calendar_names`: no query
    per row), else from the relation."""

    def get_attribute(self, instance: Any) -> Any:
        """The names (or calendars) to show: for an owner-scoped user (the serializer's
        context holds ``visible_calendars``), only the calendars they may see."""
        from ..db.names import calendar_names

        names = calendar_names(instance)
        found = names if names is not None else super().get_attribute(instance)
        visible = self.context.get("visible_calendars")
        if visible is None or found is None:
            return found
        return [v for v in found if (v if isinstance(v, str) else v.name) in visible]

    def to_representation(self, iterable: Any) -> list[Any]:
        return [
            value if isinstance(value, str) else self.child_relation.to_representation(value)
            for value in iterable
        ]


class WindowNamesField(serializers.ManyRelatedField):
    """A schedule's blackout windows by name: written as a list of names, read from the
    names the list query annotated (:func:`..db.names.with_window_names`: no query per
    row), else from the relation. An owner-scoped user (the serializer's context holds
    ``visible_calendars``) sees only the shared windows (one query per request)."""

    def get_attribute(self, instance: Any) -> Any:
        """The names (or windows) to show."""
        from ..db.names import window_names
        from ..models import BlackoutWindow

        names = window_names(instance)
        found = names if names is not None else super().get_attribute(instance)
        if self.context.get("visible_calendars") is None or found is None:
            return found
        shared = self.context.get("_shared_windows")
        if shared is None:
            shared = set(BlackoutWindow.objects.shared().values_list("name", flat=True))
            self.context["_shared_windows"] = shared  # type: ignore[index]
        return [v for v in found if (v if isinstance(v, str) else v.name) in shared]

    def to_representation(self, iterable: Any) -> list[Any]:
        return [
            value if isinstance(value, str) else self.child_relation.to_representation(value)
            for value in iterable
        ]
