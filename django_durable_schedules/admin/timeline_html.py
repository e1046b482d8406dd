"""The admin timeline's repeated markup (issue #29): what :mod:`.timeline` draws thousands
of times a page, written with Python string joins rather than template loops. A bar is its
fragment (``fragments/timeline_bar.html``) filled in; a row's strip (the runs not drawn as
bars) is one ``<path>`` per outcome (all runs, and the failures over them), not a shape per
bucket; the text table of the runs (``fragments/timeline_run_row.html``) is written only
when the page is asked for it (``?table=1``). Every value is escaped (``html.escape``).

Geometry comes from :mod:`.timeline_geometry` (the buckets: :mod:`.timeline_density`) in
pixels of a plot :data:`PLOT_WIDTH` wide: the SVGs are as wide as the window allows and
carry no ``viewBox`` (text and strokes are never stretched), so a shape's across is written
as a percentage (:func:`pct`); a strip's paths sit in a nested ``<svg>`` whose ``viewBox``
is the plot's (a ``d`` attribute takes no percentages; stretching a fill is harmless).
"""

from __future__ import annotations

import functools
import operator
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape  # not Django's: lazy-wrapped, several times slower a value
from typing import Any
from uuid import UUID

from django.contrib.admin.utils import quote
from django.utils.safestring import SafeString, mark_safe

from .display import fragment_pattern
from .timeline_density import Column, bucket_frames
from .timeline_geometry import Axis, Bar, SlotMark

#: The plot's narrowest width (its ``min-width`` in ``timeline.css``: keep them equal), in
#: pixels: the geometry's width. The plot is drawn as wide as the window allows.
PLOT_WIDTH = 720

#: The pattern drawn over a bar of these marks (the others are outlines, in CSS).
PATTERNS = {"backfill": "hatch", "buffered": "dots", "deferred": "dots"}

#: A bar's fields in its fragment (``fragments/timeline_bar.html``; and ``pattern`` where
#: its mark has one) and a run's in the text table's row (``timeline_run_row.html``).
BAR_FIELDS = ("url", "pk", "title", "css", "x", "width")
RUN_FIELDS = ("url", "status", "started", "duration", "origin")
#: A tick's fields in its fragment (``fragments/timeline_tick.html``).
TICK_FIELDS = ("x", "title")


#: :func:`pct`'s texts by pixel: the geometry rounds to 0.1 px, so a page's few thousand
#: positions and widths are a few hundred values (busy rows run at the same times).
_PERCENTS: dict[float, str] = {}


def pct(px: float) -> str:
    """``px`` on a plot of :data:`PLOT_WIDTH` px as a percentage of the plot's width, for
    an SVG attribute (``"12.5"``; the template adds ``%``)."""
    text = _PERCENTS.get(px)
    if text is None:
        if len(_PERCENTS) > 50_000:  # never, on 0.1 px steps of a 720 px plot
            _PERCENTS.clear()
        text = _PERCENTS[px] = f"{px * 100 / PLOT_WIDTH:.3f}".rstrip("0").rstrip(".")
    return text


@dataclass(frozen=True)
class Fragments:
    """The patterns of the fragments a page repeats (:func:`.display.fragment_pattern`),
    looked up once a page: a bar, a bar with a pattern over it, a row of the text table, a
    tick, a struck tick and a schedule's row."""

    bar: str
    patterned_bar: str
    table_row: str
    tick: str
    struck_tick: str
    row: str

    @classmethod
    def load(cls) -> Fragments:
        return cls(
            bar=fragment_pattern("timeline_bar", BAR_FIELDS),
            patterned_bar=fragment_pattern("timeline_bar", (*BAR_FIELDS, "pattern")),
            table_row=fragment_pattern("timeline_run_row", ("name", *RUN_FIELDS)),
            tick=fragment_pattern("timeline_tick", TICK_FIELDS),
            struck_tick=fragment_pattern("timeline_tick", TICK_FIELDS, flags=("struck",)),
            row=fragment_pattern("timeline_row", ROW_FIELDS),
        )


