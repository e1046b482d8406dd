"""Cron evaluation checked against an independent brute force, on real-world expressions.

For every expression of ``cron-corpus.tsv`` (and a set of hand-picked DST-sensitive ones),
the fire times that :func:`timing.upcoming` gives inside a window around each 2027 DST
change of the zone (a fixed window for zones without DST) must equal what a brute force
finds by walking every UTC minute of the window, reading the local wall clock with
``zoneinfo`` and matching the five fields itself under the product's DST rules
(DESIGN.md "Semantics"; R1-R3, R5 in field-reports.md):

* wildcard job (minute or hour field starts with ``*``): fires at every UTC minute whose
  local reading matches;
* fixed-time job: fires at the first reading (fold 0) of a matching wall time, and once at
  the first instant after a spring-forward gap if any skipped wall time matches;
* days: AND when either day field starts with ``*``, otherwise OR.

The matcher below shares no code with cronsim or with ``timing``.
"""

from __future__ import annotations

import calendar
import functools
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from django_durable_schedules import timing

MINUTE = timedelta(minutes=1)


def _data_dir() -> Path:
    here = Path(__file__).resolve()
    local = here.parent / "data"
    if (local / "cron-corpus.tsv").exists():
        return local
    return here.parents[2] / "shared" / "data"


def _read_tsv(name: str) -> list[tuple[str, str]]:
    rows = []
    for line in (_data_dir() / name).read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        expr, zone = line.split("\t")
        rows.append((expr.strip(), zone.strip()))
    return rows


CORPUS = _read_tsv("cron-corpus.tsv")
NEVER_FIRES = _read_tsv("cron-never-fires.tsv")


# ---------------------------------------------------------------------------------------
# Independent matcher
# ---------------------------------------------------------------------------------------

