"""The schedule admin's own views, as functions of the model admin and the request: the
health page (``<admin>/durable_schedules/schedule/health/``, :func:`..health.snapshot`
rendered), the change page's transition buttons (``<id>/transition/<name>/``) and the
form's live descriptions (``describe-cron/``, ``describe-rrule/``).
:meth:`.schedules.ScheduleAdmin.get_urls` routes them (each through the site's
``admin_view``); :func:`admin_url` reverses the admin's URLs.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
    JsonResponse,
)
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, reverse
from django.utils import timezone as dj_timezone
from django.utils.text import Truncator
from django.utils.translation import gettext

from .. import timing
from ..conf import app_settings
from ..cron_words import cron_in_words
from ..health import snapshot, tzdata_problem
from ..models import Schedule, Status
from .actions import TRANSITIONS, apply_transition, confirmation_page
from .changelist import attach_recent_receipts
from .columns import receipt_link, recent_receipts
from .display import cadence, fmt_utc, outcome_strip, safe_reverse, status_badges
from .zoned import instant

#: Failing or degraded schedules listed on the health page (the rest: a filtered list).
HEALTH_LIST_LIMIT = 50


def admin_url(model_admin: admin.ModelAdmin[Schedule], name: str, *args: Any) -> str | None:
    """The URL of the model admin's view ``name`` (``"change"``, ``"changelist"``,
    ``"health"``, ``"transition"``, ...) with ``args``, on its own site; None when it does
    not reverse."""
    info = model_admin.opts.app_label, model_admin.opts.model_name
    try:
        return reverse(
            f"admin:{info[0]}_{info[1]}_{name}",
            args=args,
            current_app=model_admin.admin_site.name,
        )
    except NoReverseMatch:
        return None


def _does_not_exist_redirect(
    model_admin: admin.ModelAdmin[Schedule], request: HttpRequest, object_id: str
) -> HttpResponse:
    """What Django's change view does for a missing object (its private
    ``_get_obj_does_not_exist_redirect``): a warning and a redirect to the admin index."""
    msg = gettext("%(name)s with ID “%(key)s” doesn’t exist. Perhaps it was deleted?") % {
        "name": model_admin.opts.verbose_name,
        "key": unquote(object_id),
    }
    model_admin.message_user(request, msg, messages.WARNING)
    return HttpResponseRedirect(reverse("admin:index", current_app=model_admin.admin_site.name))


def transition_view(
    model_admin: admin.ModelAdmin[Schedule], request: HttpRequest, object_id: str, transition: str
) -> HttpResponse:
    """POST ``<id>/transition/<enable|disable|trigger|cancel>/``: the change page's buttons.
    A final transition (cancel) first shows its confirmation page (GET, or a POST without
    ``post=yes``). 404 for an unknown transition, 405 for another method, 403 without
    change permission on the schedule; a missing schedule redirects to the admin index."""
    t = TRANSITIONS.get(transition)
    if t is None:
        raise Http404(f"no transition {transition!r}")
    if request.method != "POST" and not (t.confirm and request.method == "GET"):
        return HttpResponseNotAllowed(["GET", "POST"] if t.confirm else ["POST"])
    obj = model_admin.get_object(request, unquote(object_id))
    if obj is None:
        return _does_not_exist_redirect(model_admin, request, object_id)
    if not model_admin.has_change_permission(request, obj):
        raise PermissionDenied
    change_url = admin_url(model_admin, "change", quote(obj.pk)) or "../"
    if t.confirm and request.POST.get("post") != "yes":
        return confirmation_page(model_admin, request, t, [obj], back_url=change_url, bulk=False)
    apply_transition(request, t, [(obj.pk, obj.name, obj.status, obj.triggered_at)])
    return HttpResponseRedirect(change_url)


def describe_cron_view(
    model_admin: admin.ModelAdmin[Schedule], request: HttpRequest
) -> HttpResponse:
    """GET ``describe-cron/?cron=EXPR&timezone=ZONE``: ``{"words": ..., "error": ...}``, the
    expression in words in the active language, or why it is not a valid cron (the model's
    own validation). For the form's live description; view permission (else 403)."""
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    expression = request.GET.get("cron", "")[:200]
    zone = request.GET.get("timezone", "") or "UTC"
    if not expression.strip():
        return JsonResponse({"words": "", "error": ""})
    try:
        timing.validate_cron(expression, timing.canonical_timezone(zone))
    except timing.InvalidSchedule as exc:
        return JsonResponse({"words": "", "error": exc.message})
    return JsonResponse({"words": cron_in_words(expression), "error": ""})