def bar_context(bar: Bar, link: str | None) -> dict[str, Any]:
    """What the template reads of a bar: its geometry (across in percent: :func:`pct`) and
    words, its page's URL (``link``: "#" when not in this admin site), its classes and its
    pattern."""
    mark = f" dds-tl-m-{bar.mark}" if bar.mark else ""
    return {
        "pk": bar.pk,
        "x": pct(bar.x),
        "width": pct(bar.width),
        "title": bar.title,
        "status": bar.status,
        "started": bar.started,
        "duration": bar.duration,
        "origin": bar.origin,
        "url": link.format(quote(bar.pk)) if link else "#",
        "css": f"dds-tl-bar dds-tl-s-{bar.status}{mark}",
        "pattern": PATTERNS.get(bar.mark, ""),
    }


def band_html(columns: list[Column]) -> SafeString:
    """The density band over the rows (:func:`.timeline_density.density`: a hundred columns
    at most) as SVG: each column a group with its words in a ``<title>``, its runs and its
    failures (darker, at the bottom); across in percent (:func:`pct`), up in px."""
    parts = []
    for c in columns:
        x, width = pct(c.x), pct(c.width)
        parts.append(
            f'<g class="dds-tl-col"><title>{escape(c.title)}</title>'
            f'<rect class="dds-tl-col-runs" x="{x}%" y="{c.y}" width="{width}%" '
            f'height="{c.height}"/>'
        )
        if c.failures:
            parts.append(
                f'<rect class="dds-tl-col-failures" x="{x}%" y="{c.failure_y}" '
                f'width="{width}%" height="{c.failure_height}"/>'
            )
        parts.append("</g>")
    return mark_safe("".join(parts))


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


@functools.lru_cache(maxsize=16)
def _path_edges(axis: Axis, seconds: int, count: int, height: float) -> tuple[tuple[str, str], ...]:
    """The text of each bucket's column in a strip's path but its top: ``"M{x} "`` and
    ``"h{width}V{height}h-{width}z"``, the same for every row of a page."""
    return tuple(
        (f"M{left} ", f"h{width}V{height}h-{width}z")
        for left, width, _ in bucket_frames(axis, seconds, count)
    )


def strip_html(
    axis: Axis, counts: Sequence[tuple[int, int]], seconds: int, height: float, minutes: float
) -> SafeString:
    """A row's strip: its runs per bucket (``counts[i]``: ``(runs, failures)`` of bucket
    ``i`` of ``seconds``) as columns growing up from the bottom of a lane ``height`` px
    tall, heights relative to the row's busiest bucket: one ``<path>`` of all the columns
    and one of their failures (darker, at the bottom), each with a ``<title>`` summing it
    up (the count per bucket is in the text table, :func:`strip_table_html`). Empty when
    the row has no runs."""
    peak = max((runs for runs, _ in counts), default=0)
    if peak <= 0:
        return mark_safe("")
    frames = bucket_frames(axis, seconds, len(counts))
    edges = _path_edges(axis, seconds, len(counts), height)
    runs_d, failures_d = [], []
    total = failed = buckets = failed_buckets = 0
    busiest = ""
    tops: dict[tuple[int, int], tuple[str, str]] = {}  # a row's counts repeat: worked once
    for i, (runs, failures) in enumerate(counts):
        if runs <= 0:
            continue
        total += runs
        buckets += 1
        top = tops.get((runs, failures))
        if top is None:
            column = round(max(1.0, height * runs / peak), 1)
            part = round(column * min(failures, runs) / runs, 1)
            top = tops[(runs, failures)] = (
                f"{round(height - column, 1)}",
                f"{round(height - part, 1)}",
            )
        left, right = edges[i]
        runs_d.append(f"{left}{top[0]}{right}")
        if runs == peak and not busiest:
            busiest = frames[i][2]
        if failures:
            failed += failures
            failed_buckets += 1
            failures_d.append(f"{left}{top[1]}{right}")
    words = (
        f"runs per {minutes} min: {_plural(total, 'run')} in {_plural(buckets, 'bucket')},"
        f" at most {peak} ({escape(busiest)})"
    )
    parts = [
        f'<svg class="dds-tl-strip" width="100%" height="{height}" '
        f'viewBox="0 0 {PLOT_WIDTH} {height}" preserveAspectRatio="none">'
        f'<path class="dds-tl-heat" d="{"".join(runs_d)}"><title>{words}</title></path>'
    ]
    if failures_d:
        failed_words = f"failed: {_plural(failed, 'run')} in {_plural(failed_buckets, 'bucket')}"
        parts.append(
            f'<path class="dds-tl-heat-failed" d="{"".join(failures_d)}">'
            f"<title>{failed_words}</title></path>"
        )
    parts.append("</svg>")
    return mark_safe("".join(parts))


