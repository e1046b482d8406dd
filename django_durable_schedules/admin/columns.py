"""The computed fields of the schedule admin, as functions of the schedule: the list's
columns (cadence, status, next run, last outcome, failures, the outcome strip) and the
change page's read-only summary (next run, the next :data:`UPCOMING_COUNT` fire times,
history links, lease). :class:`.schedules.ScheduleAdmin` lists them in its
``list_display`` and fieldsets (those marked ``@admin.display`` are used as they are);
those that link into the admin site take its name (``site_name``) and are called by a thin
method of the admin. Their HTML is in the fragment templates
(``templates/durable_schedules/admin/fragments/``, :func:`.display.render_fragment`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib import admin
from django.urls import NoReverseMatch, reverse
from django.utils import timezone as dj_timezone
from django.utils.safestring import SafeString

from .. import timing
from ..db.counts import bounded_count
from ..models import (
    NO_GRID,
    Kind,
    OccurrenceLease,
    RunAttempt,
    RunReceipt,
    Schedule,
    ScheduleEvent,
    Status,
)
from ..projection import result_preview
from ..state.previous_rules import previous_of
from .chain_graph import chain_graph
from .display import (
    EMPTY,
    STRIP_LENGTH,
    deadline_now,
    fmt_utc,
    fmt_zone,
    is_utc,
    outcome_strip,
    receipt_title,
    render_fragment,
    status_badges,
    when,
)
from .display import cadence as cadence_in_words
from .pagination import EXACT_COUNT_LIMIT

#: Fire times listed on a schedule's change page.
UPCOMING_COUNT = 5

#: The placeholder id :func:`receipt_link` reverses with.
_NIL_ID = "00000000-0000-0000-0000-000000000000"


def receipt_link(site_name: str) -> str | None:
    """A receipt change URL of the admin site named ``site_name`` with ``{}`` for the id
    (one reverse, not one per mark), or None when receipts are not registered there."""
    return _change_link(site_name, "runreceipt")


def attempt_link(site_name: str) -> str | None:
    """An attempt's change URL on the admin site named ``site_name`` with ``{}`` for the
    id, or None when attempts are not registered there (as :func:`receipt_link`)."""
    return _change_link(site_name, "runattempt")


def _change_link(site_name: str, model_name: str) -> str | None:
    try:
        url = reverse(
            f"admin:durable_schedules_{model_name}_change", args=[_NIL_ID], current_app=site_name
        )
    except NoReverseMatch:
        return None
    return url.replace(_NIL_ID, "{}")


def recent_receipts(obj: Schedule) -> list[RunReceipt]:
    """The schedule's latest :data:`.display.STRIP_LENGTH` receipts, newest first: those the
    changelist attached (``dds_recent_receipts``), else one query, whose result is attached."""
    recent = getattr(obj, "dds_recent_receipts", None)
    if recent is None:  # outside the changelist: one query for this schedule
        recent = list(
            RunReceipt.objects.filter(schedule_id=obj.pk).order_by("-finished_at", "-occurrence")[
                :STRIP_LENGTH
            ]
        )
        # The attribute the changelist's Prefetch(to_attr=) fills; not a model field.
        obj.dds_recent_receipts = recent  # type: ignore[attr-defined]
    return recent


# -- list columns ------------------------------------------------------------------------

# The list is four columns wide (name and status; cadence and next run; outcomes), so that
# it fits beside the navigation sidebar and the filters at 1280 px.


@admin.display(description="schedule", ordering="name")
def name_and_status(obj: Schedule) -> SafeString:
    """The name, linked, over the status badges."""
    return render_fragment("name_and_status", {"schedule": obj})


@admin.display(description="cadence · next run (its zone, UTC)", ordering="next_run_at")
def cadence_and_next_run(obj: Schedule) -> SafeString:
    """The cadence in words over the next run, in the schedule's zone and in UTC."""
    return render_fragment("cadence_and_next_run", {"schedule": obj})


def outcomes_summary(obj: Schedule, site_name: str) -> SafeString:
    """The outcome strip (its marks link to receipts on the site ``site_name``), the last
    outcome and the consecutive failures (the column ``outcomes_summary`` of
    :class:`.schedules.ScheduleAdmin`)."""
    return render_fragment(
        "outcomes_summary",
        {
            "strip": outcomes(obj, site_name),
            "last": last_outcome(obj),
            "failures": failures(obj),
        },
    )


@admin.display(description="cadence")
def cadence(obj: Schedule) -> SafeString | str:
    """The cadence in words (:func:`.display.cadence`)."""
    return cadence_in_words(obj)


