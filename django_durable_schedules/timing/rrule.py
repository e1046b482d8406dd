"""Calendar-rule schedules (kind ``rrule``): an RFC 5545 RRULE expanded by python-dateutil in
the schedule's IANA zone, its local times mapped to instants, and the searches built on it
(next slot, latest slot, counting slots).

The rules (``docs/time.md`` explains them with examples):

- DTSTART is ``start_at`` read in the zone, or, without ``start_at``, local midnight of the
  day the schedule was created. Parts the rule leaves out default from DTSTART as RFC 5545
  §3.3.10 says (no BYHOUR with FREQ=DAILY: DTSTART's hour, so midnight). DTSTART itself is
  not an occurrence unless the rule matches it (python-dateutil's ``rrule``).
- Local times become instants by RFC 5545 §3.3.5: a local time inside a spring-forward gap
  is read with the UTC offset before the gap (02:30 becomes 03:30 of the new offset); a
  local time inside a fall-back overlap is its first occurrence. Several local times that
  land on one instant are one slot.
- Budgeted: between two occurrences dateutil does at most ``RRULE_PLAN_MAX_STEPS`` steps
  of work (:mod:`.rrule_grid`), else :class:`.errors.PlanningBudgetExceeded`: at
  validation (the walk to the first occurrence and, for a rule finer than DAILY, over its
  longest run of days without a match) and in every search after it.
- Bounded: every expansion of the rule by dateutil runs inside a window that ends at most
  400 years later (:mod:`.rrule_grid`). A rule with no occurrence in the 400 years
  from its start can never fire (exact for INTERVAL=1: the calendar repeats every 400
  years) and is refused; searches give up after 400 years without an occurrence.
"""

from __future__ import annotations

import bisect
import functools
import math
from datetime import datetime, time, timedelta

from dateutil import rrule as du

from .errors import InvalidSchedule
from .instants import FIRST_INSTANT, LAST_INSTANT, MAX_YEAR, SECOND
from .rrule_grid import (
    CYCLE_YEARS,
    DATEUTIL_LAST_YEAR,
    HORIZON_YEARS,
    RulePlan,
    grid_occurrences,
    local_instant,
    local_reading,
    rule_grid,
)
from .rrule_syntax import FREQS, RuleParts, parse_rrule, with_defaults
from .zones import validate_timezone, zone_info


def rrule_dtstart(timezone: str, start_at: datetime | None, created: datetime | None) -> datetime:
    """DTSTART of a rule, as a naive local time in ``timezone``: ``start_at`` (aware) read in
    the zone, else local midnight of the day of ``created`` (aware, the creation time).
    Both are truncated to whole seconds. Raises :class:`InvalidSchedule` ``("rrule", ...)``
    when neither is given."""
    tz = zone_info(timezone)
    if start_at is not None:
        return start_at.astimezone(tz).replace(tzinfo=None, microsecond=0)
    if created is None:
        raise InvalidSchedule(
            "rrule", "an rrule schedule needs a start (start_at or creation time)"
        )
    return datetime.combine(created.astimezone(tz).date(), time())


def _search_start(plan: RulePlan, lo: datetime) -> datetime:
    """The earliest local time whose instant may be at or after ``lo``: a local time in a
    gap maps later than its reading, by the offset in force before the gap."""
    tz = plan.tz
    earlier = max(lo - timedelta(days=2), FIRST_INSTANT)
    readings = [
        local_reading(lo, tz),
        (lo + (earlier.astimezone(tz).utcoffset() or timedelta())).replace(tzinfo=None),
    ]
    return max(min(readings), plan.dtstart)


def _until_passed(plan: RulePlan, local: datetime) -> bool:
    """Past UNTIL for good: no later local time can map to an instant at or before it."""
    until = plan.parts.until
    return until is not None and local > local_reading(until, plan.tz) + timedelta(days=2)


def rrule_from(plan: RulePlan, lo: datetime) -> datetime | None:
    """First slot at or after the UTC instant ``lo`` (whole seconds), or None.

    Local times map to instants in order, except that a local time inside a gap maps up to
    the gap's length later: after a hit from a gap, later local times are still looked at
    until one reads at or after that instant."""
    lo = max(lo, FIRST_INSTANT)
    until = plan.parts.until
    best: datetime | None = None
    for local, instant in grid_occurrences(plan, _search_start(plan, lo), 2):
        if best is not None and local >= local_reading(best, plan.tz):
            break
        if _until_passed(plan, local):
            break
        if instant < lo or (until is not None and instant > until):
            continue
        if best is None or instant < best:
            best = instant
        if local_reading(instant, plan.tz) == local:  # not in a gap: nothing later maps earlier
            break
    return best if best is not None and best <= LAST_INSTANT else None


