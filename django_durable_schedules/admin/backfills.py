"""Backfill in the admin: the list actions "Backfill…" (a form for the range, then a
confirmation page listing the slots it will run) and "Cancel backfill", and the read-only
list of backfills. Thin: :mod:`..state.backfills` plans, stores, cancels and refuses.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils import timezone as dj_timezone
from django.utils.safestring import SafeString

from .. import state, timing
from ..db.functions import JSONArrayLength
from ..exceptions import StateConflict
from ..models import Backfill, Schedule
from .actions import as_admin
from .display import fmt_utc, fmt_zone, names_listed, when, with_note
from .runs import ReadOnlyAdmin
from .zoned import ZonedDateTimeField, instant

#: Slots listed on the confirmation page (the count is always given).
SHOWN_SLOTS = 200


class BackfillForm(forms.Form):
    """The range of a backfill: wall times in the schedule's zone (as its run_at, start_at
    and end_at on its form: a repeated time is its first occurrence, a skipped one is
    refused), or ISO 8601 values with an offset, which are those instants."""

    start = ZonedDateTimeField(help_text="First instant of the range (included).")
    end = ZonedDateTimeField(help_text="End of the range (excluded), not after now.")
    include_succeeded = forms.BooleanField(
        required=False, help_text="Also run slots that already have a successful receipt."
    )
    cascade = forms.BooleanField(
        required=False,
        help_text="Run the schedules downstream of it (kind 'after') again for each slot "
        "that succeeds.",
    )

    def __init__(self, *args: Any, zone: str = "UTC", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.zone = ZoneInfo(zone)
        for name in ("start", "end"):
            field = self.fields[name]
            field.label = f"{name.capitalize()} (in {zone})"
            field.help_text = (
                f"{field.help_text} A wall time in the schedule's zone, {zone}, to the second."
            )

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or self.cleaned_data
        for name in ("start", "end"):
            value = cleaned.get(name)
            if not isinstance(value, datetime) or value.tzinfo is not None:
                continue
            if not 1000 <= value.year <= timing.MAX_YEAR:
                self.add_error(name, f"Must be between the years 1000 and {timing.MAX_YEAR}.")
                continue
            aware = instant(value, self.zone)
            if aware is None:
                self.add_error(
                    name,
                    f"{value:%Y-%m-%d %H:%M:%S} does not exist in {self.zone.key}: the "
                    "clocks skip it that night (daylight saving time).",
                )
                continue
            cleaned[name] = aware
        return cleaned


def _zone_of(schedule: Schedule) -> str:
    """The schedule's zone when it is a valid one (a value written behind save() may not
    be), else UTC."""
    try:
        return timing.validate_timezone(schedule.timezone or "UTC")
    except timing.InvalidSchedule:
        return "UTC"


def _slot_label(slot: datetime, zone: str) -> str:
    """``2027-06-01 12:00:00 CEST (10:00:00 UTC)``; a UTC schedule's: ``... UTC``."""
    if zone == "UTC":
        return fmt_utc(slot)
    return f"{fmt_zone(slot, zone)} ({fmt_utc(slot)})"


def _page(
    modeladmin: admin.ModelAdmin[Schedule],
    request: HttpRequest,
    schedule: Schedule,
    form: BackfillForm,
    plan: state.BackfillPlan | None,
) -> TemplateResponse:
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": f"Backfill {schedule.name}" + (": are you sure?" if plan else ""),
        "subtitle": None,
        "opts": modeladmin.model._meta,
        "schedule": schedule,
        "form": form,
        "plan": plan,
        "slots": [_slot_label(s, form.zone.key) for s in plan.slots[:SHOWN_SLOTS]] if plan else [],
        "zone": form.zone.key,
        "more": max(0, len(plan.slots) - SHOWN_SLOTS) if plan else 0,
        "back_url": request.get_full_path(),
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        "media": modeladmin.media + form.media,
    }
    return TemplateResponse(request, "durable_schedules/admin/backfill_confirmation.html", context)


def _add_errors(form: BackfillForm, exc: ValidationError) -> None:
    for field, problems in exc.message_dict.items():
        form.add_error(None if field == NON_FIELD_ERRORS else field, problems)


