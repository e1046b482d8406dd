"""Calendar rules expanded by python-dateutil, bounded: the grid of a rule (its BYxxx parts
with every default from DTSTART explicit), restart points on that grid, and the cached,
bounded expansions (``(local time, instant)`` pairs) the searches of :mod:`.rrule` walk.

- Restarting: a period's set does not depend on where in the period dateutil starts
  (except a weekly BYSETPOS, and a SECONDLY grid), so an expansion may start at the local
  time a search needs, which keeps it short; rules whose grid does not depend on DTSTART
  (INTERVAL=1) share one grid, and so their cached expansions.
- Bounded: every expansion runs moved by whole 400-year Gregorian cycles (the calendar,
  weekdays included, repeats every 400 years) into dateutil's last years, so that the end
  of its calendar (year 9999) stops a rule that never matches within at most 400 years of
  walking; a walk gives up :data:`HORIZON_YEARS` after its start.
- Budgeted: dateutil examines at most :data:`..limits.RRULE_PLAN_MAX_STEPS` candidate
  times between two occurrences (counted by :class:`_MeteredRule`, deterministic), else
  :class:`.errors.PlanningBudgetExceeded`. A HOURLY, MINUTELY or SECONDLY rule makes
  dateutil step through the hours, minutes or seconds of every day between two matching
  days (``FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO;BYHOUR=23;BYMINUTE=59;BYSECOND=59``:
  86,400 steps a day for 28 years, minutes of work); coarser rules step a day at a time
  and stay within the 400-year window (at most 146,097 days).
- Local times become instants by RFC 5545 §3.3.5 (:func:`local_instant`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from dateutil import rrule as du

from ..limits import RRULE_PLAN_MAX_STEPS
from .errors import InvalidSchedule, PlanningBudgetExceeded
from .instants import MAX_YEAR, SECOND, UTC
from .rrule_syntax import FREQS, RuleParts
from .zones import zone_info

#: Occurrences expanded per cached run of the rule (a search asks for as many as it needs).
_RUN = 8
#: Years after which a search without an occurrence gives up (one Gregorian cycle).
HORIZON_YEARS = 400
CYCLE_YEARS = 400  # the Gregorian calendar (weekdays included) repeats every 400 years
DATEUTIL_LAST_YEAR = 9999


#: The grid origin shared by the rules it does not change (INTERVAL=1, no weekly BYSETPOS):
#: their expansions are cached once for every DTSTART after it (a Monday).
_SHARED_ORIGIN = datetime(1900, 1, 1)


@dataclass(frozen=True, eq=False)  # identity hash: grids are cached per (rule, zone, origin)
class _Grid:
    """What dateutil expands: the rule with every default made explicit, from ``origin``,
    the start of its grid of periods (DTSTART, or :data:`_SHARED_ORIGIN` when the grid
    does not depend on it)."""

    tz: ZoneInfo
    freq: Any  # dateutil's constant: YEARLY 0 ... SECONDLY 6
    interval: int
    wkst: int
    weekly_setpos: bool  # a weekly BYSETPOS: its set depends on where the week starts
    kwargs: tuple[tuple[str, Any], ...]  # every BYxxx part, defaulted from DTSTART
    origin: datetime  # naive local

    def rule(self, anchor: datetime) -> _MeteredRule:
        """dateutil's rule started at ``anchor`` (a restart point of the grid), metered."""
        return _MeteredRule(self.freq, dtstart=anchor, interval=self.interval, **dict(self.kwargs))


#: What one step of dateutil's walk costs beyond the candidate values it examines, in the
#: same units (measured: a step's fixed cost is about seven candidate values' worth).
_STEP_COST = 7


class _OverBudget(Exception):
    """Raised inside dateutil's walk by :class:`_MeteredRule` (turned into
    :class:`.errors.PlanningBudgetExceeded` with the rule's place by :func:`grid_run`)."""


