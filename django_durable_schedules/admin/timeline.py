"""The admin timeline (``<admin>/durable_schedules/schedule/timeline/``, URL name
``admin:durable_schedules_schedule_timeline``; issue #29, item 1): one row per schedule
(at most :data:`ROWS_PER_PAGE`, in the list's order, by name) over a range, its finished
runs as bars (length: duration; colour: outcome; a mark for retries, backfills, triggers
and re-runs), each a link to its receipt, the attempt in flight (no receipt yet) as a
"running" bar from its claim to now linking to the attempt, its next slots as ticks
(excluded and blacked-out ones struck through), and a density band of the runs of all the
rows shown.

"Now" is the database clock, read by the schedules' query itself (the clock that stamps
claims and receipts): the running bars end there, the "now" line is drawn there and a
named range ends a sixth of its span after it.

Reads, whatever the number of rows and runs: the schedules of the page (one query, with
whether each links a calendar or a window, its attempt in flight and the database clock),
their calendars and windows (none when none links any, else one or two each), the runs
drawn (:func:`..db.timeline.timeline_runs`: at most :data:`BARS_PER_ROW` per row), the runs
per bucket (:func:`..db.timeline.row_counts`) and the concurrency groups offered by the
filter (one). The drawing is :mod:`.timeline_geometry` (the density band:
:mod:`.timeline_density`); the query string :mod:`.timeline_params`.

The markup repeated thousands of times a page (bars, strips, ticks, the rows of the text
table) is :mod:`.timeline_html`: the geometry is computed for a plot of
:data:`.timeline_html.PLOT_WIDTH` px, the narrowest it is drawn, and written as percentages
of the plot's width: the SVGs are as wide as the window allows (``timeline.css``), so at
1920 px the plot takes the extra width, its text and strokes unstretched. The text table of
the runs drawn is written only when asked for (``?table=1``, a link on the page).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db import connections
from django.db.models import DateTimeField, OuterRef, Subquery
from django.db.models.expressions import RawSQL
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone as dj_timezone
from django.utils.http import urlencode

from .. import timing
from ..db.clock import CLOCK_SQL, db_now
from ..db.timeline import TimelineRun, row_counts, timeline_runs
from ..models import (
    ConcurrencyGroup,
    Kind,
    ReceiptStatus,
    RunAttempt,
    Schedule,
    Status,
    load_blackouts,
    load_exclusions,
    with_blackout_flag,
    with_calendar_flag,
)
from ..registry import registry
from ..running import annotated_running, running_count
from .columns import attempt_link, receipt_link
from .display import fmt_time_utc
from .timeline_density import bucket_seconds, density
from .timeline_geometry import (
    MARKED_ORIGINS,
    Axis,
    RunningInput,
    SlotMark,
    axis_labels,
    bars,
    fmt_instant,
    running_bar,
    slot_marks,
)
from .timeline_html import (
    PLOT_WIDTH,
    Fragments,
    band_html,
    bar_context,
    bars_html,
    grid_html,
    pct,
    row_html,
    runs_table_html,
    strip_html,
    strip_table_html,
    ticks_html,
)
from .timeline_params import RANGES, TimelineParams, named_range, read_params
from .views import admin_url

#: Schedules on one page of the timeline.
ROWS_PER_PAGE = 50
#: Most runs drawn as bars on one row (the newest of the range); the others are counted
#: ("N more") and shown in the row's density strip.
BARS_PER_ROW = 60
#: Future slots looked up per row (fire times; as many excluded and blacked-out ones).
SLOTS_PER_ROW = 24
#: Buckets of the density band and of a row's strip.
BUCKETS = 96
#: A row's height and the band's, in pixels (the plot's narrowest width is
#: :data:`.timeline_html.PLOT_WIDTH`).
ROW_HEIGHT = 22
BAND_HEIGHT = 40
#: Concurrency groups offered by the filter.
GROUP_CHOICES = 100


#: The annotations of the page's schedules: the attempt in flight's id and origin (with
#: those of :meth:`..models.queries.ScheduleQuerySet.with_running`) and the database clock.
RUNNING_ID, RUNNING_ORIGIN, DB_NOW = "dds_running_id", "dds_running_origin", "dds_db_now"


def _schedules(params: TimelineParams) -> list[Schedule]:
    rows: Any = Schedule.objects.with_running()
    if params.schedule:
        rows = rows.filter(pk=params.schedule)
    if params.status:
        rows = rows.filter(status=params.status)
    if params.callback:
        rows = rows.filter(callback=params.callback)
    if params.owner:
        rows = rows.filter(**{f"owner__{get_user_model().USERNAME_FIELD}": params.owner})
    if params.group:
        rows = rows.filter(concurrency_group__name=params.group)
    if params.labels:
        rows = rows.with_labels(params.labels)
    # The row's own lease, else its oldest occurrence's (overlap_policy allow): with_running.
    open_attempt = RunAttempt.objects.filter(lease_token=OuterRef("running_lease_token"))
    rows = rows.annotate(
        **{
            RUNNING_ID: Subquery(open_attempt.values("id")[:1]),
            RUNNING_ORIGIN: Subquery(open_attempt.values("origin")[:1]),
        }
    )
    vendor = connections[rows.db].vendor
    if vendor in CLOCK_SQL:  # the database clock, read by the same statement
        rows = rows.annotate(
            **{DB_NOW: RawSQL(CLOCK_SQL[vendor], (), output_field=DateTimeField())}
        )
    rows = with_blackout_flag(with_calendar_flag(rows)).order_by("name", "pk")
    offset = params.page * ROWS_PER_PAGE
    return list(rows[offset : offset + ROWS_PER_PAGE + 1])


def _database_now(schedules: list[Schedule], host_now: datetime) -> datetime:
    """The database clock the schedules' read annotated (aware UTC); read on its own where
    the backend has no clock SQL; the host's ``host_now`` when no schedule was read (then
    nothing is drawn that it would place)."""
    if not schedules:
        return host_now
    value = schedules[0].__dict__.get(DB_NOW)
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return db_now(schedules[0]._state.db or "default")


def _running(schedule: Schedule, axis: Axis, link: str | None) -> dict[str, Any] | None:
    """The row's attempt in flight as the template draws it (a bar to now, linking to the
    attempt's page: "#" when attempts are not in this admin site), or None."""
    run, pk = annotated_running(schedule), schedule.__dict__.get(RUNNING_ID)
    if run is None or pk is None:
        return None
    origin = schedule.__dict__.get(RUNNING_ORIGIN) or "scheduled"
    found = RunningInput(
        pk, run.claimed_at, run.attempt, origin, run.worker, schedule.lease_expires_at
    )
    bar = running_bar(axis, found)
    if bar is None:
        return None
    note = f"running since {fmt_time_utc(run.claimed_at)}"
    if getattr(schedule, "running_occurrences", 0):  # overlap_policy allow
        note += f" ({running_count(schedule)} of {schedule.max_parallel} occurrences)"
    return {
        **bar_context(bar, link),
        "css": "dds-tl-bar dds-tl-running",
        "pattern": "",
        "note": note,
    }


