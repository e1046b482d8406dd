"""The admin timeline's geometry, pure (no database, no Django): where each run's bar, each
future slot's tick and each axis label goes on a row of a given width in pixels, and the
words of their tooltips (the density band's columns: :mod:`.timeline_density`).
:mod:`.timeline` reads the rows and renders what these functions return in
``durable_schedules/admin/timeline.html``.

Instants are aware datetimes; x positions and widths are pixels from the left edge of the
plot (floats rounded to 0.1 px), never outside ``[0, axis.width]``.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple, Protocol

from ..humanize import duration_words
from .display import fmt_utc

#: The narrowest bar drawn, in pixels (a run of a few milliseconds stays visible and
#: clickable).
MIN_BAR_PX = 3.0
#: Origins drawn with a mark of their own (a pattern or an outline; "retry" is an attempt
#: after the first, whatever its origin).
MARKED_ORIGINS = ("retry", "backfill", "triggered", "rerun", "buffered", "deferred")
#: Spacing of the axis labels, the first that gives at most :data:`MAX_LABELS` of them.
_H, _D = 3600, 86400
LABEL_STEPS = tuple(
    timedelta(seconds=s)
    for s in (60, 300, 900, 1800, _H, 3 * _H, 6 * _H, 12 * _H, _D, 2 * _D, 7 * _D, 14 * _D, 30 * _D)
)
MAX_LABELS = 12


@dataclass(frozen=True)
class Axis:
    """The time axis of a plot ``width`` pixels wide, from ``start`` to ``end`` (aware,
    ``start < end``), with ``now`` (past on its left, future on its right)."""

    start: datetime
    end: datetime
    now: datetime
    width: float

    def __post_init__(self) -> None:
        if self.start.tzinfo is None or self.end.tzinfo is None or self.now.tzinfo is None:
            raise ValueError("the axis takes aware datetimes")
        if not self.start < self.end:
            raise ValueError("the axis needs start < end")
        if not self.width > 0:
            raise ValueError("the axis needs a positive width")

    @functools.cached_property
    def seconds(self) -> float:
        """The span in seconds."""
        return (self.end - self.start).total_seconds()

    @functools.cached_property
    def _scale(self) -> float:
        return self.width / self.seconds

    def x(self, at: datetime) -> float:
        """``at``'s position in pixels, clamped to the plot (thousands a page)."""
        offset = (at - self.start).total_seconds() * self._scale
        return round(min(max(offset, 0.0), self.width), 1)

    def contains(self, at: datetime) -> bool:
        """Whether ``at`` is on the axis (both ends included)."""
        return self.start <= at <= self.end


class RunInput(NamedTuple):
    """A finished run as :func:`bars` takes it (the fields of
    :class:`..db.timeline.TimelineRun` it reads; that row itself is taken as it is). A named
    tuple: a page builds thousands."""

    pk: Any
    status: str
    started_at: datetime | None
    claimed_at: datetime | None
    finished_at: datetime
    attempt: int = 1
    origin: str = "scheduled"
    forced: bool = False


class RunLike(Protocol):
    """What :func:`bars` reads of a run: :class:`RunInput`, or the database's row
    (:class:`..db.timeline.TimelineRun`)."""

    @property
    def pk(self) -> Any: ...
    @property
    def status(self) -> str: ...
    @property
    def started_at(self) -> datetime | None: ...
    @property
    def claimed_at(self) -> datetime | None: ...
    @property
    def finished_at(self) -> datetime: ...
    @property
    def attempt(self) -> int: ...
    @property
    def origin(self) -> str: ...
    @property
    def forced(self) -> bool: ...


class Bar(NamedTuple):
    """A run's bar: ``x``, ``width`` (px, at least :data:`MIN_BAR_PX` unless the plot is
    narrower), ``status`` (the receipt's), ``mark`` (one of :data:`MARKED_ORIGINS`, or
    ""), ``title`` (the tooltip: status, start, duration, origin) and ``pk`` (the
    receipt's). A named tuple: a page builds thousands."""

    pk: Any
    x: float
    width: float
    status: str
    mark: str
    title: str
    started: str
    duration: str
    origin: str


def fmt_instant(at: datetime) -> str:
    """``at`` in UTC to the second: ``"2027-06-01 10:00:05 UTC"`` (as :func:`.display.fmt_utc`
    writes it from the year 1000 on: ``isoformat``, one compiled call, thousands a page)."""
    if at.year < 1000:  # isoformat pads the year; strftime and fmt_utc do not
        return fmt_utc(at)
    return f"{at.astimezone(UTC).isoformat(' ', 'seconds')[:19]} UTC"