def describe_rrule_view(
    model_admin: admin.ModelAdmin[Schedule], request: HttpRequest
) -> HttpResponse:
    """GET ``describe-rrule/?rrule=RULE&timezone=ZONE[&start_at=WALL]``: ``{"words": ...,
    "error": ...}``, the rule in words (:func:`..timing.rrule_description`) for a schedule
    created now, starting at ``start_at`` (the form's wall time in the zone, ISO 8601; the
    times a rule takes from its start come from it; blank or unreadable: now), or why it is
    refused (the model's own validation, RFC 5545 §3.3.10). For the form's live
    description, which asks again when the zone or the start changes; view permission
    (else 403)."""
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    rule = request.GET.get("rrule", "")[:500]
    zone = timing.canonical_timezone(request.GET.get("timezone", "") or "UTC")
    if not rule.strip():
        return JsonResponse({"words": "", "error": ""})
    start = _wall_time(request.GET.get("start_at", "")[:40], zone)
    spec = timing.Spec(
        kind="rrule", rrule=rule, timezone=zone, start_at=start, anchor=dj_timezone.now()
    )
    try:
        spec.validate()
    except timing.InvalidSchedule as exc:
        return JsonResponse({"words": "", "error": exc.message})
    return JsonResponse({"words": timing.rrule_description(spec), "error": ""})


def describe_instant_view(
    model_admin: admin.ModelAdmin[Schedule], request: HttpRequest
) -> HttpResponse:
    """GET ``describe-instant/?at=WALL&timezone=ZONE``: ``{"text": ..., "error": ...}``, the
    wall time typed into a form's ``run_at``/``start_at``/``end_at`` as the instant it
    will be stored as (``2027-06-01 09:00:00 JST = 2027-06-01 00:00:00 UTC``), or why it
    cannot be (a time the zone's clocks skip, an unknown zone): what the form says under
    the field as it is typed, before a save. View permission (else 403)."""
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    text = request.GET.get("at", "")[:40].strip()
    name = timing.canonical_timezone(request.GET.get("timezone", "") or "UTC")
    if not text:
        return JsonResponse({"text": "", "error": ""})
    try:
        zone = ZoneInfo(name)
    except (ValueError, ZoneInfoNotFoundError):
        return JsonResponse({"text": "", "error": f"unknown time zone {name[:60]!r}"})
    try:
        wall = datetime.fromisoformat(text).replace(tzinfo=None)
    except ValueError:
        return JsonResponse({"text": "", "error": ""})  # not a full time yet: say nothing
    at = instant(wall, zone)
    if at is None:
        return JsonResponse(
            {"text": "", "error": f"{wall:%Y-%m-%d %H:%M:%S} does not exist in {zone.key} "
             "(its clocks skip it)"}
        )  # fmt: skip
    local = at.astimezone(zone).strftime("%Y-%m-%d %H:%M:%S %Z")
    return JsonResponse({"text": f"As typed: {local} = {at:%Y-%m-%d %H:%M:%S} UTC", "error": ""})


def _wall_time(text: str, zone: str) -> datetime | None:
    """``text`` (ISO 8601, a wall time in ``zone``, or with its own offset) as an aware
    instant; None when blank or unreadable (the description then starts now)."""
    try:
        value = datetime.fromisoformat(text.strip())
        if value.tzinfo is None:
            value = value.replace(tzinfo=ZoneInfo(zone))
        return value.astimezone(UTC)
    except (ValueError, TypeError, OverflowError, KeyError, ZoneInfoNotFoundError):
        return None


# -- health ------------------------------------------------------------------------------


