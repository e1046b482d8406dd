"""The schedule admin, :class:`ScheduleAdmin`: its list and change pages, its own URLs, and
the writes, each through :mod:`..state` (add and edit the definition, delete). Its columns
and fields are the functions of :mod:`.columns`, its own views (health page, transition
buttons, the form's live descriptions) the functions of :mod:`.views`, which
:meth:`ScheduleAdmin.get_urls` routes.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import update_wrapper
from typing import Any, cast

from django.contrib import admin, messages
from django.contrib.admin.utils import flatten_fieldsets, quote, unquote
from django.contrib.admin.views.main import ChangeList
from django.db import router
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import path
from django.utils.safestring import SafeString

from .. import state
from ..db.names import with_calendar_names
from ..deadlines import with_open_slot
from ..exceptions import StateConflict
from ..health import probe
from ..models import INPUT_FIELDS, POLICY_FIELDS, Schedule, ScheduleQuerySet
from ..registry import registry
from ..stats import schedule_stats
from ..stats_math import stats_rows
from .actions import TRANSITIONS, DeleteRefused, as_admin, delete_selected, make_action
from .backfills import backfill, cancel_backfill
from .changelist import ScheduleChangeList, attach_group_waits
from .columns import cadence_and_next_run, name_and_status
from .columns import chain_links as linked_chain
from .columns import history_links as linked_history
from .columns import outcomes as linked_outcomes
from .columns import outcomes_summary as linked_outcomes_summary
from .display import ADMIN_CSS, STRIP_LENGTH, legend, names_listed
from .duplicate import duplicate, duplicate_view
from .filters import DegradedFilter, FailingFilter, LabelFilter, RunningFilter
from .forms import (
    DECLARED_RELATIONS,
    DEFINITION_LAYOUT,
    LINKS_LAYOUT,
    STATE_FIELDS,
    SUMMARY_FIELDS,
    ScheduleForm,
    upstream_field,
)
from .inlines import AttemptInline, EventInline, ReceiptInline
from .pagination import EstimatedCountPaginator
from .pauses import pause_selected, pause_view
from .run_now import run_now_view
from .timeline import timeline_view
from .versions import restore_view, version_view, versions_context
from .views import (
    admin_url,
    describe_cron_view,
    describe_instant_view,
    describe_rrule_view,
    health_view,
    transition_view,
)
from .write_lock import WriteLockedForm


@admin.register(Schedule)
class ScheduleAdmin(WriteLockedForm):
    """Schedules: the list (its columns: :mod:`.columns`), the change page with its
    transition buttons, the health page (the views: :mod:`.views`), and the writes, each
    through :mod:`..state`."""

    form = ScheduleForm
    list_display = (name_and_status, cadence_and_next_run, "outcomes_summary")
    list_display_links = (name_and_status,)
    list_filter = ("status", "kind", DegradedFilter, FailingFilter, RunningFilter, LabelFilter)
    search_fields = ("name", "callback")  # see get_search_results
    search_help_text = (
        "Search by a part of a schedule's name or callback, in any case; ^name: names "
        "starting with name, as typed."
    )
    raw_id_fields = ("owner",)
    filter_horizontal = ("exclusion_calendars", "blackout_windows")
    inlines = (ReceiptInline, AttemptInline, EventInline)
    actions = [make_action(t) for t in TRANSITIONS.values()] + [
        pause_selected,
        backfill,
        cancel_backfill,
        duplicate,
        delete_selected,
    ]
    change_list_template = "durable_schedules/admin/change_list.html"
    # Big tables: no second COUNT(*) of the whole table, and a count that reads at most
    # EXACT_COUNT_LIMIT rows (an estimate beyond; docs/scale.md).
    paginator = EstimatedCountPaginator
    show_full_result_count = False
    change_form_template = "durable_schedules/admin/schedule_change_form.html"

    class Media:
        css = ADMIN_CSS
        js = (
            "durable_schedules/unsaved.js",  # asks before a button drops unsaved edits
            "durable_schedules/cron_words.js",  # the cron and rrule fields in words, as you type
            "durable_schedules/kind_fields.js",  # the timing fields a kind takes, only
            "durable_schedules/instant_words.js",  # run_at/start_at/end_at as typed, in UTC
        )

    # -- URLs and the columns that link into this admin's site --------------------------

    def get_urls(self) -> list[Any]:
        info = self.opts.app_label, self.opts.model_name
        return [
            path(
                "health/",
                self.admin_site.admin_view(self._bound(health_view)),
                name="{}_{}_health".format(*info),
            ),
            path(
                "timeline/",
                self.admin_site.admin_view(self._bound(timeline_view)),
                name="{}_{}_timeline".format(*info),
            ),
            path(
                "describe-cron/",
                self.admin_site.admin_view(self._bound(describe_cron_view)),
                name="{}_{}_describe_cron".format(*info),
            ),
            path(
                "describe-instant/",
                self.admin_site.admin_view(self._bound(describe_instant_view)),
                name="{}_{}_describe_instant".format(*info),
            ),
            path(
                "describe-rrule/",
                self.admin_site.admin_view(self._bound(describe_rrule_view)),
                name="{}_{}_describe_rrule".format(*info),
            ),
            path(
                "<path:object_id>/run-now/",
                self.admin_site.admin_view(self._bound(run_now_view)),
                name="{}_{}_run_now".format(*info),
            ),
            path(
                "<path:object_id>/duplicate/",
                self.admin_site.admin_view(self._bound(duplicate_view)),
                name="{}_{}_duplicate".format(*info),
            ),
            path(
                "<path:object_id>/pause/",
                self.admin_site.admin_view(self._bound(pause_view)),
                name="{}_{}_pause".format(*info),
            ),
            path(
                "<path:object_id>/versions/<str:event>/",
                self.admin_site.admin_view(self._bound(version_view)),
                name="{}_{}_version".format(*info),
            ),
            path(
                "<path:object_id>/versions/<str:event>/restore/",
                self.admin_site.admin_view(self._bound(restore_view)),
                name="{}_{}_restore".format(*info),
            ),
            path(
                "<path:object_id>/transition/<str:transition>/",
                self.admin_site.admin_view(self._bound(transition_view)),
                name="{}_{}_transition".format(*info),
            ),
            *super().get_urls(),
        ]

    def _bound(self, view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        """``view(self, request, ...)`` as a view of ``request, ...`` (with its name)."""

        def bound(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            return view(self, request, *args, **kwargs)

        return update_wrapper(bound, view)

    @admin.display(description=f"last {STRIP_LENGTH} outcomes · last · failures")
    def outcomes_summary(self, obj: Schedule) -> SafeString:
        return linked_outcomes_summary(obj, self.admin_site.name)

    @admin.display(description=f"last {STRIP_LENGTH} outcomes")
    def recent_outcomes(self, obj: Schedule) -> SafeString:
        return linked_outcomes(obj, self.admin_site.name, large=True)

    @admin.display(description="chain")
    def chain_links(self, obj: Schedule) -> SafeString:
        return linked_chain(obj, self.admin_site.name)

    @admin.display(description="history")
    def history_links(self, obj: Schedule) -> SafeString:
        return linked_history(obj, self.admin_site.name)

    # -- page structure ------------------------------------------------------------------

    def get_fieldsets(self, request: HttpRequest, obj: Schedule | None = None) -> list[Any]:
        links = {"fields": LINKS_LAYOUT, "classes": ["collapse"] if obj is None else []}
        fieldsets: list[Any] = [
            ("Definition", {"fields": DEFINITION_LAYOUT}),
            ("Calendars and windows", links),
            ("Input and owner", {"fields": INPUT_FIELDS}),
            ("Policies", {"fields": POLICY_FIELDS, "classes": ["collapse"]}),
        ]
        if obj is not None:
            fieldsets.insert(0, ("Now", {"fields": SUMMARY_FIELDS}))
            fieldsets.append(("Run state", {"fields": STATE_FIELDS, "classes": ["collapse"]}))
        return fieldsets

    def get_queryset(self, request: HttpRequest) -> QuerySet[Schedule]:
        # In the same query: each row's run in flight (which, since when, on which worker:
        # display.running_since), the open run's slot and the database clock (the "late"
        # badge and the deadline): the status badges cost no query of their own; the names
        # of its exclusion calendars (the cadence's words name them).
        queryset: Any = super().get_queryset(request)
        return with_calendar_names(with_open_slot(queryset.with_running()))

    def get_object(self, request: HttpRequest, object_id: str, from_field: Any = None) -> Any:
        obj = super().get_object(request, object_id, from_field)
        return attach_group_waits([obj])[0] if obj is not None else None  # its group's wait

    def get_inlines(self, request: HttpRequest, obj: Schedule | None = None) -> Any:
        # A schedule being added has no attempts or receipts: no empty tables.
        return self.inlines if obj is not None else ()

    def get_readonly_fields(self, request: HttpRequest, obj: Schedule | None = None) -> Any:
        # The form's fields are the editable ones (models.choices): only the run state,
        # and the fields a code declaration owns, are read-only.
        return SUMMARY_FIELDS + STATE_FIELDS + self._declared_fields(obj)

    @staticmethod
    def _declared_fields(obj: Schedule | None) -> tuple[str, ...]:
        """The fields a ``register(..., every=/cron=/rrule=/at=/after=)`` declaration sets for
        ``obj`` (``after=``: its ``upstream`` links too): code owns them (every worker start and ``migrate`` set them again), so they are
        shown, not edited."""
        if obj is None or obj.name not in registry:
            return ()
        registration = registry.get(obj.name)
        if registration.declaration is None:
            return ()
        links = ("upstream",) if registration.declaration.after else ()  # after=: its links
        return ("name", *state.declared_fields(registration), *links)

    def get_form(
        self, request: HttpRequest, obj: Schedule | None = None, change: bool = False, **kwargs: Any
    ) -> Any:
        # A declared relation (upstream) is the form's own field, no model form field.
        fields = kwargs.get("fields") or flatten_fieldsets(self.get_fieldsets(request, obj))
        kwargs["fields"] = [f for f in fields if f not in DECLARED_RELATIONS]
        form = super().get_form(request, obj, change=change, **kwargs)
        if issubclass(form, ScheduleForm) and "upstream" in form.base_fields:
            form.base_fields = {**form.base_fields, "upstream": upstream_field(self.admin_site)}
        if issubclass(form, ScheduleForm):
            form.cron_words_url = admin_url(self, "describe_cron")
            form.rrule_words_url = admin_url(self, "describe_rrule")
            form.instant_words_url = admin_url(self, "describe_instant")
        return form

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return ScheduleChangeList

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        context = {
            "dds_health_url": admin_url(self, "health"),
            "dds_timeline_url": admin_url(self, "timeline"),
            # The fleet's verdict (the probe's: indexed queries only), as a banner when it fails.
            "dds_probe": probe(using=router.db_for_read(Schedule)),
            "dds_legend": legend(),
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
        context["dds_health_url"] = admin_url(self, "health")
        if obj is not None:  # this schedule's runs and next slots on the timeline
            context["dds_timeline_url"] = f"{admin_url(self, 'timeline')}?schedule={obj.pk}"
        if obj is not None and self._declared_fields(obj):
            messages.info(
                request,
                f"{obj.name} is declared in code (register(..., every=/cron=/rrule=/at=) in a "
                "schedules.py): its definition is set from there at every worker start and "
                "migrate, so it is shown, not edited here. Its policies can be edited.",
            )
        context["dds_legend"] = legend()
        if obj is not None:  # runs, success rate, durations, lateness: 24 h and 7 d
            stats = schedule_stats(obj.pk)
            context["dds_stats_rows"] = stats_rows(list(stats.windows.values()))
            context["dds_stats_sample"] = stats.sample_limit
            context["dds_versions"] = versions_context(self, obj)  # history of the definition
        if obj is not None and self.has_change_permission(request, obj):
            allowed = state.allowed_actions(obj)
            context["dds_transitions"] = [
                {
                    "label": t.label,
                    "url": admin_url(self, "transition", quote(obj.pk), t.name),
                    "danger": t.danger,
                    "confirm": t.confirm,
                    "name": t.name,
                }
                for t in TRANSITIONS.values()
                if t.name in allowed
            ]
            if "trigger" in allowed:  # "Run now…": a trigger with an override and a note
                context["dds_run_now_url"] = admin_url(self, "run_now", quote(obj.pk))
        if obj is not None and self.has_add_permission(request):
            context["dds_duplicate_url"] = admin_url(self, "duplicate", quote(obj.pk))
            if "disable" in allowed or (obj.status == "paused" and not obj.degraded_reason):
                context["dds_pause_url"] = admin_url(self, "pause", quote(obj.pk))
        return super().render_change_form(request, context, add, change, form_url, obj)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet, search_term: str
    ) -> tuple[QuerySet, bool]:
        """:meth:`.models.ScheduleQuerySet.search`: a fragment of the name or callback,
        case-insensitive (an index search on PostgreSQL, migration 0026); ``^term``: the
        start of the name (an index range everywhere)."""
        return cast(ScheduleQuerySet, queryset).search(search_term), False

    # -- writes: state.create_schedule/update_schedule for the definition, state for the rest ----------------------

    def save_model(self, request: HttpRequest, obj: Schedule, form: Any, change: bool) -> None:
        # The definition the form prepared (state.prepare: validated once), else its fields.
        prepared = getattr(form, "prepared", None)
        if prepared is not None:
            if change:
                row = state.update_schedule(prepared, **as_admin(request))
            else:
                row = state.create_schedule(prepared, **as_admin(request))
        elif change:
            row = state.update_schedule(obj.pk, **form.definition(), **as_admin(request))
        else:
            row = state.create_schedule(**form.definition(), **as_admin(request))
        for f in Schedule._meta.concrete_fields:
            setattr(obj, f.attname, getattr(row, f.attname))
        obj._state.adding = False
        obj._state.db = row._state.db

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        # The inlines are read-only history: never written (the database refuses anyway);
        # save(commit=False) only fills in what the change message reads. The calendars were
        # set by state.create_schedule/update_schedule (which re-planned the row).
        for formset in formsets:
            formset.save(commit=False)

    def delete_model(self, request: HttpRequest, obj: Schedule) -> None:
        try:
            state.delete_schedule(obj.pk, **as_admin(request))
        except StateConflict as exc:
            raise DeleteRefused(obj.name, exc.reason) from exc

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        """Not used by this admin's pages (its ``delete_selected`` action deletes one by one
        and reports refusals itself); kept safe for code that calls it."""
        refused = []
        for obj in queryset.prefetch_related(None):
            try:
                state.delete_schedule(obj.pk, **as_admin(request))
            except StateConflict as exc:
                refused.append(f"{obj.name} ({exc.reason})")
        if refused:
            self.message_user(request, f"Not deleted: {names_listed(refused)}.", messages.ERROR)

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: Any = None
    ) -> HttpResponse:
        try:
            if request.method != "POST":
                return super().delete_view(request, object_id, extra_context)
            with state.write_transaction(using=router.db_for_write(self.model)):  # as for changes
                return super().delete_view(request, object_id, extra_context)
        except DeleteRefused as exc:
            # delete_view's transaction rolled back, with it the "deleted" log entry.
            self.message_user(
                request, f"The schedule “{exc.name}” was not deleted: {exc.reason}.", messages.ERROR
            )
            url = admin_url(self, "change", quote(unquote(object_id))) or "../"
            return HttpResponseRedirect(url)
