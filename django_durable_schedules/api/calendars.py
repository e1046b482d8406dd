"""``calendars/``: exclusion calendars (list, create, retrieve, update, delete) with their
dates nested. Writes go through :mod:`..state` (:func:`~..state.save_calendar`,
:func:`~..state.delete_calendar`), which re-plans the schedules that name the calendar in
the same transaction. Full-access (staff) users see and edit every calendar; owner-scoped
users read only the shared ones, each with only their own schedules (:mod:`.visibility`).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Prefetch
from rest_framework import serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from .. import state
from ..models import ExclusionCalendar, ExclusionDate, Schedule
from .fields import model_errors_as_400
from .permissions import scope
from .strict import RejectUnknownFields
from .view_base import APIViewMixin
from .visibility import visible_calendars


class ExclusionDateSerializer(RejectUnknownFields, serializers.ModelSerializer):
    """One local date of a calendar and its reason."""

    class Meta:
        model = ExclusionDate
        fields = ["date", "reason"]


class ExclusionCalendarSerializer(RejectUnknownFields, serializers.ModelSerializer):
    """An exclusion calendar: a country's public holidays (``holidays_country``, optional
    ``holidays_subdivision``, as the ``holidays`` package knows them) and/or its own
    ``dates``; ``weekend_days`` (ISO numbers 1-7 or names; default ``[6, 7]``) say which
    days are no business days (they exclude nothing). Writing ``dates`` replaces them all; leaving it out keeps them."""

    dates = ExclusionDateSerializer(many=True, required=False)
    schedules: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        many=True,
        read_only=True,
        slug_field="name",
        help_text="The schedules that name it.",
    )

    class Meta:
        model = ExclusionCalendar
        fields = [
            "id",
            "name",
            "description",
            "holidays_country",
            "holidays_subdivision",
            "weekend_days",
            "shared",
            "dates",
            "schedules",
            "created_at",
            "updated_at",
        ]
        read_only_fields = ["id", "created_at", "updated_at"]

    def to_internal_value(self, data: Any) -> Any:
        """As DRF's, with the errors of ``dates`` flattened into messages (``"dates[3].date:
        This field is required."``): every 400 of this API is ``{field: [message]}``."""
        try:
            return super().to_internal_value(data)
        except serializers.ValidationError as exc:
            detail: Any = exc.detail
            if isinstance(detail, dict) and "dates" in detail:
                detail = {**detail, "dates": _flatten(detail["dates"], "dates")}
            raise serializers.ValidationError(detail) from None

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        fields = {k: v for k, v in attrs.items() if k != "dates"}
        candidate = ExclusionCalendar(**{**self._current(), **fields})
        with model_errors_as_400():
            candidate.clean()  # upper-cases the codes and checks them against holidays
        attrs["holidays_country"] = candidate.holidays_country
        attrs["holidays_subdivision"] = candidate.holidays_subdivision
        if "weekend_days" in attrs:
            attrs["weekend_days"] = candidate.weekend_days  # ISO numbers, sorted
        days = [d["date"] for d in attrs.get("dates") or []]
        if len(days) != len(set(days)):
            raise serializers.ValidationError({"dates": ["Each date may be given once."]})
        return attrs

    def _current(self) -> dict[str, Any]:
        cal = self.instance
        if not isinstance(cal, ExclusionCalendar):
            return {}
        return {
            f: getattr(cal, f)
            for f in (
                "name",
                "description",
                "holidays_country",
                "holidays_subdivision",
                "weekend_days",
            )
        }

    def _save(self, calendar: ExclusionCalendar, attrs: dict[str, Any]) -> ExclusionCalendar:
        dates = attrs.pop("dates", None)
        for name, value in attrs.items():
            setattr(calendar, name, value)
        pairs = [(d["date"], d.get("reason", "")) for d in dates] if dates is not None else None
        with model_errors_as_400():
            return state.save_calendar(calendar, dates=pairs)

    def create(self, validated_data: dict[str, Any]) -> ExclusionCalendar:
        return self._save(ExclusionCalendar(), validated_data)

    def update(
        self, instance: ExclusionCalendar, validated_data: dict[str, Any]
    ) -> ExclusionCalendar:
        return self._save(instance, validated_data)


def _flatten(detail: Any, path: str) -> list[str]:
    """Nested DRF errors as ``"path: message"`` strings."""
    if isinstance(detail, dict):
        return [
            m
            for k, v in detail.items()
            for m in _flatten(v, f"{path}.{k}" if not str(k).isdigit() else f"{path}[{k}]")
        ]
    if isinstance(detail, list):
        if all(isinstance(v, str) for v in detail):
            return [f"{path}: {v}" for v in detail]
        return [m for i, v in enumerate(detail) if v for m in _flatten(v, f"{path}[{i}]")]
    return [f"{path}: {detail}"]


class ExclusionCalendarViewSet(APIViewMixin, viewsets.ModelViewSet):
    """Exclusion calendars, by name; each with its dates and the schedules that name it."""

    serializer_class = ExclusionCalendarSerializer
    pagination_class = None
    queryset = ExclusionCalendar.objects.prefetch_related("dates", "schedules")
    # Owner-scoped users: read-only, the shared calendars, their own schedules only.
    owner_scoped_read_only = True

    def get_queryset(self) -> Any:
        schedules = scope(Schedule.objects.only("id", "name", "owner"), self.request)
        return visible_calendars(self.request).prefetch_related(
            "dates", Prefetch("schedules", queryset=schedules)
        )

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Delete the calendar and its dates; its schedules are re-planned without it."""
        calendar = self.get_object()
        try:
            state.delete_calendar(calendar)
        except DjangoValidationError as exc:  # deleted meanwhile
            raise serializers.ValidationError(exc.messages) from None
        return Response(status=status.HTTP_204_NO_CONTENT)
