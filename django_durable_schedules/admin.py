"""Django admin: schedules, their read-only attempts and receipts, worker heartbeats, health.

Thin by design. Every transition (enable, disable, cancel, trigger, delete) calls
:mod:`.state`; every definition write (add, edit) calls :mod:`.state`; the health page
renders :func:`.health.snapshot`. The admin only chooses what to show:

* the schedule list shows the cadence in words, the status, the next run in the schedule's
  zone and in UTC, the last outcome, consecutive failures and a strip of the last
  :data:`STRIP_LENGTH` outcomes (fetched for the whole page in one query);
* the change page shows the next :data:`UPCOMING_COUNT` fire times and read-only inlines of
  the latest attempts and receipts, with buttons for the transitions;
* ``<admin>/durable_schedules/schedule/health/`` is the health page.

The colours live in ``static/durable_schedules/admin.css`` (no inline styles or scripts, so
a strict Content-Security-Policy is fine).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.actions import delete_selected as django_delete_selected
from django.contrib.admin.utils import quote, unquote
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import PermissionDenied
from django.db import router, transaction
from django.db.models import Prefetch, QuerySet
from django.forms.models import BaseInlineFormSet
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
)
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, path, reverse
from django.utils import timezone as dj_timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.text import Truncator
from django.utils.timesince import timesince, timeuntil
from django.utils.translation import gettext

from . import state, timing
from .conf import app_settings
from .exceptions import StateConflict
from .health import snapshot
from .models import (
    ReceiptStatus,
    RunAttempt,
    RunReceipt,
    Schedule,
    ScheduleQuerySet,
    Status,
    WorkerHeartbeat,
)
from .registry import registry

#: Outcomes in the strip of the schedule list and change page.
STRIP_LENGTH = 20
#: Latest attempts and receipts shown on a schedule's change page.
INLINE_LIMIT = 20
#: Fire times listed on a schedule's change page.
UPCOMING_COUNT = 5
#: Failing or degraded schedules listed on the health page (the rest: a filtered list).
HEALTH_LIST_LIMIT = 50
#: Names listed in one action message before "and N more".
MESSAGE_NAMES = 10

_CSS = {"all": ["durable_schedules/admin.css"]}
_EMPTY = "—"

DEFINITION_FIELDS = (
    "name",
    "callback",
    "kind",
    "interval_seconds",
    "cron",
    "timezone",
    "run_at",
    "start_at",
    "end_at",
    "max_runs",
)
#: The same fields as laid out on the form (tuples share a line).
DEFINITION_LAYOUT = (
    "name",
    "callback",
    ("kind", "timezone"),
    ("interval_seconds", "cron"),
    "run_at",
    ("start_at", "end_at"),
    "max_runs",
)
INPUT_FIELDS = ("payload", "metadata", "owner")
POLICY_FIELDS = (
    "misfire_policy",
    "max_attempts",
    "jitter_seconds",
    "misfire_grace_seconds",
    "backoff_base_seconds",
    "backoff_cap_seconds",
    "pause_after_failures",
    "timeout_seconds",
)
SUMMARY_FIELDS = (
    "status_badge",
    "next_run_detail",
    "upcoming_table",
    "recent_outcomes",
    "history_links",
)
STATE_FIELDS = (
    "degraded_reason",
    "pause_reason",
    "last_run_detail",
    "occurrence",
    "attempt",
    "failure_count",
    "failed_occurrences",
    "missed_count",
    "lease_detail",
    "created_at",
    "updated_at",
)


def _editable(fields: Iterable[str]) -> tuple[str, ...]:
    """The fields :mod:`.state` lets a caller write (run state never is)."""
    return tuple(f for f in fields if f in state.EDITABLE_FIELDS)


# ---------------------------------------------------------------------------------------
# Formatting helpers (pure; no queries)
# ---------------------------------------------------------------------------------------


def _zone(name: str | None) -> ZoneInfo:
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def _is_utc(name: str | None) -> bool:
    return (name or "UTC") in ("UTC", "Etc/UTC", "Etc/UCT", "UCT", "Universal", "Zulu")


def fmt_utc(value: datetime | None) -> str:
    """``2027-06-01 10:00:00 UTC`` (or a dash)."""
    if value is None:
        return _EMPTY
    return f"{value.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"


def fmt_zone(value: datetime, zone_name: str | None) -> str:
    """``2027-06-01 12:00:00 CEST``: the instant as read in the schedule's zone."""
    local = value.astimezone(_zone(zone_name))
    return f"{local:%Y-%m-%d %H:%M:%S} {local.tzname()}"


def _relative(value: datetime, now: datetime) -> str:
    if value <= now:
        return f"{timesince(value, now)} ago" if (now - value).total_seconds() >= 60 else "now"
    return f"in {timeuntil(value, now)}" if (value - now).total_seconds() >= 60 else "now"