class _MeteredRule(du.rrule):
    """dateutil's rule, counting the work of its HOURLY, MINUTELY and SECONDLY steps
    (``steps``: each candidate value examined, plus :data:`_STEP_COST` a step) and stopping its walk (:class:`_OverBudget`) when more than
    :data:`RRULE_PLAN_MAX_STEPS` of them pass without an occurrence (``mark``: ``steps``
    at the last one, set by the caller). Every such step goes through dateutil's
    ``__mod_distance`` once the FREQ's own BYxxx set is given (:func:`_dateutil_parts`
    always gives it); the one here is dateutil's, counted."""

    steps = 0
    mark = 0

    def _rrule__mod_distance(self, value: int, byxxx: Any, base: int) -> tuple[int, int] | None:
        interval = self._interval  # type: ignore[attr-defined]
        accumulator = 0
        found: tuple[int, int] | None = None
        examined = 0
        for _ in range(base):
            examined += 1
            div, value = divmod(value + interval, base)
            accumulator += div
            if value in byxxx:
                found = (accumulator, value)
                break
        self.steps += examined + _STEP_COST
        if self.steps - self.mark > RRULE_PLAN_MAX_STEPS:
            raise _OverBudget
        return found


@dataclass(frozen=True, eq=False)  # identity hash: plans are cached per (rule, zone, start)
class RulePlan:
    """A calendar rule compiled for one zone from one DTSTART (naive local): its parts, the
    zone and the grid its occurrences are read from (see :func:`.rrule.cached_rule_plan`)."""

    parts: RuleParts
    tz: ZoneInfo
    zone: str
    dtstart: datetime  # naive local
    grid: _Grid


def rule_grid(full: RuleParts, zone: str, dtstart: datetime) -> _Grid:
    """The grid of a defaulted rule from ``dtstart``: shared by every DTSTART after
    :data:`_SHARED_ORIGIN` when INTERVAL is 1 (no weekly BYSETPOS), so that schedules with
    one rule share its cached expansions."""
    weekly_setpos = full.freq == "WEEKLY" and bool(full.bysetpos)
    shared = full.interval == 1 and not weekly_setpos and dtstart >= _SHARED_ORIGIN
    return cached_grid(full, zone, _SHARED_ORIGIN if shared else dtstart)


@functools.lru_cache(maxsize=1024)
def cached_grid(full: RuleParts, zone: str, origin: datetime) -> _Grid:
    """The grid of ``full`` in ``zone`` from the naive local ``origin``, cached (see
    :func:`rule_grid`, which chooses the origin)."""
    freq = FREQS.index(full.freq)  # dateutil numbers them in this order
    weekly_setpos = freq == du.WEEKLY and bool(full.bysetpos)
    kwargs = _dateutil_parts(full)
    return _Grid(zone_info(zone), freq, full.interval, full.wkst, weekly_setpos, kwargs, origin)


def _dateutil_parts(parts: RuleParts) -> tuple[tuple[str, Any], ...]:
    """The BYxxx parts of a defaulted rule (:func:`.rrule_syntax.with_defaults`) as
    dateutil's keyword arguments: with every default explicit, the rule can be restarted
    anywhere on its grid without changing it."""
    weekdays = tuple(du.weekday(d, n or None) for n, d in parts.byday)
    # The FREQ's own level, when the rule leaves it open, as every value (the same rule):
    # then each step of dateutil's walk is one counted by _MeteredRule.
    every = {"HOURLY": ("byhour", 24), "MINUTELY": ("byminute", 60), "SECONDLY": ("bysecond", 60)}
    own, size = every.get(parts.freq, ("", 0))
    values: dict[str, Any] = {
        "bymonth": parts.bymonth,
        "byweekno": parts.byweekno,
        "byyearday": parts.byyearday,
        "bymonthday": parts.bymonthday,
        "byweekday": weekdays,
        "byhour": parts.byhour,
        "byminute": parts.byminute,
        "bysecond": parts.bysecond,
        "bysetpos": parts.bysetpos,
    }
    if own and not values[own]:
        values[own] = tuple(range(size))
    return (("wkst", parts.wkst),) + tuple((k, v or None) for k, v in values.items())


def local_instant(naive: datetime, tz: ZoneInfo) -> datetime:
    """RFC 5545 §3.3.5: the instant of a local time; in a gap with the offset before the
    gap, in an overlap the first occurrence (both are ``fold=0`` under PEP 495)."""
    return naive.replace(tzinfo=tz, fold=0).astimezone(UTC)