MACROS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}
MONTH_NAMES = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
MONTHS = {n: i for i, n in enumerate(MONTH_NAMES, 1)}
DAYS = {n: i for i, n in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"])}


def _number(text: str, names: dict[str, int]) -> int:
    return names[text.upper()] if text.upper() in names else int(text)


def _expand_item(item: str, lo: int, hi: int, names: dict[str, int]) -> set[int]:
    base, _, step = item.partition("/")
    if base == "*":
        first, last = lo, hi
    elif "-" in base:
        a, b = base.split("-")
        first, last = _number(a, names), _number(b, names)
    else:
        first = _number(base, names)
        last = hi if step else first
    return set(range(first, last + 1, int(step) if step else 1))


def _expand_field(text: str, lo: int, hi: int, names: dict[str, int] | None = None) -> set[int]:
    values: set[int] = set()
    for item in text.split(","):
        values |= _expand_item(item, lo, hi, names or {})
    return values


def _cron_weekday(day: date) -> int:
    return (day.weekday() + 1) % 7  # cron: 0 = Sunday


def _last_weekday_of_month(year: int, month: int) -> int:
    last = calendar.monthrange(year, month)[1]
    while date(year, month, last).weekday() >= 5:
        last -= 1
    return last


@dataclass
class Matcher:
    expr: str

    def __post_init__(self) -> None:
        minute, hour, dom, month, dow = MACROS.get(self.expr, self.expr).split()
        self.wildcard = minute.startswith("*") or hour.startswith("*")
        self.day_and = dom.startswith("*") or dow.startswith("*")
        self.minutes = _expand_field(minute, 0, 59)
        self.hours = _expand_field(hour, 0, 23)
        self.months = _expand_field(month, 1, 12, MONTHS)
        self.dom_items = dom.split(",")
        self.dow_items = dow.split(",")
        self.day_match = functools.cache(self._day_match)

    def _dom(self, day: date) -> bool:
        last = calendar.monthrange(day.year, day.month)[1]
        for item in self.dom_items:
            if item.upper() == "L" and day.day == last:
                return True
            if item.upper() == "LW" and day.day == _last_weekday_of_month(day.year, day.month):
                return True
            if item.upper() not in ("L", "LW") and day.day in _expand_item(item, 1, 31, {}):
                return True
        return False

    def _dow(self, day: date) -> bool:
        weekday = _cron_weekday(day)
        last = calendar.monthrange(day.year, day.month)[1]
        for item in self.dow_items:
            if "#" in item:
                wd, nth = item.split("#")
                if _number(wd, DAYS) % 7 == weekday and (day.day - 1) // 7 + 1 == int(nth):
                    return True
            elif item.upper().endswith("L"):
                if int(item[:-1]) % 7 == weekday and day.day + 7 > last:
                    return True
            elif weekday in {v % 7 for v in _expand_item(item, 0, 7, DAYS)}:
                return True
        return False

    def _day_match(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        if self.day_and:
            return self._dom(day) and self._dow(day)
        return self._dom(day) or self._dow(day)

    def wall_matches(self, wall: datetime) -> bool:
        return (
            wall.minute in self.minutes and wall.hour in self.hours and self.day_match(wall.date())
        )


@dataclass(frozen=True)
class Tick:
    """One UTC minute of a window: its local wall reading, fold, and the wall minutes a
    spring-forward gap skipped just before it."""

    instant: datetime
    wall: datetime
    fold: int
    skipped: tuple[datetime, ...]


@functools.cache
def _ticks(zone: str, start: datetime, end: datetime) -> tuple[Tick, ...]:
    tz = ZoneInfo(zone)
    ticks = []
    previous = (start - MINUTE).astimezone(tz).replace(tzinfo=None)
    t = start
    while t < end:
        local = t.astimezone(tz)
        wall = local.replace(tzinfo=None, fold=0)
        skipped = []
        w = previous + MINUTE
        while w < wall:
            skipped.append(w)
            w += MINUTE
        ticks.append(Tick(t, wall, local.fold, tuple(skipped)))
        previous = wall
        t += MINUTE
    return tuple(ticks)


def brute_force(expr: str, zone: str, start: datetime, end: datetime) -> list[datetime]:
    """All fire times in [start, end) under the product rules, by walking every minute."""
    m = Matcher(expr)
    fired = []
    for tick in _ticks(zone, start, end):
        if m.wildcard:
            fire = m.wall_matches(tick.wall)
        else:
            fire = (tick.fold == 0 and m.wall_matches(tick.wall)) or (
                bool(tick.skipped) and any(m.wall_matches(w) for w in tick.skipped)
            )
        if fire:
            fired.append(tick.instant)
    return fired


def module_slots(expr: str, zone: str, start: datetime, end: datetime) -> list[datetime]:
    spec = timing.Spec(kind="cron", cron=expr, timezone=zone)
    slots = []
    cursor = start - timedelta(seconds=1)
    while True:
        batch = timing.upcoming(spec, cursor, 50)
        slots.extend(s for s in batch if s < end)
        if len(batch) < 50 or batch[-1] >= end:
            return slots
        cursor = batch[-1]


# ---------------------------------------------------------------------------------------
# Windows
# ---------------------------------------------------------------------------------------

HALF_WINDOW = timedelta(hours=15)
UTC_WINDOWS = (  # Sun 28 Feb - Tue 2 Mar 2027: a month end, a Sunday and a Monday
    (datetime(2027, 2, 28, tzinfo=UTC), datetime(2027, 3, 2, tzinfo=UTC)),
)


@functools.cache
def transitions(zone: str, year: int = 2027) -> tuple[datetime, ...]:
    """UTC instants of the zone's offset changes in ``year`` (daily scan + bisection)."""
    tz = ZoneInfo(zone)
    found = []
    t = datetime(year, 1, 1, tzinfo=UTC)
    while t.year == year:
        nxt = t + timedelta(days=1)
        if t.astimezone(tz).utcoffset() != nxt.astimezone(tz).utcoffset():
            lo, hi = t, nxt
            while hi - lo > MINUTE:
                mid = lo + (hi - lo) / 2
                mid = mid.replace(second=0, microsecond=0)
                if mid.astimezone(tz).utcoffset() == t.astimezone(tz).utcoffset():
                    lo = mid
                else:
                    hi = mid
            found.append(hi)
        t = nxt
    return tuple(found)


def windows(zone: str, year: int = 2027) -> list[tuple[datetime, datetime]]:
    changes = transitions(zone, year)
    if not changes:
        return list(UTC_WINDOWS)
    return [(c - HALF_WINDOW, c + HALF_WINDOW) for c in changes]


def test_transition_finder_knows_the_2027_dates():
    assert transitions("America/New_York") == (
        datetime(2027, 3, 14, 7, tzinfo=UTC),
        datetime(2027, 11, 7, 6, tzinfo=UTC),
    )
    assert transitions("Australia/Lord_Howe") == (
        datetime(2027, 4, 3, 15, tzinfo=UTC),
        datetime(2027, 10, 2, 15, 30, tzinfo=UTC),
    )
    assert transitions("America/Moncton", 2006) == (
        datetime(2006, 4, 2, 4, 1, tzinfo=UTC),
        datetime(2006, 10, 29, 3, 1, tzinfo=UTC),
    )
    assert transitions("UTC") == ()


def test_brute_force_itself_follows_the_rules():
    """Guard the oracle: B07 and R1/R2 values from field-reports.md."""
    ny = "America/New_York"
    day = (datetime(2027, 11, 7, 4, tzinfo=UTC), datetime(2027, 11, 7, 8, tzinfo=UTC))
    assert len(brute_force("*/15 * * * *", ny, *day)) == 16
    assert brute_force("30 1 * * *", ny, *day) == [datetime(2027, 11, 7, 5, 30, tzinfo=UTC)]
    gap = (datetime(2027, 3, 14, 5, tzinfo=UTC), datetime(2027, 3, 14, 9, tzinfo=UTC))
    assert brute_force("30 2 * * *", ny, *gap) == [datetime(2027, 3, 14, 7, tzinfo=UTC)]
    assert brute_force("*/30 2 * * *", ny, *gap) == []


# ---------------------------------------------------------------------------------------
# The corpus
# ---------------------------------------------------------------------------------------


def _ids(rows):
    return [f"{expr}|{zone}" for expr, zone in rows]


def test_corpus_is_not_empty():
    assert len(CORPUS) > 150
    assert len(NEVER_FIRES) >= 10


@pytest.mark.parametrize(("expr", "zone"), CORPUS, ids=_ids(CORPUS))
def test_corpus_expression(expr, zone):
    # It validates, unchanged but for whitespace.
    assert timing.validate_cron(expr, zone) == " ".join(expr.split())
    assert timing.validate_timezone(zone) == zone
    # Around each DST change of its zone (or in a fixed window), it fires exactly when the
    # brute force says.
    for start, end in windows(zone):
        assert module_slots(expr, zone, start, end) == brute_force(expr, zone, start, end), (
            f"{expr!r} in {zone} between {start} and {end}"
        )
    # Outside the windows (e.g. '0 12 29 2 *'), every upcoming slot is a real match.
    spec = timing.Spec(kind="cron", cron=expr, timezone=zone)
    matcher = Matcher(expr)
    slots = timing.upcoming(spec, datetime(2027, 1, 1, tzinfo=UTC), 3)
    assert len(slots) == 3
    for slot in slots:
        assert slot.tzinfo is UTC and slot.second == 0 and slot.microsecond == 0
        assert matcher.wall_matches(slot.astimezone(ZoneInfo(zone)).replace(tzinfo=None))


@pytest.mark.parametrize(("expr", "zone"), NEVER_FIRES, ids=_ids(NEVER_FIRES))
def test_never_firing_expression_is_rejected(expr, zone):
    with pytest.raises(timing.InvalidSchedule) as caught:
        timing.validate_cron(expr, zone)
    assert caught.value.field == "cron"
    assert "can never fire" in caught.value.message
    assert "day-of-month" in caught.value.message  # it names the field


@pytest.mark.parametrize(("expr", "zone"), NEVER_FIRES, ids=_ids(NEVER_FIRES))
def test_never_firing_expression_fails_spec_validation(expr, zone):
    with pytest.raises(timing.InvalidSchedule, match="can never fire"):
        timing.next_slot_after(
            timing.Spec(kind="cron", cron=expr, timezone=zone), datetime(2027, 1, 1, tzinfo=UTC)
        )


# ---------------------------------------------------------------------------------------
# DST-sensitive expressions in zones with unusual transitions
# ---------------------------------------------------------------------------------------

DST_ZONES = (
    "America/New_York",  # 02:00 -> 03:00, 02:00 -> 01:00
    "Europe/Berlin",  # 02:00 -> 03:00, 03:00 -> 02:00
    "Australia/Sydney",  # southern hemisphere: gap in October, overlap in April
    "Australia/Lord_Howe",  # 30-minute shift
    "America/Havana",  # gap at midnight (00:00 -> 01:00), repeated 00:xx hour
    "America/Santiago",  # gap at midnight, repeated 23:xx hour the day before
    # (+ America/Moncton in 2006: its repeated hour straddled midnight, 00:01 -> 23:01)
    "Asia/Beirut",  # gap at midnight, repeated 23:xx hour
    "America/Nuuk",  # gap 23:00 -> 00:00: the first instant after it is a midnight
    "UTC",
)
DST_EXPRESSIONS = (
    "30 2 * * *",  # fixed, in New York/Berlin/Sydney gaps and overlaps
    "15 2 * * *",  # fixed, inside Lord Howe's 30-minute gap
    "45 1 * * *",  # fixed, inside Lord Howe's repeated half hour
    "0 0 * * *",  # fixed, midnight gaps
    "30 0 * * *",  # fixed, midnight gaps and Havana's repeated hour
    "30 23 * * *",  # fixed, Santiago/Beirut repeated hour
    "0,30 2,3 * * *",  # fixed, two slots collapsing into the first instant after a gap
    "0-59 1 * * *",  # fixed (does not start with *): once per minute, first pass only
    "*/30 0 * * *",  # wildcard, hour 0 missing on midnight-gap days
    "*/15 1-2 * * *",  # wildcard, both passes / nothing in the gap
    "*/20 23 * * *",  # wildcard, repeated 23:xx
    "* 0 * * *",  # wildcard, every minute of hour 0
    "0 * * * *",  # wildcard (hour field *)
    "@hourly",
    "@daily",
    "0 */2 * * *",  # wildcard by the hour field
    "5 0 L * *",
    "0 1 LW * *",
    "0 0 * * 0L",
    "30 0 * * 0#1",  # first Sunday: Santiago's and Sydney's transition days
    "0 2 1-7 * 0",  # OR rule
    "*/30 0-3 */2 * 0",  # AND rule (day-of-month starts with *)
    "0 0,1,2,3 * * sun",  # names
    "*/30 0,23 * * *",  # wildcard across a repeated hour that straddles midnight
    "0 0,23 * * *",  # fixed: Nuuk's 23:00 (gap) and 00:00 are the same instant
)


@pytest.mark.parametrize("expr", DST_EXPRESSIONS)
def test_dst_sensitive_expression_matches_brute_force(expr):
    for zone, year in [(zone, 2027) for zone in DST_ZONES] + [("America/Moncton", 2006)]:
        for start, end in windows(zone, year):
            assert module_slots(expr, zone, start, end) == brute_force(expr, zone, start, end), (
                f"{expr!r} in {zone} between {start} and {end}"
            )


@pytest.mark.parametrize(
    ("zone", "year"), [(z, 2027) for z in DST_ZONES] + [("America/Moncton", 2006)]
)
def test_latest_and_count_agree_with_brute_force(zone, year):
    for expr in (
        "30 2 * * *",
        "*/30 0 * * *",
        "*/15 1-2 * * *",
        "0-59 1 * * *",
        "30 23 * * *",
        "*/30 0,23 * * *",
        "0 0,23 * * *",
    ):
        _check_latest_and_count(expr, zone, year)


def _check_latest_and_count(expr: str, zone: str, year: int) -> None:
    spec = timing.Spec(kind="cron", cron=expr, timezone=zone)
    for start, end in windows(zone, year):
        expected = brute_force(expr, zone, start, end)
        assert timing.count_slots(spec, start, end) == len(expected)
        for now in (start + timedelta(hours=h, seconds=17) for h in range(0, 30, 2)):
            before = [s for s in expected if s <= now]
            got = timing.latest_slot_at_or_before(spec, now, not_before=start)
            assert got == (before[-1] if before else None), f"now={now}"
