"""The operator transitions and the bulk delete: one table, :data:`TRANSITIONS`, drives the
list actions, the change page's buttons and their messages; every transition and every
deletion calls :mod:`..state` (which decides, and may refuse).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.actions import delete_selected as django_delete_selected
from django.db import router, transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from .. import state
from ..exceptions import StateConflict
from ..models import Schedule, Status
from .display import fmt_utc, fmt_zone, is_utc, names_listed, plural


def as_admin(request: HttpRequest) -> dict[str, Any]:
    """Who and where, for the audit trail (``ScheduleEvent.actor`` / ``source``)."""
    return {"actor": request.user, "source": "admin"}


@dataclass(frozen=True)
class Transition:
    """An operator transition; ``name`` is the :mod:`.state` function called. The statuses
    it is offered for are :func:`.state.allowed_actions`' (:mod:`.state` decides and may
    refuse)."""

    name: str
    label: str
    done: str
    #: A schedule already in this status is left as it is (reported as unchanged).
    target: str | None = None
    danger: bool = False
    #: Final: asked on a confirmation page first (:func:`confirmation_page`), like Delete.
    confirm: bool = False
    #: What the confirmation page says the transition means.
    warning: str = ""


TRANSITIONS: dict[str, Transition] = {
    t.name: t
    for t in (
        Transition("enable", "Enable", "Enabled", target=Status.ACTIVE),
        Transition("disable", "Disable", "Disabled", target=Status.PAUSED),
        Transition("trigger", "Trigger now", "Triggered"),
        Transition(
            "cancel",
            "Cancel",
            "Cancelled",
            danger=True,
            confirm=True,
            warning="Cancelling is final: a cancelled schedule never runs again and cannot be "
            "enabled. A run in progress finishes and gets its receipt; the schedule, its "
            "attempts, receipts and audit trail stay.",
        ),
    )
}


def _what_changed(t: Transition, name: str, before: str, row: Schedule) -> str:
    if t.name == "trigger":
        return f"{name} (runs on the next worker pass, outside its grid)"
    change = f"{name} ({before} → {row.status}"
    if t.name == "enable":
        change += f", next run {_in_zone_and_utc(row.next_run_at, row.timezone)}"
    return change + ")"


def _in_zone_and_utc(value: Any, zone: str) -> str:
    """``2026-11-30 02:30:00 CET (01:30:00 UTC)``; UTC once for a UTC schedule."""
    if value is None or is_utc(zone):
        return fmt_utc(value)
    return f"{fmt_zone(value, zone)} ({fmt_utc(value)})"


def apply_transition(
    request: HttpRequest,
    t: Transition,
    rows: Iterable[tuple[Any, str, str, Any]],
    *,
    options: dict[str, Any] | None = None,
) -> None:
    """Call ``state.<t.name>`` for each ``(pk, name, status before, triggered_at before)``
    (with the keywords ``options``: a trigger's override and note) and tell the user what
    changed, what already was so (a status already reached, a trigger already pending),
    and what was refused (with the reason). A ``ValidationError`` of the transition
    propagates (the caller's form shows it)."""
    func = getattr(state, t.name)
    changed: list[str] = []
    unchanged: list[str] = []
    pending: list[str] = []
    refused: list[str] = []
    for pk, name, before, triggered_before in rows:
        try:
            row = func(pk, **as_admin(request), **(options or {}))
        except StateConflict as exc:
            refused.append(f"{name} ({exc.reason})")
        except Schedule.DoesNotExist:
            refused.append(f"{name} (it no longer exists)")
        else:
            if t.target is not None and before == t.target:
                unchanged.append(name)
            elif t.name == "trigger" and triggered_before is not None:
                pending.append(f"{name} (requested at {fmt_utc(triggered_before)})")
            else:
                changed.append(_what_changed(t, name, before, row))
    if changed:
        messages.success(request, f"{t.done} {plural(len(changed))}: {names_listed(changed)}.")
    if unchanged:
        messages.info(request, f"Already {t.target}, unchanged: {names_listed(unchanged)}.")
    if pending:
        messages.info(
            request,
            f"Already triggered and not run yet, so one run happens at the next worker pass: "
            f"{names_listed(pending)}.",
        )
    if refused:
        messages.error(
            request, f"{t.label} refused for {plural(len(refused))}: {names_listed(refused)}."
        )


def confirmation_page(
    modeladmin: admin.ModelAdmin[Schedule],
    request: HttpRequest,
    t: Transition,
    schedules: Iterable[Schedule],
    *,
    back_url: str,
    bulk: bool,
) -> TemplateResponse:
    """The page that asks before a final transition (:attr:`Transition.confirm`): what it
    means, the schedules it applies to, those it would refuse (with their status), and a
    form that posts ``post=yes`` to the same URL (``bulk``: as the list action, with the
    selected ids, as Django's delete confirmation does)."""
    rows = list(schedules)
    allowed = [s for s in rows if t.name in state.allowed_actions(s)]
    refused = [s for s in rows if t.name not in state.allowed_actions(s)]
    opts = modeladmin.model._meta
    title = f"{t.label} {'schedules' if bulk or len(rows) != 1 else 'schedule'}"
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": f"{title}: are you sure?",
        "subtitle": None,
        "opts": opts,
        "transition": t,
        "allowed": allowed,
        "refused": refused,
        "bulk": bulk,
        "back_url": back_url,
        "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        "media": modeladmin.media,
    }
    return TemplateResponse(
        request, "durable_schedules/admin/transition_confirmation.html", context
    )


def make_action(t: Transition) -> Any:
    """The list action of transition ``t``: a confirmation page first when ``t.confirm``,
    then :func:`apply_transition` on the selected rows."""

    def action(
        modeladmin: admin.ModelAdmin[Schedule], request: HttpRequest, queryset: QuerySet
    ) -> TemplateResponse | None:
        queryset = queryset.prefetch_related(None).order_by("name")
        if t.confirm and request.POST.get("post") != "yes":
            return confirmation_page(
                modeladmin, request, t, queryset, back_url=request.get_full_path(), bulk=True
            )
        rows = queryset.values_list("pk", "name", "status", "triggered_at")
        apply_transition(request, t, list(rows))
        return None

    action.__name__ = t.name
    return admin.action(permissions=["change"], description=f"{t.label} – selected schedules")(
        action
    )


class DeleteRefused(Exception):
    """A schedule of a bulk delete that ``state.delete_schedule`` refused (its name and why)."""

    def __init__(self, name: str, reason: str):
        super().__init__(reason)
        self.name = name
        self.reason = reason


@admin.action(permissions=["delete"], description="Delete selected schedules")
def delete_selected(
    modeladmin: admin.ModelAdmin[Schedule], request: HttpRequest, queryset: QuerySet
) -> HttpResponse | None:
    """Django's confirmation page, then :func:`.state.delete_schedule` per schedule: a
    refused one stays, and the message says which and why (never "deleted" for it)."""
    queryset = queryset.prefetch_related(None)
    if not request.POST.get("post"):
        return django_delete_selected(modeladmin, request, queryset)
    _, _, perms_needed, protected = modeladmin.get_deleted_objects(queryset, request)
    if perms_needed or protected:
        return django_delete_selected(modeladmin, request, queryset)
    deleted: list[str] = []
    refused: list[str] = []
    for obj in queryset.order_by("name"):
        try:
            # The log entry commits only with the deletion it records.
            with transaction.atomic(using=router.db_for_write(Schedule)):
                modeladmin.log_deletions(request, queryset.filter(pk=obj.pk))
                state.delete_schedule(obj.pk, **as_admin(request))
        except StateConflict as exc:
            refused.append(f"{obj.name} ({exc.reason})")
        except Schedule.DoesNotExist:
            refused.append(f"{obj.name} (it no longer exists)")
        else:
            deleted.append(obj.name)
    if deleted:
        modeladmin.message_user(
            request, f"Deleted {plural(len(deleted))}: {names_listed(deleted)}.", messages.SUCCESS
        )
    if refused:
        modeladmin.message_user(
            request,
            f"Not deleted, {plural(len(refused))}: {names_listed(refused)}.",
            messages.ERROR,
        )
    return None