def health_view(model_admin: admin.ModelAdmin[Schedule], request: HttpRequest) -> HttpResponse:
    """The health snapshot, live workers, failing and degraded schedules (staff with
    view permission on schedules)."""
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    # ?exact=1: the strays counted over every attempt (an anti-join of the whole table,
    # seconds at ten million attempts), on purpose only: the page's link says so.
    exact = request.GET.get("exact") == "1"
    health = snapshot(exact=exact)
    changelist = admin_url(model_admin, "changelist") or ""
    skew_warn = app_settings.SKEW_WARN_SECONDS
    tzdata_mixed = tzdata_problem(health.workers) is not None
    workers = [
        {
            **w,
            "last_seen": fmt_utc(w["last_seen_at"]),
            "age": max(0.0, (health.checked_at - w["last_seen_at"]).total_seconds()),
            "started": fmt_utc(w["started_at"]),
            "skewed": abs(w["clock_skew_seconds"]) > skew_warn,
            "tzdata_mixed": tzdata_mixed,
        }
        for w in health.workers
    ]
    failing_qs = attach_recent_receipts(
        Schedule.objects.failing().order_by("-failure_count", "name")[:HEALTH_LIST_LIMIT]
    )
    degraded_qs = attach_recent_receipts(
        Schedule.objects.degraded().order_by("name")[:HEALTH_LIST_LIMIT]
    )
    link = receipt_link(model_admin.admin_site.name)
    counts = [
        *(
            _count(
                f"{status} schedules",
                health.schedules.get(status, 0),
                f"{changelist}?status__exact={status}",
                "bad" if status == Status.FAILED and health.schedules.get(status) else "",
            )
            for status in Status.values
        ),
        _count("due now", health.due),
        _count("overdue", health.overdue, tone="bad" if health.overdue else ""),
        _count(
            "degraded",
            health.degraded,
            f"{changelist}?degraded=yes",
            "bad" if health.degraded else "",
        ),
        _count(
            "failing",
            health.failing,
            f"{changelist}?failing=yes",
            "warn" if health.failing else "",
        ),
        _count("live leases", health.live_leases, f"{changelist}?running=yes"),
        _count(
            "expired leases", health.expired_leases, tone="bad" if health.expired_leases else ""
        ),
        _count("open attempts", health.open_attempts),
        _count(
            "attempts without receipt or lease",
            health.stray_attempts,
            tone="warn" if health.stray_attempts else "",
        ),
        _count("missed slots (total)", health.missed_slots),
        _count("live workers", health.live_workers, tone="" if health.live_workers else "warn"),
    ]
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Scheduler health",
        "opts": model_admin.opts,
        "media": model_admin.media,
        "health": health,
        "checked_at": fmt_utc(health.checked_at),
        "counts": counts,
        "exact": exact,
        "workers": workers,
        "stale_after": app_settings.WORKER_STALE_SECONDS,
        "skew_warn": skew_warn,
        "failing": [_health_row(model_admin, s, link) for s in failing_qs],
        "failing_more": max(0, health.failing - HEALTH_LIST_LIMIT),
        "degraded": [_health_row(model_admin, s, link) for s in degraded_qs],
        "degraded_more": max(0, health.degraded - HEALTH_LIST_LIMIT),
        "paused": [
            {
                **row,
                "until_text": fmt_utc(row["paused_until"]) if row["paused_until"] else "enabled",
            }
            for row in health.paused_schedules
        ],
        "stalled_backfills": [
            {**row, "since_text": fmt_utc(row["since"])} for row in health.stalled_backfills
        ],
        "cancelled_backfills": [
            {**row, "cancelled_text": fmt_utc(row["cancelled_at"])}
            for row in health.cancelled_backfills
        ],
        "changelist_url": changelist,
        "heartbeats_url": safe_reverse(
            "admin:durable_schedules_workerheartbeat_changelist", model_admin.admin_site.name
        ),
    }
    request.current_app = model_admin.admin_site.name
    return TemplateResponse(request, "durable_schedules/admin/health.html", context)


def _health_row(
    model_admin: admin.ModelAdmin[Schedule], obj: Schedule, link: str | None
) -> dict[str, Any]:
    recent = recent_receipts(obj)
    last_error = next((r for r in recent if r.error_type or r.error_message), None)
    return {
        "schedule": obj,
        "url": admin_url(model_admin, "change", quote(obj.pk)),
        "status": status_badges(obj),
        "cadence": cadence(obj),
        "strip": outcome_strip(recent, link=link, zone=obj.timezone),
        "last_error": (
            Truncator(
                ": ".join(p for p in (last_error.error_type, last_error.error_message) if p)
            ).chars(200)
            if last_error
            else ""
        ),
    }


def _count(label: str, value: int, url: str | None = None, tone: str = "") -> dict[str, Any]:
    return {"label": label, "value": value, "url": url, "tone": tone}