def fmt_duration(seconds: float | None) -> str:
    """A duration as the timeline says it (:func:`..humanize.duration_words`, short):
    ``"0.25 s"``, ``"42 s"``, ``"3 min 04 s"``, ``"2 h 05 min"``; ``"not run"`` for None
    (the callback never started)."""
    return duration_words(seconds, NOT_RUN, short=True)


#: A duration's words for a run whose callback never started.
NOT_RUN = "not run"


@functools.lru_cache(maxsize=256)
def origin_mark(origin: str, attempt: int) -> str:
    """The mark a run's bar gets: ``"retry"`` for an attempt after the first, else its
    origin when it is one of :data:`MARKED_ORIGINS`, else "" (a scheduled first try)."""
    if attempt > 1:
        return "retry"
    return origin if origin in MARKED_ORIGINS else ""


@functools.lru_cache(maxsize=256)
def origin_words(origin: str, attempt: int, forced: bool = False) -> str:
    """The origin as a tooltip says it: ``"scheduled"``, ``"retry (attempt 2), triggered"``,
    ``"rerun (forced)"``."""
    words = origin or "scheduled"
    if attempt > 1:
        words = f"retry (attempt {attempt}), {words}"
    return f"{words} (forced)" if forced else words


def _span(axis: Axis, run: RunLike, min_width: float) -> tuple[float, float, datetime]:
    """``(left, width, began)`` of ``run``'s bar (see :func:`bar_of`)."""
    finished = run.finished_at
    began = run.started_at or run.claimed_at or finished
    if began > finished:  # two clocks' estimates: never a negative bar
        began = finished
    left, right = axis.x(began), axis.x(finished)
    width = max(right - left, min(min_width, axis.width))
    return min(left, axis.width - width), width, began


def bar_of(
    axis: Axis,
    run: RunLike,
    min_width: float = MIN_BAR_PX,
    span: tuple[float, float, datetime] | None = None,
) -> Bar:
    """The bar of one run: from ``started_at`` (else ``claimed_at``, else ``finished_at``)
    to ``finished_at``, clipped to the axis, at least ``min_width`` wide (kept inside the
    plot: a run that ends at the right edge grows leftwards). ``span``: its ``(left,
    width, began)`` where the caller has worked it out already."""
    left, width, began = span or _span(axis, run, min_width)
    started_at = run.started_at
    took = (
        fmt_duration((run.finished_at - started_at).total_seconds())
        if started_at is not None
        else NOT_RUN
    )
    started = fmt_instant(began)
    origin = origin_words(run.origin, run.attempt, run.forced)
    status = run.status
    return Bar(
        run.pk,
        round(left, 1),
        round(width, 1),
        status,
        origin_mark(run.origin, run.attempt),
        f"{status} · started {started} · {took} · {origin}",
        started,
        took,
        origin,
    )


_BY_FINISH = operator.attrgetter("finished_at", "pk")

#: How much of a bar must show beside the newer bars drawn over it (px) for it to be
#: drawn: a bar hidden under newer ones could be neither seen nor pointed at.
VISIBLE_PX = 1.0


def bars(axis: Axis, runs: Iterable[RunLike], min_width: float = MIN_BAR_PX) -> list[Bar]:
    """The bars of ``runs`` (:func:`bar_of`), oldest first (a later bar is drawn over an
    earlier one), leaving out each bar of which less than :data:`VISIBLE_PX` would show
    beside the newer ones (many runs on few pixels: a busy schedule over 7 days); the
    row's strip counts them."""
    ordered = sorted(runs, key=_BY_FINISH)
    kept: list[tuple[RunLike, tuple[float, float, datetime]]] = []
    covered_from = math.inf  # the leftmost edge of the newer bars kept so far
    # _span inlined (thousands a page): the same arithmetic as axis.x, one call fewer each.
    start, scale, plot = axis.start, axis._scale, axis.width
    narrowest = min(min_width, plot)
    for run in reversed(ordered):
        finished = run.finished_at
        began = run.started_at or run.claimed_at or finished
        if began > finished:  # two clocks' estimates: never a negative bar
            began = finished
        left = (began - start).total_seconds() * scale
        left = round(0.0 if left < 0.0 else plot if left > plot else left, 1)
        right = (finished - start).total_seconds() * scale
        right = round(0.0 if right < 0.0 else plot if right > plot else right, 1)
        width = right - left
        if width < narrowest:
            width = narrowest
        if left > plot - width:
            left = plot - width
        if (covered_from if covered_from < left + width else left + width) - left >= VISIBLE_PX:
            kept.append((run, (left, width, began)))
            if left < covered_from:
                covered_from = left
    return [bar_of(axis, r, min_width, span) for r, span in reversed(kept)]