def _plural(n: int, word: str = "schedule") -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _names(items: Sequence[str]) -> str:
    shown = "; ".join(items[:MESSAGE_NAMES])
    if len(items) > MESSAGE_NAMES:
        shown += f"; and {len(items) - MESSAGE_NAMES} more"
    return shown


def _receipt_title(receipt: RunReceipt) -> str:
    title = f"#{receipt.occurrence} {receipt.get_status_display()} · {fmt_utc(receipt.finished_at)}"
    if receipt.error_type or receipt.error_message:
        error = ": ".join(p for p in (receipt.error_type, receipt.error_message) if p)
        title += f" · {Truncator(error).chars(160)}"
    return title


def outcome_strip(
    receipts: Sequence[RunReceipt],
    *,
    link: str | None = None,
    length: int = STRIP_LENGTH,
    large: bool = False,
) -> SafeString:
    """The last ``length`` outcomes as coloured marks, oldest left, newest right.

    ``receipts`` are newest first (as fetched). Each mark has the status in its colour
    *and* in its title (hover) and accessible label; empty slots are outlined. ``link`` is a
    receipt change URL with ``{}`` where the receipt id goes.
    """
    recent = list(receipts[:length])
    counts: dict[str, int] = {}
    for r in recent:
        counts[r.get_status_display()] = counts.get(r.get_status_display(), 0) + 1
    summary = ", ".join(f"{n} {label}" for label, n in counts.items()) or "no runs yet"
    marks = [SafeString('<span class="dds-mark dds-empty"></span>')] * (length - len(recent))
    for r in reversed(recent):
        title = _receipt_title(r)
        if link:
            marks.append(
                format_html(
                    '<a class="dds-mark dds-o-{}" href="{}" title="{}" aria-label="{}"></a>',
                    r.status,
                    link.replace("{}", quote(str(r.pk))),
                    title,
                    title,
                )
            )
        else:
            marks.append(
                format_html(
                    '<span class="dds-mark dds-o-{}" title="{}"></span>',
                    r.status,
                    title,
                )
            )
    return format_html(
        '<span class="dds-strip{}" aria-label="Last {} outcomes, oldest first: {}">{}</span>',
        " dds-strip-large" if large else "",
        len(recent),
        summary,
        SafeString("".join(marks)),
    )


def outcome_label(status: str, label: str | None = None) -> SafeString:
    """A coloured dot and the outcome's name."""
    return format_html(
        '<span class="dds-outcome"><span class="dds-dot dds-o-{}"></span>{}</span>',
        status,
        label or ReceiptStatus(status).label,
    )


def status_badges(obj: Schedule) -> SafeString:
    """The status as a coloured badge, plus "running" (lease held) and "degraded"."""
    badges = [
        format_html(
            '<span class="dds-badge dds-s-{}" title="{}">{}</span>',
            obj.status,
            obj.pause_reason or obj.get_status_display(),
            obj.get_status_display(),
        )
    ]
    if obj.lease_token is not None:
        badges.append(
            format_html(
                '<span class="dds-badge dds-s-running" title="lease held until {}">running</span>',
                fmt_utc(obj.lease_expires_at),
            )
        )
    if obj.degraded_reason:
        badges.append(
            format_html(
                '<span class="dds-badge dds-s-degraded" title="{}">degraded</span>',
                obj.degraded_reason,
            )
        )
    return SafeString(" ".join(badges))


def _when(value: datetime | None, zone_name: str | None, *, now: datetime) -> SafeString:
    """An instant in the schedule's zone and, below it, in UTC (once if the zone is UTC)."""
    if value is None:
        return SafeString(_EMPTY)
    hint = f"{zone_name or 'UTC'} · {_relative(value, now)}"
    if _is_utc(zone_name):
        return format_html('<span class="dds-when" title="{}">{}</span>', hint, fmt_utc(value))
    return format_html(
        '<span class="dds-when" title="{}">{}</span><span class="dds-utc">{}</span>',
        hint,
        fmt_zone(value, zone_name),
        fmt_utc(value),
    )


def cadence(obj: Schedule) -> str:
    try:
        return timing.describe(obj.spec())
    except (timing.InvalidSchedule, ValueError, TypeError):
        return f"{obj.kind} schedule"


def _as_admin(request: HttpRequest) -> dict[str, Any]:
    """Who and where, for the audit trail (``ScheduleEvent.actor`` / ``source``)."""
    return {"actor": request.user, "source": "admin"}


# ---------------------------------------------------------------------------------------
# Transitions: one table drives the actions, the change-page buttons and their messages
# ---------------------------------------------------------------------------------------


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


TRANSITIONS: dict[str, Transition] = {
    t.name: t
    for t in (
        Transition("enable", "Enable", "Enabled", target=Status.ACTIVE),
        Transition("disable", "Disable", "Disabled", target=Status.PAUSED),
        Transition("trigger", "Trigger now", "Triggered"),
        Transition("cancel", "Cancel", "Cancelled", danger=True),
    )
}


