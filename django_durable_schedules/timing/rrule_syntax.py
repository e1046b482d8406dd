"""RRULE syntax: an RFC 5545 recurrence rule (section 3.3.10) read part by part into plain
values, with messages naming the bad part and token (before python-dateutil sees it).

Accepted: ``FREQ`` (required), ``INTERVAL``, ``UNTIL`` (a UTC date-time), ``WKST``,
``BYSECOND``, ``BYMINUTE``, ``BYHOUR``, ``BYDAY``, ``BYMONTHDAY``, ``BYYEARDAY``,
``BYWEEKNO``, ``BYMONTH``, ``BYSETPOS``; names in any case, an optional ``RRULE:`` prefix.
Refused: ``COUNT`` (the schedule's ``max_runs`` counts runs), ``DTSTART`` and ``TZID`` (the
start and the zone come from the schedule), dateutil's ``BYEASTER`` and any other name.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass
from datetime import datetime

from .errors import InvalidSchedule
from .instants import MAX_YEAR, UTC

FREQS = ("YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY", "MINUTELY", "SECONDLY")
WEEKDAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
#: Largest INTERVAL per FREQ: about ten years, as for interval schedules.
MAX_INTERVAL = {
    "YEARLY": 10,
    "MONTHLY": 120,
    "WEEKLY": 522,
    "DAILY": 3660,
    "HOURLY": 3660 * 24,
    "MINUTELY": 3660 * 1440,
    "SECONDLY": 3660 * 86400,
}
#: Most times of day a rule of FREQ=DAILY or coarser may list (BYHOUR x BYMINUTE x
#: BYSECOND): finer grids are written with FREQ=MINUTELY or SECONDLY, which step cheaply.
MAX_TIMES_OF_DAY = 1440
MAX_RULE_CHARS = 500

# name: (low, high, zero allowed) of the integer list parts
_INT_PARTS = {
    "BYSECOND": (0, 59, True),
    "BYMINUTE": (0, 59, True),
    "BYHOUR": (0, 23, True),
    "BYMONTHDAY": (-31, 31, False),
    "BYYEARDAY": (-366, 366, False),
    "BYWEEKNO": (-53, 53, False),
    "BYMONTH": (1, 12, False),
    "BYSETPOS": (-366, 366, False),
}
_ORDER = (
    "FREQ",
    "INTERVAL",
    "UNTIL",
    "WKST",
    "BYMONTH",
    "BYWEEKNO",
    "BYYEARDAY",
    "BYMONTHDAY",
    "BYDAY",
    "BYHOUR",
    "BYMINUTE",
    "BYSECOND",
    "BYSETPOS",
)
_INTEGER = re.compile(r"[+-]?[0-9]{1,4}")
_BYDAY = re.compile(r"(?P<n>[+-]?[0-9]{1,2})?(?P<day>[A-Z]{2})")
_UNTIL = re.compile(r"[0-9]{8}T[0-9]{6}Z")
_FIRST_UNTIL = datetime(1000, 1, 1, tzinfo=UTC)
_LAST_UNTIL = datetime(MAX_YEAR, 12, 31, 23, 59, 59, tzinfo=UTC)


@dataclass(frozen=True)
class RuleParts:
    """A parsed rule: plain values, not yet defaulted from DTSTART (RFC 5545 §3.3.10).
    ``byday`` holds ``(n, weekday)`` pairs, weekday 0 = Monday, n 0 = every such day."""

    freq: str
    interval: int = 1
    until: datetime | None = None  # aware UTC
    wkst: int = 0
    bymonth: tuple[int, ...] = ()
    byweekno: tuple[int, ...] = ()
    byyearday: tuple[int, ...] = ()
    bymonthday: tuple[int, ...] = ()
    byday: tuple[tuple[int, int], ...] = ()
    byhour: tuple[int, ...] = ()
    byminute: tuple[int, ...] = ()
    bysecond: tuple[int, ...] = ()
    bysetpos: tuple[int, ...] = ()

    @property
    def normalized(self) -> str:
        """The rule in upper case, its parts in a fixed order (RFC 5545 syntax)."""
        out = [f"FREQ={self.freq}"]
        if self.interval != 1:
            out.append(f"INTERVAL={self.interval}")
        if self.until is not None:
            out.append(f"UNTIL={self.until:%Y%m%dT%H%M%SZ}")
        if self.wkst:
            out.append(f"WKST={WEEKDAYS[self.wkst]}")
        for name in _ORDER[4:]:
            values = getattr(self, name.lower())
            if name == "BYDAY":
                values = [(str(n) if n else "") + WEEKDAYS[d] for n, d in values]
            if values:
                out.append(f"{name}={','.join(str(v) for v in values)}")
        return ";".join(out)


def _fail(message: str) -> InvalidSchedule:
    return InvalidSchedule("rrule", message)


def _integers(name: str, text: str) -> tuple[int, ...]:
    low, high, zero = _INT_PARTS[name]
    values: list[int] = []
    for token in text.split(","):
        if not _INTEGER.fullmatch(token):
            raise _fail(f"{name}: {token!r} is not a whole number")
        value = int(token)
        if not low <= value <= high or (value == 0 and not zero):
            where = f"{low} to {high}" + ("" if zero or low > 0 else ", not 0")
            if name == "BYSECOND" and value == 60:
                where += " (leap second 60 is not supported)"
            raise _fail(f"{name}: {token!r} is out of range {where}")
        if value not in values:
            values.append(value)
    return tuple(values)


def _byday(text: str) -> tuple[tuple[int, int], ...]:
    days: list[tuple[int, int]] = []
    for token in text.split(","):
        match = _BYDAY.fullmatch(token)
        if not match or match["day"] not in WEEKDAYS:
            raise _fail(f"BYDAY: {token!r} is not a weekday (MO, TU, ... SU, optionally 1MO, -1FR)")
        n = int(match["n"]) if match["n"] else 0
        if match["n"] and not (1 <= abs(n) <= 53):
            raise _fail(f"BYDAY: {token!r}: the ordinal must be 1 to 53 or -53 to -1")
        if (n, WEEKDAYS.index(match["day"])) not in days:
            days.append((n, WEEKDAYS.index(match["day"])))
    return tuple(days)


def _until(text: str) -> datetime:
    if not _UNTIL.fullmatch(text):
        raise _fail(
            f"UNTIL: {text!r} must be a UTC date-time like 20271231T235959Z (RFC 5545 "
            "§3.3.10: with a time zone, UNTIL is given in UTC)"
        )
    try:
        until = datetime.strptime(text, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        raise _fail(f"UNTIL: {text!r} is not a valid date-time") from None
    if not _FIRST_UNTIL <= until <= _LAST_UNTIL:
        # Read in a zone a day east or west of UTC, an instant at the calendar's edge is
        # no datetime at all (year 0 or 10000): the same years as every other instant.
        raise _fail(
            f"UNTIL: {until.date().isoformat()} is outside the years 1000 to {MAX_YEAR} that "
            "instants may take"
        )
    return until


def _split(text: str) -> dict[str, str]:
    if not isinstance(text, str):
        raise _fail(f"a rule must be text, got {type(text).__name__}")
    if len(text) > MAX_RULE_CHARS:
        raise _fail(f"a rule has at most {MAX_RULE_CHARS} characters, got {len(text)}")
    body = text.strip()
    upper = body.upper()
    if "DTSTART" in upper or "\n" in body or "TZID" in upper:
        raise _fail(
            "give only the RRULE parts (FREQ=...;...): DTSTART and TZID are not accepted, "
            "the start comes from start_at and the zone from timezone"
        )
    if upper.startswith("RRULE:"):
        body = body[6:]
    if not body:
        raise _fail("an rrule schedule needs a rule, e.g. FREQ=DAILY;BYHOUR=9;BYMINUTE=0")
    parts: dict[str, str] = {}
    for piece in body.split(";"):
        name, equals, value = piece.strip().partition("=")
        # Words (FREQ=daily, BYDAY=mo, a UNTIL's z) in any case; a number part's value
        # as typed, so that its message quotes what was typed (INTERVAL=abc, not ABC).
        name, value = name.strip().upper(), value.strip()
        if name not in _INT_PARTS and name != "INTERVAL":
            value = value.upper()
        if not equals or not name or not value:
            raise _fail(f"{piece.strip()!r} is not a NAME=VALUE rule part")
        if name in parts:
            raise _fail(f"{name} is given twice")
        if name == "COUNT":
            raise _fail(
                "COUNT is not accepted: set the schedule's max_runs instead (it counts runs; "
                "slots passed over while no worker ran do not use it up)"
            )
        if name not in _ORDER:
            raise _fail(f"unknown rule part {name!r} (RFC 5545 §3.3.10 parts: {', '.join(_ORDER)})")
        parts[name] = value
    return parts


def _check_combinations(p: RuleParts) -> None:
    """The combinations RFC 5545 §3.3.10 forbids, and the bound on times of day."""
    if any(n for n, _ in p.byday) and p.freq not in ("MONTHLY", "YEARLY"):
        raise _fail("BYDAY with an ordinal (1MO, -1FR) needs FREQ=MONTHLY or FREQ=YEARLY")
    if any(n for n, _ in p.byday) and p.freq == "YEARLY" and p.byweekno:
        raise _fail("BYDAY with an ordinal cannot be combined with BYWEEKNO")
    if p.bymonthday and p.freq == "WEEKLY":
        raise _fail("BYMONTHDAY cannot be used with FREQ=WEEKLY")
    if p.byyearday and p.freq in ("DAILY", "WEEKLY", "MONTHLY"):
        raise _fail(f"BYYEARDAY cannot be used with FREQ={p.freq}")
    if p.byweekno and p.freq != "YEARLY":
        raise _fail("BYWEEKNO needs FREQ=YEARLY")
    others = (p.bymonth, p.byweekno, p.byyearday, p.bymonthday, p.byday, p.byhour)
    if p.bysetpos and not any(others + (p.byminute, p.bysecond)):
        raise _fail("BYSETPOS needs another BYxxx part to choose from")
    if FREQS.index(p.freq) <= FREQS.index("DAILY"):
        times = max(1, len(p.byhour)) * max(1, len(p.byminute)) * max(1, len(p.bysecond))
        if times > MAX_TIMES_OF_DAY:
            raise _fail(
                f"BYHOUR x BYMINUTE x BYSECOND give {times} times of day; at most "
                f"{MAX_TIMES_OF_DAY} are accepted with FREQ={p.freq} (use FREQ=MINUTELY or "
                "FREQ=SECONDLY for a finer grid)"
            )


@functools.lru_cache(maxsize=1024)
def parse_rrule(text: str) -> RuleParts:
    """Read an RFC 5545 RRULE value (``FREQ=WEEKLY;INTERVAL=2;BYDAY=TU``) into
    :class:`RuleParts`; cached per text.

    Raises :class:`InvalidSchedule` ``("rrule", message)`` for: no FREQ, an unknown or
    repeated part, COUNT, DTSTART or TZID, a value out of its range (``BYHOUR: '24' is out of
    range 0 to 23``), an UNTIL not in UTC, an INTERVAL above about ten years, the
    combinations RFC 5545 §3.3.10 forbids (an ordinal BYDAY outside MONTHLY/YEARLY,
    BYMONTHDAY with WEEKLY, BYWEEKNO outside YEARLY, BYSETPOS alone) and more than
    :data:`MAX_TIMES_OF_DAY` times of day with FREQ=DAILY or coarser.
    """
    parts = _split(text)
    if "FREQ" not in parts:
        raise _fail("FREQ is required (YEARLY, MONTHLY, WEEKLY, DAILY, HOURLY, MINUTELY, SECONDLY)")
    freq = parts.pop("FREQ")
    if freq not in FREQS:
        raise _fail(f"FREQ: {freq!r} is not one of {', '.join(FREQS)}")
    values: dict[str, object] = {"freq": freq}
    if "INTERVAL" in parts:
        token = parts.pop("INTERVAL")
        if not token.isdigit() or not 1 <= int(token) <= MAX_INTERVAL[freq]:
            raise _fail(
                f"INTERVAL: {token!r} must be a whole number from 1 to {MAX_INTERVAL[freq]} "
                f"with FREQ={freq} (about 10 years)"
            )
        values["interval"] = int(token)
    if "UNTIL" in parts:
        values["until"] = _until(parts.pop("UNTIL"))
    if "WKST" in parts:
        token = parts.pop("WKST")
        if token not in WEEKDAYS:
            raise _fail(f"WKST: {token!r} is not a weekday (MO, TU, ... SU)")
        values["wkst"] = WEEKDAYS.index(token)
    if "BYDAY" in parts:
        values["byday"] = _byday(parts.pop("BYDAY"))
    for name, token in parts.items():
        values[name.lower()] = _integers(name, token)
    rule = RuleParts(**values)  # type: ignore[arg-type]
    _check_combinations(rule)
    return rule


def with_defaults(parts: RuleParts, dtstart: datetime) -> RuleParts:
    """``parts`` with the values RFC 5545 §3.3.10 takes from DTSTART made explicit (as
    python-dateutil derives them): without any day part, YEARLY takes DTSTART's month and
    day of the month, MONTHLY its day of the month, WEEKLY its weekday; coarser than
    HOURLY takes its hour, coarser than MINUTELY its minute, coarser than SECONDLY its
    second. ``dtstart`` is a naive local time."""
    level = FREQS.index(parts.freq)
    changes: dict[str, object] = {}
    if not (parts.byweekno or parts.byyearday or parts.bymonthday or parts.byday):
        if parts.freq == "YEARLY":
            changes["bymonth"] = parts.bymonth or (dtstart.month,)
            changes["bymonthday"] = (dtstart.day,)
        elif parts.freq == "MONTHLY":
            changes["bymonthday"] = (dtstart.day,)
        elif parts.freq == "WEEKLY":
            changes["byday"] = ((0, dtstart.weekday()),)
    for name, below, value in (
        ("byhour", "HOURLY", dtstart.hour),
        ("byminute", "MINUTELY", dtstart.minute),
        ("bysecond", "SECONDLY", dtstart.second),
    ):
        if not getattr(parts, name) and level < FREQS.index(below):
            changes[name] = (value,)
    return dataclasses.replace(parts, **changes)  # type: ignore[arg-type]
