"""``GET`` of the API's root (``/api/`` in the example project): its endpoints by name,
each an absolute URL, as DRF's ``DefaultRouter`` root answers, behind the same permission
as every other view of the API (:class:`.permissions.ScheduleAPIPermission`)."""

from __future__ import annotations

from typing import Any

from django.urls import NoReverseMatch, reverse
from drf_spectacular.utils import OpenApiResponse
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from .schema import extend_schema
from .view_base import APIViewMixin

#: Name in the answer -> URL name in the API's namespace, in the answer's order.
ENDPOINTS = {
    "schedules": "schedule-list",
    "attempts": "attempt-list",
    "receipts": "receipt-list",
    "calendars": "calendar-list",
    "blackouts": "blackout-list",
    "groups": "group-list",
    "health": "health",
    "health/probe": "health-probe",
}

_ROOT = OpenApiResponse(
    {"type": "object", "additionalProperties": {"type": "string", "format": "uri"}},
    description="The API's endpoints: name -> absolute URL.",
)


def endpoint_urls(request: Request, namespace: str) -> dict[str, str]:
    """``{name: absolute URL}`` of :data:`ENDPOINTS` reversed in ``namespace`` (the
    namespace the root was reached under) for ``request``'s host and scheme; a name the
    project's URLconf does not route is left out."""
    urls: dict[str, str] = {}
    for key, name in ENDPOINTS.items():
        try:
            path = reverse(f"{namespace}:{name}" if namespace else name)
        except NoReverseMatch:
            continue
        urls[key] = request.build_absolute_uri(path)
    return urls


class APIRootView(APIViewMixin, APIView):
    """The API's root: its endpoints (owner-scoped users too, who may use some of them)."""

    @extend_schema(responses={200: _ROOT})
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """The endpoints of the API by name, each an absolute URL."""
        match = request.resolver_match
        namespace = match.namespace if match is not None else ""
        return Response(endpoint_urls(request, namespace))
