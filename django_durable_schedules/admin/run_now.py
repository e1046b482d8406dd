"""The admin's "Run now…" page (issue #27): a trigger with a payload override and a note.

With a callback that declares a ``payload_schema``, the form has one field per top-level
property (text, whole number, number or checkbox for the scalar types, JSON text for the
others), prefilled with the schedule's payload; without one, a JSON object to merge over
the payload. Only the values changed from the schedule's payload make the override. The
view (:func:`run_now_view`) calls :func:`..state.trigger`, which decides.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse

from ..models import Schedule
from ..registry import registry
from ..state.overrides import NOTE_MAX_CHARS
from .actions import TRANSITIONS, apply_transition

#: The form field of each scalar JSON Schema ``type``.
SCALAR_FIELDS: dict[str, type[forms.Field]] = {
    "string": forms.CharField,
    "integer": forms.IntegerField,
    "number": forms.FloatField,
    "boolean": forms.BooleanField,
}


class RunNowForm(forms.Form):
    """The override, a note and ``ignore_blackout``; :meth:`override` is the payload
    override the cleaned form gives (None: none)."""

    note = forms.CharField(
        required=False,
        max_length=NOTE_MAX_CHARS,
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60}),
        help_text="Why it is run by hand (kept in the audit trail).",
    )
    ignore_blackout = forms.BooleanField(
        required=False, help_text="It may start inside a blackout window."
    )

    def __init__(self, *args: Any, schedule: Schedule, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        current = schedule.payload if isinstance(schedule.payload, dict) else {}
        self.current = current
        schema = _schema_of(schedule)
        properties = (schema or {}).get("properties")
        #: ``(form field name, payload key, JSON Schema type or "")`` of each property.
        self.keys: list[tuple[str, str, str]] = []
        if isinstance(properties, Mapping) and properties:
            for i, (key, prop) in enumerate(properties.items()):
                name = f"payload_{i}"
                kind = prop.get("type", "") if isinstance(prop, Mapping) else ""
                kind = kind if isinstance(kind, str) and kind in SCALAR_FIELDS else ""
                self.fields[name] = _field(key, prop, kind, current)
                self.keys.append((name, key, kind))
        else:
            self.fields["payload"] = forms.CharField(
                required=False,
                initial="{}",
                widget=forms.Textarea(attrs={"rows": 6, "cols": 60, "class": "vLargeTextField"}),
                help_text="A JSON object merged over the schedule's payload (top-level keys "
                "replaced) for this run only.",
            )
        self.order_fields([*(n for n, _, _ in self.keys), "payload", "note", "ignore_blackout"])

    def clean_payload(self) -> Any:
        try:
            value = json.loads(self.cleaned_data["payload"] or "{}")
        except ValueError as exc:
            raise ValidationError(f"Not JSON: {exc}") from None
        if not isinstance(value, dict):
            raise ValidationError('Must be a JSON object, such as {"dry_run": true}.')
        return value

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        for name, _key, kind in self.keys:
            if not kind and cleaned.get(name) not in (None, ""):
                try:
                    cleaned[name] = json.loads(cleaned[name])
                except ValueError as exc:
                    self.add_error(name, f"Not JSON: {exc}")
        return cleaned

    def override(self) -> dict[str, Any] | None:
        """The payload override: the JSON object given, or the properties whose value was
        changed from the schedule's payload (a blank one left out). None when empty."""
        if "payload" in self.fields:
            return self.cleaned_data["payload"] or None
        override: dict[str, Any] = {}
        for name, key, kind in self.keys:
            value = self.cleaned_data.get(name)
            if kind == "boolean":
                if key in self.current or value:
                    if value != self.current.get(key):
                        override[key] = value
            elif value not in (None, "") and value != self.current.get(key):
                override[key] = value
            elif value == "" and kind == "string" and self.current.get(key) not in (None, ""):
                override[key] = value
        return override or None


def _schema_of(schedule: Schedule) -> Mapping[str, Any] | None:
    if schedule.callback not in registry:
        return None
    return registry.get(schedule.callback).payload_schema


def _field(key: str, prop: Any, kind: str, current: dict[str, Any]) -> forms.Field:
    """The form field of property ``key`` (schema ``prop``, scalar ``kind`` or "" for
    JSON text), prefilled with the payload's value."""
    described = prop.get("description", "") if isinstance(prop, Mapping) else ""
    value = current.get(key)
    if kind:
        field = SCALAR_FIELDS[kind](required=False, label=key, help_text=described)
        field.initial = value
        return field
    field = forms.CharField(
        required=False,
        label=key,
        help_text=(described + " " if described else "") + "(JSON)",
        widget=forms.Textarea(attrs={"rows": 2, "cols": 60}),
    )
    field.initial = "" if key not in current else json.dumps(value)
    return field


def run_now_view(
    model_admin: admin.ModelAdmin[Schedule], request: HttpRequest, object_id: str
) -> HttpResponse:
    """GET ``<id>/run-now/``: the form; POST: :func:`..state.trigger` with the override,
    the note and ``ignore_blackout``, the usual message and back to the change page (a
    refused override: the form again with the state package's field messages). 403
    without change permission on the schedule; 404 for a missing one."""
    from .views import admin_url  # it routes this view

    obj = model_admin.get_object(request, unquote(object_id))
    if obj is None:
        raise Http404("no such schedule (perhaps it was deleted)")
    if not model_admin.has_change_permission(request, obj):
        raise PermissionDenied
    change_url = admin_url(model_admin, "change", quote(obj.pk)) or "../"
    form = RunNowForm(request.POST or None, schedule=obj)
    if request.method == "POST" and form.is_valid():
        options = {
            "payload": form.override(),
            "note": form.cleaned_data["note"],
            "ignore_blackout": form.cleaned_data["ignore_blackout"],
        }
        try:
            apply_transition(
                request,
                TRANSITIONS["trigger"],
                [(obj.pk, obj.name, obj.status, obj.triggered_at)],
                options=options,
            )
        except ValidationError as exc:
            for field, problems in exc.message_dict.items():
                target = field if field in form.fields else None
                for problem in problems:
                    form.add_error(target, problem)
        else:
            return HttpResponseRedirect(change_url)
    elif request.method not in ("GET", "HEAD", "POST"):
        messages.error(request, "Run now takes GET or POST.")
        return HttpResponseRedirect(change_url)
    context = {
        **model_admin.admin_site.each_context(request),
        "title": f"Run {obj.name} now",
        "opts": model_admin.opts,
        "media": model_admin.media + form.media,
        "schedule": obj,
        "form": form,
        "payload_json": json.dumps(obj.payload, indent=2, sort_keys=True, default=str),
        "has_schema": bool(form.keys),
        "back_url": change_url,
    }
    request.current_app = model_admin.admin_site.name
    return TemplateResponse(request, "durable_schedules/admin/run_now.html", context)