def _what_changed(t: Transition, name: str, before: str, row: Schedule) -> str:
    if t.name == "trigger":
        return f"{name} (runs on the next worker pass, outside its grid)"
    change = f"{name} ({before} → {row.status}"
    if t.name == "enable":
        change += f", next run {fmt_utc(row.next_run_at)}"
    return change + ")"


def apply_transition(
    request: HttpRequest, t: Transition, rows: Iterable[tuple[Any, str, str]]
) -> None:
    """Call ``state.<t.name>`` for each ``(pk, name, status before)`` and tell the user
    what changed, what already was so, and what was refused (with the reason)."""
    func = getattr(state, t.name)
    changed: list[str] = []
    unchanged: list[str] = []
    refused: list[str] = []
    for pk, name, before in rows:
        try:
            row = func(pk, **_as_admin(request))
        except StateConflict as exc:
            refused.append(f"{name} ({exc.reason})")
        except Schedule.DoesNotExist:
            refused.append(f"{name} (it no longer exists)")
        else:
            if t.target is not None and before == t.target:
                unchanged.append(name)
            else:
                changed.append(_what_changed(t, name, before, row))
    if changed:
        messages.success(request, f"{t.done} {_plural(len(changed))}: {_names(changed)}.")
    if unchanged:
        messages.info(request, f"Already {t.target}, unchanged: {_names(unchanged)}.")
    if refused:
        messages.error(
            request, f"{t.label} refused for {_plural(len(refused))}: {_names(refused)}."
        )


def _make_action(t: Transition) -> Any:
    def action(modeladmin: ScheduleAdmin, request: HttpRequest, queryset: QuerySet) -> None:
        rows = queryset.prefetch_related(None).order_by("name").values_list("pk", "name", "status")
        apply_transition(request, t, list(rows))

    action.__name__ = t.name
    return admin.action(permissions=["change"], description=f"{t.label} – selected schedules")(
        action
    )


class _DeleteRefused(Exception):
    def __init__(self, name: str, reason: str):
        super().__init__(reason)
        self.name = name
        self.reason = reason


