"""Pure schedule time math: validation, next fire times, catch-up and backoff arithmetic.

Nothing here imports Django or touches a database. Every instant that goes in must be an
aware ``datetime``; every instant that comes out is an aware UTC ``datetime`` with whole
seconds. Durations are integer seconds.

Rules and where they come from (``docs/time.md`` explains them with examples):

* Interval schedules are elapsed UTC time: slot ``n`` is ``anchor + n * interval``.
* Cron schedules are wall-clock time in the schedule's IANA zone. ``cronsim`` parses the
  fields and decides which dates fire; this module maps
  wall times to instants itself, because cronsim's DST handling breaks the rules below in
  three cases (see "Cron evaluation"):

  - fixed-time jobs (minute and hour fields do not start with ``*``) run once for a wall
    time inside a spring-forward gap, at the first instant after the gap, and once, at the
    first reading, for a wall time inside a fall-back overlap;
  - wildcard jobs (minute or hour field starts with ``*``) run at every real instant whose
    local reading matches: both passes of a repeated hour, nothing inside a gap;
  - day-of-month and day-of-week: if either field starts with ``*`` both must match,
    otherwise either one is enough.
* Instants are truncated (never rounded up) to whole seconds before any arithmetic.
"""

from __future__ import annotations

import bisect
import calendar
import functools
import hashlib
import math
import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from typing import overload
from zoneinfo import ZoneInfo, available_timezones

from cronsim import CronSim, CronSimError

__all__ = [
    "InvalidSchedule",
    "UTC",
    "MIN_INTERVAL_SECONDS",
    "MAX_INTERVAL_SECONDS",
    "MAX_YEAR",
    "KINDS",
    "CRON_MACROS",
    "require_aware",
    "truncate_to_second",
    "validate_timezone",
    "validate_interval",
    "validate_cron",
    "is_wildcard_cron",
    "Spec",
    "next_slot_after",
    "upcoming",
    "latest_slot_at_or_before",
    "count_slots",
    "backoff_seconds",
    "jitter_offset",
    "describe",
]

UTC = timezone.utc  # noqa: UP017 (the same object as datetime.UTC)
MIN_INTERVAL_SECONDS = 1
MAX_INTERVAL_SECONDS = 10 * 366 * 86400  # about ten years; bigger intervals are rejected
MAX_YEAR = 9000  # fire times later than this year are "never" (None), never an OverflowError
KINDS = ("interval", "cron", "once")

#: The ``@`` macros accepted in a cron field, and the 5-field expression each one means.
CRON_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

