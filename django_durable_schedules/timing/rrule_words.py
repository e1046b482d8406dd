"""Calendar rules in words (English): ``FREQ=WEEKLY;INTERVAL=2;BYDAY=TU;BYHOUR=9;BYMINUTE=0``
is "every 2 weeks on Tuesday at 09:00".

python-dateutil has no text for a rule, so this is a small describer of the common shapes
(a frequency and interval; weekdays, with ordinals; days of the month; months; one
BYSETPOS over weekdays; times of day; UNTIL). Anything else (BYWEEKNO, BYYEARDAY, other
BYSETPOS uses, many times) is not put into words: the caller shows the rule itself. The
words state the values DTSTART supplies (RFC 5545 §3.3.10), so they name the times the
rule really has.
"""

from __future__ import annotations

from datetime import datetime

from .errors import InvalidSchedule
from .rrule_syntax import RuleParts, parse_rrule, with_defaults

_DAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTH_NAMES = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_UNITS = {
    "YEARLY": "year",
    "MONTHLY": "month",
    "WEEKLY": "week",
    "DAILY": "day",
    "HOURLY": "hour",
    "MINUTELY": "minute",
    "SECONDLY": "second",
}
_ORDINALS = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth"}
_MAX_TIMES = 4


def _join(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _ordinal(n: int) -> str:
    """1 -> "first", -1 -> "last", -2 -> "second to last", 12 -> "12th"."""
    if n < 0:
        return "last" if n == -1 else f"{_ordinal(-n)} to last"
    if n in _ORDINALS:
        return _ORDINALS[n]
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _weekdays(days: list[int]) -> str:
    if sorted(days) == [0, 1, 2, 3, 4]:
        return "weekday (Monday to Friday)"
    return _join([_DAY_NAMES[d] for d in days])


def _day_phrase(p: RuleParts) -> str | None:
    """The days: "on Tuesday", "on the last Friday", "on day 1 and 15". None: not
    describable here."""
    if p.byweekno or p.byyearday:
        return None
    period = "year" if p.freq == "YEARLY" and not p.bymonth else "month"
    phrases = []
    if p.bysetpos:
        if len(p.bysetpos) != 1 or not p.byday or p.bymonthday or any(n for n, _ in p.byday):
            return None
        days = [d for _, d in p.byday]
        if len(days) == 1:
            return None  # "the n-th Monday" is written 1MO; a lone BYSETPOS over one day is rare
        return f"on the {_ordinal(p.bysetpos[0])} {_weekdays(days)} of the {period}"
    if p.bymonthday:
        numbered = [str(d) for d in p.bymonthday if d > 0]
        named = [
            "the last day" if d == -1 else f"the {_ordinal(-d)} day" for d in p.bymonthday if d < 0
        ]
        listed = ([f"day {_join(numbered)}"] if numbered else []) + named
        phrases.append(f"on {_join(listed)} of the month")
    if p.byday:
        plain = [d for n, d in p.byday if not n]
        nth = [f"the {_ordinal(n)} {_DAY_NAMES[d]}" for n, d in p.byday if n]
        if plain and nth:
            return None
        if nth:
            text = f"on {_join(nth)}" + (
                f" of the {period}" if p.freq in ("MONTHLY", "YEARLY") else ""
            )
        else:
            text = f"on {'weekdays (Monday to Friday)' if sorted(plain) == [0, 1, 2, 3, 4] else _join([_DAY_NAMES[d] for d in plain])}"
        phrases.append(("when it is a " + text[3:]) if p.bymonthday else text)
    return ", ".join(phrases)


def _time_phrase(p: RuleParts) -> str | None:
    """The times of day of a DAILY-or-coarser rule ("at 09:00 and 17:30"), or the
    minutes, seconds and hours that filter a finer one. None: too many to list."""
    if p.freq in ("YEARLY", "MONTHLY", "WEEKLY", "DAILY"):
        times = [(h, m, s) for h in p.byhour for m in p.byminute for s in p.bysecond]
        if len(times) > _MAX_TIMES:
            return None
        shown = [f"{h:02d}:{m:02d}" + (f":{s:02d}" if s else "") for h, m, s in sorted(times)]
        return f"at {_join(shown)}"
    filters = []
    if p.byminute:
        filters.append(f"at minute {_join([f':{m:02d}' for m in p.byminute])}")
    if p.bysecond and p.bysecond != (0,):
        filters.append(f"at second {_join([f'{s:02d}' for s in p.bysecond])}")
    if p.byhour:
        filters.append(
            f"in the hour{'s' if len(p.byhour) > 1 else ''} {_join([f'{h:02d}:00' for h in p.byhour])}"
        )
    return ", ".join(filters)


def describe_rule(parts: RuleParts) -> str:
    """A defaulted rule (:func:`.rrule_syntax.with_defaults`) in English words, or "" when
    it has a shape this describer does not put into words."""
    unit = _UNITS[parts.freq]
    words = [f"every {unit}" if parts.interval == 1 else f"every {parts.interval} {unit}s"]
    day = _day_phrase(parts)
    clock = _time_phrase(parts)
    if day is None or clock is None:
        return ""
    if parts.freq == "MONTHLY" and parts.interval == 1 and day.endswith(" of the month"):
        words, day = [], day.removesuffix(" of the month") + " of every month"
    words += [w for w in (day, clock) if w]
    if (
        len(parts.bymonth) == 1
        and parts.bymonthday
        and not parts.byday
        and min(parts.bymonthday) > 0
    ):
        month = _MONTH_NAMES[parts.bymonth[0] - 1]  # "on March 1 and 15"
        words[1] = f"on {month} {_join([str(d) for d in parts.bymonthday])}"
    elif parts.bymonth:
        words.append(f"in {_join([_MONTH_NAMES[m - 1] for m in parts.bymonth])}")
    if parts.wkst and parts.freq == "WEEKLY" and parts.interval > 1:
        words.append(f"(weeks start on {_DAY_NAMES[parts.wkst]})")
    if parts.until is not None:
        words.append(f"until {parts.until:%Y-%m-%d %H:%M:%S} UTC")
    return " ".join(words)


def rrule_in_words(text: str, dtstart: datetime) -> str:
    """The RFC 5545 rule ``text`` in English words, with the values it takes from the
    naive local ``dtstart`` spelled out ("every month on the last weekday (Monday to
    Friday) of the month at 00:00"); "" for an invalid rule or a shape not put into words
    (show the rule itself then). Never raises."""
    try:
        return describe_rule(with_defaults(parse_rrule(text), dtstart))
    except (InvalidSchedule, ValueError, TypeError, KeyError, IndexError):
        return ""
