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
- Bounded: every expansion of the rule by dateutil runs inside a window that ends at most
  400 years later (the search is moved by whole 400-year Gregorian cycles so that the end
  of dateutil's calendar, year 9999, stops it). A rule with no occurrence in the 400 years
  from its start can never fire (exact for INTERVAL=1: the calendar repeats every 400
  years) and is refused; searches give up after 400 years without an occurrence.
"""

from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from dateutil import rrule as du

from .errors import InvalidSchedule
from .instants import _FIRST_INSTANT, _LAST_INSTANT, _SECOND, MAX_YEAR, UTC
from .rrule_syntax import FREQS, RuleParts, parse_rrule, with_defaults
from .zones import _zone, validate_timezone

#: Occurrences expanded per cached run of the rule (a search asks for as many as it needs).
_RUN = 8
#: Years after which a search without an occurrence gives up (one Gregorian cycle).
HORIZON_YEARS = 400
_CYCLE_YEARS = 400  # the Gregorian calendar (weekdays included) repeats every 400 years
_DATEUTIL_LAST_YEAR = 9999


@dataclass(frozen=True, eq=False)  # identity hash: plans are cached per (rule, zone, start)
class _RulePlan:
    parts: RuleParts
    tz: ZoneInfo
    zone: str
    dtstart: datetime  # naive local
    freq: Any  # dateutil's constant: YEARLY 0 ... SECONDLY 6
    kwargs: tuple[tuple[str, Any], ...]  # every BYxxx part, defaulted from DTSTART

    def rule(self, anchor: datetime) -> du.rrule:
        """dateutil's rule started at ``anchor`` (a period boundary of the grid)."""
        return du.rrule(
            self.freq, dtstart=anchor, interval=self.parts.interval, **dict(self.kwargs)
        )


def _dateutil_parts(parts: RuleParts) -> tuple[tuple[str, Any], ...]:
    """The BYxxx parts of a defaulted rule (:func:`.rrule_syntax.with_defaults`) as
    dateutil's keyword arguments: with every default explicit, the rule can be restarted
    anywhere on its grid without changing it."""
    weekdays = tuple(du.weekday(d, n or None) for n, d in parts.byday)
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
    return (("wkst", parts.wkst),) + tuple((k, v or None) for k, v in values.items())


def rrule_dtstart(timezone: str, start_at: datetime | None, created: datetime | None) -> datetime:
    """DTSTART of a rule, as a naive local time in ``timezone``: ``start_at`` (aware) read in
    the zone, else local midnight of the day of ``created`` (aware, the creation time).
    Both are truncated to whole seconds. Raises :class:`InvalidSchedule` ``("rrule", ...)``
    when neither is given."""
    tz = _zone(timezone)
    if start_at is not None:
        return start_at.astimezone(tz).replace(tzinfo=None, microsecond=0)
    if created is None:
        raise InvalidSchedule(
            "rrule", "an rrule schedule needs a start (start_at or creation time)"
        )
    return datetime.combine(created.astimezone(tz).date(), time())


def _instant(naive: datetime, tz: ZoneInfo) -> datetime:
    """RFC 5545 §3.3.5: the instant of a local time; in a gap with the offset before the
    gap, in an overlap the first occurrence (both are ``fold=0`` under PEP 495)."""
    return naive.replace(tzinfo=tz, fold=0).astimezone(UTC)


def _reading(instant: datetime, tz: ZoneInfo) -> datetime:
    return instant.astimezone(tz).replace(tzinfo=None, fold=0)


def _add_months(day: date, months: int) -> date:
    index = day.year * 12 + day.month - 1 + months
    return date(index // 12, index % 12 + 1, 1)


def _period(plan: _RulePlan, naive: datetime) -> tuple[datetime, datetime, datetime]:
    """``(start, end, next start)`` of the period of the grid (FREQ x INTERVAL counted from
    DTSTART, RFC 5545 §3.3.10) that starts at or before the local ``naive`` (after DTSTART)."""
    ds, step, freq = plan.dtstart, plan.parts.interval, plan.freq
    if freq >= du.HOURLY:
        unit = timedelta(seconds={du.HOURLY: 3600, du.MINUTELY: 60, du.SECONDLY: 1}[freq])
        base = ds.replace(minute=0, second=0) if freq == du.HOURLY else ds
        base = base.replace(second=0) if freq == du.MINUTELY else base
        start = base + unit * step * ((naive - base) // unit // step)
        return start, start + unit, start + unit * step
    day = naive.date()
    if freq in (du.DAILY, du.WEEKLY):
        days = 1 if freq == du.DAILY else 7
        first = ds.date() - timedelta(days=(ds.weekday() - plan.parts.wkst) % 7 if days == 7 else 0)
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


def _anchor(plan: _RulePlan, naive: datetime) -> datetime:
    """Where to start dateutil so that it yields exactly the occurrences at or after the
    local ``naive``: ``naive`` itself inside a period of the grid (a period's set does not
    depend on where in it the expansion starts), the next period's start between periods;
    the period's start for a weekly BYSETPOS (a partial week would change its set) and a
    SECONDLY grid (dateutil takes the first second from its start)."""
    ds = plan.dtstart
    if naive <= ds:
        return ds
    start, end, following = _period(plan, naive)
    if naive >= end:
        return following
    if plan.freq == du.SECONDLY or (plan.freq == du.WEEKLY and plan.parts.bysetpos):
        return max(start, ds)
    return naive


def _shift_years(anchor: datetime) -> int:
    """Whole 400-year cycles that move ``anchor`` into dateutil's last years, at least one
    whole year before its end (year 9999)."""
    return _CYCLE_YEARS * max(0, (_DATEUTIL_LAST_YEAR - 1 - anchor.year) // _CYCLE_YEARS)


@functools.lru_cache(maxsize=4096)
def _run(
    plan: _RulePlan, anchor: datetime, size: int = _RUN
) -> tuple[tuple[tuple[datetime, datetime], ...], datetime | None]:
    """Up to ``size`` occurrences from ``anchor`` as ``(local time, instant)`` in local
    order (a weekly BYSETPOS: at least its first week), and where to go on: None after a
    full run (from the last local time), else the end of the window it ran out of.
    The rule runs moved by whole 400-year cycles, so that dateutil stops at the end of its
    calendar: a rule that never matches costs at most one window (at most 400 years)."""
    shift = _shift_years(anchor)
    end = datetime(_DATEUTIL_LAST_YEAR + 1 - shift, 1, 1)
    whole_week = (
        anchor + timedelta(days=7) if plan.parts.bysetpos and plan.freq == du.WEEKLY else anchor
    )
    items: list[tuple[datetime, datetime]] = []
    try:
        for moved in plan.rule(anchor.replace(year=anchor.year + shift)):
            local = moved.replace(year=moved.year - shift)
            items.append((local, _instant(local, plan.tz)))
            if len(items) >= size and local >= whole_week:
                return tuple(items), None
    except (ValueError, OverflowError) as exc:  # dateutil: "... resulting in empty rule"
        raise InvalidSchedule("rrule", f"the rule cannot be expanded: {exc}") from None
    return tuple(items), end


def _occurrences(
    plan: _RulePlan, start: datetime, batch: int = _RUN
) -> Iterator[tuple[datetime, datetime]]:
    """``(local time, instant)`` of every occurrence at or after the local ``start``, in
    local order, for at most ``HORIZON_YEARS`` after ``start`` and not after MAX_YEAR;
    expanded ``batch`` at a time (then more and more: a long walk needs fewer restarts)."""
    limit = datetime(min(start.year + HORIZON_YEARS, MAX_YEAR + 1), 1, 1)
    cursor = start
    while cursor < limit:
        items, stopped = _run(plan, _anchor(plan, cursor), batch)
        for local, instant in items:
            if local >= limit:
                return
            if local >= cursor:
                yield local, instant
        following = items[-1][0] + _SECOND if stopped is None else stopped
        cursor = max(cursor + _SECOND, following)
        batch = min(4 * batch, 256)


def _search_start(plan: _RulePlan, lo: datetime) -> datetime:
    """The earliest local time whose instant may be at or after ``lo``: a local time in a
    gap maps later than its reading, by the offset in force before the gap."""
    tz = plan.tz
    earlier = max(lo - timedelta(days=2), _FIRST_INSTANT)
    readings = [
        _reading(lo, tz),
        (lo + (earlier.astimezone(tz).utcoffset() or timedelta())).replace(tzinfo=None),
    ]
    return max(min(readings), plan.dtstart)


def _until_passed(plan: _RulePlan, local: datetime) -> bool:
    """Past UNTIL for good: no later local time can map to an instant at or before it."""
    until = plan.parts.until
    return until is not None and local > _reading(until, plan.tz) + timedelta(days=2)


def _rrule_from(plan: _RulePlan, lo: datetime) -> datetime | None:
    """First slot at or after the UTC instant ``lo`` (whole seconds), or None.

    Local times map to instants in order, except that a local time inside a gap maps up to
    the gap's length later: after a hit from a gap, later local times are still looked at
    until one reads at or after that instant."""
    lo = max(lo, _FIRST_INSTANT)
    until = plan.parts.until
    best: datetime | None = None
    for local, instant in _occurrences(plan, _search_start(plan, lo), 2):
        if best is not None and local >= _reading(best, plan.tz):
            break
        if _until_passed(plan, local):
            break
        if instant < lo or (until is not None and instant > until):
            continue
        if best is None or instant < best:
            best = instant
        if _reading(instant, plan.tz) == local:  # not in a gap: nothing later maps earlier
            break
    return best if best is not None and best <= _LAST_INSTANT else None


def _rrule_upcoming(
    plan: _RulePlan, lo: datetime, hi: datetime | None, count: int
) -> list[datetime]:
    """The first ``count`` slots at or after ``lo`` and not after ``hi`` (None: open), in
    one walk of the occurrences (the stop rule of :func:`_rrule_from`, for the count-th)."""
    if count == 0:
        return []
    until = plan.parts.until
    hi = until if hi is None else (hi if until is None else min(hi, until))
    stop = _reading(hi, plan.tz) + timedelta(days=2) if hi is not None else None
    found: list[datetime] = []
    start = _search_start(plan, max(lo, _FIRST_INSTANT))
    for local, instant in _occurrences(plan, start, count + 1):
        if len(found) >= count and local >= _reading(found[count - 1], plan.tz):
            break
        if stop is not None and local > stop:
            break
        if instant < lo or (hi is not None and instant > hi) or instant in found:
            continue
        bisect.insort(found, instant)
    return [slot for slot in found[:count] if slot <= _LAST_INSTANT]


def _rrule_latest(plan: _RulePlan, lo: datetime, hi: datetime) -> datetime | None:
    """Latest slot in [lo, hi] by bisection over the forward search (as for cron):
    O(log(hi - lo)) searches."""
    best = _rrule_from(plan, lo)
    if best is None or best > hi:
        return None
    top = hi  # invariant: best is a slot, and no slot lies in (top, hi]
    while best < top:
        middle = best + timedelta(seconds=math.ceil((top - best) / _SECOND / 2))
        slot = _rrule_from(plan, middle)
        if slot is not None and slot <= hi:
            best = slot
        else:
            top = middle - _SECOND
    return best


def _rrule_count(plan: _RulePlan, lo: datetime, hi_excl: datetime, cap: int) -> int:
    """Distinct slots in [lo, hi_excl), at most ``cap``: the occurrences are walked (at
    most ``cap`` of them counted), each instant once."""
    until = plan.parts.until
    stop = _reading(min(hi_excl, _LAST_INSTANT + _SECOND), plan.tz) + timedelta(days=2)
    seen: set[datetime] = set()
    for local, instant in _occurrences(plan, _search_start(plan, max(lo, _FIRST_INSTANT)), 64):
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
    days = du.rrule(
        du.YEARLY,
        dtstart=datetime(_DATEUTIL_LAST_YEAR + 1 - _CYCLE_YEARS, 1, 1),
        bymonth=p.bymonth or None,
        byweekno=p.byweekno or None,
        byyearday=p.byyearday or None,
        bymonthday=p.bymonthday or None,
        byweekday=tuple(du.weekday(d) for _, d in p.byday) or None,
        byhour=0,
        byminute=0,
        bysecond=0,
    )
    return next(iter(days), None) is None


def _day_parts(parts: RuleParts) -> str:
    """The day parts of a normalized rule: ``BYMONTH=2;BYMONTHDAY=30``."""
    names = ("BYMONTH=", "BYWEEKNO=", "BYYEARDAY=", "BYMONTHDAY=", "BYDAY=")
    return ";".join(p for p in parts.normalized.split(";") if p.startswith(names))


@functools.lru_cache(maxsize=1024)
def _compile(text: str, zone: str, dtstart: datetime) -> _RulePlan | InvalidSchedule:
    """The plan of a rule in a zone from a DTSTART, or the reason it is refused (cached
    either way: a rule that can never fire costs one bounded search, once)."""
    try:
        parts = parse_rrule(text)
        validate_timezone(zone)
        freq = FREQS.index(parts.freq)  # dateutil numbers them in this order
        full = with_defaults(parts, dtstart)
        plan = _RulePlan(parts, _zone(zone), zone, dtstart, freq, _dateutil_parts(full))
        if _no_day_ever_matches(full):
            given = "" if _day_parts(full) == _day_parts(parts) else " (from its start)"
            message = f"can never fire: no date matches {_day_parts(full)}{given}"
            return InvalidSchedule("rrule", message)
        # Every period is on the grid and some date of the cycle matches: it fires (and
        # keeps firing). Otherwise look for the first occurrence, a bounded search.
        plain = full.interval == 1 and not full.bysetpos and not any(n for n, _ in full.byday)
        sure = plain and full.until is None
        first = True if sure else next(_occurrences(plan, dtstart, 1), None)
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
    if parts.until is not None and _rrule_from(plan, _instant(dtstart, plan.tz)) is None:
        return InvalidSchedule(
            "rrule",
            f"can never fire: no occurrence between its start {start} and UNTIL {parts.until:%Y-%m-%dT%H:%M:%SZ}",
        )
    return plan


def compile_rrule(text: str, timezone: str, dtstart: datetime) -> _RulePlan:
    """The cached plan of ``text`` in ``timezone`` from the naive local ``dtstart``
    (see :func:`rrule_dtstart`). Raises :class:`InvalidSchedule` like :func:`validate_rrule`."""
    plan = _compile(text, timezone, dtstart)
    if isinstance(plan, InvalidSchedule):
        raise InvalidSchedule(plan.field, plan.message)
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