@dataclass(frozen=True)
class RunningInput:
    """An attempt still in flight (claimed, no receipt yet) as :func:`running_bar` takes
    it: the attempt's ``pk``, ``claimed_at`` (since when it runs), number, origin, the
    ``worker`` holding its lease and when that lease expires (None: not known)."""

    pk: Any
    claimed_at: datetime
    attempt: int = 1
    origin: str = "scheduled"
    worker: str = ""
    lease_expires_at: datetime | None = None


#: The status of a running attempt's bar (no receipt's status is spelled so).
RUNNING = "running"


def running_bar(axis: Axis, run: RunningInput, min_width: float = MIN_BAR_PX) -> Bar | None:
    """The bar of an attempt in flight: from its claim to ``axis.now`` (the database
    clock), clipped to the axis and at least ``min_width`` wide like :func:`bar_of`; its
    ``status`` is :data:`RUNNING` and its words say since when it runs and for how long so
    far (and when its lease expired, if it did: no worker renews it). None when the run
    lies outside the axis (a range that ends before its claim or begins after now)."""
    now = max(axis.now, run.claimed_at)  # two clocks' estimates: never a negative bar
    if run.claimed_at > axis.end or now < axis.start:
        return None
    left, right = axis.x(run.claimed_at), axis.x(now)
    width = max(right - left, min(min_width, axis.width))
    left = min(left, axis.width - width)
    since = fmt_instant(run.claimed_at)
    took = f"{fmt_duration((now - run.claimed_at).total_seconds())} so far"
    origin = origin_words(run.origin, run.attempt)
    title = f"{RUNNING} since {since} · {took} · {origin}"
    if run.worker:
        title += f" · on {run.worker}"
    if run.lease_expires_at is not None and run.lease_expires_at < axis.now:
        title += f" · lease expired {fmt_instant(run.lease_expires_at)}, not renewed"
    return Bar(
        pk=run.pk,
        x=round(left, 1),
        width=round(width, 1),
        status=RUNNING,
        mark=origin_mark(run.origin, run.attempt),
        title=title,
        started=since,
        duration=took,
        origin=origin,
    )


@dataclass(frozen=True)
class SlotMark:
    """A future slot's tick: ``x``, whether it fires (``struck``: False) or is left out
    (excluded by a calendar or inside a blackout window: ``struck`` True, ``why`` says
    which), and its ``title``."""

    x: float
    struck: bool
    why: str
    title: str

    @property
    def left(self) -> float:
        """The left end of the strike through a struck tick (px)."""
        return round(self.x - 4, 1)

    @property
    def right(self) -> float:
        """The right end of the strike through a struck tick (px)."""
        return round(self.x + 4, 1)


def slot_marks(axis: Axis, slots: Iterable[tuple[datetime, str]]) -> list[SlotMark]:
    """The ticks of ``slots`` (``(at, why_not)``: ``why_not`` "" for a slot that fires) that
    lie on the axis, in time order."""
    marks = []
    for at, why in sorted(slots, key=lambda s: s[0]):
        if not axis.contains(at):
            continue
        title = f"next slot {fmt_instant(at)}" if not why else f"{fmt_instant(at)}: not run, {why}"
        marks.append(SlotMark(x=axis.x(at), struck=bool(why), why=why, title=title))
    return marks


@dataclass(frozen=True)
class Label:
    """An axis label: ``x`` and ``text`` (``"06:00"``, or ``"Jun 02"`` at midnight UTC and
    for day steps)."""

    x: float
    text: str


def axis_labels(axis: Axis, max_labels: int = MAX_LABELS) -> list[Label]:
    """Labels at round UTC instants, spaced by the first of :data:`LABEL_STEPS` that gives
    at most ``max_labels`` of them."""
    step = next(
        (s for s in LABEL_STEPS if axis.seconds / s.total_seconds() <= max_labels),
        LABEL_STEPS[-1],
    )
    size = int(step.total_seconds())
    first = math.ceil(axis.start.timestamp() / size) * size
    labels = []
    at_seconds = first
    while at_seconds <= axis.end.timestamp():
        at = datetime.fromtimestamp(at_seconds, tz=UTC)
        daily = size >= 86400 or (at.hour == 0 and at.minute == 0)
        labels.append(Label(axis.x(at), at.strftime("%b %d") if daily else at.strftime("%H:%M")))
        at_seconds += size
    return labels
