"""The fleet probe as a plain Django view: ``GET`` answers ``200`` with
:meth:`.health.Probe.as_dict` when the scheduler fleet does its job (the database answers,
enough live workers, no due schedule waiting too long for a claim), else ``503`` with the
same body. It names no schedule, so it is safe to expose to a load balancer, a Kubernetes
probe or an uptime monitor; ``PROBE_PUBLIC = False`` restricts it to staff.

The API routes it at ``health/probe/``; without the API (no Django REST framework), route it
yourself: ``path("scheduler/probe/", probe_view)``. The detailed, per-schedule health for
people stays ``health/`` (staff).
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse

from .conf import app_settings
from .health import probe


def probe_view(request: HttpRequest) -> HttpResponse:
    """``GET``/``HEAD``: the probe; 200 when it passes, 503 when not, 403 for a non-staff
    request when ``PROBE_PUBLIC`` is False, 405 for other methods. Never cached."""
    if request.method not in ("GET", "HEAD"):
        return HttpResponseNotAllowed(["GET", "HEAD"])
    if not app_settings.PROBE_PUBLIC:
        user = getattr(request, "user", None)
        if user is None or not user.is_staff:
            return JsonResponse({"detail": "staff only (PROBE_PUBLIC is False)"}, status=403)
    result = probe()
    response = JsonResponse(result.as_dict(), status=200 if result.ok else 503)
    response["Cache-Control"] = "no-store"
    return response
