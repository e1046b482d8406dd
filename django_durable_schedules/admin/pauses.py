"""Pause with a note and an end in the admin (issue #27): the list action "Pause selected
schedules…" (one note and an optional end for every schedule selected: an incident) and
the change page's "Pause…" page (``<id>/pause/``), both on one form
(:class:`PauseForm`, template ``pause_form.html``). Thin: each schedule is paused by
:func:`..state.disable`, which decides and may refuse.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.utils import timezone as dj_timezone

from .. import state
from ..exceptions import StateConflict
from ..models import Schedule, Status
from .actions import as_admin
from .display import fmt_utc, names_listed, plural
from .views import admin_url

#: The name of the list action (the form posts it back).
ACTION = "pause_selected"


class PauseForm(forms.Form):
    """One note and an optional end. ``until`` is a ``datetime-local`` input read in the
    admin's current time zone (a wall time that zone skips or repeats is refused)."""

    note = forms.CharField(
        max_length=state.NOTE_MAX_CHARS,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        help_text="Why: shown with the pause in the list, on the page and in health.",
    )
    until = forms.DateTimeField(
        required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        help_text="Optional: when a worker resumes it by itself (no catch-up of the slots "
        "passed meanwhile). Blank: paused until enabled.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.zone = dj_timezone.get_current_timezone_name()
        self.fields["until"].label = f"Until (in {self.zone})"

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or self.cleaned_data
        if self.errors:
            return cleaned
        until = cleaned.get("until")
        try:
            state.check_pause(cleaned.get("note"), until, state.db_now() if until else None)
        except ValidationError as exc:
            for field, problems in exc.message_dict.items():
                self.add_error(field if field in self.fields else None, problems)
        return cleaned


def _page(
    modeladmin: admin.ModelAdmin[Schedule],
    request: HttpRequest,
    form: PauseForm,
    schedules: list[Schedule],
    *,
    bulk: bool,
    back_url: str,
) -> TemplateResponse:
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": f"Pause {plural(len(schedules))}" if bulk else f"Pause {schedules[0].name}",
        "subtitle": None,
        "opts": modeladmin.model._meta,
        "form": form,
        "schedules": schedules,
        "bulk": bulk,
        "action": ACTION,
        "back_url": back_url,
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        "media": modeladmin.media + form.media,
    }
    return TemplateResponse(request, "durable_schedules/admin/pause_form.html", context)


def pause_each(
    request: HttpRequest, rows: list[Schedule], note: str, until: datetime | None
) -> None:
    """:func:`..state.disable` with ``note`` and ``until`` for each of ``rows``; tell the
    user which were paused (a paused one: its pause updated) and which refused, and why."""
    paused: list[str] = []
    refused: list[str] = []
    for schedule in rows:
        try:
            state.disable(schedule.pk, note=note, until=until, **as_admin(request))
        except StateConflict as exc:
            refused.append(f"{schedule.name} ({exc.reason})")
        except ValidationError as exc:
            refused.append(f"{schedule.name} ({' '.join(exc.messages)})")
        except Schedule.DoesNotExist:
            refused.append(f"{schedule.name} (it no longer exists)")
        else:
            paused.append(schedule.name)
    end = f" until {fmt_utc(until)}" if until else " until enabled"
    if paused:
        messages.success(request, f"Paused {plural(len(paused))}{end}: {names_listed(paused)}.")
    if refused:
        messages.error(
            request, f"Pause refused for {plural(len(refused))}: {names_listed(refused)}."
        )


@admin.action(permissions=["change"], description="Pause selected schedules…")
def pause_selected(
    modeladmin: admin.ModelAdmin[Schedule], request: HttpRequest, queryset: QuerySet
) -> TemplateResponse | None:
    """The form (one note, an optional end) for the selected schedules; ``post=yes``
    pauses each (:func:`pause_each`) and goes back to the list."""
    rows = list(queryset.prefetch_related(None).order_by("name"))
    back = request.get_full_path()
    if request.POST.get("post") != "yes":
        return _page(modeladmin, request, PauseForm(), rows, bulk=True, back_url=back)
    form = PauseForm(request.POST)
    if not form.is_valid():
        return _page(modeladmin, request, form, rows, bulk=True, back_url=back)
    pause_each(request, rows, form.cleaned_data["note"], form.cleaned_data["until"])
    return None


def pause_view(
    modeladmin: admin.ModelAdmin[Schedule], request: HttpRequest, object_id: str
) -> HttpResponse:
    """GET/POST ``<id>/pause/``: the change page's "Pause…": the form (prefilled with the
    pause's note and end when the schedule is paused), then :func:`pause_each` and back to
    the change page. 405 for another method, 403 without change permission, a missing
    schedule: back to the list."""
    if request.method not in ("GET", "POST"):
        return HttpResponseNotAllowed(["GET", "POST"])
    obj = modeladmin.get_object(request, unquote(object_id))
    if obj is None:
        messages.warning(request, "That schedule no longer exists.")
        return HttpResponseRedirect("../../")
    if not modeladmin.has_change_permission(request, obj):
        raise PermissionDenied
    change_url = admin_url(modeladmin, "change", quote(obj.pk)) or "../"
    if request.method == "GET":
        initial = {}
        if obj.status == Status.PAUSED:
            initial = {"note": obj.pause_reason, "until": _local(obj.paused_until)}
        form = PauseForm(initial=initial)
        return _page(modeladmin, request, form, [obj], bulk=False, back_url=change_url)
    form = PauseForm(request.POST)
    if not form.is_valid():
        return _page(modeladmin, request, form, [obj], bulk=False, back_url=change_url)
    pause_each(request, [obj], form.cleaned_data["note"], form.cleaned_data["until"])
    return HttpResponseRedirect(change_url)


def _local(value: datetime | None) -> datetime | None:
    """``value`` in the admin's current time zone (what the ``datetime-local`` shows)."""
    return dj_timezone.localtime(value) if value is not None else None
