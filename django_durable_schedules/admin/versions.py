"""The admin's definition history (issue #29, item 3): the change page's "History of the
definition" (:func:`versions_context`: each version's time, actor, source and fields
changed, with a "Compare" link), the compare page (``<id>/versions/<event>/``,
:func:`version_view`: what the version holds otherwise than the current definition, and
"Restore this version"), and the confirmation page (``<id>/versions/<event>/restore/``,
:func:`restore_view`) whose POST calls :func:`..state.restore_definition` under the write
lock and goes back to the change page with a message."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import router
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse

from .. import state
from ..models import Schedule
from ..state.version_rules import Version, differences, find
from .views import admin_url


def _shown(value: Any) -> str:
    """A definition value as the pages show it: JSON (``null`` shown as a dash)."""
    if value is None or value == "":
        return "-"
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def versions_context(
    model_admin: admin.ModelAdmin[Schedule], obj: Schedule, found: list[Version] | None = None
) -> list[dict[str, Any]]:
    """The rows of the change page's "History of the definition": one per version of
    ``obj``'s definition (newest first, at most 50), with its compare URL."""
    found = state.definition_versions(obj) if found is None else found
    return [
        {
            "version": v,
            "url": admin_url(model_admin, "version", quote(obj.pk), v.event_id),
            "who": v.actor or "-",
        }
        for v in found
    ]


def _schedule_and_version(
    model_admin: admin.ModelAdmin[Schedule], request: HttpRequest, object_id: str, event: str
) -> tuple[Schedule, Version]:
    """The schedule ``object_id`` (view permission) and its version ``event``; 404 for
    either unknown, 403 without view permission."""
    schedule = model_admin.get_object(request, unquote(object_id))
    if schedule is None:
        raise Http404("no such schedule")
    if not model_admin.has_view_or_change_permission(request, schedule):
        raise PermissionDenied
    found = state.definition_versions(schedule)
    version = find(found, event)
    if version is None:
        raise Http404("no such version of this schedule")
    return schedule, version


def _context(
    model_admin: admin.ModelAdmin[Schedule],
    request: HttpRequest,
    schedule: Schedule,
    version: Version,
    title: str,
) -> dict[str, Any]:
    diff = differences(version.definition, state.current_definition(schedule))
    return {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.opts,
        "title": title,
        "schedule": schedule,
        "version": version,
        "who": version.actor or "-",
        "rows": [(d.field, _shown(d.current), _shown(d.version)) for d in diff],
        "change_url": admin_url(model_admin, "change", quote(schedule.pk)),
        "compare_url": admin_url(model_admin, "version", quote(schedule.pk), version.event_id),
        "restore_url": (
            admin_url(model_admin, "restore", quote(schedule.pk), version.event_id)
            if diff and model_admin.has_change_permission(request, schedule)
            else None
        ),
    }


def version_view(
    model_admin: admin.ModelAdmin[Schedule], request: HttpRequest, object_id: str, event: str
) -> HttpResponse:
    """GET: the version ``event`` of the schedule ``object_id`` beside the current
    definition (each field that differs: its current value and the version's), with
    "Restore this version" for a user who may change it. 404: unknown schedule or
    version."""
    schedule, version = _schedule_and_version(model_admin, request, object_id, event)
    title = f"{schedule.name}: the version of {version.at:%Y-%m-%d %H:%M:%S} UTC"
    context = _context(model_admin, request, schedule, version, title)
    return TemplateResponse(request, "durable_schedules/admin/version_compare.html", context)


def restore_view(
    model_admin: admin.ModelAdmin[Schedule], request: HttpRequest, object_id: str, event: str
) -> HttpResponse:
    """GET: the confirmation page of a restore of the version ``event``; POST with
    ``post=yes``: :func:`..state.restore_definition` under the write lock (source
    ``admin``), a success message and the change page (a refusal: an error message naming
    the fields, and the compare page). 403 without change permission."""
    schedule, version = _schedule_and_version(model_admin, request, object_id, event)
    if not model_admin.has_change_permission(request, schedule):
        raise PermissionDenied
    context = _context(model_admin, request, schedule, version, "")
    if request.method == "POST" and request.POST.get("post") == "yes":
        try:
            with state.write_transaction(using=router.db_for_write(Schedule)):
                state.restore_definition(
                    schedule.pk, version.event_id, actor=request.user, source="admin"
                )
        except ValidationError as exc:
            reasons = "; ".join(f"{f}: {' '.join(m)}" for f, m in exc.message_dict.items())
            model_admin.message_user(
                request, f"{schedule.name} was not restored: {reasons}", messages.ERROR
            )
            return HttpResponseRedirect(context["compare_url"] or "../")
        except Schedule.DoesNotExist:
            raise Http404("the schedule was deleted meanwhile") from None
        model_admin.message_user(
            request,
            f"The definition of {schedule.name} was restored to its version of "
            f"{version.at:%Y-%m-%d %H:%M:%S} UTC, as an edit: it takes effect at the next "
            "worker pass, and no run was fired.",
            messages.SUCCESS,
        )
        return HttpResponseRedirect(context["change_url"] or "../")
    context["title"] = f"Restore this version of {schedule.name}?"
    return TemplateResponse(request, "durable_schedules/admin/restore_confirmation.html", context)


__all__ = ["restore_view", "version_view", "versions_context"]
