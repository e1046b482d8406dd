"""Duplicate a schedule in the admin: the change page's "Duplicate…" button and the list
action for one selected schedule both lead to a small form (``<id>/duplicate/``) that asks
for the new name, prefilled ``<name>-copy``. Thin: :func:`..state.duplicate_schedule`
copies the schedule, paused until enabled, and refuses a name taken (a form error).
"""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse

from .. import state
from ..models import Schedule, name_validator
from .actions import as_admin
from .views import admin_url

#: What the form proposes: the source's name with this suffix.
COPY_SUFFIX = "-copy"


class DuplicateForm(forms.Form):
    """The new schedule's name (the rules of ``Schedule.name``)."""

    name = forms.CharField(
        max_length=128,
        validators=[name_validator],
        help_text="The new schedule's name: 1-128 of letters, digits, '_', '.', ':' or '-', "
        "starting with a letter or digit, used by no other schedule.",
    )


def proposed_name(name: str) -> str:
    """``<name>-copy``, cut so that it stays within the 128 characters of a name."""
    return name[: 128 - len(COPY_SUFFIX)] + COPY_SUFFIX


def duplicate_view(
    model_admin: admin.ModelAdmin[Schedule], request: HttpRequest, object_id: str
) -> HttpResponse:
    """GET ``<id>/duplicate/``: the form, its name prefilled ``<name>-copy``; POST: create
    the copy (:func:`..state.duplicate_schedule`, paused) and go to the list with a
    message, or show the form again with the field messages (a name taken or invalid).
    403 without the add permission; a missing schedule redirects to the list."""
    if not model_admin.has_add_permission(request):
        raise PermissionDenied
    original = model_admin.get_object(request, unquote(object_id))
    changelist = admin_url(model_admin, "changelist") or "../"
    if original is None:
        messages.warning(request, "That schedule no longer exists.")
        return HttpResponseRedirect(changelist)
    if request.method != "POST":
        form = DuplicateForm(initial={"name": proposed_name(original.name)})
        return _page(model_admin, request, original, form)
    form = DuplicateForm(request.POST)
    if form.is_valid():
        try:
            copy = state.duplicate_schedule(
                original.pk, form.cleaned_data["name"], **as_admin(request)
            )
        except ValidationError as exc:
            for field, problems in _messages(exc).items():
                form.add_error("name" if field == "name" else None, problems)
        except Schedule.DoesNotExist:
            messages.warning(request, "That schedule no longer exists.")
            return HttpResponseRedirect(changelist)
        else:
            messages.success(
                request,
                f"Duplicated {original.name} as {copy.name}: it is paused, with no next run, "
                "until you enable it.",
            )
            return HttpResponseRedirect(changelist)
    return _page(model_admin, request, original, form)


def _messages(exc: ValidationError) -> dict[str, list[str]]:
    """The field messages of ``exc``; those of another field than the name are the
    source's own problems (a definition no longer valid), named with their field."""
    if not hasattr(exc, "error_dict"):
        return {"__all__": exc.messages}
    found: dict[str, list[str]] = {}
    for field, problems in exc.message_dict.items():
        if field == "name":
            found["name"] = problems
        else:
            label = "" if field == "__all__" else f"{field}: "
            found.setdefault("__all__", []).extend(f"{label}{p}" for p in problems)
    return found


def _page(
    model_admin: admin.ModelAdmin[Schedule],
    request: HttpRequest,
    original: Schedule,
    form: DuplicateForm,
) -> TemplateResponse:
    context = {
        **model_admin.admin_site.each_context(request),
        "title": f"Duplicate {original.name}",
        "subtitle": None,
        "opts": model_admin.model._meta,
        "schedule": original,
        "form": form,
        "change_url": admin_url(model_admin, "change", quote(original.pk)),
        "media": model_admin.media + form.media,
    }
    return TemplateResponse(request, "durable_schedules/admin/duplicate.html", context)


@admin.action(permissions=["add"], description="Duplicate… – one selected schedule")
def duplicate(
    modeladmin: admin.ModelAdmin[Schedule], request: HttpRequest, queryset: QuerySet
) -> HttpResponse | None:
    """The list action: exactly one schedule selected, its duplicate form."""
    pks = list(queryset.prefetch_related(None).values_list("pk", flat=True)[:2])
    if len(pks) != 1:
        messages.error(request, "Select exactly one schedule to duplicate.")
        return None
    url = admin_url(modeladmin, "duplicate", quote(pks[0]))
    return HttpResponseRedirect(url or "../")