def local_reading(instant: datetime, tz: ZoneInfo) -> datetime:
    """The naive local time ``tz`` reads at the aware ``instant`` (the inverse of
    :func:`local_instant` outside gaps and second readings)."""
    return instant.astimezone(tz).replace(tzinfo=None, fold=0)


def _add_months(day: date, months: int) -> date:
    index = day.year * 12 + day.month - 1 + months
    return date(index // 12, index % 12 + 1, 1)


def _period(grid: _Grid, naive: datetime) -> tuple[datetime, datetime, datetime]:
    """``(start, end, next start)`` of the period of the grid (FREQ x INTERVAL counted from
    its origin, RFC 5545 §3.3.10) that starts at or before the local ``naive`` (after the
    origin)."""
    ds, step, freq = grid.origin, grid.interval, grid.freq
    if freq >= du.HOURLY:
        unit = timedelta(seconds={du.HOURLY: 3600, du.MINUTELY: 60, du.SECONDLY: 1}[freq])
        base = ds.replace(minute=0, second=0) if freq == du.HOURLY else ds
        base = base.replace(second=0) if freq == du.MINUTELY else base
        start = base + unit * step * ((naive - base) // unit // step)
        return start, start + unit, start + unit * step
    day = naive.date()
    if freq in (du.DAILY, du.WEEKLY):
        days = 1 if freq == du.DAILY else 7
        first = ds.date() - timedelta(days=(ds.weekday() - grid.wkst) % 7 if days == 7 else 0)
        begin = first + timedelta(days=days * step * ((day - first).days // days // step))
        ends = (begin + timedelta(days=days), begin + timedelta(days=days * step))
    else:
        months = 12 if freq == du.YEARLY else 1
        first = date(ds.year, ds.month if freq == du.MONTHLY else 1, 1)
        elapsed = (day.year - first.year) * 12 + day.month - first.month
        begin = _add_months(first, months * step * (elapsed // (months * step)))
        ends = (_add_months(begin, months), _add_months(begin, months * step))
    midnight = time()
    return (
        datetime.combine(begin, midnight),
        datetime.combine(ends[0], midnight),
        datetime.combine(ends[1], midnight),
    )


def _anchor(grid: _Grid, naive: datetime) -> datetime:
    """Where to start dateutil so that it yields exactly the occurrences at or after the
    local ``naive``: ``naive`` itself inside a period of the grid (a period's set does not
    depend on where in it the expansion starts), the next period's start between periods;
    the period's start for a weekly BYSETPOS (a partial week would change its set) and a
    SECONDLY grid (dateutil takes the first second from its start)."""
    ds = grid.origin
    if naive <= ds:
        return ds
    start, end, following = _period(grid, naive)
    if naive >= end:
        return following
    if grid.freq == du.SECONDLY or grid.weekly_setpos:
        return max(start, ds)
    return naive


def _shift_years(anchor: datetime) -> int:
    """Whole 400-year cycles that move ``anchor`` into dateutil's last years, at least one
    whole year before its end (year 9999)."""
    return CYCLE_YEARS * max(0, (DATEUTIL_LAST_YEAR - 1 - anchor.year) // CYCLE_YEARS)


def over_budget(start: datetime) -> PlanningBudgetExceeded:
    """The error of a rule whose walk from the local time ``start`` examined more than
    :data:`RRULE_PLAN_MAX_STEPS` candidate times without an occurrence."""
    return PlanningBudgetExceeded(
        "rrule",
        f"planning the rule took more than {RRULE_PLAN_MAX_STEPS:,} steps between two "
        f"occurrences (searching from {start:%Y-%m-%d %H:%M:%S} local time): its FREQ steps "
        "through every hour, minute or second of the days between matching days; write it "
        "with FREQ=DAILY (or coarser) and BYHOUR/BYMINUTE/BYSECOND for the times",
    )


@dataclass(frozen=True)
class _Run:
    """What one expansion of the rule found: ``items`` (``(local time, instant)``), where
    to go on (``stopped``: None after a full run, else the end of the window it ran out
    of), and its cost in candidate times examined: ``lead`` before its first occurrence
    (all of it without one), ``trail`` after its last."""

    items: tuple[tuple[datetime, datetime], ...]
    stopped: datetime | None
    lead: int
    trail: int


@functools.lru_cache(maxsize=4096)
def grid_run(grid: _Grid, anchor: datetime, size: int = _RUN) -> _Run:
    """Up to ``size`` occurrences from ``anchor`` as ``(local time, instant)`` in local
    order (a weekly BYSETPOS: at least its first week), and where to go on: None after a
    full run (from the last local time), else the end of the window it ran out of.
    The rule runs moved by whole 400-year cycles, so that dateutil stops at the end of its
    calendar: a rule that never matches costs at most one window (at most 400 years).
    Raises :class:`.errors.PlanningBudgetExceeded` when more than
    :data:`RRULE_PLAN_MAX_STEPS` candidate times pass between two occurrences of the run."""
    shift = _shift_years(anchor)
    end = datetime(DATEUTIL_LAST_YEAR + 1 - shift, 1, 1)
    whole_week = anchor + timedelta(days=7) if grid.weekly_setpos else anchor
    items: list[tuple[datetime, datetime]] = []
    rule = grid.rule(anchor.replace(year=anchor.year + shift))
    lead = 0
    try:
        for moved in rule:
            if not items:
                lead = rule.steps
            rule.mark = rule.steps
            local = moved.replace(year=moved.year - shift)
            items.append((local, local_instant(local, grid.tz)))
            if len(items) >= size and local >= whole_week:
                return _Run(tuple(items), None, lead, 0)
    except _OverBudget:
        raise over_budget(items[-1][0] if items else anchor) from None
    except (ValueError, OverflowError) as exc:  # dateutil: "... resulting in empty rule"
        raise InvalidSchedule("rrule", f"the rule cannot be expanded: {exc}") from None
    if not items:
        return _Run((), end, rule.steps, rule.steps)
    return _Run(tuple(items), end, lead, rule.steps - rule.mark)


def grid_occurrences(
    plan: RulePlan, start: datetime, batch: int = _RUN
) -> Iterator[tuple[datetime, datetime]]:
    """``(local time, instant)`` of every occurrence at or after the local ``start``, in
    local order, for at most ``HORIZON_YEARS`` after ``start`` and not after MAX_YEAR;
    expanded ``batch`` at a time (then more and more: a long walk needs fewer restarts).
    Raises :class:`.errors.PlanningBudgetExceeded` when more than
    :data:`RRULE_PLAN_MAX_STEPS` candidate times pass before the next occurrence (counted
    across runs, cached or not: the same answer whatever the caches hold)."""
    limit = datetime(min(start.year + HORIZON_YEARS, MAX_YEAR + 1), 1, 1)
    cursor = start
    carry = 0  # steps since the last occurrence, in runs before this one
    while cursor < limit:
        run = grid_run(plan.grid, _anchor(plan.grid, cursor), batch)
        if carry + run.lead > RRULE_PLAN_MAX_STEPS:
            raise over_budget(cursor)
        carry = run.trail if run.items else carry + run.lead
        for local, instant in run.items:
            if local >= limit:
                return
            if local >= cursor:
                yield local, instant
        following = run.items[-1][0] + SECOND if run.stopped is None else run.stopped
        cursor = max(cursor + SECOND, following)
        batch = min(4 * batch, 256)


@functools.lru_cache(maxsize=2048)
def month_days(full: RuleParts, year: int, month: int) -> tuple[date, ...]:
    """The days of ``year``-``month`` passing BYMONTH and BYDAY (ordinals included) of the
    defaulted rule ``full`` (every day without BYDAY), by dateutil, cached: the days a
    rule counted over business days (:mod:`.business_rrule`) picks from."""
    if full.bymonth and month not in full.bymonth:
        return ()
    first = datetime(year, month, 1)
    last = (first + timedelta(days=32)).replace(day=1) - timedelta(days=1)
    if not full.byday:
        return tuple(first.date() + timedelta(days=i) for i in range(last.day))
    rule = du.rrule(
        du.MONTHLY,
        dtstart=first,
        until=last,
        byweekday=tuple(du.weekday(d, n or None) for n, d in full.byday),
    )
    return tuple(day.date() for day in rule)
