"""``GET schedules/{id}/versions/`` and ``POST schedules/{id}/restore/`` (issue #29, item
3): the versions of a schedule's definition (:func:`..state.definition_versions`) and the
restore of one of them as an edit (:func:`..state.restore_definition`); the actions
:class:`ScheduleVersionsMixin` gives the schedules viewset."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample
from rest_framework import serializers
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from .. import state
from ..state.version_rules import RELATION_FIELDS, VERSIONS_LIMIT, Version
from .permissions import owner_scoped
from .schema import extend_schema
from .serializers import ScheduleSerializer
from .strict import StrictSerializer
from .visibility import visible_names

#: The example of a restore's body: the id is a version's ``event`` (from ``versions/``).
EXAMPLE_EVENT = "5f0c6b1e-2a43-4c1b-9d7e-0b6a51f3c2d4"


class RestoreSerializer(StrictSerializer):
    """``{"event": "<id>"}``: the version to restore, by the id of the event that made it."""

    event = serializers.UUIDField(
        help_text="The `event` of one of the schedule's versions (`GET schedules/{id}/"
        f"versions/`: its last {VERSIONS_LIMIT} created or edited events)."
    )


class VersionSerializer(serializers.Serializer):
    """One version of the definition: the definition right after the event ``event``."""

    event = serializers.CharField(help_text="The id of the event that made this version.")
    action = serializers.CharField(help_text="created, edited or calendars.")
    at = serializers.DateTimeField(help_text="When (database clock).")
    actor = serializers.CharField(help_text="Who (blank: code or the engine).")
    source = serializers.CharField(help_text="api, admin, command, code or import.")  # type: ignore[assignment]
    changed = serializers.ListField(
        child=serializers.CharField(), help_text="The definition fields the event changed."
    )
    restored_from = serializers.CharField(
        allow_null=True, help_text="The event of the version this one restored, if any."
    )
    current = serializers.BooleanField(
        help_text="Its definition is the current one (restoring it changes nothing)."
    )
    definition = serializers.DictField(
        help_text="Every definition field (not the name, owner or run state), as JSON: "
        "instants in UTC, calendars and windows by name, the group by its key."
    )

    @staticmethod
    def shape(version: Version, visible: Any = None) -> dict[str, Any]:
        """``version`` as this serializer shows it; with ``visible`` (the calendar names an
        owner-scoped user may see; None: every one), the calendars they cannot see are left
        out of the definition."""
        definition = dict(version.definition)
        if visible is not None:
            names = definition.get(RELATION_FIELDS[0]) or []
            definition[RELATION_FIELDS[0]] = [n for n in names if n in visible]
        return {
            "event": version.event_id,
            "action": version.action,
            "at": version.at,
            "actor": version.actor,
            "source": version.source,
            "changed": list(version.changed),
            "restored_from": version.restored_from,
            "current": version.current,
            "definition": definition,
        }


class ScheduleVersionsMixin:
    """The ``versions`` and ``restore`` actions of the schedules viewset: the permissions
    and owner scoping of reading and editing the schedule (its ``get_object``)."""

    get_object: Any
    _transition: Any

    @extend_schema(responses={200: VersionSerializer(many=True)})
    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=None)
    def versions(self, request: Request, pk: Any = None) -> Response:
        """The versions of the definition, newest first, at most 50, reconstructed from
        the audit trail (`created`, `edited` and `calendars` events): each with the
        definition it had. Restore one with `POST schedules/{id}/restore/`."""
        schedule = self.get_object()
        visible = visible_names(request)
        found = state.definition_versions(schedule)
        return Response(
            VersionSerializer([VersionSerializer.shape(v, visible) for v in found], many=True).data
        )

    @extend_schema(
        request=RestoreSerializer,
        responses={200: ScheduleSerializer},
        examples=[
            OpenApiExample(
                "Restore a version",
                summary="The event id of a version, from GET schedules/{id}/versions/.",
                value={"event": EXAMPLE_EVENT},
                request_only=True,
            )
        ],
    )
    @action(detail=True, methods=["post"])
    def restore(self, request: Request, pk: Any = None) -> Response:
        """Make an earlier version of the definition current again, as an edit: validated
        (a version that no longer validates is a 400 naming the fields), re-planned from
        now, one `edited` event whose changes name the version (`restored_from`); no run
        is fired. 400 on `event` for an id that is not one of the schedule's versions."""
        body = RestoreSerializer(data=request.data or {})
        body.is_valid(raise_exception=True)
        event = body.validated_data["event"]
        owner = request.user if owner_scoped(request) else None
        return self._transition(  # type: ignore[no-any-return]
            lambda pk, **audit: state.restore_definition(pk, event, owner=owner, **audit)
        )


__all__ = ["RestoreSerializer", "ScheduleVersionsMixin", "VersionSerializer"]
