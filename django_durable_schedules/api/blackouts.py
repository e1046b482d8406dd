"""``blackouts/``: blackout windows (list, create, retrieve, update, delete), by name.
Writes go through :mod:`..state` (:func:`~..state.save_window`,
:func:`~..state.delete_window`); the claim reads windows per batch, so a change applies at
the next claim. Full-access (staff) users see and edit every window; owner-scoped users
read only the shared ones, each with only their own schedules (:mod:`.visibility`)."""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch
from rest_framework import serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from .. import state
from ..models import BlackoutWindow, Schedule
from .fields import AwareDateTimeField, model_errors_as_400
from .permissions import owner_scoped, scope
from .strict import RejectUnknownFields
from .view_base import APIViewMixin

_WINDOW_FIELDS = ("name", "description", "timezone", "start_at", "end_at", "rrule")


class BlackoutWindowSerializer(RejectUnknownFields, serializers.ModelSerializer):
    """A blackout window: one range (``start_at``, ``end_at``) or recurring (``rrule`` in
    ``timezone``, anchored at ``start_at`` when given, each ``duration_seconds`` long, none
    starting after ``end_at`` when given). Checked as ``BlackoutWindow.clean()`` does:
    a 400 with field messages."""

    start_at = AwareDateTimeField(required=False, allow_null=True)
    end_at = AwareDateTimeField(required=False, allow_null=True)
    schedules: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        many=True, read_only=True, slug_field="name", help_text="The schedules that name it."
    )

    class Meta:
        model = BlackoutWindow
        fields = [
            "id",
            *_WINDOW_FIELDS,
            "duration_seconds",
            "shared",
            "schedules",
            "created_at",
            "updated_at",
        ]
        read_only_fields = ["id", "created_at", "updated_at"]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        current = self.instance
        base = {}
        if isinstance(current, BlackoutWindow):
            base = {f: getattr(current, f) for f in (*_WINDOW_FIELDS, "duration_seconds")}
            base["created_at"] = current.created_at
        candidate = BlackoutWindow(**{**base, **attrs})
        with model_errors_as_400():
            candidate.clean()  # normalizes the rule and the zone
        attrs["rrule"], attrs["timezone"] = candidate.rrule, candidate.timezone
        return attrs

    def _save(self, window: BlackoutWindow, attrs: dict[str, Any]) -> BlackoutWindow:
        for name, value in attrs.items():
            setattr(window, name, value)
        request = self.context.get("request")
        with model_errors_as_400():
            return state.save_window(window, actor=getattr(request, "user", None), source="api")

    def create(self, validated_data: dict[str, Any]) -> BlackoutWindow:
        return self._save(BlackoutWindow(), validated_data)

    def update(self, instance: BlackoutWindow, validated_data: dict[str, Any]) -> BlackoutWindow:
        return self._save(instance, validated_data)


class BlackoutWindowViewSet(APIViewMixin, viewsets.ModelViewSet):
    """Blackout windows, by name; each with the schedules that name it."""

    serializer_class = BlackoutWindowSerializer
    pagination_class = None
    queryset = BlackoutWindow.objects.prefetch_related("schedules")
    # Owner-scoped users: read-only, the shared windows, their own schedules only.
    owner_scoped_read_only = True

    def get_queryset(self) -> Any:
        schedules = scope(Schedule.objects.only("id", "name", "owner"), self.request)
        windows = BlackoutWindow.objects.all()
        if owner_scoped(self.request):
            windows = windows.shared()
        return windows.prefetch_related(Prefetch("schedules", queryset=schedules))

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Delete the window; its schedules go on without it from the next claim."""
        state.delete_window(self.get_object(), actor=request.user, source="api")
        return Response(status=status.HTTP_204_NO_CONTENT)