@admin.action(permissions=["change"], description="Backfill a past range – one selected schedule")
def backfill(
    modeladmin: admin.ModelAdmin[Schedule], request: HttpRequest, queryset: QuerySet
) -> TemplateResponse | None:
    """Three steps on one URL: the range form; the confirmation page listing the slots
    (``state.plan_backfill``); ``post=yes`` stores it (``state.request_backfill``)."""
    rows = list(queryset.prefetch_related(None)[:2])
    if len(rows) != 1:
        messages.error(request, "Select exactly one schedule to backfill.")
        return None
    schedule = rows[0]
    zone = _zone_of(schedule)
    if "start" not in request.POST:
        return _page(modeladmin, request, schedule, BackfillForm(zone=zone), None)
    form = BackfillForm(request.POST, zone=zone)
    if not form.is_valid():
        return _page(modeladmin, request, schedule, form, None)
    args = form.cleaned_data
    try:
        if request.POST.get("post") != "yes":
            plan = state.plan_backfill(
                schedule, args["start"], args["end"], include_succeeded=args["include_succeeded"]
            )
            return _page(modeladmin, request, schedule, form, plan)
        made = state.request_backfill(
            schedule.pk,
            args["start"],
            args["end"],
            include_succeeded=args["include_succeeded"],
            cascade=args["cascade"],
            **as_admin(request),
        )
    except ValidationError as exc:
        _add_errors(form, exc)
        return _page(modeladmin, request, schedule, form, None)
    except StateConflict as exc:
        messages.error(request, f"Backfill refused for {schedule.name}: {exc.reason}.")
        return None
    skipped = (
        f"; {made.skipped_succeeded} already succeeded, left out" if made.skipped_succeeded else ""
    )
    messages.success(
        request,
        f"Backfill of {schedule.name}: {len(made.slots)} slot{'' if len(made.slots) == 1 else 's'} "
        f"from {fmt_utc(made.start)} "
        f"will run in order, one at a time, when the schedule is free{skipped}.",
    )
    return None


@admin.action(permissions=["change"], description="Cancel backfill – selected schedules")
def cancel_backfill(
    modeladmin: admin.ModelAdmin[Schedule], request: HttpRequest, queryset: QuerySet
) -> None:
    """``state.cancel_backfill`` for each selected schedule; says which had none."""
    done: list[str] = []
    refused: list[str] = []
    for pk, name in queryset.prefetch_related(None).order_by("name").values_list("pk", "name"):
        try:
            b = state.cancel_backfill(pk, **as_admin(request))
        except (StateConflict, Schedule.DoesNotExist) as exc:
            refused.append(f"{name} ({getattr(exc, 'reason', 'it no longer exists')})")
        else:
            done.append(f"{name} (after {b.position} of {len(b.slots)} slots)")
    if done:
        messages.success(request, f"Backfill cancelled: {names_listed(done)}.")
    if refused:
        messages.error(request, f"Nothing cancelled for {names_listed(refused)}.")


@admin.register(Backfill)
class BackfillAdmin(ReadOnlyAdmin):
    """Backfills, newest first: range, progress and status (cancel from the schedules'
    list action)."""

    #: What fits 1280 px with the navigation sidebar open: the range on two lines, in UTC
    #: (a backfill's instants are UTC slots), the request's time in UTC.
    list_display = ("schedule_name", "slot_range", "progress", "status", "requested")
    list_filter = ("status",)
    search_fields = ("schedule_name",)
    fields = (
        "schedule_name",
        "start",
        "end",
        "include_succeeded",
        "cascade",
        "progress",
        "skipped_succeeded",
        "status",
        "created_at",
        "finished_at",
        "created_by_repr",
        "source",
    )
    readonly_fields = fields

    @admin.display(description="range (UTC)", ordering="start")
    def slot_range(self, obj: Backfill) -> SafeString:
        """``[start, end)`` in UTC, the end below the start."""
        now = dj_timezone.now()
        return with_note(when(obj.start, "UTC", now=now), f"to {fmt_utc(obj.end)}")

    @admin.display(description="requested (UTC)", ordering="created_at")
    def requested(self, obj: Backfill) -> SafeString:
        return when(obj.created_at, "UTC", now=dj_timezone.now())

    @admin.display(description="progress")
    def progress(self, obj: Backfill) -> str:
        total = getattr(obj, "slot_count", None)
        if total is None:  # not read through get_queryset()
            total = len(obj.slots)
        return f"{min(obj.position, total)} of {total} slot{'' if total == 1 else 's'}"

    def get_queryset(self, request: HttpRequest) -> Any:
        # Up to BACKFILL_MAX_SLOTS instants per row: the list counts them in the database
        # instead of loading them (and instead of one query per row for a deferred field).
        return (
            super()
            .get_queryset(request)
            .defer("slots")
            .annotate(slot_count=JSONArrayLength("slots"))
        )