@admin.display(description="status", ordering="status")
def status_badge(obj: Schedule) -> SafeString:
    """The status badges (:func:`.display.status_badges`)."""
    return status_badges(obj)


@admin.display(description="next run (zone · UTC)", ordering="next_run_at")
def next_run(obj: Schedule) -> SafeString:
    """The next run, in the schedule's zone and in UTC, relative to now."""
    return when(obj.next_run_at, obj.timezone, now=dj_timezone.now())


@admin.display(description="last outcome")
def last_outcome(obj: Schedule) -> SafeString | str:
    """The latest receipt's outcome, or :data:`.display.EMPTY`."""
    recent = recent_receipts(obj)
    if not recent:
        return EMPTY
    last = recent[0]
    return render_fragment(
        "last_outcome", {"receipt": last, "title": receipt_title(last, obj.timezone)}
    )


@admin.display(description="failures", ordering="failure_count")
def failures(obj: Schedule) -> SafeString:
    """The consecutive failures (``failure_count``)."""
    return render_fragment("failures", {"count": obj.failure_count})


def outcomes(obj: Schedule, site_name: str, *, large: bool = False) -> SafeString:
    """The strip of the latest :data:`.display.STRIP_LENGTH` outcomes, each mark linked to
    its receipt on the site ``site_name``; ``large`` for the change page."""
    return outcome_strip(
        recent_receipts(obj), link=receipt_link(site_name), large=large, zone=obj.timezone
    )


# -- change page fields --------------------------------------------------------------------


@admin.display(description="next run")
def next_run_detail(obj: Schedule) -> SafeString | str:
    """The next run, or why there is none."""
    if obj.next_run_at is None:  # text, no markup (the admin escapes it)
        return f"{EMPTY} (nothing planned while {obj.status})"
    return when(obj.next_run_at, obj.timezone, now=dj_timezone.now())


@admin.display(description="deadline")
def deadline_detail(obj: Schedule) -> str:
    """The deadline of the occurrence it owes and whether it is late (by the database
    clock), whether a worker reported it (``deadline_missed``), and the alerts open."""
    if obj.deadline_seconds is None:
        return f"{EMPTY} (no deadline_seconds)"
    found = deadline_now(obj)
    if found.deadline_at is None:
        text = f"{obj.deadline_seconds}s after each slot (no occurrence owed now)"
    else:
        state = "late" if found.late else "on time"
        text = f"occurrence {found.occurrence}: {fmt_utc(found.deadline_at)}, {state}"
        if found.reported:
            text += " (deadline_missed reported)"
    if obj.open_alerts:
        text += f"; alerts open: {obj.open_alerts}"
    return text


@admin.display(description="last run")
def last_run_detail(obj: Schedule) -> SafeString:
    """The last run, in the schedule's zone and in UTC, relative to now."""
    return when(obj.last_run_at, obj.timezone, now=dj_timezone.now())


#: Characters of a previous run's result shown on the change page (the rest is cut).
PREVIOUS_RESULT_CHARS = 500


@admin.display(description="last success (ctx.previous)")
def previous_detail(obj: Schedule) -> SafeString:
    """The last successful run as its callback reads it (``ctx.previous``): occurrence,
    nominal instant and finish (in the schedule's zone and UTC), the result as JSON cut to
    :data:`PREVIOUS_RESULT_CHARS` characters; "none yet" before the first success. Read
    from the row (:func:`..state.previous_rules.previous_of`): no query."""
    found = previous_of(obj)
    if found is None:
        return render_fragment("previous", {"previous": None})
    now = dj_timezone.now()
    result, truncated = result_preview(found.result, PREVIOUS_RESULT_CHARS)
    return render_fragment(
        "previous",
        {
            "previous": found,
            "scheduled_for": when(found.scheduled_for, obj.timezone, now=now),
            "finished_at": when(found.finished_at, obj.timezone, now=now),
            "result": result,
            "truncated": truncated,
            "limit": PREVIOUS_RESULT_CHARS,
        },
    )