def _slots(schedule: Schedule, axis: Axis) -> tuple[list[SlotMark], bool, str]:
    """The row's future ticks, whether more slots fire on the axis than were looked up,
    and a note ("" or why there are none)."""
    if schedule.kind == Kind.MANUAL:
        return [], False, "runs only when triggered"
    if schedule.kind == Kind.AFTER:
        return [], False, "runs after its upstream schedules"
    if schedule.status != Status.ACTIVE:
        return [], False, f"{schedule.status}: no slot runs"
    after = max(axis.now, axis.start)
    if after >= axis.end:
        return [], False, ""
    try:
        views = schedule.upcoming_slots(SLOTS_PER_ROW, after=after)
    except (timing.InvalidSchedule, ValueError, TypeError) as exc:
        return [], False, f"slots cannot be computed: {exc}"
    fired = [v for v in views if v.fires]
    more = len(fired) >= SLOTS_PER_ROW and fired[-1].at <= axis.end
    return slot_marks(axis, [(v.at, v.why_not) for v in views]), more, ""


def _row(
    schedule: Schedule,
    axis: Axis,
    runs: list[TimelineRun],
    counts: list[tuple[int, int]],
    seconds: int,
    urls: dict[str, Any],
    frags: Fragments,
    table: bool = False,
) -> dict[str, Any]:
    """A row as the template reads it: its bars, strip and ticks as SVG, its words, and
    (``table``: the page shows the text table) its runs as the table's rows."""
    drawn = bars(axis, runs)  # the rows as they are (RunLike): no copy per run
    link = urls["receipt"]
    running = _running(schedule, axis, urls["attempt"])
    total = sum(n for n, _ in counts)
    failures = sum(f for _, f in counts)
    hidden = max(0, total - len(drawn))
    ticks, slots_more, note = _slots(schedule, axis)
    minutes = round(seconds / 60, 1)
    label = f"{schedule.name}: {total} run{'s' if total != 1 else ''} in the range"
    if failures:
        label += f", {failures} failed"
    if hidden:
        label += f"; the newest {len(drawn)} drawn, {hidden} more counted in the strip"
    if running:
        label += f"; running since {running['started']}"
    fires = sum(1 for t in ticks if not t.struck)
    if fires:
        label += f"; {fires}{'+' if slots_more else ''} slots ahead"
    return {
        "schedule": schedule,
        "url": admin_url(urls["admin"], "change", quote(schedule.pk)),
        "only_url": f"{urls['timeline']}?{urlencode({'schedule': str(schedule.pk)})}",
        "bars_svg": bars_html(drawn, link, frags),
        "table_html": (
            runs_table_html(schedule.name, drawn, link, running, frags) if table else ""
        ),
        "buckets_html": (
            strip_table_html(schedule.name, axis, counts, seconds, minutes)
            if table and hidden
            else ""
        ),
        "running": running,
        "total": total,
        "failures": failures,
        "hidden": hidden,
        # The row's strip: only when some of its runs are not drawn.
        "strip_svg": (strip_html(axis, counts, seconds, ROW_HEIGHT, minutes) if hidden else ""),
        "ticks_svg": ticks_html(ticks, frags),
        "slots_more": slots_more,
        "note": note,
        "label": label,
    }