@admin.action(permissions=["delete"], description="Delete selected schedules")
def delete_selected(
    modeladmin: ScheduleAdmin, request: HttpRequest, queryset: QuerySet
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
                state.delete_schedule(obj.pk, **_as_admin(request))
        except StateConflict as exc:
            refused.append(f"{obj.name} ({exc.reason})")
        except Schedule.DoesNotExist:
            refused.append(f"{obj.name} (it no longer exists)")
        else:
            deleted.append(obj.name)
    if deleted:
        modeladmin.message_user(
            request, f"Deleted {_plural(len(deleted))}: {_names(deleted)}.", messages.SUCCESS
        )
    if refused:
        modeladmin.message_user(
            request,
            f"Not deleted, {_plural(len(refused))}: {_names(refused)}.",
            messages.ERROR,
        )
    return None


# ---------------------------------------------------------------------------------------
# Form, filters, changelist, inlines
# ---------------------------------------------------------------------------------------


class ScheduleForm(forms.ModelForm):
    """``callback`` is a choice among registered names, never a free import path."""

    callback = forms.ChoiceField(choices=())

    class Meta:
        model = Schedule
        fields = _editable(DEFINITION_FIELDS + INPUT_FIELDS + POLICY_FIELDS)

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        field = self.fields.get("callback")
        if not isinstance(field, forms.ChoiceField):  # absent from a read-only form
            return
        names = registry.names()
        current = self.instance.callback if self.instance and self.instance.callback else None
        choices = [(n, n) for n in names]
        if current and current not in names:
            # Shown so the page still renders; saving it again is refused by validation.
            choices.append((current, f"{current} (not registered)"))
        field.choices = [("", "---------"), *choices]
        field.help_text = "One of the callbacks registered in code."


class DegradedFilter(admin.SimpleListFilter):
    title = "degraded"
    parameter_name = "degraded"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Degraded"), ("no", "Not degraded")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == "yes":
            return queryset.filter(ScheduleQuerySet.degraded_q())
        if self.value() == "no":
            return queryset.exclude(ScheduleQuerySet.degraded_q())
        return queryset


class FailingFilter(admin.SimpleListFilter):
    title = "failing"
    parameter_name = "failing"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Failing (consecutive failures)"), ("no", "Not failing")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == "yes":  # the same predicate health counts
            return queryset.filter(ScheduleQuerySet.failing_q())
        if self.value() == "no":
            return queryset.exclude(ScheduleQuerySet.failing_q())
        return queryset


class RunningFilter(admin.SimpleListFilter):
    title = "running"
    parameter_name = "running"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Running (lease held)"), ("no", "Idle")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == "yes":
            return queryset.filter(ScheduleQuerySet.leased_q())
        if self.value() == "no":
            return queryset.exclude(ScheduleQuerySet.leased_q())
        return queryset


def _recent_receipts(length: int = STRIP_LENGTH) -> Prefetch:
    """The latest ``length`` receipts of every schedule of a page, in one query (a window
    function per schedule, served by the ``(schedule, finished_at)`` index)."""
    receipts = RunReceipt.objects.order_by("-finished_at", "-occurrence").only(
        "id", "schedule", "occurrence", "status", "finished_at", "error_type", "error_message"
    )
    return Prefetch("receipts", queryset=receipts[:length], to_attr="dds_recent_receipts")


class ScheduleChangeList(ChangeList):
    """Adds the outcome strip's receipts to the page's schedules: one query per page."""

    def get_queryset(self, request: HttpRequest, exclude_parameters: Any = None) -> QuerySet:
        qs = super().get_queryset(request, exclude_parameters)
        return qs.prefetch_related(_recent_receipts())


class LatestFormSet(BaseInlineFormSet):
    """Only the newest :data:`INLINE_LIMIT` related rows (the full history is a link away)."""

    def get_queryset(self) -> QuerySet:
        if not hasattr(self, "_queryset"):
            self._queryset = super().get_queryset()[:INLINE_LIMIT]
        return self._queryset


class _ReadOnlyInline(admin.TabularInline):
    extra = 0
    max_num = 0
    can_delete = False
    show_change_link = True
    formset = LatestFormSet

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class AttemptInline(_ReadOnlyInline):
    model = RunAttempt
    verbose_name = "attempt"
    verbose_name_plural = f"latest attempts (newest first, at most {INLINE_LIMIT})"
    fields = (
        "occurrence",
        "attempt",
        "slot",
        "claimed",
        "lateness_display",
        "worker",
        "missed_slots",
        "outcome",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).select_related("receipt").order_by("-claimed_at")

    @admin.display(description="scheduled for (UTC)")
    def slot(self, obj: RunAttempt) -> str:
        return fmt_utc(obj.scheduled_for)

    @admin.display(description="claimed at (UTC)")
    def claimed(self, obj: RunAttempt) -> str:
        return fmt_utc(obj.claimed_at)

    @admin.display(description="late")
    def lateness_display(self, obj: RunAttempt) -> str:
        return f"{obj.lateness:.0f} s"

    @admin.display(description="outcome")
    def outcome(self, obj: RunAttempt) -> SafeString | str:
        return _attempt_outcome(obj)


class ReceiptInline(_ReadOnlyInline):
    model = RunReceipt
    verbose_name = "receipt"
    verbose_name_plural = f"latest receipts (newest first, at most {INLINE_LIMIT})"
    fields = (
        "occurrence",
        "outcome",
        "finished",
        "error",
        "failure_count_after",
        "slots_skipped",
        "next_run",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).order_by("-finished_at", "-occurrence")

    @admin.display(description="outcome")
    def outcome(self, obj: RunReceipt) -> SafeString:
        return outcome_label(obj.status)

    @admin.display(description="finished at (UTC)")
    def finished(self, obj: RunReceipt) -> str:
        return fmt_utc(obj.finished_at)

    @admin.display(description="error")
    def error(self, obj: RunReceipt) -> str:
        text = ": ".join(p for p in (obj.error_type, obj.error_message) if p)
        return Truncator(text).chars(120) if text else _EMPTY

    @admin.display(description="next run (UTC)")
    def next_run(self, obj: RunReceipt) -> str:
        return fmt_utc(obj.next_run_at)


def _attempt_outcome(obj: RunAttempt) -> SafeString | str:
    try:
        receipt = obj.receipt
    except RunReceipt.DoesNotExist:
        return SafeString('<span class="dds-outcome dds-open">open (no receipt yet)</span>')
    return outcome_label(receipt.status)


# ---------------------------------------------------------------------------------------
# Schedules
# ---------------------------------------------------------------------------------------


@admin.register(Schedule)
class ScheduleAdmin(admin.ModelAdmin):
    form = ScheduleForm
    list_display = (
        "name",
        "kind",
        "cadence",
        "status_badge",
        "next_run",
        "last_outcome",
        "failures",
        "outcomes",
    )
    list_display_links = ("name",)
    list_filter = ("status", "kind", DegradedFilter, FailingFilter, RunningFilter)
    search_fields = ("name", "callback")
    search_help_text = "Search by schedule name or callback name."
    raw_id_fields = ("owner",)
    inlines = (ReceiptInline, AttemptInline)
    actions = [_make_action(t) for t in TRANSITIONS.values()] + [delete_selected]
    change_list_template = "durable_schedules/admin/change_list.html"
    change_form_template = "durable_schedules/admin/schedule_change_form.html"

    class Media:
        css = _CSS

    # -- page structure ------------------------------------------------------------------

    def get_fieldsets(self, request: HttpRequest, obj: Schedule | None = None) -> list[Any]:
        fieldsets: list[Any] = [
            ("Definition", {"fields": DEFINITION_LAYOUT}),
            ("Input and owner", {"fields": INPUT_FIELDS}),
            ("Policies", {"fields": POLICY_FIELDS, "classes": ["collapse"]}),
        ]
        if obj is not None:
            fieldsets.insert(0, ("Now", {"fields": SUMMARY_FIELDS}))
            fieldsets.append(("Run state", {"fields": STATE_FIELDS, "classes": ["collapse"]}))
        return fieldsets

    def get_readonly_fields(self, request: HttpRequest, obj: Schedule | None = None) -> Any:
        fields = DEFINITION_FIELDS + INPUT_FIELDS + POLICY_FIELDS
        not_editable = tuple(f for f in fields if f not in state.EDITABLE_FIELDS)
        return SUMMARY_FIELDS + STATE_FIELDS + not_editable

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return ScheduleChangeList

    def get_urls(self) -> list[Any]:
        info = self.opts.app_label, self.opts.model_name
        return [
            path(
                "health/",
                self.admin_site.admin_view(self.health_view),
                name="{}_{}_health".format(*info),
            ),
            path(
                "<path:object_id>/transition/<str:transition>/",
                self.admin_site.admin_view(self.transition_view),
                name="{}_{}_transition".format(*info),
            ),
            *super().get_urls(),
        ]

    def _url(self, name: str, *args: Any) -> str | None:
        info = self.opts.app_label, self.opts.model_name
        try:
            return reverse(
                f"admin:{info[0]}_{info[1]}_{name}",
                args=args,
                current_app=self.admin_site.name,
            )
        except NoReverseMatch:
            return None

    def _does_not_exist_redirect(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """What Django's change view does for a missing object (its private
        ``_get_obj_does_not_exist_redirect``): a warning and a redirect to the admin index."""
        msg = gettext("%(name)s with ID “%(key)s” doesn’t exist. Perhaps it was deleted?") % {
            "name": self.opts.verbose_name,
            "key": unquote(object_id),
        }
        self.message_user(request, msg, messages.WARNING)
        return HttpResponseRedirect(reverse("admin:index", current_app=self.admin_site.name))

    def _receipt_link(self) -> str | None:
        """A receipt change URL with ``{}`` for the id (one reverse, not one per mark)."""
        try:
            url = reverse(
                "admin:durable_schedules_runreceipt_change",
                args=["00000000-0000-0000-0000-000000000000"],
                current_app=self.admin_site.name,
            )
        except NoReverseMatch:
            return None
        return url.replace("00000000-0000-0000-0000-000000000000", "{}")

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        context = {
            "dds_health_url": self._url("health"),
            "dds_legend": _legend(),
            **(extra_context or {}),
        }
        return super().changelist_view(request, extra_context=context)

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: Schedule | None = None,
    ) -> HttpResponse:
        context["dds_health_url"] = self._url("health")
        context["dds_legend"] = _legend()
        if obj is not None and self.has_change_permission(request, obj):
            allowed = state.allowed_actions(obj)
            context["dds_transitions"] = [
                {
                    "label": t.label,
                    "url": self._url("transition", quote(obj.pk), t.name),
                    "danger": t.danger,
                    "name": t.name,
                }
                for t in TRANSITIONS.values()
                if t.name in allowed
            ]
        return super().render_change_form(request, context, add, change, form_url, obj)

    # -- list columns ----------------------------------------------------------------------

    @admin.display(description="cadence")
    def cadence(self, obj: Schedule) -> str:
        return cadence(obj)

    @admin.display(description="status", ordering="status")
    def status_badge(self, obj: Schedule) -> SafeString:
        return status_badges(obj)

    @admin.display(description="next run (zone · UTC)", ordering="next_run_at")
    def next_run(self, obj: Schedule) -> SafeString:
        return _when(obj.next_run_at, obj.timezone, now=dj_timezone.now())

    @admin.display(description="last outcome")
    def last_outcome(self, obj: Schedule) -> SafeString | str:
        recent = self._recent(obj)
        if not recent:
            return _EMPTY
        last = recent[0]
        return format_html(
            '<span title="{}">{}</span>',
            _receipt_title(last),
            outcome_label(last.status, last.get_status_display()),
        )

    @admin.display(description="failures", ordering="failure_count")
    def failures(self, obj: Schedule) -> SafeString:
        return format_html(
            '<span class="dds-failures{}" title="consecutive failed attempts">{}</span>',
            " dds-failing" if obj.failure_count else "",
            obj.failure_count,
        )

    @admin.display(description=f"last {STRIP_LENGTH} outcomes")
    def outcomes(self, obj: Schedule) -> SafeString:
        return outcome_strip(self._recent(obj), link=self._receipt_link())

    def _recent(self, obj: Schedule) -> list[RunReceipt]:
        recent = getattr(obj, "dds_recent_receipts", None)
        if recent is None:  # outside the changelist: one query for this schedule
            recent = list(
                RunReceipt.objects.filter(schedule_id=obj.pk).order_by(
                    "-finished_at", "-occurrence"
                )[:STRIP_LENGTH]
            )
            # The attribute the changelist's Prefetch(to_attr=) fills; not a model field.
            obj.dds_recent_receipts = recent  # type: ignore[attr-defined]
        return recent

    # -- change page fields ------------------------------------------------------------------

    @admin.display(description="next run")
    def next_run_detail(self, obj: Schedule) -> SafeString:
        if obj.next_run_at is None:
            return format_html("{} (nothing planned while {})", _EMPTY, obj.status)
        return _when(obj.next_run_at, obj.timezone, now=dj_timezone.now())

    @admin.display(description="last run")
    def last_run_detail(self, obj: Schedule) -> SafeString:
        return _when(obj.last_run_at, obj.timezone, now=dj_timezone.now())

    @admin.display(description="lease")
    def lease_detail(self, obj: Schedule) -> str:
        if obj.lease_token is None:
            return "none (not running)"
        return f"{obj.lease_token}, expires {fmt_utc(obj.lease_expires_at)}"

    @admin.display(description=f"next {UPCOMING_COUNT} fire times")
    def upcoming_table(self, obj: Schedule) -> SafeString:
        try:
            times = obj.upcoming(UPCOMING_COUNT)
        except (timing.InvalidSchedule, ValueError, TypeError) as exc:
            return format_html('<span class="dds-note">cannot compute: {}</span>', exc)
        note = ""
        if obj.status != Status.ACTIVE:
            note = format_html(
                '<p class="dds-note">The schedule is {}: these are the times its definition '
                "gives; none runs unless it is enabled (or triggered).</p>",
                obj.status,
            )
        if not times:
            return format_html('{}<span class="dds-note">No further fire times.</span>', note)
        zone = obj.timezone or "UTC"
        utc_only = _is_utc(zone)
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td>{}</tr>",
            (
                (
                    i,
                    fmt_zone(t, zone) if not utc_only else fmt_utc(t),
                    SafeString("") if utc_only else format_html("<td>{}</td>", fmt_utc(t)),
                )
                for i, t in enumerate(times, 1)
            ),
        )
        head = (
            format_html("<th>#</th><th>{}</th>", "UTC")
            if utc_only
            else format_html("<th>#</th><th>{}</th><th>UTC</th>", zone)
        )
        return format_html(
            '{}<table class="dds-upcoming"><thead><tr>{}</tr></thead><tbody>{}</tbody></table>',
            note,
            head,
            rows,
        )

    @admin.display(description=f"last {STRIP_LENGTH} outcomes")
    def recent_outcomes(self, obj: Schedule) -> SafeString:
        return outcome_strip(self._recent(obj), link=self._receipt_link(), large=True)

    @admin.display(description="history")
    def history_links(self, obj: Schedule) -> SafeString:
        parts = []
        for model, word in ((RunAttempt, "attempt"), (RunReceipt, "receipt")):
            count = model.objects.filter(schedule_id=obj.pk).count()
            label = word if count == 1 else f"{word}s"
            try:
                url = reverse(
                    f"admin:durable_schedules_{model._meta.model_name}_changelist",
                    current_app=self.admin_site.name,
                )
            except NoReverseMatch:
                parts.append(format_html("{} {}", count, label))
                continue
            parts.append(
                format_html('<a href="{}?schedule__exact={}">{} {}</a>', url, obj.pk, count, label)
            )
        return format_html(
            "{} in all · occurrence {} · {} slots missed",
            SafeString(" · ".join(parts)),
            obj.occurrence,
            obj.missed_count,
        )

    # -- writes: state.create_schedule/update_schedule for the definition, state for the rest ----------------------

    def save_model(self, request: HttpRequest, obj: Schedule, form: Any, change: bool) -> None:
        editable = [f for f in form.fields if f in state.EDITABLE_FIELDS]
        if change:
            changes = {f: getattr(obj, f) for f in form.changed_data if f in editable}
            row = state.update_schedule(obj.pk, **changes, **_as_admin(request))
        else:
            fields = {f: getattr(obj, f) for f in editable}
            row = state.create_schedule(**fields, **_as_admin(request))
        for f in Schedule._meta.concrete_fields:
            setattr(obj, f.attname, getattr(row, f.attname))
        obj._state.adding = False
        obj._state.db = row._state.db

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        # The inlines are read-only history: never written (the database refuses anyway);
        # save(commit=False) only fills in what the change message reads.
        form.save_m2m()
        for formset in formsets:
            formset.save(commit=False)

    def delete_model(self, request: HttpRequest, obj: Schedule) -> None:
        try:
            state.delete_schedule(obj.pk, **_as_admin(request))
        except StateConflict as exc:
            raise _DeleteRefused(obj.name, exc.reason) from exc

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        """Not used by this admin's pages (its ``delete_selected`` action deletes one by one
        and reports refusals itself); kept safe for code that calls it."""
        refused = []
        for obj in queryset.prefetch_related(None):
            try:
                state.delete_schedule(obj.pk, **_as_admin(request))
            except StateConflict as exc:
                refused.append(f"{obj.name} ({exc.reason})")
        if refused:
            self.message_user(request, f"Not deleted: {_names(refused)}.", messages.ERROR)

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: Any = None
    ) -> HttpResponse:
        try:
            return super().delete_view(request, object_id, extra_context)
        except _DeleteRefused as exc:
            # delete_view's transaction rolled back, with it the "deleted" log entry.
            self.message_user(
                request, f"The schedule “{exc.name}” was not deleted: {exc.reason}.", messages.ERROR
            )
            url = self._url("change", quote(unquote(object_id))) or "../"
            return HttpResponseRedirect(url)

    def transition_view(
        self, request: HttpRequest, object_id: str, transition: str
    ) -> HttpResponse:
        """POST ``<id>/transition/<enable|disable|trigger|cancel>/``: the change page's buttons."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        t = TRANSITIONS.get(transition)
        if t is None:
            raise Http404(f"no transition {transition!r}")
        obj = self.get_object(request, unquote(object_id))
        if obj is None:
            return self._does_not_exist_redirect(request, object_id)
        if not self.has_change_permission(request, obj):
            raise PermissionDenied
        apply_transition(request, t, [(obj.pk, obj.name, obj.status)])
        return HttpResponseRedirect(self._url("change", quote(obj.pk)) or "../")

    # -- health ----------------------------------------------------------------------------

    def health_view(self, request: HttpRequest) -> HttpResponse:
        """The health snapshot, live workers, failing and degraded schedules (staff with
        view permission on schedules)."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        health = snapshot()
        changelist = self._url("changelist") or ""
        skew_warn = app_settings.SKEW_WARN_SECONDS
        workers = [
            {
                **w,
                "last_seen": fmt_utc(w["last_seen_at"]),
                "age": max(0.0, (health.checked_at - w["last_seen_at"]).total_seconds()),
                "started": fmt_utc(w["started_at"]),
                "skewed": abs(w["clock_skew_seconds"]) > skew_warn,
            }
            for w in health.workers
        ]
        failing_qs = (
            Schedule.objects.failing()
            .order_by("-failure_count", "name")
            .prefetch_related(_recent_receipts())
        )
        degraded_qs = (
            Schedule.objects.degraded().order_by("name").prefetch_related(_recent_receipts())
        )
        link = self._receipt_link()
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
            _count("missed slots (total)", health.missed_slots),
            _count("live workers", health.live_workers, tone="" if health.live_workers else "warn"),
        ]
        context = {
            **self.admin_site.each_context(request),
            "title": "Scheduler health",
            "opts": self.opts,
            "media": self.media,
            "health": health,
            "checked_at": fmt_utc(health.checked_at),
            "counts": counts,
            "workers": workers,
            "stale_after": app_settings.WORKER_STALE_SECONDS,
            "skew_warn": skew_warn,
            "failing": [self._health_row(s, link) for s in failing_qs[:HEALTH_LIST_LIMIT]],
            "failing_more": max(0, health.failing - HEALTH_LIST_LIMIT),
            "degraded": [self._health_row(s, link) for s in degraded_qs[:HEALTH_LIST_LIMIT]],
            "degraded_more": max(0, health.degraded - HEALTH_LIST_LIMIT),
            "changelist_url": changelist,
            "heartbeats_url": _safe_reverse(
                "admin:durable_schedules_workerheartbeat_changelist", self.admin_site.name
            ),
        }
        request.current_app = self.admin_site.name
        return TemplateResponse(request, "durable_schedules/admin/health.html", context)

    def _health_row(self, obj: Schedule, link: str | None) -> dict[str, Any]:
        recent = self._recent(obj)
        last_error = next((r for r in recent if r.error_type or r.error_message), None)
        return {
            "schedule": obj,
            "url": self._url("change", quote(obj.pk)),
            "status": status_badges(obj),
            "cadence": cadence(obj),
            "strip": outcome_strip(recent, link=link),
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


def _safe_reverse(name: str, current_app: str) -> str | None:
    try:
        return reverse(name, current_app=current_app)
    except NoReverseMatch:
        return None


def _legend() -> list[SafeString]:
    return [outcome_label(value, label) for value, label in ReceiptStatus.choices]


# ---------------------------------------------------------------------------------------
# Read-only history: attempts, receipts, worker heartbeats
# ---------------------------------------------------------------------------------------


class ReadOnlyAdmin(admin.ModelAdmin):
    """No add, change or delete for anyone, superusers included (the database refuses
    UPDATE and DELETE on attempts and receipts anyway). Viewing needs view permission."""

    class Media:
        css = _CSS

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def _schedule_link(admin_site: admin.AdminSite, schedule_id: Any, name: str) -> SafeString | str:
    try:
        url = reverse(
            "admin:durable_schedules_schedule_change",
            args=[quote(schedule_id)],
            current_app=admin_site.name,
        )
    except NoReverseMatch:
        return name
    return format_html('<a href="{}">{}</a>', url, name)


@admin.register(RunAttempt)
class RunAttemptAdmin(ReadOnlyAdmin):
    list_display = (
        "schedule_link",
        "occurrence",
        "attempt",
        "slot",
        "claimed",
        "lateness_display",
        "worker",
        "missed_slots",
        "outcome",
    )
    list_select_related = ("receipt",)
    list_filter = ("worker",)
    search_fields = ("schedule_name", "idempotency_key", "=worker")
    date_hierarchy = "claimed_at"

    @admin.display(description="schedule", ordering="schedule_name")
    def schedule_link(self, obj: RunAttempt) -> SafeString | str:
        return _schedule_link(self.admin_site, obj.schedule_id, obj.schedule_name)

    @admin.display(description="scheduled for (UTC)", ordering="scheduled_for")
    def slot(self, obj: RunAttempt) -> str:
        return fmt_utc(obj.scheduled_for)

    @admin.display(description="claimed at (UTC)", ordering="claimed_at")
    def claimed(self, obj: RunAttempt) -> str:
        return fmt_utc(obj.claimed_at)

    @admin.display(description="late")
    def lateness_display(self, obj: RunAttempt) -> str:
        return f"{obj.lateness:.0f} s"

    @admin.display(description="outcome")
    def outcome(self, obj: RunAttempt) -> SafeString | str:
        return _attempt_outcome(obj)


@admin.register(RunReceipt)
class RunReceiptAdmin(ReadOnlyAdmin):
    list_display = (
        "schedule_link",
        "occurrence",
        "outcome",
        "finished",
        "error",
        "failure_count_after",
        "next_run",
    )
    list_select_related = ("attempt",)
    list_filter = ("status",)
    search_fields = ("attempt__schedule_name", "error_type", "error_message")
    date_hierarchy = "finished_at"

    @admin.display(description="schedule", ordering="attempt__schedule_name")
    def schedule_link(self, obj: RunReceipt) -> SafeString | str:
        return _schedule_link(self.admin_site, obj.schedule_id, obj.attempt.schedule_name)

    @admin.display(description="outcome", ordering="status")
    def outcome(self, obj: RunReceipt) -> SafeString:
        return outcome_label(obj.status)

    @admin.display(description="finished at (UTC)", ordering="finished_at")
    def finished(self, obj: RunReceipt) -> str:
        return fmt_utc(obj.finished_at)

    @admin.display(description="error")
    def error(self, obj: RunReceipt) -> str:
        text = ": ".join(p for p in (obj.error_type, obj.error_message) if p)
        return Truncator(text).chars(120) if text else _EMPTY

    @admin.display(description="next run (UTC)", ordering="next_run_at")
    def next_run(self, obj: RunReceipt) -> str:
        return fmt_utc(obj.next_run_at)


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(ReadOnlyAdmin):
    list_display = (
        "worker_id",
        "hostname",
        "pid",
        "last_seen",
        "in_flight",
        "runs_finished",
        "skew",
        "stopped",
    )
    change_list_template = "durable_schedules/admin/change_list.html"

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        context = {
            "dds_health_url": _safe_reverse(
                "admin:durable_schedules_schedule_health", self.admin_site.name
            ),
            **(extra_context or {}),
        }
        return super().changelist_view(request, extra_context=context)

    @admin.display(description="last seen (UTC)", ordering="last_seen_at")
    def last_seen(self, obj: WorkerHeartbeat) -> str:
        return fmt_utc(obj.last_seen_at)

    @admin.display(description="stopped at (UTC)", ordering="stopped_at")
    def stopped(self, obj: WorkerHeartbeat) -> str:
        return fmt_utc(obj.stopped_at)

    @admin.display(description="clock skew", ordering="clock_skew_seconds")
    def skew(self, obj: WorkerHeartbeat) -> SafeString:
        return format_html(
            '<span class="{}">{} s</span>',
            "dds-bad" if abs(obj.clock_skew_seconds) > app_settings.SKEW_WARN_SECONDS else "",
            f"{obj.clock_skew_seconds:+.3f}",
        )


__all__ = [
    "RunAttemptAdmin",
    "RunReceiptAdmin",
    "ScheduleAdmin",
    "ScheduleForm",
    "WorkerHeartbeatAdmin",
    "outcome_strip",
]
