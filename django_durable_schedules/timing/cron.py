"""Cron evaluation: the wall times of the firing dates mapped to instants under the DST
rules, and the searches built on it (next slot, latest slot, counting slots).

Cron schedules are wall-clock time in the schedule's IANA zone. The rules (``docs/time.md``
explains them with examples):

- fixed-time jobs (minute and hour fields do not start with ``*``) run once for a wall
  time inside a spring-forward gap, at the first instant after the gap, and once, at the
  first reading, for a wall time inside a fall-back overlap;
- wildcard jobs (minute or hour field starts with ``*``) run at every real instant whose
  local reading matches: both passes of a repeated hour, nothing inside a gap.
"""

from __future__ import annotations

import bisect
import functools
import math
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from cronsim import CronSim

from .cron_plan import CronPlan
from .instants import FIRST_INSTANT, LAST_INSTANT, MAX_YEAR, MINUTE, SECOND, UTC

# --------------------------------------------------------------------------------------
# Cron evaluation
#
# cronsim parses the expression and decides which calendar dates fire (month, the
# day-of-month/day-of-week rule, L, LW, nL, #). Mapping wall times to instants is done
# here, because cronsim's own DST handling breaks the contract in three ways (each one is
# a test in tests/test_timing.py):
#
# * fixed-time job, search started inside the second pass of a repeated hour: cronsim
#   drops the fold and returns the first reading of a later wall time, which lies *before*
#   the start (``50 1 * * *`` from 06:40Z on 2027-11-07 New York gives 05:50Z);
# * wildcard job on a day whose midnight falls in a gap (America/Havana 2027-03-14): it
#   returns the non-existent 00:00, i.e. 01:00 real time, even for ``*/30 0 * * *``;
# * wildcard job across a 30-minute shift (Australia/Lord_Howe 2027-04-04): it steps hours
#   in UTC and lands on :30, skipping the 00:00 slot of the next day.
# --------------------------------------------------------------------------------------


def _reading(instant: datetime, tz: ZoneInfo) -> datetime:
    """The naive local wall-clock reading of a UTC instant."""
    return instant.astimezone(tz).replace(tzinfo=None, fold=0)


# Offsets are compared every few hours from 3 hours before midnight (more than any DST
# shift in use, at most 2 hours) to 3 hours after the next one; two offset changes that
# cancel out within 3 hours do not occur in the time zone database.
_PLAIN_DAY_PROBE_HOURS = (-3, 0, 3, 6, 9, 12, 15, 18, 21, 24, 27)


@functools.lru_cache(maxsize=4096)
def plain_day(tz: ZoneInfo, day: date) -> tuple[datetime, datetime] | None:
    """UTC bounds [start, end) of local ``day`` if the zone's offset does not change from a
    few hours before its midnight to a few hours after the next one; else None.

    On such a day every wall minute occurs exactly once, at ``start + minutes``, no
    gap-shifted slot of the previous day lands in it, and no repeated hour straddles
    either midnight."""
    try:
        start = datetime.combine(day, time(), tzinfo=tz).astimezone(UTC)
        offset = (start - SECOND).astimezone(tz).utcoffset()
        for hours in _PLAIN_DAY_PROBE_HOURS:
            if (start + timedelta(hours=hours)).astimezone(tz).utcoffset() != offset:
                return None
    except OverflowError:
        return None
    return start, start + timedelta(days=1)