_SECOND = timedelta(seconds=1)
_MINUTE = timedelta(minutes=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_LAST_INSTANT = datetime(MAX_YEAR, 12, 31, 23, 59, 59, tzinfo=UTC)
_FIRST_INSTANT = datetime(2, 1, 1, tzinfo=UTC)  # cron searches never start earlier (no underflow)


# --------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------


class InvalidSchedule(ValueError):
    """A schedule definition (or an instant given to this module) is not acceptable.

    ``field`` names the offending schedule field (``"cron"``, ``"timezone"``,
    ``"interval_seconds"``, ``"run_at"``, ...) so that callers can turn it into a
    field-keyed ``ValidationError`` or an HTTP 400 body; ``message`` is the human text and
    also what ``str()`` returns.
    """

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
        self.message = message

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[type[InvalidSchedule], tuple[str, str]]:
        # keep both arguments when pickled (e.g. across processes)
        return (type(self), (self.field, self.message))


# --------------------------------------------------------------------------------------
# Instants
# --------------------------------------------------------------------------------------


def require_aware(value: datetime, field: str) -> datetime:
    """Return ``value`` converted to UTC, refusing naive datetimes.

    A naive datetime is neither UTC nor local time, so it is never guessed at.
    Microseconds are kept (see :func:`truncate_to_second`).

    Raises :class:`InvalidSchedule` ``(field, "aware datetime required ...")`` for a naive
    datetime or a non-datetime, and for an instant that cannot be expressed in UTC.
    """
    if not isinstance(value, datetime):
        raise InvalidSchedule(
            field, f"aware datetime required, got {type(value).__name__} {value!r}"
        )
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidSchedule(
            field,
            f"aware datetime required, got naive {value.isoformat()}; "
            "give its UTC offset or time zone (it is never read as UTC or as local time)",
        )
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise InvalidSchedule(field, f"datetime {value.isoformat()} is out of range") from None


def truncate_to_second(value: datetime, field: str = "datetime") -> datetime:
    """Return the aware ``value`` in UTC with ``microsecond=0``.

    Truncates, never rounds up, so a slot can never move into the future (MySQL
    rounding ``.999999`` up skipped runs). Raises :class:`InvalidSchedule` ``(field, ...)``
    for a naive datetime, like :func:`require_aware`.
    """
    return require_aware(value, field).replace(microsecond=0)


def _to_seconds(value: datetime) -> int:
    """Whole seconds since the Unix epoch of an aware UTC datetime without microseconds."""
    return (value - _EPOCH) // _SECOND


def _from_seconds(seconds: int) -> datetime | None:
    """The UTC instant ``seconds`` after the epoch, or None when it lies after MAX_YEAR."""
    if seconds > _to_seconds(_LAST_INSTANT):
        return None
    return _EPOCH + timedelta(seconds=seconds)


# --------------------------------------------------------------------------------------
# Time zones and intervals
# --------------------------------------------------------------------------------------

# Present in some system zone databases but not IANA zone names a schedule may use: the
# host's own zone and zic's internal defaults.
_NOT_SCHEDULE_ZONES = frozenset({"localtime", "posixrules", "Factory"})


@functools.cache
def _known_zones() -> frozenset[str]:
    return frozenset(available_timezones()) | {"UTC"}


@functools.lru_cache(maxsize=512)
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def validate_timezone(name: str) -> str:
    """Return ``name`` if it is an IANA time zone name that ``zoneinfo`` can load.

    Typos (``'America/New_Yrok'``), the empty string, case variants (``'utc'``), file
    paths and host-specific entries such as ``'localtime'`` are refused.

    Raises :class:`InvalidSchedule` ``("timezone", "unknown IANA time zone '...'")``.
    """
    message = f"unknown IANA time zone {name!r}"
    if not isinstance(name, str) or name in _NOT_SCHEDULE_ZONES or name not in _known_zones():
        raise InvalidSchedule("timezone", message)
    try:
        _zone(name)
    except (KeyError, ValueError, OSError):  # ZoneInfoNotFoundError is a KeyError
        raise InvalidSchedule("timezone", message) from None
    return name


def validate_interval(seconds: int) -> int:
    """Return ``seconds`` if it is a valid interval length: an ``int`` (not a ``bool``) in
    ``[MIN_INTERVAL_SECONDS, MAX_INTERVAL_SECONDS]`` (1 s to about 10 years).

    Zero, negative and absurdly large intervals are refused at creation instead of
    overflowing a timer in the worker.

    Raises :class:`InvalidSchedule` ``("interval_seconds", ...)``.
    """
    if isinstance(seconds, bool) or not isinstance(seconds, int):
        raise InvalidSchedule(
            "interval_seconds",
            f"interval must be a whole number of seconds, got {type(seconds).__name__} {seconds!r}",
        )
    if seconds < MIN_INTERVAL_SECONDS:
        raise InvalidSchedule(
            "interval_seconds",
            f"interval must be at least {MIN_INTERVAL_SECONDS} second, got {seconds}",
        )
    if seconds > MAX_INTERVAL_SECONDS:
        raise InvalidSchedule(
            "interval_seconds",
            f"interval must be at most {MAX_INTERVAL_SECONDS} seconds (about 10 years), "
            f"got {seconds}",
        )
    return seconds


# --------------------------------------------------------------------------------------
# Cron syntax
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _CronField:
    name: str
    low: int
    high: int
    max_step: int  # a step larger than the field's range is refused
    names: tuple[str, ...] = ()
    name_base: int = 0  # value of names[0]


_MONTH_NAMES = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAY_NAMES = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_FIELDS = (
    _CronField("minute", 0, 59, 60),
    _CronField("hour", 0, 23, 24),
    _CronField("day-of-month", 1, 31, 31),
    _CronField("month", 1, 12, 12, _MONTH_NAMES, 1),
    _CronField("day-of-week", 0, 7, 7, _DAY_NAMES, 0),
)
_DIGITS = re.compile(r"[0-9]+")


def _cron_error(field: _CronField, message: str) -> InvalidSchedule:
    return InvalidSchedule("cron", f"{field.name}: {message}")


def _check_value(field: _CronField, token: str) -> int:
    """The integer a single field value stands for (number or name), or an error."""
    upper = token.upper()
    if field.names and upper in field.names:
        return field.names.index(upper) + field.name_base
    if not _DIGITS.fullmatch(token):
        hint = f" or a name such as {field.names[0]}" if field.names else ""
        raise _cron_error(field, f"{token!r} is not a number{hint}")
    value = int(token)
    if not field.low <= value <= field.high:
        raise _cron_error(field, f"{token!r} is out of range {field.low}-{field.high}")
    return value


def _check_step(field: _CronField, item: str, step: str) -> None:
    if not _DIGITS.fullmatch(step):
        raise _cron_error(field, f"step {step!r} in {item!r} is not a number")
    if int(step) == 0:
        raise _cron_error(field, f"step 0 in {item!r} is not allowed (steps start at 1)")
    if int(step) > field.max_step:
        raise _cron_error(
            field,
            f"step {int(step)} in {item!r} is larger than the field range "
            f"{field.low}-{field.high if field.name != 'day-of-week' else 6} "
            "(steps restart every period; use an interval schedule for 'every N')",
        )


def _check_range_or_value(field: _CronField, item: str, base: str) -> None:
    if base == "*":
        return
    if "-" in base:
        first, _, last = base.partition("-")
        if _check_value(field, first) > _check_value(field, last):
            raise _cron_error(
                field, f"range {item!r} runs backwards (wrap-around ranges are not supported)"
            )
        return
    _check_value(field, base)


def _check_day_of_month_extension(field: _CronField, item: str) -> bool:
    """True if ``item`` is an accepted day-of-month extension (L, LW); error if it is an
    extension cronsim does not evaluate (nW, L-n, nL, L/n ...)."""
    upper = item.upper()
    if upper in ("L", "LW"):
        return True
    if "W" in upper:
        raise _cron_error(
            field,
            f"{item!r} (nearest weekday) is not supported; only 'LW' (last weekday of "
            "the month) is",
        )
    if "L" in upper:
        raise _cron_error(
            field,
            f"{item!r} is not supported; use 'L' (last day of the month) or 'LW' "
            "(last weekday of the month)",
        )
    return False


def _check_day_of_week_extension(field: _CronField, item: str) -> bool:
    """True if ``item`` is an accepted day-of-week extension (nL, n#k); error for the
    L forms cronsim does not evaluate."""
    upper = item.upper()
    if "#" in upper:
        day, _, nth = upper.partition("#")
        _check_value(field, day)
        if not _DIGITS.fullmatch(nth) or not 1 <= int(nth) <= 5:
            raise _cron_error(field, f"{item!r}: the occurrence after '#' must be 1-5")
        return True
    if "L" in upper:
        if upper.endswith("L") and _DIGITS.fullmatch(upper[:-1]):
            _check_value(field, upper[:-1])
            return True
        raise _cron_error(
            field,
            f"{item!r} is not supported; write the last weekday of the month as its "
            "number followed by L, e.g. '5L' for the last Friday",
        )
    return False


def _check_item(field: _CronField, item: str) -> None:
    """Validate one comma-separated item of a field; raise InvalidSchedule naming both."""
    if item == "":
        raise _cron_error(field, "empty list item (check the commas)")
    if "?" in item:
        raise _cron_error(field, f"{item!r}: '?' is not supported; use '*'")
    if field.name == "day-of-month" and _check_day_of_month_extension(field, item):
        return
    if field.name == "day-of-week" and _check_day_of_week_extension(field, item):
        return
    base, slash, step = item.partition("/")
    if slash:
        _check_step(field, item, step)
    _check_range_or_value(field, item, base)


def _expand(expr: str) -> tuple[str, str]:
    """(normalized, five-field expansion) of a cron expression, or InvalidSchedule."""
    if not isinstance(expr, str) or not expr.strip():
        raise InvalidSchedule("cron", "cron expression is empty")
    words = expr.split()
    if words[0].startswith("@"):
        macro = words[0].lower()
        if macro == "@reboot":
            raise InvalidSchedule(
                "cron", "'@reboot' is not supported: a schedule needs a time of day"
            )
        if macro not in CRON_MACROS or len(words) != 1:
            raise InvalidSchedule(
                "cron",
                f"unknown cron macro {expr.strip()!r}; use one of {', '.join(CRON_MACROS)}",
            )
        return macro, CRON_MACROS[macro]
    if len(words) != 5:
        raise InvalidSchedule(
            "cron",
            "a cron expression has 5 fields (minute hour day-of-month month day-of-week), "
            f"got {len(words)}",
        )
    normalized = " ".join(words)
    return normalized, normalized


def is_wildcard_cron(expr: str) -> bool:
    """True when the minute or the hour field starts with ``*``.

    Macros count as their expansion: ``@hourly`` (``0 * * * *``) is a wildcard job, the
    others are fixed-time. Wildcard jobs fire at every real instant whose local reading
    matches; fixed-time jobs fire once per wall-clock match.
    Raises :class:`InvalidSchedule` ``("cron", ...)`` when ``expr`` has no 5 fields.
    """
    minute, hour = _expand(expr)[1].split()[:2]
    return minute.startswith("*") or hour.startswith("*")


# --------------------------------------------------------------------------------------
# Cron compilation and "can never fire"
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)  # identity hash: plans are cached per (expression, zone)
class _CronPlan:
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
        first = math.ceil(start / _MINUTE)
        last = math.ceil(end / _MINUTE)
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


