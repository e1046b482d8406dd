"""Rules counted over business days (``Schedule.rrule_business_days``): a ``FREQ=MONTHLY``
or ``FREQ=YEARLY`` rule whose BYMONTHDAY and BYSETPOS count **business days** only
(:mod:`.business_days`: not excluded by a calendar, no weekend day).

Each period of the rule's grid (a month, from DTSTART's month, every INTERVAL months; or a
year, from DTSTART's year, every INTERVAL years) is expanded by python-dateutil without
BYMONTHDAY and BYSETPOS (BYMONTH and BYDAY, ordinals included, read within each month as
RFC 5545 reads them for MONTHLY, and for YEARLY with BYMONTH); the days that are no
business day are removed; BYMONTHDAY ``n`` then picks the n-th of the days left in each
month (``-1`` the last), BYSETPOS picks among the times of the whole period (BYHOUR,
BYMINUTE, BYSECOND, defaulted from DTSTART). So ``FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;
BYSETPOS=-1`` is the last business day of the month, ``FREQ=MONTHLY;BYMONTHDAY=1`` the
first, ``FREQ=YEARLY;BYMONTH=12;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1`` the last business day of
December and ``FREQ=YEARLY;BYMONTH=3,6,9,12;BYMONTHDAY=-1`` the last business day of each
quarter, holidays removed before the pick. A YEARLY rule with a day part names its months
(BYMONTH). Local times become instants as for every rule
(:func:`.rrule_grid.local_instant`). Searches walk period by period, at most 400 years.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import date, datetime, time, timedelta
from typing import TypeVar

from .errors import InvalidSchedule
from .instants import FIRST_INSTANT, LAST_INSTANT, MAX_YEAR
from .rrule_grid import HORIZON_YEARS, RulePlan, local_instant, local_reading, month_days
from .rrule_syntax import RuleParts, with_defaults

_Day = TypeVar("_Day", date, datetime)  # a day of the month, or a time of one

FIELD = "rrule_business_days"
_MONTHS = HORIZON_YEARS * 12


def check_business_rule(parts: RuleParts) -> None:
    """Refuse (field ``rrule_business_days``) a rule it cannot count over business days:
    only FREQ=MONTHLY and FREQ=YEARLY rules, without BYWEEKNO or BYYEARDAY; a YEARLY one
    with BYMONTHDAY or BYDAY names its months (BYMONTH)."""
    if parts.freq not in ("MONTHLY", "YEARLY"):
        raise InvalidSchedule(
            FIELD,
            f"rrule_business_days counts the business days of a month or a year: it takes "
            f"FREQ=MONTHLY or FREQ=YEARLY rules (got FREQ={parts.freq})",
        )
    if parts.byweekno or parts.byyearday:
        raise InvalidSchedule(FIELD, "rrule_business_days takes no BYWEEKNO or BYYEARDAY")
    if parts.freq == "YEARLY" and not parts.bymonth and (parts.bymonthday or parts.byday):
        raise InvalidSchedule(
            FIELD,
            "rrule_business_days counts a FREQ=YEARLY rule's days within its months: name "
            "them with BYMONTH (BYMONTH=12 for December, BYMONTH=1,2,...,12 for every month)",
        )


def _times(full: RuleParts) -> list[time]:
    return sorted(time(h, m, s) for h in full.byhour for m in full.byminute for s in full.bysecond)


def month_times(
    plan: RulePlan, is_business: Callable[[date], bool], year: int, month: int
) -> list[datetime]:
    """The local times (naive) of the rule in one period, business days only, BYMONTHDAY
    (in each month) and BYSETPOS (over the period) counted over them (not yet bounded by
    DTSTART or UNTIL): for a MONTHLY rule the month ``year``-``month``, for a YEARLY one
    the year ``year`` (``month`` unused), its BYMONTH months in order."""
    full = with_defaults(plan.parts, plan.dtstart)
    months = sorted(full.bymonth) if _yearly(plan) else [month]
    days: list[date] = []
    for m in months:
        found = [d for d in month_days(full, year, m) if is_business(d)]
        days += _positions(found, full.bymonthday) if full.bymonthday else found
    moments = [datetime.combine(d, t) for d in days for t in _times(full)]
    if full.bysetpos:
        moments = _positions(moments, full.bysetpos)
    return moments


def _positions(items: list[_Day], positions: Iterable[int]) -> list[_Day]:
    """The items at the rule's 1-based ``positions`` (negative: from the end), sorted, each
    once; a position past either end picks nothing (BYMONTHDAY, BYSETPOS)."""
    picked: set[_Day] = set()
    for n in positions:
        index = n - 1 if n > 0 else len(items) + n
        if 0 <= index < len(items):
            picked.add(items[index])
    return sorted(picked)


def _yearly(plan: RulePlan) -> bool:
    return plan.parts.freq == "YEARLY"


def _stride(plan: RulePlan) -> int:
    """Months from one period of the grid to the next (INTERVAL months, or years)."""
    return plan.parts.interval * (12 if _yearly(plan) else 1)


def _period(plan: RulePlan, index: int) -> int:
    """The first month (an index, ``year * 12 + month - 1``) of the period holding the
    month ``index``: itself, or for a YEARLY rule its January."""
    return index - index % 12 if _yearly(plan) else index


def _origin(plan: RulePlan) -> int:
    return _period(plan, plan.dtstart.year * 12 + plan.dtstart.month - 1)


def _months_from(plan: RulePlan, year: int, month: int, step: int) -> tuple[int, int]:
    """The first month of the rule's period at or after (``step`` 1) / at or before
    (``step`` -1) the one holding ``year``-``month`` (every INTERVAL months from DTSTART's
    month; every INTERVAL years from DTSTART's year for a YEARLY rule)."""
    origin = _origin(plan)
    here = _period(plan, year * 12 + month - 1)
    index = max(here, origin) if step > 0 else here
    stride = _stride(plan)
    offset = (index - origin) % stride
    if offset:
        index += (stride - offset) if step > 0 else -offset
    return divmod(index, 12)


def _slots_of_month(
    plan: RulePlan, is_business: Callable[[date], bool], index: int
) -> list[datetime]:
    year, month0 = divmod(index, 12)
    if not 1 <= year <= MAX_YEAR:
        return []
    until = plan.parts.until
    found = []
    for local in month_times(plan, is_business, year, month0 + 1):
        if local < plan.dtstart:
            continue
        instant = local_instant(local, plan.tz)
        if until is not None and instant > until:
            continue
        if FIRST_INSTANT <= instant <= LAST_INSTANT:
            found.append(instant)
    return sorted(set(found))


def business_rule_from(
    plan: RulePlan, is_business: Callable[[date], bool], lo: datetime
) -> datetime | None:
    """The first slot at or after ``lo`` (aware UTC), or None (at most 400 years on)."""
    lo = max(lo, FIRST_INSTANT)
    reading = local_reading(lo, plan.tz) - timedelta(days=1)
    year, month0 = _months_from(plan, reading.year, reading.month, 1)
    index = year * 12 + month0
    for _ in range(_MONTHS // _stride(plan) + 2):
        if index // 12 > MAX_YEAR:
            return None
        if plan.parts.until is not None and index > _index_of(plan, plan.parts.until) + 1:
            return None
        for slot in _slots_of_month(plan, is_business, index):
            if slot >= lo:
                return slot
        index += _stride(plan)
    return None


def _index_of(plan: RulePlan, instant: datetime) -> int:
    reading = local_reading(instant, plan.tz)
    return reading.year * 12 + reading.month - 1


def business_rule_latest(
    plan: RulePlan, is_business: Callable[[date], bool], lo: datetime, hi: datetime
) -> datetime | None:
    """The latest slot in ``[lo, hi]``, or None (month by month back from ``hi``)."""
    reading = local_reading(hi, plan.tz) + timedelta(days=1)
    year, month0 = _months_from(plan, reading.year, reading.month, -1)
    index = year * 12 + month0
    first = _period(plan, _index_of(plan, max(lo, FIRST_INSTANT)) - 1)
    while index >= max(first, _origin(plan)):
        slots = [s for s in _slots_of_month(plan, is_business, index) if lo <= s <= hi]
        if slots:
            return slots[-1]
        index -= _stride(plan)
    return None


def business_rule_count(
    plan: RulePlan, is_business: Callable[[date], bool], lo: datetime, hi_excl: datetime, cap: int
) -> int:
    """Slots in ``[lo, hi_excl)``, at most ``cap``."""
    total = 0
    cursor = lo
    while total < cap:
        slot = business_rule_from(plan, is_business, cursor)
        if slot is None or slot >= hi_excl:
            break
        total += 1
        cursor = slot + timedelta(seconds=1)
    return total