@admin.display(description="lease")
def lease_detail(obj: Schedule) -> str:
    """The lease token and its expiry (UTC), or that there is none; for an
    ``overlap_policy="allow"`` schedule also each running occurrence's lease, oldest first
    ("occurrence 12: <token>, expires ...", one query: the change page's, never a list's)."""
    lines = (
        []
        if obj.lease_token is None
        else [f"{obj.lease_token}, expires {fmt_utc(obj.lease_expires_at)}"]
    )
    if obj.overlap_policy == "allow" or getattr(obj, "running_occurrences", None):
        leases = OccurrenceLease.objects.using(obj._state.db or "default").filter(schedule=obj)
        for lease in leases.order_by("claimed_at", "pk"):
            lines.append(
                f"occurrence {lease.occurrence}: {lease.lease_token}, "
                f"expires {fmt_utc(lease.lease_expires_at)}"
            )
    return "\n".join(lines) if lines else "none (not running)"


@admin.display(description=f"next {UPCOMING_COUNT} fire times")
def upcoming_table(obj: Schedule) -> SafeString:
    """The next :data:`UPCOMING_COUNT` fire times with the excluded and blacked-out slots
    among them (and why), in the schedule's zone and in UTC; or why they cannot be
    computed."""
    try:
        views = obj.upcoming_slots(UPCOMING_COUNT)  # with the excluded ones, and why
    except (timing.InvalidSchedule, ValueError, TypeError) as exc:
        return render_fragment("upcoming", {"error": exc})
    zone = obj.timezone or "UTC"
    utc_only = is_utc(zone)
    fired = [v for v in views if v.fires]
    numbers = {id(v): n for n, v in enumerate(fired, 1)}
    # A one-shot planned but past its run_at (created with run_now, or not claimed yet): it
    # runs at once, which the times from now (none) would contradict.
    due = obj.next_run_at if obj.kind == Kind.ONCE and obj.status == Status.ACTIVE else None
    return render_fragment(
        "upcoming",
        {
            "error": None,
            "due_since": _due_since(due, zone) if due is not None and not fired else None,
            "manual": obj.kind in NO_GRID,
            "words": timing.MANUAL_WORDS if obj.kind == Kind.MANUAL else timing.AFTER_WORDS,
            "inactive": obj.status != Status.ACTIVE,
            "status": obj.status,
            "zone": zone,
            "utc_only": utc_only,
            "rows": [
                (
                    numbers.get(id(v), ""),
                    fmt_utc(v.at) if utc_only else fmt_zone(v.at, zone),
                    fmt_utc(v.at),
                    v.why_not,
                    v.why_moved,
                )
                for v in views
            ],
        },
    )


def _due_since(at: datetime, zone: str) -> str:
    """``at`` in the zone and in UTC (in UTC alone for UTC), as the upcoming table shows it."""
    return fmt_utc(at) if is_utc(zone) else f"{fmt_zone(at, zone)} · {fmt_utc(at)}"


def history_links(obj: Schedule, site_name: str) -> SafeString:
    """The schedule's attempt, receipt and event counts (exact up to
    :data:`.pagination.EXACT_COUNT_LIMIT`, then "10,000+"), each linked to its list on the
    site ``site_name``, and its missed slots (the field ``history_links`` of
    :class:`.schedules.ScheduleAdmin`)."""
    parts = []
    for model, word in (
        (RunAttempt, "attempt"),
        (RunReceipt, "receipt"),
        (ScheduleEvent, "event"),
    ):
        # Exact up to EXACT_COUNT_LIMIT, then "10,000+" (a busy schedule's history is not
        # counted row by row on every view of its page).
        count = bounded_count(model.objects.filter(schedule_id=obj.pk), EXACT_COUNT_LIMIT)
        more = count > EXACT_COUNT_LIMIT
        try:
            url: str | None = reverse(
                f"admin:durable_schedules_{model._meta.model_name}_changelist",
                current_app=site_name,
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


def chain_links(obj: Schedule, site_name: str) -> SafeString:
    """The schedules ``obj`` runs after ("Runs after: …") and those that run after it
    ("Before: …"), each a link to its change page on the site ``site_name``, under the
    small graph of its chain (:func:`.chain_graph.chain_graph`; the field ``chain_links``
    of :class:`.schedules.ScheduleAdmin`). Two queries for a schedule with no chain; with
    one, two a level each way (three levels at most) and one for the names."""
    graph = chain_graph(obj, site_name)
    direct = {node.key: node for node in graph.everyone if node.level in (-1, 1)}

    def linked(level: int) -> list[dict[str, Any]]:
        return [
            {"name": n.name, "url": n.url}
            for n in sorted(direct.values(), key=lambda n: n.name)
            if n.level == level
        ]

    return render_fragment(
        "chain_links",
        {
            "graph": graph.svg,
            "upstream": linked(-1),
            "downstream": linked(1),
            "wait_seconds": obj.wait_seconds if obj.kind == Kind.AFTER else None,
        },
    )
