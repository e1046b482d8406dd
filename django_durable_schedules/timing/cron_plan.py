"""Cron compilation: a validated expression in a zone becomes a cached :class:`CronPlan`
(its minutes, hours, months and cronsim's day matcher), refused if it can never fire.

``cronsim`` parses the fields and decides which dates fire (months, the
day-of-month/day-of-week rule: if either field starts with ``*`` both must match, otherwise
either one is enough; ``L``, ``LW``, ``nL``, ``#``). :mod:`.cron` maps the wall times of
those dates to instants.
"""

from __future__ import annotations

import bisect
import calendar
import functools
import math
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError

from .cron_syntax import CRON_FIELDS, check_item, expand_cron
from .errors import InvalidSchedule
from .instants import MINUTE
from .zones import validate_timezone, zone_info


@dataclass(frozen=True, eq=False)  # identity hash: plans are cached per (expression, zone)
class CronPlan:
    """A cron expression compiled for one zone (:func:`compile_cron`): its normalized and
    five-field forms and what evaluation reads from them."""

    normalized: str
    expanded: str
    wildcard: bool
    tz: ZoneInfo
    minutes: frozenset[int]
    hours: frozenset[int]
    months: frozenset[int]
    days: CronSim  # a cronsim instance used only for its day matcher (months forced to *)
    day_expr: str  # "0 0 <dom> <month> <dow>": cronsim jumps to the next firing date

    @functools.cached_property
    def minutes_of_day(self) -> tuple[int, ...]:
        """Matching wall times of a firing day, as sorted minutes after midnight."""
        return tuple(sorted(60 * h + m for h in self.hours for m in self.minutes))

    def count_minutes_of_day(self, start: timedelta, end: timedelta) -> int:
        """How many matching wall times ``00:00 + k minutes`` satisfy start <= k < end."""
        first = math.ceil(start / MINUTE)
        last = math.ceil(end / MINUTE)
        return bisect.bisect_left(self.minutes_of_day, last) - bisect.bisect_left(
            self.minutes_of_day, first
        )

    def matches_day(self, day: date) -> bool:
        """Month and the day-of-month/day-of-week rule (cronsim's matcher)."""
        return day.month in self.months and self.days.match_day(day)


@functools.cache
def _month_shapes() -> tuple[tuple[int, int], ...]:
    """One (year, month) for every distinct (month, weekday of the 1st, length) of the
    400-year Gregorian cycle: if no day of these months matches, no day ever does."""
    seen: dict[tuple[int, int, int], tuple[int, int]] = {}
    for year in range(2000, 2400):
        for month in range(1, 13):
            seen.setdefault((month, *calendar.monthrange(year, month)), (year, month))
    return tuple(seen.values())


def _can_ever_fire(plan: CronPlan) -> bool:
    for year, month in _month_shapes():
        if month not in plan.months:
            continue
        days_in_month = calendar.monthrange(year, month)[1]
        if any(plan.days.match_day(date(year, month, d)) for d in range(1, days_in_month + 1)):
            return True
    return False


def _never_fires_message(expanded: str) -> str:
    _, _, dom, month, dow = expanded.split()
    if dow == "*":
        where = f"day-of-month {dom!r} never occurs in month {month!r}"
    else:
        where = f"no date matches day-of-month {dom!r} and day-of-week {dow!r}"
        if month != "*":
            where += f" in month {month!r}"
    return f"can never fire: {where}"


def _engine(expanded: str, start: datetime) -> CronSim:
    try:
        return CronSim(expanded, start)
    except CronSimError as exc:  # our own checks should have caught it first
        raise InvalidSchedule("cron", f"cron expression rejected: {exc}") from None


@functools.lru_cache(maxsize=1024)
def compile_cron(expr: str, tz_name: str) -> CronPlan:
    """Check syntax field by field, then build the plan; cached per (expr, zone)."""
    normalized, expanded = expand_cron(expr)
    fields = expanded.split()
    for field, text in zip(CRON_FIELDS, fields, strict=True):
        for item in text.split(","):
            check_item(field, item)
    minute, hour, dom, month, dow = fields
    reference = datetime(2000, 1, 1)
    times = _engine(f"{minute} {hour} * * *", reference)
    plan = CronPlan(
        normalized=normalized,
        expanded=expanded,
        wildcard=minute.startswith("*") or hour.startswith("*"),
        tz=zone_info(validate_timezone(tz_name)),
        minutes=frozenset(times.minutes),
        hours=frozenset(times.hours),
        months=frozenset(_engine(f"* * * {month} *", reference).months),
        days=_engine(f"* * {dom} * {dow}", reference),
        day_expr=f"0 0 {dom} {month} {dow}",
    )
    if not _can_ever_fire(plan):
        raise InvalidSchedule("cron", _never_fires_message(expanded))
    _engine(expanded, reference)  # the engine itself must accept the whole expression
    return plan


def validate_cron(expr: str, timezone: str = "UTC") -> str:
    """Validate a 5-field cron expression and return it normalized.

    Normalized means whitespace collapsed to single spaces; a macro is returned as its
    lower-case name (``@daily``). Accepted: numbers, ``*``, ranges ``a-b``, lists, steps
    ``*/n``, ``a-b/n`` and ``a/n`` (``a`` to the field maximum), month and weekday names,
    weekday 0 or 7 for Sunday, the macros in :data:`CRON_MACROS`, and the extensions
    cronsim evaluates correctly: ``L`` and ``LW`` in day-of-month, ``nL`` and
    ``n#k`` in day-of-week.

    Raises :class:`InvalidSchedule` with ``field="cron"`` and a message naming the bad
    field and token, e.g. ``"day-of-month: '32' is out of range 1-31"``, for: a wrong
    number of fields, ``@reboot`` or an unknown macro, out-of-range values, backwards
    ranges, a step of 0 or a step larger than the field's range (``*/90`` minutes),
    unsupported extensions (``15W``, ``L-3``, ``?``) and expressions that can never fire
    (``0 0 30 2 *``: "can never fire: ..."). Also raises
    ``InvalidSchedule("timezone", ...)`` for an unknown ``timezone``.
    """
    return compile_cron(expr, timezone).normalized