def strip_table_html(
    name: str, axis: Axis, counts: Sequence[tuple[int, int]], seconds: int, minutes: float
) -> SafeString:
    """A row's strip as text, for the table of runs: a table row listing the runs (and
    failures) of each bucket that has any."""
    frames = bucket_frames(axis, seconds, len(counts))
    cells = [
        f"{escape(span)}: {runs}{f' ({failures} failed)' if failures else ''}"
        for (runs, failures), (_, _, span) in zip(counts, frames, strict=True)
        if runs > 0
    ]
    if not cells:
        return mark_safe("")
    return mark_safe(
        f'<tr class="dds-tl-buckets"><td>{escape(name)}</td><td colspan="4">'
        f"runs per {minutes} min: {'; '.join(cells)}</td></tr>"
    )


def ticks_html(ticks: list[SlotMark], frags: Fragments) -> SafeString:
    """A row's future slots (:func:`.timeline_geometry.slot_marks`) as SVG: their fragment
    filled in once a tick, every value escaped."""
    return mark_safe(
        "".join(
            (frags.struck_tick if t.struck else frags.tick).format(
                x=pct(t.x), title=escape(t.title)
            )
            for t in ticks
        )
    )


def bars_html(drawn: list[Bar], link: str | None, frags: Fragments) -> SafeString:
    """A row's bars as SVG, each linking to its receipt (``link``, a pattern of the
    receipt's URL; "#" when receipts are not in this admin site): their fragment filled in
    once a bar (:func:`.display.fragment_pattern`, made a ``%`` pattern: :func:`positional`);
    what a template loop over thousands of bars would render, in a fraction of its time.
    Escaped: the words, the classes (the receipt's status), the URL pattern once and each
    id (quoted by the admin's ``quote`` for the URL); the place is numbers written by
    :func:`pct`. The running bar's SVG is the template's own (one a row at most)."""
    plain, plain_fill = positional(frags.bar, BAR_FIELDS)
    patterned, patterned_fill = positional(frags.patterned_bar, (*BAR_FIELDS, "pattern"))
    url = escape(link) if link else ""
    prefix, _, suffix = url.partition("{}")
    classes: dict[tuple[str, str], str] = {}
    svg = []
    for bar in drawn:
        if type(bar.pk) is UUID:  # hex and dashes: nothing to quote or escape
            pk = quoted = str(bar.pk)
        else:
            raw = str(bar.pk)
            pk, quoted = escape(raw), escape(quote(raw))
        kind = (bar.status, bar.mark)
        css = classes.get(kind)
        if css is None:
            mark = f" dds-tl-m-{bar.mark}" if bar.mark else ""
            css = classes[kind] = escape(f"dds-tl-bar dds-tl-s-{bar.status}{mark}")
        href = f"{prefix}{quoted}{suffix}" if url else "#"
        pattern = PATTERNS.get(bar.mark)
        values = (href, pk, escape(bar.title), css, pct(bar.x), pct(bar.width))
        if pattern:
            svg.append(patterned % patterned_fill((*values, pattern)))
        else:
            svg.append(plain % plain_fill(values))
    return mark_safe("".join(svg))


@functools.lru_cache(maxsize=16)
def positional(
    pattern: str, fields: tuple[str, ...]
) -> tuple[str, Callable[[tuple[str, ...]], tuple[str, ...]]]:
    """A ``str.format`` pattern with named fields (:func:`.display.fragment_pattern`) as a
    ``%`` pattern, and what puts a tuple of the values of ``fields`` (in that order) in the
    pattern's order: ``pattern % fill(values)``, without a dict of keywords a value
    (thousands a page). Each field of the pattern is one of ``fields`` (``ValueError``
    otherwise); a field may appear more than once."""
    parts, where = [], []
    for literal, field, _, _ in string.Formatter().parse(pattern):
        parts.append(literal.replace("%", "%%"))
        if field is not None:
            parts.append("%s")
            where.append(fields.index(field))
    pick = operator.itemgetter(*where) if len(where) > 1 else (lambda v: (v[where[0]],))
    return "".join(parts), pick