def _can_ever_fire(plan: _CronPlan) -> bool:
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
def _compile(expr: str, tz_name: str) -> _CronPlan:
    """Check syntax field by field, then build the plan; cached per (expr, zone)."""
    normalized, expanded = _expand(expr)
    fields = expanded.split()
    for field, text in zip(_FIELDS, fields, strict=True):
        for item in text.split(","):
            _check_item(field, item)
    minute, hour, dom, month, dow = fields
    reference = datetime(2000, 1, 1)
    times = _engine(f"{minute} {hour} * * *", reference)
    plan = _CronPlan(
        normalized=normalized,
        expanded=expanded,
        wildcard=minute.startswith("*") or hour.startswith("*"),
        tz=_zone(validate_timezone(tz_name)),
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
    return _compile(expr, timezone).normalized


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
def _plain_day(tz: ZoneInfo, day: date) -> tuple[datetime, datetime] | None:
    """UTC bounds [start, end) of local ``day`` if the zone's offset does not change from a
    few hours before its midnight to a few hours after the next one; else None.

    On such a day every wall minute occurs exactly once, at ``start + minutes``, no
    gap-shifted slot of the previous day lands in it, and no repeated hour straddles
    either midnight."""
    try:
        start = datetime.combine(day, time(), tzinfo=tz).astimezone(UTC)
        offset = (start - _SECOND).astimezone(tz).utcoffset()
        for hours in _PLAIN_DAY_PROBE_HOURS:
            if (start + timedelta(hours=hours)).astimezone(tz).utcoffset() != offset:
                return None
    except OverflowError:
        return None
    return start, start + timedelta(days=1)


def _first_instant_after_gap(tz: ZoneInfo, wall: datetime, lo: datetime, hi: datetime) -> datetime:
    """The first instant whose reading is later than ``wall``, a wall time that a
    spring-forward gap skips; ``lo < that instant <= hi`` (bisection over seconds)."""
    while hi - lo > _SECOND:
        middle = lo + timedelta(seconds=(hi - lo) // _SECOND // 2)
        if _reading(middle, tz) > wall:
            hi = middle
        else:
            lo = middle
    return hi


def _wall_instants(plan: _CronPlan, wall: datetime) -> tuple[datetime, ...]:
    """The instants at which a matching wall time fires."""
    tz = plan.tz
    candidates = sorted({wall.replace(tzinfo=tz, fold=fold).astimezone(UTC) for fold in (0, 1)})
    real = [u for u in candidates if _reading(u, tz) == wall]
    if plan.wildcard:
        return tuple(real)  # both passes of a repeated hour; nothing inside a gap
    if real:
        return (real[0],)  # fixed-time: the first reading only
    return (_first_instant_after_gap(tz, wall, candidates[0], candidates[-1]),)


@functools.lru_cache(maxsize=256)
def _day_instants(plan: _CronPlan, day: date) -> tuple[datetime, ...]:
    """All fire instants of the wall times of a firing ``day`` with a DST change, sorted."""
    midnight = datetime.combine(day, time())
    instants: set[datetime] = set()
    for minutes in plan.minutes_of_day:
        instants.update(_wall_instants(plan, midnight + timedelta(minutes=minutes)))
    return tuple(sorted(instants))


def _first_instant_of_day_after(plan: _CronPlan, day: date, after: datetime) -> datetime | None:
    """The first fire instant strictly after ``after`` among the wall times of ``day``."""
    bounds = _plain_day(plan.tz, day)
    if bounds is None:
        instants = _day_instants(plan, day)
        index = bisect.bisect_right(instants, after)
        return instants[index] if index < len(instants) else None
    start = bounds[0]
    index = bisect.bisect_right(plan.minutes_of_day, (after - start) // _MINUTE)
    if index == len(plan.minutes_of_day):
        return None
    return start + plan.minutes_of_day[index] * _MINUTE


def _next_firing_day(plan: _CronPlan, day: date) -> date | None:
    """The first date >= ``day`` that the calendar fields select (None after MAX_YEAR).
    Looks at the next few dates directly, then lets cronsim jump (it gives up after 50
    years without a match, which only an expression rejected by validate_cron can need)."""
    for _ in range(8):
        if plan.matches_day(day):
            return day if day.year <= MAX_YEAR else None
        day += timedelta(days=1)
    engine = CronSim(plan.day_expr, datetime.combine(day, time()) - _SECOND)
    try:
        day = next(engine).date()
    except (StopIteration, OverflowError):
        return None
    return day if day.year <= MAX_YEAR else None


def _cron_next(plan: _CronPlan, after: datetime) -> datetime | None:
    """First slot strictly after the UTC instant ``after`` (whole seconds), or None.

    Walks the firing dates from ``after``'s local date and returns the earliest instant
    later than ``after``. Next to a DST change the walk also looks at the date before
    (a repeated hour can straddle midnight) and the date after the one that produced the
    answer (a repeated hour can put instants of one date before those of the previous).
    A date without DST change ends before the next one starts, so it needs neither.
    """
    if after >= _LAST_INSTANT:
        return None
    day = _reading(after, plan.tz).date()
    if _plain_day(plan.tz, day - timedelta(days=1)) is None:
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
        if best_day is not None and _plain_day(plan.tz, best_day) is not None:
            break
        day = firing + timedelta(days=1)
    return best if best is not None and best <= _LAST_INSTANT else None


def _cron_from(plan: _CronPlan, lo: datetime) -> datetime | None:
    """First slot at or after the UTC instant ``lo`` (whole seconds), or None."""
    return _cron_next(plan, max(lo, _FIRST_INSTANT) - _SECOND)


def _cron_count(plan: _CronPlan, lo: datetime, hi_excl: datetime, cap: int) -> int:
    """Slots in [lo, hi_excl), at most ``cap``, day by firing local day: a day without DST
    change is counted arithmetically (its wall minutes map linearly to UTC); the instants
    of a day with one are collected in a set, since a gap straddling midnight can move
    slots of two dates onto the same instant."""
    tz = plan.tz
    lo, hi_excl = max(lo, _FIRST_INSTANT), min(hi_excl, _LAST_INSTANT + _SECOND)
    plain_total = 0
    dst_instants: set[datetime] = set()
    day = _reading(lo, tz).date() - timedelta(days=1)
    last_day = _reading(hi_excl, tz).date() + timedelta(days=1)
    while plain_total + len(dst_instants) < cap:
        firing_day = _next_firing_day(plan, day)
        if firing_day is None or firing_day > last_day:
            break
        day = firing_day
        bounds = _plain_day(tz, day)
        if bounds is None:
            instants = _day_instants(plan, day)
            first = bisect.bisect_left(instants, lo)
            dst_instants.update(instants[first : bisect.bisect_left(instants, hi_excl)])
        else:
            start, end = bounds
            plain_total += max(
                0, plan.count_minutes_of_day(max(lo, start) - start, min(hi_excl, end) - start)
            )
        day += timedelta(days=1)
    return min(plain_total + len(dst_instants), cap)


def _cron_latest(plan: _CronPlan, lo: datetime, hi: datetime) -> datetime | None:
    """Latest slot in [lo, hi] by bisection over the forward search: O(log(hi - lo))
    searches, so 30 days of ``* * * * *`` costs ~22 of them, not 43,200."""
    best = _cron_from(plan, lo)
    if best is None or best > hi:
        return None
    top = hi  # invariant: best is a slot, and no slot lies in (top, hi]
    while best < top:
        middle = best + timedelta(seconds=math.ceil((top - best) / _SECOND / 2))
        slot = _cron_from(plan, middle)
        if slot is not None and slot <= hi:
            best = slot
        else:
            top = middle - _SECOND
    return best


# --------------------------------------------------------------------------------------
# Schedule specification
# --------------------------------------------------------------------------------------


def _given(value: object) -> bool:
    return value is not None and value != ""


@dataclass(frozen=True)
class Spec:
    """The timing definition of a schedule; pure data, validated by :meth:`validate`.

    ``kind`` is ``"interval"`` (``interval_seconds`` from ``anchor``), ``"cron"``
    (``cron`` in ``timezone``) or ``"once"`` (``run_at``). ``anchor`` is the interval
    grid origin (the schedule's ``start_at``, else its creation time); when it is None
    ``start_at`` is used. No slot is earlier than ``start_at`` or later than ``end_at``
    (inclusive). All datetimes must be aware; they are used truncated to whole seconds.
    """

    kind: str
    interval_seconds: int | None = None
    cron: str | None = None
    timezone: str = "UTC"
    run_at: datetime | None = None
    anchor: datetime | None = None
    start_at: datetime | None = None
    end_at: datetime | None = None

    def validate(self) -> None:
        """Raise :class:`InvalidSchedule` ``(field, message)`` for the first problem:
        unknown ``kind``; unknown ``timezone``; a naive datetime; ``end_at`` before
        ``start_at``; a missing required field or a field that does not belong to the kind
        (``cron`` on an interval, ``run_at`` on a cron, ...); an invalid interval or cron
        expression; an interval without ``anchor``/``start_at``; a ``run_at`` outside
        ``[start_at, end_at]``."""
        if self.kind not in KINDS:
            raise InvalidSchedule(
                "kind", f"kind must be one of {', '.join(KINDS)}; got {self.kind!r}"
            )
        validate_timezone(self.timezone)
        for name in ("run_at", "anchor", "start_at", "end_at"):
            if getattr(self, name) is not None:
                require_aware(getattr(self, name), name)
        if self.start_at and self.end_at and _trunc(self.end_at) < _trunc(self.start_at):
            raise InvalidSchedule("end_at", "end_at must not be before start_at")
        self._forbid(
            {
                "interval": ("cron", "run_at"),
                "cron": ("interval_seconds", "run_at"),
                "once": ("interval_seconds", "cron"),
            }[self.kind]
        )
        getattr(self, f"_validate_{self.kind}")()

    def _forbid(self, names: tuple[str, ...]) -> None:
        for name in names:
            if _given(getattr(self, name)):
                raise InvalidSchedule(name, f"a {self.kind} schedule does not take {name}")

    def _validate_interval(self) -> None:
        if self.interval_seconds is None:
            raise InvalidSchedule("interval_seconds", "an interval schedule needs interval_seconds")
        validate_interval(self.interval_seconds)
        if self.anchor is None and self.start_at is None:
            raise InvalidSchedule(
                "anchor", "an interval schedule needs an anchor (start_at or creation time)"
            )

    def _validate_cron(self) -> None:
        if self.cron is None or not _given(self.cron):
            raise InvalidSchedule("cron", "a cron schedule needs a cron expression")
        validate_cron(self.cron, self.timezone)

    def _validate_once(self) -> None:
        if self.run_at is None:
            raise InvalidSchedule("run_at", "a once schedule needs run_at")
        run_at = _trunc(self.run_at)
        if self.start_at and run_at < _trunc(self.start_at):
            raise InvalidSchedule("run_at", "run_at is before start_at")
        if self.end_at and run_at > _trunc(self.end_at):
            raise InvalidSchedule("run_at", "run_at is after end_at")


def _trunc(value: datetime, field: str = "datetime") -> datetime:
    return truncate_to_second(value, field)


@overload
def _window(spec: Spec, lo: datetime, hi: datetime) -> tuple[datetime, datetime]: ...
@overload
def _window(spec: Spec, lo: datetime, hi: None) -> tuple[datetime, datetime | None]: ...
def _window(spec: Spec, lo: datetime, hi: datetime | None) -> tuple[datetime, datetime | None]:
    """Narrow [lo, hi] (whole-second UTC; hi None = open) to [start_at, end_at]."""
    if spec.start_at is not None:
        lo = max(lo, _trunc(spec.start_at))
    if spec.end_at is not None:
        end = _trunc(spec.end_at)
        hi = end if hi is None else min(hi, end)
    return lo, hi


def _interval_grid(spec: Spec) -> tuple[int, int]:
    """(anchor in epoch seconds, interval seconds) of a validated interval spec."""
    anchor = spec.anchor if spec.anchor is not None else spec.start_at
    assert anchor is not None and spec.interval_seconds is not None  # Spec.validate() checked
    return _to_seconds(_trunc(anchor, "anchor")), spec.interval_seconds


def _run_at(spec: Spec) -> datetime:
    """``run_at`` (whole-second UTC) of a validated once spec."""
    assert spec.run_at is not None  # Spec.validate() checked
    return _trunc(spec.run_at, "run_at")


def _first_slot_from(spec: Spec, lo: datetime) -> datetime | None:
    """First slot >= lo (whole-second UTC), ignoring end_at."""
    if spec.kind == "once":
        run_at = _run_at(spec)
        return run_at if lo <= run_at <= _LAST_INSTANT else None
    if spec.kind == "interval":
        anchor, every = _interval_grid(spec)
        n = max(0, -((anchor - _to_seconds(lo)) // every))  # ceil((lo - anchor) / every)
        return _from_seconds(anchor + n * every)
    return _cron_from(_compile(spec.cron, spec.timezone), lo)


# --------------------------------------------------------------------------------------
# Public slot arithmetic
# --------------------------------------------------------------------------------------


def next_slot_after(spec: Spec, after: datetime, *, inclusive: bool = False) -> datetime | None:
    """The first slot strictly after ``after`` (at or after it when ``inclusive``), as an
    aware UTC datetime with whole seconds, or None when there is none (a once schedule
    already past, ``end_at`` passed, nothing before year MAX_YEAR).

    ``after`` (aware) is truncated to whole seconds first. Slots are never before
    ``start_at`` nor after ``end_at``. Interval: ``anchor + n * interval_seconds``
    computed in integer UTC seconds, whatever the zone. Cron: wall time
    in ``spec.timezone`` with the DST rules of the module docstring. Once:
    ``run_at``.

    Raises :class:`InvalidSchedule` if the spec is invalid (``spec.validate()``) or
    ``after`` is naive.
    """
    spec.validate()
    after = min(_trunc(after, "after"), _LAST_INSTANT + _SECOND)
    return _next_slot(spec, after if inclusive else after + _SECOND)


def _next_slot(spec: Spec, lo: datetime) -> datetime | None:
    """First slot >= lo (whole-second UTC) of a validated spec, inside [start_at, end_at]."""
    if lo > _LAST_INSTANT:
        return None
    lo, hi = _window(spec, lo, None)
    slot = _first_slot_from(spec, lo)
    if slot is None or (hi is not None and slot > hi):
        return None
    return slot


def upcoming(spec: Spec, after: datetime, count: int) -> list[datetime]:
    """The next ``count`` slots strictly after ``after`` (aware UTC, whole seconds), fewer
    if the schedule ends. Raises ``ValueError`` for a negative ``count`` and
    :class:`InvalidSchedule` like :func:`next_slot_after`."""
    if count < 0:
        raise ValueError("count must not be negative")
    spec.validate()
    slots: list[datetime] = []
    cursor = min(_trunc(after, "after"), _LAST_INSTANT)
    while len(slots) < count:
        slot = _next_slot(spec, cursor + _SECOND)
        if slot is None:
            break
        slots.append(slot)
        cursor = slot
    return slots


def latest_slot_at_or_before(spec: Spec, now: datetime, *, not_before: datetime) -> datetime | None:
    """The most recent slot ``s`` with ``not_before <= s <= now`` (and inside
    ``[start_at, end_at]``), or None. Used to coalesce missed slots into one late run.

    Bounded whatever the gap: interval and once are O(1) arithmetic; cron bisects
    over the forward search, O(log(now - not_before)) searches. Both bounds are
    truncated to whole seconds first. Raises :class:`InvalidSchedule` like
    :func:`next_slot_after`.
    """
    spec.validate()
    lo, hi = _window(spec, _trunc(not_before, "not_before"), _trunc(now, "now"))
    if hi < lo:
        return None
    if spec.kind == "once":
        run_at = _run_at(spec)
        return run_at if lo <= run_at <= hi else None
    if spec.kind == "interval":
        anchor, every = _interval_grid(spec)
        n = (_to_seconds(hi) - anchor) // every
        slot = _from_seconds(anchor + n * every) if n >= 0 else None
        return slot if slot is not None and slot >= lo else None
    return _cron_latest(_compile(spec.cron, spec.timezone), lo, hi)


def count_slots(spec: Spec, start: datetime, end: datetime, *, cap: int = 100_000) -> int:
    """Number of slots ``s`` with ``start <= s < end`` (and inside ``[start_at, end_at]``),
    at most ``cap``. Interval and once: O(1) arithmetic. Cron: a walk that counts whole
    DST-free local days arithmetically and stops at ``cap``. ``start`` and ``end`` are
    truncated to whole seconds first. Raises ``ValueError`` for a negative ``cap`` and
    :class:`InvalidSchedule` like :func:`next_slot_after`."""
    if cap < 0:
        raise ValueError("cap must not be negative")
    spec.validate()
    start, end = _trunc(start, "start"), _trunc(end, "end")
    if end <= start or cap == 0:
        return 0
    lo, hi = _window(spec, start, end - _SECOND)
    if hi < lo:
        return 0
    if spec.kind == "once":
        return 1 if lo <= _run_at(spec) <= hi else 0
    if spec.kind == "interval":
        anchor, every = _interval_grid(spec)
        first = max(0, -((anchor - _to_seconds(lo)) // every))
        last = (_to_seconds(hi) - anchor) // every
        return max(0, min(cap, last - first + 1))
    return _cron_count(_compile(spec.cron, spec.timezone), lo, hi + _SECOND, cap)


# --------------------------------------------------------------------------------------
# Retries, jitter, descriptions
# --------------------------------------------------------------------------------------


def backoff_seconds(attempt: int, base: float, cap: float) -> float:
    """Delay in seconds before retry number ``attempt`` (1 = the first retry):
    ``min(cap, base * 2 ** (attempt - 1))``. Never overflows, whatever ``attempt``.
    Raises ``ValueError`` if ``attempt < 1`` or ``base``/``cap`` is negative."""
    if attempt < 1:
        raise ValueError("attempt must be at least 1")
    if base < 0 or cap < 0:
        raise ValueError("base and cap must not be negative")
    if base == 0:
        return 0.0
    if attempt > 2048:  # 2 ** 2047 overflows a float whatever the base
        return float(cap)
    try:
        delay = math.ldexp(float(base), attempt - 1)
    except OverflowError:
        return float(cap)
    return float(min(cap, delay))


def jitter_offset(key: str, max_seconds: int) -> int:
    """A deterministic offset in ``[0, max_seconds]`` seconds derived from the SHA-256 of
    ``key`` (stable across processes and Python versions, unlike ``hash()``); 0 when
    ``max_seconds`` is 0. Raises ``ValueError`` for a negative ``max_seconds``."""
    if max_seconds < 0:
        raise ValueError("max_seconds must not be negative")
    if max_seconds == 0:
        return 0
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % (max_seconds + 1)


_UNITS = (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1))


def _describe_seconds(seconds: int) -> str:
    for unit, size in _UNITS:
        if seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'' if count == 1 else 's'}"
    raise AssertionError("unreachable")  # pragma: no cover


def describe(spec: Spec) -> str:
    """Short human words for a spec: ``"every 5 minutes"``, ``"every 1 hour"``,
    ``"cron '0 3 * * *' (Europe/Paris)"``, ``"once at 2027-06-01 09:00:00 UTC"``.
    Does not validate; an interval is named in its largest whole unit."""
    seconds = spec.interval_seconds
    if spec.kind == "interval" and isinstance(seconds, int) and seconds > 0:
        return f"every {_describe_seconds(seconds)}"
    if spec.kind == "cron":
        return f"cron '{spec.cron}' ({spec.timezone})"
    if spec.kind == "once" and spec.run_at is not None:
        return f"once at {_trunc(spec.run_at):%Y-%m-%d %H:%M:%S} UTC"
    return f"{spec.kind} schedule"
