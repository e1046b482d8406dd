"""Who may use the API, and which schedules each user sees.

Two keys of ``settings.DURABLE_SCHEDULES`` (both optional):

``API_PERMISSION_CLASSES`` (default ``["rest_framework.permissions.IsAdminUser"]``)
    DRF permission classes (dotted paths or classes); a request must pass all of them to use
    the API with full access (every schedule, run and the health endpoint).
``API_OWNER_SCOPED`` (default ``False``)
    When true, authenticated users who are not staff may also use the API, scoped to their
    own schedules (``Schedule.owner``) and those schedules' attempts and receipts; anyone
    else's answer 404, the health endpoint answers 403, and schedules they create are theirs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from django.utils.module_loading import import_string
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from .. import conf
from ..models import Schedule

DEFAULT_PERMISSION_CLASSES = ("rest_framework.permissions.IsAdminUser",)


def api_setting(key: str, default: Any) -> Any:
    """One API key of ``settings.DURABLE_SCHEDULES`` (see :mod:`..conf`), read at call time
    (override-friendly); ``default`` is used when the key is not set."""
    return (getattr(settings, "DURABLE_SCHEDULES", None) or {}).get(
        key, conf.get(key) if key in conf.DEFAULTS else default
    )


def configured_permissions() -> list[BasePermission]:
    """Instances of the ``API_PERMISSION_CLASSES`` setting."""
    paths: Sequence[Any] = api_setting("API_PERMISSION_CLASSES", DEFAULT_PERMISSION_CLASSES)
    return [(import_string(p) if isinstance(p, str) else p)() for p in paths]


def owner_scoped(request: Request) -> bool:
    """True when ``request`` sees only its user's own schedules (``API_OWNER_SCOPED`` is on
    and the user is authenticated but not staff)."""
    user = getattr(request, "user", None)
    return bool(
        api_setting("API_OWNER_SCOPED", False)
        and user is not None
        and user.is_authenticated
        and not user.is_staff
    )


def scope(queryset: QuerySet, request: Request, owner_path: str = "owner") -> QuerySet:
    """``queryset`` narrowed to the request user's rows when the request is owner-scoped."""
    if owner_scoped(request):
        return queryset.filter(**{owner_path: request.user})
    return queryset


class ScheduleAPIPermission(BasePermission):
    """Staff-only by default (``API_PERMISSION_CLASSES``); with ``API_OWNER_SCOPED`` also
    authenticated non-staff users, limited to their own rows by the views' querysets.

    A view with ``owner_scoped_access = False`` (health) is never open to scoped users; one
    with ``owner_scoped_read_only = True`` (calendars) only to their reads (GET, HEAD,
    OPTIONS).
    """

    def has_permission(self, request: Request, view: Any) -> bool:
        if owner_scoped(request):
            if getattr(view, "owner_scoped_read_only", False):
                return request.method in SAFE_METHODS
            return getattr(view, "owner_scoped_access", True)
        return all(p.has_permission(request, view) for p in configured_permissions())

    def has_object_permission(self, request: Request, view: Any, obj: Any) -> bool:
        if owner_scoped(request):
            # The views' querysets already hold only the user's rows; this re-checks the
            # schedule itself (attempts and receipts are reached through their schedule).
            if isinstance(obj, Schedule):
                return obj.owner_id is not None and obj.owner_id == request.user.pk
            return True
        return all(p.has_object_permission(request, view, obj) for p in configured_permissions())