def rrule_upcoming(plan: RulePlan, lo: datetime, hi: datetime | None, count: int) -> list[datetime]:
    """The first ``count`` slots at or after ``lo`` and not after ``hi`` (None: open), in
    one walk of the occurrences (the stop rule of :func:`rrule_from`, for the count-th)."""
    if count == 0:
        return []
    until = plan.parts.until
    hi = until if hi is None else (hi if until is None else min(hi, until))
    stop = local_reading(hi, plan.tz) + timedelta(days=2) if hi is not None else None
    found: list[datetime] = []
    start = _search_start(plan, max(lo, FIRST_INSTANT))
    for local, instant in grid_occurrences(plan, start, count + 1):
        if len(found) >= count and local >= local_reading(found[count - 1], plan.tz):
            break
        if stop is not None and local > stop:
            break
        if instant < lo or (hi is not None and instant > hi) or instant in found:
            continue
        bisect.insort(found, instant)
    return [slot for slot in found[:count] if slot <= LAST_INSTANT]


def rrule_latest(plan: RulePlan, lo: datetime, hi: datetime) -> datetime | None:
    """Latest slot in [lo, hi] by bisection over the forward search (as for cron):
    O(log(hi - lo)) searches."""
    best = rrule_from(plan, lo)
    if best is None or best > hi:
        return None
    top = hi  # invariant: best is a slot, and no slot lies in (top, hi]
    while best < top:
        middle = best + timedelta(seconds=math.ceil((top - best) / SECOND / 2))
        slot = rrule_from(plan, middle)
        if slot is not None and slot <= hi:
            best = slot
        else:
            top = middle - SECOND
    return best


def rrule_count(plan: RulePlan, lo: datetime, hi_excl: datetime, cap: int) -> int:
    """Distinct slots in [lo, hi_excl), at most ``cap``: the occurrences are walked (at
    most ``cap`` of them counted), each instant once."""
    until = plan.parts.until
    stop = local_reading(min(hi_excl, LAST_INSTANT + SECOND), plan.tz) + timedelta(days=2)
    seen: set[datetime] = set()
    for local, instant in grid_occurrences(plan, _search_start(plan, max(lo, FIRST_INSTANT)), 64):
        if local > stop or _until_passed(plan, local) or len(seen) >= cap:
            break
        if lo <= instant < hi_excl and (until is None or instant <= until):
            seen.add(instant)
    return min(len(seen), cap)


def _no_day_ever_matches(p: RuleParts) -> bool:
    """True when no date of a whole 400-year Gregorian cycle passes the day parts of the
    defaulted rule ``p`` (BYMONTH, BYWEEKNO, BYYEARDAY, BYMONTHDAY, BYDAY without
    ordinals): then the rule can never fire, whatever its FREQ and INTERVAL. A cheap yearly
    expansion over the cycle (years 9600-9999: dateutil stops at its calendar's end). Rules
    with an ordinal BYDAY or a BYSETPOS are left to the full search (their days depend on
    the period)."""
    if p.bysetpos or any(n for n, _ in p.byday):
        return False
    if not (p.bymonth or p.byweekno or p.byyearday or p.bymonthday or p.byday):
        return False
    days = _day_rule(p, datetime(DATEUTIL_LAST_YEAR + 1 - CYCLE_YEARS, 1, 1))
    return next(iter(days), None) is None


def _day_rule(p: RuleParts, start: datetime) -> du.rrule:
    """The days (at midnight) that pass the day parts of the defaulted rule ``p`` without an
    ordinal BYDAY or a BYSETPOS, from ``start``: one yearly expansion."""
    return du.rrule(
        du.YEARLY,
        dtstart=start,
        bymonth=p.bymonth or None,
        byweekno=p.byweekno or None,
        byyearday=p.byyearday or None,
        bymonthday=p.bymonthday or None,
        byweekday=tuple(du.weekday(d) for _, d in p.byday) or None,
        byhour=0,
        byminute=0,
        bysecond=0,
    )


@functools.lru_cache(maxsize=256)
def _longest_gap(p: RuleParts) -> tuple[datetime, int]:
    """``(day, days)``: the longest run of days of the 400-year Gregorian cycle that no day
    of the defaulted rule ``p`` passes (its day parts: see :func:`_day_rule`), as the day
    that passes just before it (a date in the years 9600-9999) and its length. One walk of
    the cycle (at most 146,097 days); the cycle repeats, so this is the longest ever."""
    cycle_start = datetime(DATEUTIL_LAST_YEAR + 1 - CYCLE_YEARS, 1, 1)
    first = previous = None
    best: tuple[datetime, int] = (cycle_start, 0)
    for day in _day_rule(p, cycle_start):
        if previous is not None and (day - previous).days > best[1]:
            best = (previous, (day - previous).days)
        first = first or day
        previous = day
    if first is not None and previous is not None:
        wrap = (first - previous).days + 146097  # the last day to the first of the next cycle
        if wrap > best[1]:
            best = (previous, wrap)
    return best