def runs_table_html(
    name: str,
    drawn: list[Bar],
    link: str | None,
    running: dict[str, Any] | None,
    frags: Fragments,
) -> SafeString:
    """A row's runs drawn (and its ``running`` attempt, a :func:`bar_context`, last) as
    rows of the page's text table (:data:`RUN_FIELDS`), every value escaped."""
    escaped_name, row = escape(name), frags.table_row
    table = [
        row.format(
            name=escaped_name,
            url=escape(link.format(quote(str(bar.pk)))) if link else "#",
            status=escape(bar.status),
            started=escape(bar.started),
            duration=escape(bar.duration),
            origin=escape(bar.origin),
        )
        for bar in drawn
    ]
    if running:
        values = {f: escape(str(running[f])) for f in RUN_FIELDS}
        table.append(row.format(name=escaped_name, **values))
    return mark_safe("\n".join(table))


def grid_html(labels: list[dict[str, Any]], height: float) -> SafeString:
    """The vertical lines of the axis labels (``x``: :func:`pct`) across a row ``height``
    px tall: the same for every row, written once a page."""
    return mark_safe(
        "".join(
            f'<line class="dds-tl-grid" x1="{lab["x"]}%" x2="{lab["x"]}%" y1="0" y2="{height}"/>'
            for lab in labels
        )
    )


#: A row's fields in its fragment (``fragments/timeline_row.html``).
ROW_FIELDS = (
    "name", "total", "url", "words", "running_note", "height", "label", "strip", "grid",
    "bars", "running", "ticks", "now", "note",
)  # fmt: skip


def row_html(row: dict[str, Any], page: dict[str, Any], frags: Fragments) -> SafeString:
    """A schedule's row of the timeline (``row``: what :func:`.timeline._row` returns; its
    SVG parts already written) filled into its fragment (:data:`ROW_FIELDS`), every word
    escaped. ``page``: the parts every row shares, ``grid`` (:func:`grid_html`), ``now_x``
    (:func:`pct`, or None off the axis), ``height`` (px), ``alone`` (False on a one-schedule
    timeline: no "only" link) and ``range`` (the named range, or "")."""
    schedule, total, failures, hidden = (
        row["schedule"],
        row["total"],
        row["failures"],
        row["hidden"],
    )
    name = escape(schedule.name)
    words = [f"{escape(schedule.status)} · " if schedule.status != "active" else ""]
    words.append(f"{total} run{'s' if total != 1 else ''}")
    if failures:
        words.append(f', <span class="dds-tl-failed-count">{failures} failed</span>')
    if hidden:
        words.append(f' · <span class="dds-tl-more">{hidden} more</span>')
    if page["alone"]:
        more = f"&amp;range={escape(page['range'])}" if page["range"] else ""
        words.append(
            f' · <a href="{escape(row["only_url"])}{more}" '
            f'aria-label="timeline of {name} alone">only</a>'
        )
    running, running_note, running_svg = row["running"], "", ""
    if running:
        running_note = (
            f'<span class="dds-note dds-tl-running-note">{escape(running["note"])}</span>'
        )
        running_svg = (
            f'<a href="{escape(running["url"])}" class="dds-tl-link dds-tl-running-link" '
            f'data-attempt="{escape(str(running["pk"]))}"><title>{escape(running["title"])}'
            f'</title><rect class="{escape(running["css"])}" x="{running["x"]}%" y="5" '
            f'width="{running["width"]}%" height="12"/></a>'
        )
    height, now_x = page["height"], page["now_x"]
    now = (
        f'<line class="dds-tl-now" x1="{now_x}%" x2="{now_x}%" y1="0" y2="{height}"/>'
        if now_x is not None
        else ""
    )
    note = ""
    if row["note"]:
        note = f'<span class="dds-note dds-tl-row-note">{escape(row["note"])}</span>'
    elif row["slots_more"]:
        note = '<span class="dds-note dds-tl-row-note">more slots ahead than shown</span>'
    pattern, fill = positional(frags.row, ROW_FIELDS)
    values = (
        name, str(total), escape(str(row["url"])), "".join(words), running_note, str(height),
        escape(row["label"]), row["strip_svg"], page["grid"], row["bars_svg"], running_svg,
        row["ticks_svg"], now, note,
    )  # fmt: skip
    return mark_safe(pattern % fill(values))
