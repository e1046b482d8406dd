"""The computed fields of the schedule admin: the list's columns (cadence, status, next run,
last outcome, failures, the outcome strip) and the change page's read-only summary (next
run, the next :data:`UPCOMING_COUNT` fire times, history links, lease). A base class of
:class:`.schedules.ScheduleAdmin`. Their HTML is in the fragment templates
(``templates/durable_schedules/admin/fragments/``, :func:`.display.render_fragment`).
"""

from __future__ import annotations

from django.contrib import admin
from django.urls import NoReverseMatch, reverse
from django.utils import timezone as dj_timezone
from django.utils.safestring import SafeString

from .. import timing
from ..db.counts import bounded_count
from ..models import RunAttempt, RunReceipt, Schedule, ScheduleEvent, Status
from .display import (
    EMPTY,
    STRIP_LENGTH,
    cadence,
    fmt_utc,
    fmt_zone,
    is_utc,
    outcome_strip,
    receipt_title,
    render_fragment,
    status_badges,
    when,
)
from .pagination import EXACT_COUNT_LIMIT

#: Fire times listed on a schedule's change page.
UPCOMING_COUNT = 5


class ScheduleColumns(admin.ModelAdmin):
    """The list columns and change-page fields of :class:`.schedules.ScheduleAdmin`."""

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

    # -- list columns ----------------------------------------------------------------------

    # The list is four columns wide (name and status; cadence and next run; outcomes), so
    # that it fits beside the navigation sidebar and the filters at 1280 px.

    @admin.display(description="schedule", ordering="name")
    def name_and_status(self, obj: Schedule) -> SafeString:
        return render_fragment("name_and_status", {"schedule": obj})

    @admin.display(description="cadence · next run (its zone, UTC)", ordering="next_run_at")
    def cadence_and_next_run(self, obj: Schedule) -> SafeString:
        return render_fragment("cadence_and_next_run", {"schedule": obj})

    @admin.display(description=f"last {STRIP_LENGTH} outcomes · last · failures")
    def outcomes_summary(self, obj: Schedule) -> SafeString:
        return render_fragment(
            "outcomes_summary",
            {
                "strip": self.outcomes(obj),
                "last": self.last_outcome(obj),
                "failures": self.failures(obj),
            },
        )

    @admin.display(description="cadence")
    def cadence(self, obj: Schedule) -> SafeString | str:
        return cadence(obj)

    @admin.display(description="status", ordering="status")
    def status_badge(self, obj: Schedule) -> SafeString:
        return status_badges(obj)

    @admin.display(description="next run (zone · UTC)", ordering="next_run_at")
    def next_run(self, obj: Schedule) -> SafeString:
        return when(obj.next_run_at, obj.timezone, now=dj_timezone.now())

    @admin.display(description="last outcome")
    def last_outcome(self, obj: Schedule) -> SafeString | str:
        recent = self._recent(obj)
        if not recent:
            return EMPTY
        last = recent[0]
        return render_fragment(
            "last_outcome", {"receipt": last, "title": receipt_title(last, obj.timezone)}
        )

    @admin.display(description="failures", ordering="failure_count")
    def failures(self, obj: Schedule) -> SafeString:
        return render_fragment("failures", {"count": obj.failure_count})

    @admin.display(description=f"last {STRIP_LENGTH} outcomes")
    def outcomes(self, obj: Schedule) -> SafeString:
        return outcome_strip(self._recent(obj), link=self._receipt_link(), zone=obj.timezone)

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
    def next_run_detail(self, obj: Schedule) -> SafeString | str:
        if obj.next_run_at is None:  # text, no markup (the admin escapes it)
            return f"{EMPTY} (nothing planned while {obj.status})"
        return when(obj.next_run_at, obj.timezone, now=dj_timezone.now())

    @admin.display(description="last run")
    def last_run_detail(self, obj: Schedule) -> SafeString:
        return when(obj.last_run_at, obj.timezone, now=dj_timezone.now())

    @admin.display(description="lease")
    def lease_detail(self, obj: Schedule) -> str:
        if obj.lease_token is None:
            return "none (not running)"
        return f"{obj.lease_token}, expires {fmt_utc(obj.lease_expires_at)}"

    @admin.display(description=f"next {UPCOMING_COUNT} fire times")
    def upcoming_table(self, obj: Schedule) -> SafeString:
        try:
            views = obj.upcoming_slots(UPCOMING_COUNT)  # with the excluded ones, and why
        except (timing.InvalidSchedule, ValueError, TypeError) as exc:
            return render_fragment("upcoming", {"error": exc})
        zone = obj.timezone or "UTC"
        utc_only = is_utc(zone)
        fired = [v for v in views if v.excluded_by is None]
        numbers = {id(v): n for n, v in enumerate(fired, 1)}
        return render_fragment(
            "upcoming",
            {
                "error": None,
                "inactive": obj.status != Status.ACTIVE,
                "status": obj.status,
                "zone": zone,
                "utc_only": utc_only,
                "rows": [
                    (
                        numbers.get(id(v), ""),
                        fmt_utc(v.at) if utc_only else fmt_zone(v.at, zone),
                        fmt_utc(v.at),
                        str(v.excluded_by) if v.excluded_by is not None else "",
                    )
                    for v in views
                ],
            },
        )

    @admin.display(description=f"last {STRIP_LENGTH} outcomes")
    def recent_outcomes(self, obj: Schedule) -> SafeString:
        return outcome_strip(
            self._recent(obj), link=self._receipt_link(), large=True, zone=obj.timezone
        )

    @admin.display(description="history")
    def history_links(self, obj: Schedule) -> SafeString:
        parts = []
        for model, word in (
            (RunAttempt, "attempt"),
            (RunReceipt, "receipt"),
            (ScheduleEvent, "event"),
        ):
            # Exact up to EXACT_COUNT_LIMIT, then "10,000+" (a busy schedule's history is
            # not counted row by row on every view of its page).
            count = bounded_count(model.objects.filter(schedule_id=obj.pk), EXACT_COUNT_LIMIT)
            more = count > EXACT_COUNT_LIMIT
            try:
                url: str | None = reverse(
                    f"admin:durable_schedules_{model._meta.model_name}_changelist",
                    current_app=self.admin_site.name,
                )
            except NoReverseMatch:
                url = None
            parts.append(
                {
                    "count": f"{EXACT_COUNT_LIMIT:,}+" if more else count,
                    "label": word if count == 1 else f"{word}s",
                    "url": url,
                }
            )
        return render_fragment(
            "history_links",
            {
                "parts": parts,
                "schedule_id": obj.pk,
                "occurrence": obj.occurrence,
                "missed": obj.missed_count,
            },
        )