def timeline_view(model_admin: admin.ModelAdmin[Schedule], request: HttpRequest) -> HttpResponse:
    """The timeline page (staff with view permission on schedules); a bad parameter is a
    message and is ignored."""
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    params, problems = read_params(request.GET, dj_timezone.now(), Status.values)
    for problem in problems:
        messages.error(request, problem)
    found = _schedules(params)  # the filters and the page only: not the range
    schedules, has_next = found[:ROWS_PER_PAGE], len(found) > ROWS_PER_PAGE
    now = _database_now(schedules, dj_timezone.now())
    if params.range:  # a named range ends by the database clock too
        start, end = named_range(params.range, now)
        params = replace(params, start=start, end=end)
    axis = Axis(params.start, params.end, now, PLOT_WIDTH)
    seconds = bucket_seconds(axis, BUCKETS)
    load_exclusions(schedules)
    load_blackouts(schedules)
    ids = [s.pk for s in schedules]
    runs_by: dict[Any, list[TimelineRun]] = defaultdict(list)
    for run in timeline_runs(ids, axis.start, axis.end, BARS_PER_ROW):
        runs_by[run.schedule_id].append(run)
    counts = row_counts(ids, axis.start, axis.end, seconds, BUCKETS)
    timeline_url = admin_url(model_admin, "timeline") or ""
    urls = {
        "admin": model_admin,
        "receipt": receipt_link(model_admin.admin_site.name),
        "attempt": attempt_link(model_admin.admin_site.name),
        "timeline": timeline_url,
    }
    frags = Fragments.load()
    rows = [
        _row(s, axis, runs_by[s.pk], cells, seconds, urls, frags, params.table)
        for s, cells in zip(schedules, counts, strict=True)
    ]
    now_x = pct(axis.x(now)) if axis.contains(now) else None
    labels = [{"x": pct(lab.x), "text": lab.text} for lab in axis_labels(axis)]
    page = {
        "grid": grid_html(labels, ROW_HEIGHT),
        "now_x": now_x,
        "height": ROW_HEIGHT,
        "alone": not params.schedule,
        "range": params.range or "",
    }
    for row in rows:
        row["html"] = row_html(row, page, frags)
    band = [
        (sum(runs for runs, _ in column), sum(failed for _, failed in column))
        for column in zip(*counts, strict=True)
    ] or [(0, 0)] * BUCKETS
    filters = params.filters()
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Timeline",
        "opts": model_admin.opts,
        "media": model_admin.media,
        "params": params,
        "rows": rows,
        "axis": axis,
        "now_x": now_x,
        "labels": labels,
        "band_svg": band_html(density(axis, band, seconds, BAND_HEIGHT)),
        "band_total": sum(n for n, _ in band),
        "bucket_minutes": round(seconds / 60, 1),
        "start_text": fmt_instant(axis.start),
        "end_text": fmt_instant(axis.end),
        "start_value": axis.start.strftime("%Y-%m-%dT%H:%M"),
        "end_value": axis.end.strftime("%Y-%m-%dT%H:%M"),
        "ranges": [
            {
                "name": name,
                "url": "?" + urlencode({**filters, "range": name}, doseq=True),
                "current": name == params.range,
            }
            for name in RANGES
        ],
        "prev_url": _page_url(params, params.page - 1) if params.page > 0 else None,
        "next_url": _page_url(params, params.page + 1) if has_next else None,
        "first_row": params.page * ROWS_PER_PAGE + 1,
        "last_row": params.page * ROWS_PER_PAGE + len(rows),
        "statuses": Status.values,
        "receipt_statuses": ReceiptStatus.values,
        "marks": MARKED_ORIGINS,
        "callbacks": registry.names(),
        "groups": list(
            ConcurrencyGroup.objects.order_by("name").values_list("name", flat=True)[:GROUP_CHOICES]
        ),
        "plot_width": PLOT_WIDTH,
        "row_height": ROW_HEIGHT,
        "band_height": BAND_HEIGHT,
        "bars_per_row": BARS_PER_ROW,
        "changelist_url": admin_url(model_admin, "changelist") or "",
        "table_url": _table_url(request, show=not params.table),
    }
    request.current_app = model_admin.admin_site.name
    return TemplateResponse(request, "durable_schedules/admin/timeline.html", context)


def _table_url(request: HttpRequest, show: bool) -> str:
    """This page with the text table of the runs (``show``) or without it."""
    query = request.GET.copy()
    query.pop("table", None)
    if show:
        query["table"] = "1"
    return f"?{query.urlencode()}#dds-tl-runs" if show else f"?{query.urlencode()}"


def _page_url(params: TimelineParams, page: int) -> str:
    values = {**params.filters(), "p": page}
    if params.range:
        values["range"] = params.range
    else:
        values["start"] = params.start.isoformat()
        values["end"] = params.end.isoformat()
    if params.table:
        values["table"] = 1
    return "?" + urlencode(values, doseq=True)
