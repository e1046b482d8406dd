"""django-filter FilterSets for the list endpoints.

Datetimes in filters must be ISO 8601 with a UTC offset, like everywhere in the API; a
naive one is a 400. ``*_after`` is inclusive (``>=``), ``*_before`` exclusive (``<``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

from django import forms
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.utils import timezone as dj_timezone
from django.utils.dateparse import parse_datetime
from django_filters import rest_framework as filters
from django_filters.fields import IsoDateTimeField
from drf_spectacular.utils import extend_schema_field

from ..models import (
    AttemptOrigin,
    Kind,
    ReceiptStatus,
    RunAttempt,
    RunReceipt,
    Schedule,
    ScheduleQuerySet,
    Status,
)
from ..models.labels import LABEL_MAX_COUNT, parse_labels
from .fields import AWARE_MESSAGE


class AwareDateTimeFormField(IsoDateTimeField):
    """An ISO 8601 datetime with a UTC offset; naive input is refused, not localised."""

    def to_python(self, value: Any) -> datetime | None:
        if value in self.empty_values:
            return None
        if isinstance(value, datetime):
            parsed: datetime | None = value
        else:
            try:
                parsed = parse_datetime(str(value).strip())
            except ValueError:
                parsed = None
        if parsed is None:
            raise ValidationError(
                "Enter an ISO 8601 datetime with a UTC offset, e.g. 2027-06-01T10:00:00Z.",
                code="invalid",
            )
        if dj_timezone.is_naive(parsed):
            raise ValidationError(AWARE_MESSAGE, code="naive")
        try:
            return parsed.astimezone(UTC)
        except OverflowError:
            raise ValidationError("Datetime value out of range.", code="overflow") from None


class AwareDateTimeFilter(filters.IsoDateTimeFilter):
    """``IsoDateTimeFilter`` that requires an aware datetime."""

    field_class = AwareDateTimeFormField


_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})


class StrictBooleanFormField(forms.Field):
    """``true``/``false`` (also ``1``/``0``, ``yes``/``no``, any case); anything else is a
    400 naming the value, not a filter silently ignored (django-filter's default)."""

    def to_python(self, value: Any) -> bool | None:
        text = "" if value is None else str(value).strip().lower()
        if not text:
            return None
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise ValidationError(f"{value!r} is not true or false.", code="invalid")


class StrictBooleanFilter(filters.BooleanFilter):
    """A ``BooleanFilter`` with :class:`StrictBooleanFormField`."""

    field_class = StrictBooleanFormField  # type: ignore[assignment]

    def __init__(self, *args: Any, **kwargs: Any):
        # django-filter's BooleanWidget turns anything but true/false into "not given".
        kwargs["widget"] = forms.TextInput
        super().__init__(*args, **kwargs)


class LabelsFormField(forms.Field):
    """``?label=key`` / ``?label=key:value``, repeatable: the parsed ``(key, value)`` pairs
    (:func:`..models.labels.parse_label`); a malformed one is a 400 naming it."""

    widget = forms.SelectMultiple  # reads every ``label`` of the query string

    def to_python(self, value: Any) -> list[tuple[str, str | None]]:
        if value in self.empty_values:
            return []
        texts = value if isinstance(value, list | tuple) else [value]
        return parse_labels(texts)


LABEL_HELP = (
    "metadata label: key (present, any value) or key:value (split at the first ':'; the "
    "value compares as text: a JSON number, true, false or null also matches the text that "
    f"spells it); repeatable, all must match, at most {LABEL_MAX_COUNT}."
)


@extend_schema_field(
    {"type": "array", "items": {"type": "string", "minLength": 1}, "description": LABEL_HELP}
)
class LabelsFilter(filters.Filter):
    """All the labels must match: :meth:`..models.ScheduleQuerySet.with_labels`."""

    field_class = LabelsFormField

    def filter(self, qs: QuerySet, value: Any) -> QuerySet:
        return cast(ScheduleQuerySet, qs).with_labels(value) if value else qs


class ScheduleFilter(filters.FilterSet):
    """``schedules/?status=&kind=&callback=&pool=&degraded=&failing=&label=``."""

    # distinct=False: django-filter's default DISTINCT (for filters across to-many joins)
    # makes PostgreSQL sort every matching row before the page's LIMIT (0.4 s for 61,000
    # paused of 1 M schedules); these filter the table's own columns (or a one-to-one).
    status = filters.MultipleChoiceFilter(choices=Status.choices, distinct=False)
    kind = filters.ChoiceFilter(choices=Kind.choices)
    callback = filters.CharFilter()
    pool = filters.CharFilter(label="Only schedules of this worker pool (exact name).")
    degraded = StrictBooleanFilter(
        method="filter_degraded", label="Only schedules with (true) / without (false) a reason."
    )
    failing = StrictBooleanFilter(
        method="filter_failing", label="Only schedules with (true) / without (false) failures."
    )
    label = LabelsFilter(label=LABEL_HELP)

    class Meta:
        model = Schedule
        fields = ["status", "kind", "callback", "pool", "degraded", "failing", "label"]

    def filter_degraded(self, queryset: QuerySet, name: str, value: bool) -> QuerySet:
        q = ScheduleQuerySet.degraded_q()
        return queryset.filter(q) if value else queryset.exclude(q)

    def filter_failing(self, queryset: QuerySet, name: str, value: bool) -> QuerySet:
        q = ScheduleQuerySet.failing_q()  # the same predicate health counts
        return queryset.filter(q) if value else queryset.exclude(q)


class AttemptFilter(filters.FilterSet):
    """``attempts/?schedule=&status=&open=&origin=&worker=&claimed_after=&claimed_before=``.

    ``status`` is the status of the attempt's receipt; ``open=true`` lists attempts that
    have no receipt yet.
    """

    schedule = filters.UUIDFilter(field_name="schedule_id")
    status = filters.MultipleChoiceFilter(  # receipt: one per attempt at most
        field_name="receipt__status", choices=ReceiptStatus.choices, distinct=False
    )
    open = StrictBooleanFilter(field_name="receipt", lookup_expr="isnull")
    origin = filters.MultipleChoiceFilter(choices=AttemptOrigin.choices, distinct=False)
    worker = filters.CharFilter()
    claimed_after = AwareDateTimeFilter(field_name="claimed_at", lookup_expr="gte")
    claimed_before = AwareDateTimeFilter(field_name="claimed_at", lookup_expr="lt")

    class Meta:
        model = RunAttempt
        fields = [
            "schedule",
            "status",
            "open",
            "origin",
            "worker",
            "claimed_after",
            "claimed_before",
        ]


class ReceiptFilter(filters.FilterSet):
    """``receipts/?schedule=&status=&finished_after=&finished_before=``."""

    schedule = filters.UUIDFilter(field_name="schedule_id")
    status = filters.MultipleChoiceFilter(choices=ReceiptStatus.choices, distinct=False)
    finished_after = AwareDateTimeFilter(field_name="finished_at", lookup_expr="gte")
    finished_before = AwareDateTimeFilter(field_name="finished_at", lookup_expr="lt")

    class Meta:
        model = RunReceipt
        fields = ["schedule", "status", "finished_after", "finished_before"]
