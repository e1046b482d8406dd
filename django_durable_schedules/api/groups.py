"""``groups/``: concurrency groups (list, create, retrieve, update, delete), by id or name.
Writes go through :mod:`..state` (:func:`~..state.save_group`,
:func:`~..state.delete_group`, by the request's user, source ``api``: an edit writes a
``group`` event on each schedule that names the group); a claim counts a group's live
leases under its lock, so a change applies at the next claim. Each group carries what it
holds now: ``running`` (live leases) and ``waiting`` (due, unleased rows), both in the
list's one statement (:func:`~..state.with_usage`). A delete while schedules name the
group is a 409 naming them. Full-access (staff) users see and edit every group; owner-scoped users only read
them (their schedules may name any group)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from .. import state
from ..db.clock import db_now
from ..models import ConcurrencyGroup
from .fields import model_errors_as_400
from .schema import extend_schema
from .serializers import DetailSerializer
from .strict import RejectUnknownFields
from .view_base import APIViewMixin

_LIMITS = ("max_running", "rate", "description")
_IN_USE = OpenApiResponse(
    DetailSerializer, description="Still named by schedules (detail names some)."
)


class ConcurrencyGroupSerializer(RejectUnknownFields, serializers.ModelSerializer):
    """A concurrency group: at most ``max_running`` runs of its schedules at once (null: no
    cap) and at most ``rate`` starts per window (``"10/m"``; blank: none), at least one of
    the two. Checked as ``ConcurrencyGroup.clean()`` does: a 400 with field messages. The
    name is fixed once created."""

    running = serializers.IntegerField(
        read_only=True, help_text="Runs of its schedules holding a live lease now."
    )
    waiting = serializers.IntegerField(
        read_only=True,
        help_text="Its schedules due now and not running: held back by the group's limits, "
        "or not claimed yet.",
    )

    class Meta:
        model = ConcurrencyGroup
        fields = [
            "id",
            "name",
            "description",
            "max_running",
            "rate",
            "running",
            "waiting",
            "created_at",
            "updated_at",
        ]
        read_only_fields = ["id", "created_at", "updated_at"]
        # The name's uniqueness is save_group's (a name taken: an update of that group).
        extra_kwargs: dict[str, Any] = {"name": {"validators": []}}

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        current = self.instance
        if isinstance(current, ConcurrencyGroup):
            if "name" in attrs and attrs["name"] != current.name:
                raise serializers.ValidationError(
                    {"name": ["A group's name cannot be changed: create another group."]}
                )
            attrs = {**{f: getattr(current, f) for f in ("name", *_LIMITS)}, **attrs}
        elif ConcurrencyGroup.objects.filter(name=attrs.get("name")).exists():
            raise serializers.ValidationError(
                {"name": ["A concurrency group with this name already exists."]}
            )
        candidate = ConcurrencyGroup(**attrs)
        with model_errors_as_400():
            candidate.full_clean(validate_unique=False)
        attrs["rate"] = candidate.rate
        return attrs

    def _save(self, attrs: dict[str, Any]) -> ConcurrencyGroup:
        request = self.context.get("request")
        with model_errors_as_400():
            group = state.save_group(
                attrs["name"],
                max_running=attrs.get("max_running"),
                rate=attrs.get("rate", ""),
                description=attrs.get("description", ""),
                actor=getattr(request, "user", None),
                source="api",
            )
        return _with_usage(group.pk)

    def create(self, validated_data: dict[str, Any]) -> ConcurrencyGroup:
        return self._save(validated_data)

    def update(self, instance: ConcurrencyGroup, validated_data: dict[str, Any]) -> Any:
        return self._save(validated_data)


def _with_usage(pk: Any) -> ConcurrencyGroup:
    """The group ``pk`` read again with its ``running`` and ``waiting``."""
    return state.with_usage(ConcurrencyGroup.objects.all(), db_now()).get(pk=pk)


class ConcurrencyGroupViewSet(APIViewMixin, viewsets.ModelViewSet):
    """Concurrency groups, by id or name; each with its live runs and its waiting rows."""

    serializer_class = ConcurrencyGroupSerializer
    pagination_class = None
    queryset = ConcurrencyGroup.objects.all()
    # Owner-scoped users: read-only (a schedule of theirs may name any group).
    owner_scoped_read_only = True

    def get_queryset(self) -> Any:
        if getattr(self, "swagger_fake_view", False):  # the schema: no clock to read
            return ConcurrencyGroup.objects.none()
        return state.with_usage(ConcurrencyGroup.objects.order_by("name"), db_now())

    def get_object(self) -> ConcurrencyGroup:
        """The group of the URL: a number is its id, anything else its name. Raises
        ``Http404`` when no group has it."""
        value = str(self.kwargs[self.lookup_url_kwarg or self.lookup_field])
        # A number a primary key can hold is an id; anything else a name (404 unless one).
        field = "pk" if value.isascii() and value.isdigit() and len(value) <= 18 else "name"
        group: ConcurrencyGroup = get_object_or_404(self.get_queryset(), **{field: value})
        self.check_object_permissions(self.request, group)
        return group

    @extend_schema(responses={204: None, 409: _IN_USE})
    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Delete the group; refused (409, naming some of them) while schedules name it."""
        group = self.get_object()
        try:
            state.delete_group(group.name, actor=request.user, source="api")
        except DjangoValidationError as exc:
            return Response({"detail": " ".join(exc.messages)}, status=status.HTTP_409_CONFLICT)
        return Response(status=status.HTTP_204_NO_CONTENT)
