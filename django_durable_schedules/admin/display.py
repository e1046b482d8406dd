"""How the admin shows things: instants in the schedule's zone and in UTC, outcomes (a
coloured label, the strip of the last :data:`STRIP_LENGTH`, the legend), status badges, the
cadence in words, the lists of names in action messages, the admin's stylesheet, and
``safe_reverse`` (a URL, or None where the site has no such page).

The HTML is in templates, ``templates/durable_schedules/admin/fragments/``: each helper
here that returns markup builds its template's context and renders it
(:func:`render_fragment`); the text formatters (``fmt_utc``, ``fmt_zone``, ...) return plain
text. The template tag library :mod:`..templatetags.durable_schedules_admin` renders the
same helpers inside templates.

Pure formatting, no queries of their own (``attempt_outcome`` reads an attempt's receipt,
which its callers select with the attempt).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.template.loader import get_template, render_to_string
from django.urls import NoReverseMatch, reverse
from django.utils.safestring import SafeString, mark_safe
from django.utils.timesince import timesince, timeuntil

from .. import timing
from ..cron_words import business_in_words, schedule_description, schedule_in_words
from ..db.clock import db_now
from ..db.latest import ReceiptSummary
from ..deadlines import DeadlineState, deadline_state, read_now
from ..humanize import duration_words
from ..models import ReceiptStatus, RunAttempt, RunReceipt, Schedule
from ..running import annotated_running
from ..timing.descriptions import spec_words

#: Outcomes in the strip of the schedule list and change page.
STRIP_LENGTH = 20
#: Names listed in one action message before "and N more".
MESSAGE_NAMES = 10

#: The admin's one stylesheet, as a ``Media.css`` value.
ADMIN_CSS = {"all": ["durable_schedules/admin.css"]}
#: What an empty cell shows.
EMPTY = "—"
#: The folder of the admin's HTML fragments.
FRAGMENTS = "durable_schedules/admin/fragments/"
#: Each receipt status's label, read once (``get_status_display()`` rebuilds the choices'
#: mapping at every call: a third of a schedule list page's time went there).
_RECEIPT_LABELS: dict[str, str] = {str(value): str(label) for value, label in ReceiptStatus.choices}


def receipt_label(status: str) -> str:
    """The label of a receipt status (``"lease_expired"`` -> ``"lease expired"``); an
    unknown value as it is."""
    return _RECEIPT_LABELS.get(status, status)


def render_fragment(name: str, context: Mapping[str, Any]) -> SafeString:
    """The fragment template ``FRAGMENTS/<name>.html`` rendered with ``context``, without
    the whitespace around it (its header comment's line break, its final newline)."""
    return mark_safe(render_to_string(f"{FRAGMENTS}{name}.html", dict(context)).strip())


#: Patterns made from fragment templates, by (name, fields, flags): (template, pattern).
_PATTERNS: dict[tuple[str, tuple[str, ...], tuple[str, ...]], tuple[Any, str]] = {}


def fragment_pattern(name: str, fields: Sequence[str], flags: Sequence[str] = ()) -> str:
    """The fragment ``FRAGMENTS/<name>.html`` rendered once with ``{field}`` placeholders
    for ``fields`` (and True for each of ``flags``): a ``str.format`` pattern of its HTML,
    for a fragment repeated thousands of times a page (each mark of the outcome strips).
    Fill it with escaped values (:func:`django.utils.html.escape`); such a template holds
    no literal braces. Made again when the template loader reloads the template."""
    key = (name, tuple(fields), tuple(flags))
    template = get_template(f"{FRAGMENTS}{name}.html")
    cached = _PATTERNS.get(key)
    if cached is None or cached[0] is not template:
        context = {f: mark_safe(f"{{{f}}}") for f in fields} | {f: True for f in flags}
        cached = _PATTERNS[key] = (template, template.render(context).strip())
    return cached[1]


def _zone(name: str | None) -> ZoneInfo:
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def is_utc(name: str | None) -> bool:
    """Whether the zone name ``name`` (None or empty: UTC) is one of UTC's names."""
    return (name or "UTC") in ("UTC", "Etc/UTC", "Etc/UCT", "UCT", "Universal", "Zulu")


def _wall(v: datetime) -> str:
    """``2027-06-01 10:00:00``, as ``strftime("%Y-%m-%d %H:%M:%S")`` writes it (the year
    unpadded), at half its cost: a list page formats a few thousand instants."""
    return f"{v.year}-{v.month:02d}-{v.day:02d} {v.hour:02d}:{v.minute:02d}:{v.second:02d}"


def fmt_utc(value: datetime | None) -> str:
    """``2027-06-01 10:00:00 UTC`` (or a dash)."""
    if value is None:
        return EMPTY
    return f"{_wall(value.astimezone(UTC))} UTC"


def fmt_zone(value: datetime, zone_name: str | None) -> str:
    """``2027-06-01 12:00:00 CEST``: the instant as read in the schedule's zone."""
    local = value.astimezone(_zone(zone_name))
    return f"{_wall(local)} {local.tzname()}"


def _relative(value: datetime, now: datetime) -> str:
    if value <= now:
        return f"{timesince(value, now)} ago" if (now - value).total_seconds() >= 60 else "now"
    return f"in {timeuntil(value, now)}" if (value - now).total_seconds() >= 60 else "now"


def plural(n: int, word: str = "schedule") -> str:
    """``1 schedule``, ``2 schedules``."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def names_listed(items: Sequence[str]) -> str:
    """``a; b; c``, at most :data:`MESSAGE_NAMES` of them, then ``; and N more``."""
    shown = "; ".join(items[:MESSAGE_NAMES])
    if len(items) > MESSAGE_NAMES:
        shown += f"; and {len(items) - MESSAGE_NAMES} more"
    return shown


def _clip(text: str, length: int) -> str:
    """``text`` cut to ``length`` characters, the last one "…" when it was longer (what
    ``Truncator(text).chars(length)`` gives, without its lazy object per call)."""
    return text if len(text) <= length else text[: length - 1] + "…"


def receipt_title(receipt: RunReceipt | ReceiptSummary, zone: str | None = None) -> str:
    """``#12 failed · <finished, in the schedule's zone and UTC> · <error>``."""
    finished = fmt_utc(receipt.finished_at)
    if not is_utc(zone) and receipt.finished_at is not None:
        finished = f"{fmt_zone(receipt.finished_at, zone)} ({finished})"
    title = f"#{receipt.occurrence} {receipt_label(receipt.status)} · {finished}"
    if receipt.error_type or receipt.error_message:
        error = ": ".join(p for p in (receipt.error_type, receipt.error_message) if p)
        title += f" · {_clip(error, 160)}"
    return title


def outcome_strip(
    receipts: Sequence[RunReceipt | ReceiptSummary],
    *,
    link: str | None = None,
    length: int = STRIP_LENGTH,
    large: bool = False,
    zone: str | None = None,
) -> SafeString:
    """The last ``length`` outcomes as coloured marks, oldest left, newest right.

    ``receipts`` are newest first (as fetched). Each mark has the status in its colour
    *and* in its title (hover) and accessible label; empty slots are outlined. ``link`` is a
    receipt change URL with ``{}`` where the receipt id goes.
    """
    recent = list(receipts[:length])
    counts: dict[str, int] = {}
    for r in recent:
        label = receipt_label(r.status)
        counts[label] = counts.get(label, 0) + 1
    summary = ", ".join(f"{n} {label}" for label, n in counts.items()) or "no runs yet"
    # A list page has 2,000 marks: each is its fragment's pattern filled in, not a
    # template rendered (a tenth of the time; the HTML stays in outcome_mark.html).
    linked = link is not None
    pattern = fragment_pattern(
        "outcome_mark", ("status", "url", "title"), ("linked",) if linked else ()
    )
    marks = mark_safe(
        "".join(
            pattern.format(
                status=html.escape(r.status),
                url=html.escape(link.replace("{}", str(r.pk))) if link else "",  # a UUID
                title=html.escape(receipt_title(r, zone)),
            )
            for r in reversed(recent)
        )
    )
    return render_fragment(
        "outcome_strip",
        {
            "large": large,
            "count": len(recent),
            "summary": summary,
            "empty_slots": range(length - len(recent)),
            "marks": marks,
        },
    )


def outcome_label(status: str, label: str | None = None) -> SafeString:
    """A coloured dot and the outcome's name (one per row of the run lists: its
    fragment's pattern filled in, :func:`fragment_pattern`)."""
    pattern = fragment_pattern("outcome_label", ("status", "label"))
    text = pattern.format(
        status=html.escape(status), label=html.escape(str(label or receipt_label(status)))
    )
    return mark_safe(text)


def status_badges(obj: Schedule) -> SafeString:
    """The status as a coloured badge, plus "running" (lease held), "degraded" and
    "late" (the occurrence it owes is past its deadline: :func:`deadline_now`). A row read
    with :meth:`~..models.queries.ScheduleQuerySet.with_running` also says which run, since
    when and on which worker ("#12.1 since 10:02:03 UTC on host-1:4242"; no query), and one
    read with its group (:func:`.changelist.attach_group_waits`) that its concurrency group
    holds back says so ("waiting for group reports (2 of 2 running)"). An
    ``overlap_policy="allow"`` schedule running occurrences (its row unleased) is running
    too: "running" then "2 of 3 occurrences; oldest #12.1 since ... on host-1:4242" (words
    that may wrap: the list fits 1280 px); one due while held at its ``max_parallel`` also
    "waiting: 2 of 2 running" (:func:`parallel_words`)."""
    deadline = deadline_now(obj)
    occurrences = annotated_occurrences(obj)
    counted, parallel_wait = parallel_words(obj, occurrences)
    return render_fragment(
        "status_badges",
        {
            "schedule": obj,
            "title": obj.pause_reason or obj.get_status_display(),
            "running": obj.lease_token is not None or occurrences > 0,
            "lease_until": fmt_utc(obj.lease_expires_at),
            "parallel_wait": parallel_wait,
            "since": "; ".join(w for w in (counted, running_since(obj)) if w),
            "late": deadline.late,
            "deadline_at": fmt_utc(deadline.deadline_at),
            "pause": pause_words(obj),
            "group_wait": obj.__dict__.get("dds_group_wait", ""),
        },
    )


def parallel_words(obj: Schedule, occurrences: int) -> tuple[str, str]:
    """The words beside the running badge and the wait badge of a schedule running
    ``occurrences`` occurrence leases (the ``running_occurrences`` annotation of
    :meth:`~..models.queries.ScheduleQuerySet.with_running`): ``("2 of 3 occurrences",
    "")``; ``("2 of 2 occurrences", "waiting: 2 of 2 running")`` when it is due, held at its
    ``max_parallel``, by the database clock its read annotated
    (:func:`..deadlines.read_now`; no wait badge without it). ``("", "")`` for a schedule
    running no occurrence (its row's lease, if any). Never queries."""
    if occurrences <= 0:
        return "", ""
    limit = obj.max_parallel or occurrences
    label = f"{occurrences} of {limit} occurrence{'' if limit == 1 else 's'}"
    now = read_now(obj)
    due = now is not None and obj.next_run_at is not None and obj.next_run_at <= now
    held = due and obj.lease_token is None and occurrences >= limit
    return label, f"waiting: {occurrences} of {limit} running" if held else ""


def pause_words(obj: Schedule) -> str:
    """Why a schedule paused by an operator (not degraded) is paused, and until when:
    ``"INC-42 · until 2026-12-03 18:00:00 UTC"``; ``""`` for any other schedule."""
    if obj.status != "paused" or obj.degraded_reason:
        return ""
    until = f"until {fmt_utc(obj.paused_until)}" if obj.paused_until else ""
    return " · ".join(p for p in (obj.pause_reason, until) if p)


def running_since(obj: Schedule) -> str:
    """``"#12.1 since 10:02:03 UTC on host-1:4242"`` for a schedule read with its open
    attempt (:func:`..running.annotated_running`; an ``allow`` schedule's oldest running
    occurrence), else ``""``."""
    run = annotated_running(obj)
    if run is None:
        return ""
    oldest = "oldest " if obj.lease_token is None and annotated_occurrences(obj) > 1 else ""
    when_ = fmt_time_utc(run.claimed_at)
    return f"{oldest}#{run.occurrence}.{run.attempt} since {when_} on {run.worker}"


def annotated_occurrences(obj: Schedule) -> int:
    """The ``running_occurrences`` annotation of
    :meth:`~..models.queries.ScheduleQuerySet.with_running` (0 without it). Never queries."""
    return int(getattr(obj, "running_occurrences", None) or 0)


def fmt_time_utc(value: datetime) -> str:
    """``10:02:03 UTC`` (the date too, ``2027-06-01 10:02:03 UTC``, when not today in UTC)."""
    value = value.astimezone(UTC)
    if value.date() == datetime.now(UTC).date():
        return f"{value:%H:%M:%S} UTC"
    return fmt_utc(value)


def fmt_duration(seconds: float | None) -> str:
    """A duration as people read it (:func:`..humanize.duration_words`; a dash for None)."""
    return duration_words(seconds, EMPTY)


def deadline_now(obj: Schedule) -> DeadlineState:
    """The deadline state of ``obj`` by the database clock its read annotated
    (:func:`..deadlines.with_open_slot`, the admin's queryset), else read now; free for a
    schedule without a deadline."""
    if obj.deadline_seconds is None:
        return DeadlineState()
    using = obj._state.db or "default"
    return deadline_state(obj, read_now(obj) or db_now(using), using)


def with_note(value: SafeString | str, note: str) -> SafeString:
    """``value`` (HTML when a ``SafeString``, else text) with ``note`` (text) on one line
    below it, cut with an ellipsis by the style sheet: a list column that holds a second,
    lesser column (the admin's lists fit 1280 px with the navigation sidebar open).
    ``value`` alone when there is no note."""
    shown = value if isinstance(value, SafeString) else html.escape(value)
    if not note:
        return mark_safe(shown)
    pattern = fragment_pattern("with_note", ("value", "note"))
    return mark_safe(pattern.format(value=shown, note=html.escape(note)))


def when(value: datetime | None, zone_name: str | None, *, now: datetime) -> SafeString:
    """An instant in the schedule's zone and, below it, in UTC (once if the zone is UTC)."""
    if value is None:
        return SafeString(EMPTY)  # a dash, no markup
    # Two or three per row of every list: the fragment's pattern filled in.
    hint = html.escape(f"{zone_name or 'UTC'} · {_relative(value, now)}")
    utc = html.escape(fmt_utc(value))
    if is_utc(zone_name):
        return mark_safe(fragment_pattern("when", ("hint", "utc")).format(hint=hint, utc=utc))
    local = html.escape(fmt_zone(value, zone_name))
    pattern = fragment_pattern("when", ("hint", "local", "utc"))
    return mark_safe(pattern.format(hint=hint, local=local, utc=utc))


def cadence(obj: Schedule) -> SafeString | str:
    """``every 5 minutes``; for cron the expression and its zone, with the expression in
    words below it (``At 09:00, Monday through Friday``, :func:`..cron_words.cron_in_words`);
    for rrule the rule and its zone, with the rule in words (:func:`..timing.rrule_description`);
    further specs (``extra_specs``) after the main one (:func:`..cron_words.schedule_in_words`)."""
    try:
        spec = obj.spec(exclusions=False)
        text = schedule_description(obj)
    except (timing.InvalidSchedule, ValueError, TypeError):
        return f"{obj.kind} schedule"
    words = schedule_in_words(obj)
    if not words:
        return text
    if business_in_words(obj):  # said once, in the words below (with the calendars)
        text = spec_words(spec)
    return render_fragment("cadence", {"text": text, "words": words})


def attempt_outcome(obj: RunAttempt) -> SafeString | str:
    """The outcome label of an attempt's receipt, or the "open" label while it has none."""
    try:
        receipt = obj.receipt
    except RunReceipt.DoesNotExist:
        return render_fragment("outcome_label", {"open": True})
    return outcome_label(receipt.status)


def safe_reverse(name: str, current_app: str) -> str | None:
    """``reverse(name)`` in the admin site ``current_app``, or None when it has no such URL
    (a custom site that does not register every model)."""
    try:
        return reverse(name, current_app=current_app)
    except NoReverseMatch:
        return None


def legend() -> list[SafeString]:
    """One outcome label per receipt status: the list page's legend of the strip."""
    return [outcome_label(value, label) for value, label in ReceiptStatus.choices]