def first_instant_after_gap(tz: ZoneInfo, wall: datetime, lo: datetime, hi: datetime) -> datetime:
    """The first instant whose reading is later than ``wall``, a wall time that a
    spring-forward gap skips; ``lo < that instant <= hi`` (bisection over seconds)."""
    while hi - lo > SECOND:
        middle = lo + timedelta(seconds=(hi - lo) // SECOND // 2)
        if _reading(middle, tz) > wall:
            hi = middle
        else:
            lo = middle
    return hi


def _wall_instants(plan: CronPlan, wall: datetime) -> tuple[datetime, ...]:
    """The instants at which a matching wall time fires."""
    tz = plan.tz
    candidates = sorted({wall.replace(tzinfo=tz, fold=fold).astimezone(UTC) for fold in (0, 1)})
    real = [u for u in candidates if _reading(u, tz) == wall]
    if plan.wildcard:
        return tuple(real)  # both passes of a repeated hour; nothing inside a gap
    if real:
        return (real[0],)  # fixed-time: the first reading only
    return (first_instant_after_gap(tz, wall, candidates[0], candidates[-1]),)


@functools.lru_cache(maxsize=256)
def day_instants(plan: CronPlan, day: date) -> tuple[datetime, ...]:
    """All fire instants of the wall times of a firing ``day`` with a DST change, sorted."""
    midnight = datetime.combine(day, time())
    instants: set[datetime] = set()
    for minutes in plan.minutes_of_day:
        instants.update(_wall_instants(plan, midnight + timedelta(minutes=minutes)))
    return tuple(sorted(instants))


def _first_instant_of_day_after(plan: CronPlan, day: date, after: datetime) -> datetime | None:
    """The first fire instant strictly after ``after`` among the wall times of ``day``."""
    bounds = plain_day(plan.tz, day)
    if bounds is None:
        instants = day_instants(plan, day)
        index = bisect.bisect_right(instants, after)
        return instants[index] if index < len(instants) else None
    start = bounds[0]
    index = bisect.bisect_right(plan.minutes_of_day, (after - start) // MINUTE)
    if index == len(plan.minutes_of_day):
        return None
    return start + plan.minutes_of_day[index] * MINUTE


def _next_firing_day(plan: CronPlan, day: date) -> date | None:
    """The first date >= ``day`` that the calendar fields select (None after MAX_YEAR).
    Looks at the next few dates directly, then lets cronsim jump (it gives up after 50
    years without a match, which only an expression rejected by validate_cron can need)."""
    for _ in range(8):
        if plan.matches_day(day):
            return day if day.year <= MAX_YEAR else None
        day += timedelta(days=1)
    engine = CronSim(plan.day_expr, datetime.combine(day, time()) - SECOND)
    try:
        day = next(engine).date()
    except (StopIteration, OverflowError):
        return None
    return day if day.year <= MAX_YEAR else None


def _cron_next(plan: CronPlan, after: datetime) -> datetime | None:
    """First slot strictly after the UTC instant ``after`` (whole seconds), or None.

    Walks the firing dates from ``after``'s local date and returns the earliest instant
    later than ``after``. Next to a DST change the walk also looks at the date before
    (a repeated hour can straddle midnight) and the date after the one that produced the
    answer (a repeated hour can put instants of one date before those of the previous).
    A date without DST change ends before the next one starts, so it needs neither.
    """
    if after >= LAST_INSTANT:
        return None
    day = _reading(after, plan.tz).date()
    if plain_day(plan.tz, day - timedelta(days=1)) is None:
        day -= timedelta(days=1)
    best: datetime | None = None
    best_day: date | None = None
    while True:
        firing = _next_firing_day(plan, day)
        if firing is None or (best_day is not None and firing > best_day + timedelta(days=1)):
            break
        found = _first_instant_of_day_after(plan, firing, after)
        if found is not None and (best is None or found < best):
            best, best_day = found, firing
        if best_day is not None and plain_day(plan.tz, best_day) is not None:
            break
        day = firing + timedelta(days=1)
    return best if best is not None and best <= LAST_INSTANT else None


def cron_from(plan: CronPlan, lo: datetime) -> datetime | None:
    """First slot at or after the UTC instant ``lo`` (whole seconds), or None."""
    return _cron_next(plan, max(lo, FIRST_INSTANT) - SECOND)


def cron_count(plan: CronPlan, lo: datetime, hi_excl: datetime, cap: int) -> int:
    """Slots in [lo, hi_excl), at most ``cap``, day by firing local day: a day without DST
    change is counted arithmetically (its wall minutes map linearly to UTC); the instants
    of a day with one are collected in a set, since a gap straddling midnight can move
    slots of two dates onto the same instant."""
    tz = plan.tz
    lo, hi_excl = max(lo, FIRST_INSTANT), min(hi_excl, LAST_INSTANT + SECOND)
    plain_total = 0
    dst_instants: set[datetime] = set()
    day = _reading(lo, tz).date() - timedelta(days=1)
    last_day = _reading(hi_excl, tz).date() + timedelta(days=1)
    while plain_total + len(dst_instants) < cap:
        firing_day = _next_firing_day(plan, day)
        if firing_day is None or firing_day > last_day:
            break
        day = firing_day
        bounds = plain_day(tz, day)
        if bounds is None:
            instants = day_instants(plan, day)
            first = bisect.bisect_left(instants, lo)
            dst_instants.update(instants[first : bisect.bisect_left(instants, hi_excl)])
        else:
            start, end = bounds
            plain_total += max(
                0, plan.count_minutes_of_day(max(lo, start) - start, min(hi_excl, end) - start)
            )
        day += timedelta(days=1)
    return min(plain_total + len(dst_instants), cap)


def cron_latest(plan: CronPlan, lo: datetime, hi: datetime) -> datetime | None:
    """Latest slot in [lo, hi] by bisection over the forward search: O(log(hi - lo))
    searches, so 30 days of ``* * * * *`` costs ~22 of them, not 43,200."""
    best = cron_from(plan, lo)
    if best is None or best > hi:
        return None
    top = hi  # invariant: best is a slot, and no slot lies in (top, hi]
    while best < top:
        middle = best + timedelta(seconds=math.ceil((top - best) / SECOND / 2))
        slot = cron_from(plan, middle)
        if slot is not None and slot <= hi:
            best = slot
        else:
            top = middle - SECOND
    return best