def _check_budget(plan: RulePlan, full: RuleParts) -> None:
    """Raise :class:`.errors.PlanningBudgetExceeded` for a HOURLY, MINUTELY or SECONDLY
    rule whose walk over the longest run of days without a matching day goes over the
    planning budget (:data:`..limits.RRULE_PLAN_MAX_STEPS`): the walk starts the day after
    the last matching day before that run, in the first 400-year cycle at or after
    DTSTART. (Its walk from DTSTART to the first occurrence is :func:`cached_rule_plan`'s search.)
    Such a rule has no ordinal BYDAY, and its BYSETPOS picks within an hour, a minute or a
    second: its days are those of its day parts. A rule without day parts matches every
    day; it is left to that search and to the budget of every later search."""
    if FREQS.index(full.freq) <= FREQS.index("DAILY"):
        return  # it steps a day at a time: bounded by the 400-year window
    if not (full.bymonth or full.byweekno or full.byyearday or full.bymonthday or full.byday):
        return
    day, days = _longest_gap(full)
    if days <= 1:
        return
    start = day.replace(
        year=day.year - CYCLE_YEARS * ((day.year - plan.dtstart.year) // CYCLE_YEARS)
    )
    if start < plan.dtstart:
        start = start.replace(year=start.year + CYCLE_YEARS)
    start += timedelta(days=1)
    if start.year <= MAX_YEAR - 1:
        next(grid_occurrences(plan, start, 1), None)


def _day_parts(parts: RuleParts) -> str:
    """The day parts of a normalized rule: ``BYMONTH=2;BYMONTHDAY=30``."""
    names = ("BYMONTH=", "BYWEEKNO=", "BYYEARDAY=", "BYMONTHDAY=", "BYDAY=")
    return ";".join(p for p in parts.normalized.split(";") if p.startswith(names))


@functools.lru_cache(maxsize=1024)
def cached_rule_plan(text: str, zone: str, dtstart: datetime) -> RulePlan | InvalidSchedule:
    """The plan of a rule in a zone from a DTSTART, or the reason it is refused (cached
    either way: a rule that can never fire costs one bounded search, once)."""
    try:
        parts = parse_rrule(text)
        validate_timezone(zone)
        full = with_defaults(parts, dtstart)
        plan = RulePlan(parts, zone_info(zone), zone, dtstart, rule_grid(full, zone, dtstart))
        if _no_day_ever_matches(full):
            given = "" if _day_parts(full) == _day_parts(parts) else " (from its start)"
            message = f"can never fire: no date matches {_day_parts(full)}{given}"
            return InvalidSchedule("rrule", message)
        # Every period is on the grid and some date of the cycle matches: it fires (and
        # keeps firing). Otherwise look for the first occurrence, a bounded search; a rule
        # finer than DAILY looks for it anyway, and walks its longest run of days without a
        # match, within the planning budget.
        plain = full.interval == 1 and not full.bysetpos and not any(n for n, _ in full.byday)
        sure = plain and full.until is None and FREQS.index(full.freq) <= FREQS.index("DAILY")
        first = True if sure else next(grid_occurrences(plan, dtstart, 1), None)
        if first is not None:
            _check_budget(plan, full)
    except InvalidSchedule as exc:
        return exc
    except (ValueError, OverflowError, TypeError) as exc:
        return InvalidSchedule("rrule", f"the rule cannot be expanded: {exc}")
    start = f"{dtstart:%Y-%m-%d %H:%M:%S} ({zone})"
    if first is None:
        return InvalidSchedule(
            "rrule",
            f"can never fire: no occurrence in the {HORIZON_YEARS} years from its start {start}",
        )
    if parts.until is not None and rrule_from(plan, local_instant(dtstart, plan.tz)) is None:
        return InvalidSchedule(
            "rrule",
            f"can never fire: no occurrence between its start {start} and UNTIL {parts.until:%Y-%m-%dT%H:%M:%SZ}",
        )
    return plan


def compile_rrule(text: str, timezone: str, dtstart: datetime) -> RulePlan:
    """The cached plan of ``text`` in ``timezone`` from the naive local ``dtstart``
    (see :func:`rrule_dtstart`). Raises :class:`InvalidSchedule` like :func:`validate_rrule`."""
    plan = cached_rule_plan(text, timezone, dtstart)
    if isinstance(plan, InvalidSchedule):
        raise type(plan)(plan.field, plan.message)
    return plan


def validate_rrule(text: str, timezone: str = "UTC", dtstart: datetime | None = None) -> str:
    """Validate an RFC 5545 RRULE value for a schedule and return it normalized (upper case,
    parts in a fixed order).

    ``dtstart`` (naive local time in ``timezone``; default: midnight of 2000-01-01) is the
    rule's DTSTART. Raises :class:`InvalidSchedule` ``("rrule", message)`` for everything
    :func:`.rrule_syntax.parse_rrule` refuses, for a rule dateutil cannot expand, and for
    a rule that can never fire: no occurrence in the 400 years from DTSTART
    (``BYMONTH=2;BYMONTHDAY=30``), or none before its UNTIL; ``InvalidSchedule("timezone",
    ...)`` for an unknown zone (RFC 5545 §3.3.10).
    """
    compile_rrule(text, timezone, dtstart or datetime(2000, 1, 1))
    return parse_rrule(text).normalized
