"""The admin's "Re-run this occurrence" (issue #27): a button on a receipt's and an
attempt's change page (:meth:`RerunMixin.rerun_button`) leading to a confirmation page
(``<id>/rerun/``, :func:`rerun_view`) that names the occurrence, its last outcome and its
idempotency key, then calls :func:`..state.rerun` and goes to the schedule's page with a
message. Needs change permission on schedules."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, path, reverse
from django.utils.safestring import SafeString

from .. import state
from ..exceptions import StateConflict
from ..models import RunAttempt, RunReceipt, Schedule

#: The permission a re-run needs: it changes the schedule's state.
CHANGE_SCHEDULE = "durable_schedules.change_schedule"


def _attempt_of(obj: RunAttempt | RunReceipt) -> RunAttempt:
    return obj if isinstance(obj, RunAttempt) else obj.attempt


def _url(model_admin: admin.ModelAdmin[Any], name: str, *args: Any) -> str | None:
    opts = model_admin.opts
    try:
        return reverse(
            f"admin:{opts.app_label}_{opts.model_name}_{name}",
            args=args,
            current_app=model_admin.admin_site.name,
        )
    except NoReverseMatch:
        return None


class RerunMixin:
    """For the attempts' and receipts' admins: the ``<id>/rerun/`` URL and the button."""

    def get_urls(self) -> list[Any]:
        admin_self: Any = self
        opts = admin_self.opts
        view = admin_self.admin_site.admin_view(
            lambda request, object_id: rerun_view(admin_self, request, object_id)
        )
        name = f"{opts.app_label}_{opts.model_name}_rerun"
        return [path("<path:object_id>/rerun/", view, name=name), *super().get_urls()]  # type: ignore[misc]

    @admin.display(description="re-run")
    def rerun_button(self, obj: RunAttempt | RunReceipt) -> SafeString | str:
        from .display import render_fragment

        url = _url(self, "rerun", quote(obj.pk))  # type: ignore[arg-type]
        if url is None or not Schedule.objects.filter(pk=obj.schedule_id).exists():
            return "-"
        return render_fragment("rerun_button", {"url": url})


def rerun_view(
    model_admin: admin.ModelAdmin[Any], request: HttpRequest, object_id: str
) -> HttpResponse:
    """GET: the confirmation page of a re-run of the occurrence of the attempt or receipt
    ``object_id``; POST with ``post=yes``: :func:`..state.rerun` (``force`` and ``note``
    from the form), a message, and the schedule's change page (a refusal: an error message
    and the page it came from). 403 without change permission on schedules; 404 for an
    unknown object or a schedule deleted since."""
    if not request.user.has_perm(CHANGE_SCHEDULE):
        raise PermissionDenied
    obj = model_admin.get_object(request, unquote(object_id))
    if obj is None:
        raise Http404("no such run")
    attempt = _attempt_of(obj)
    schedule = Schedule.objects.filter(pk=attempt.schedule_id).first()
    if schedule is None:
        raise Http404("its schedule was deleted")
    occurrence = attempt.occurrence
    back = _url(model_admin, "change", quote(obj.pk)) or "../"
    history = state.reruns.rerun_history(schedule.pk, occurrence)
    if request.method == "POST" and request.POST.get("post") == "yes":
        try:
            state.rerun(
                schedule.pk,
                occurrence,
                force=request.POST.get("force") == "on",
                note=request.POST.get("note", ""),
                actor=request.user,
                source="admin",
            )
        except (StateConflict, ValidationError) as exc:
            reason = exc.reason if isinstance(exc, StateConflict) else " ".join(exc.messages)
            model_admin.message_user(request, f"{schedule.name}: {reason}", messages.ERROR)
            return HttpResponseRedirect(back)
        model_admin.message_user(
            request,
            f"Occurrence {occurrence} of {schedule.name} will be re-run at the next worker "
            f"pass (attempt {history.last_attempt + 1}, key {attempt.idempotency_key}).",
            messages.SUCCESS,
        )
        schedule_url = reverse(
            "admin:durable_schedules_schedule_change",
            args=[quote(schedule.pk)],
            current_app=model_admin.admin_site.name,
        )
        return HttpResponseRedirect(schedule_url)
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.opts,
        "title": f"Re-run occurrence {occurrence} of {schedule.name}?",
        "schedule": schedule,
        "occurrence": occurrence,
        "history": history,
        "idempotency_key": attempt.idempotency_key,
        "back_url": back,
    }
    return TemplateResponse(request, "durable_schedules/admin/rerun_confirmation.html", context)
