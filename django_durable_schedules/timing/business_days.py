"""Business days as pure data: the weekend days of exclusion calendars, what a business day
is, and the nearest business day before or after a date.

A local date is a **business day** of a schedule when no calendar of the schedule excludes
it (:class:`.exclusions.Exclusions`) and it is no weekend day. Weekend days are ISO weekday
numbers (1 Monday ... 7 Sunday); a calendar's ``weekend_days`` default to Saturday and
Sunday (``[6, 7]``); several calendars: a day any of them calls a weekend day is one. A
weekend day is **not** excluded: a schedule with calendars still fires on Saturdays.
Weekend days only say which days are business days, for the exclusion policies that move
an excluded slot (:mod:`.moved_slots`) and for rules counted over business days
(``rrule_business_days``, :mod:`.business_rrule`).

No Django, no database.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, timedelta
from typing import TYPE_CHECKING, Any

from .errors import InvalidSchedule
from .instants import MAX_YEAR

if TYPE_CHECKING:
    from .exclusions import Exclusions

#: The field the errors of weekend days name (the calendar's field).
WEEKEND_FIELD = "weekend_days"
#: Saturday and Sunday (ISO weekday numbers).
DEFAULT_WEEKEND: frozenset[int] = frozenset({6, 7})
#: The exclusion policies of a schedule and their field.
POLICY_FIELD = "exclusion_policy"
POLICIES = ("skip", "previous_business_day", "next_business_day")
#: Dates a search for a business day steps over at most (about 27 years of non-business
#: days: a calendar that excludes every weekday for that long is refused).
MAX_DAYS = 10_000
_ONE_DAY = timedelta(days=1)

_NAMES = {
    name: number
    for number, names in enumerate(
        (
            ("monday", "mon", "mo"),
            ("tuesday", "tue", "tu"),
            ("wednesday", "wed", "we"),
            ("thursday", "thu", "th"),
            ("friday", "fri", "fr"),
            ("saturday", "sat", "sa"),
            ("sunday", "sun", "su"),
        ),
        start=1,
    )
    for name in names
}
DAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def weekend_days(value: Any, calendar: str = "") -> tuple[int, ...]:
    """``value`` (a list of ISO weekday numbers 1-7, or day names in English: ``"saturday"``,
    ``"Sat"``, ``"SA"``) as sorted ISO numbers without repeats. An empty list is no weekend
    (every day not excluded is a business day). Raises :class:`InvalidSchedule` (field
    ``weekend_days``) for anything else: not a list, a number out of 1-7, an unknown name,
    every day of the week (no business day would be left). ``calendar`` names the calendar
    in the message."""
    where = f"calendar {calendar!r}: " if calendar else ""
    if not isinstance(value, list | tuple):
        raise InvalidSchedule(
            WEEKEND_FIELD,
            f"{where}weekend_days must be a list of ISO weekday numbers (1 Monday ... 7 "
            f"Sunday) or day names; got {type(value).__name__}",
        )
    days: set[int] = set()
    for item in value:
        if type(item) is int and 1 <= item <= 7:
            days.add(item)
        elif isinstance(item, str) and item.strip().lower() in _NAMES:
            days.add(_NAMES[item.strip().lower()])
        elif isinstance(item, str) and item.strip().isdigit() and 1 <= int(item) <= 7:
            days.add(int(item))
        else:
            raise InvalidSchedule(
                WEEKEND_FIELD,
                f"{where}{item!r} is no weekday: give ISO numbers 1 (Monday) to 7 (Sunday) "
                "or names (saturday, sun, ...)",
            )
    if len(days) == 7:
        raise InvalidSchedule(
            WEEKEND_FIELD, f"{where}every day of the week is a weekend day: no business day"
        )
    return tuple(sorted(days))


def weekend_words(days: Any) -> str:
    """``(6, 7)`` as ``"Saturday and Sunday"``; ``()`` as ``"no weekend"``."""
    try:
        names = [DAY_NAMES[d - 1] for d in sorted(days)]
    except (TypeError, IndexError):
        return repr(days)
    if not names:
        return "no weekend"
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def check_policy(value: Any) -> str:
    """``value`` if it is an exclusion policy, else :class:`InvalidSchedule` (field
    ``exclusion_policy``)."""
    if not isinstance(value, str) or value not in POLICIES:
        raise InvalidSchedule(
            POLICY_FIELD, f"exclusion_policy must be one of {', '.join(POLICIES)}; got {value!r}"
        )
    return value


def business_day_test(
    weekend: frozenset[int], exclusions: Exclusions | None
) -> Callable[[date], bool]:
    """The test "is this local date a business day": not a ``weekend`` day (ISO numbers)
    and not excluded by ``exclusions``."""

    def test(day: date) -> bool:
        if day.isoweekday() in weekend:
            return False
        return not exclusions or exclusions.excluded_by(day) is None

    return test


def nearest_business_day(
    day: date, forward: bool, is_business: Callable[[date], bool]
) -> date | None:
    """The first business day strictly after ``day`` (``forward``) or strictly before it,
    or None past the calendar's ends. Raises :class:`InvalidSchedule` (field
    ``exclusion_calendars``) after :data:`MAX_DAYS` days without one."""
    step = _ONE_DAY if forward else -_ONE_DAY
    for _ in range(MAX_DAYS):
        if (forward and day >= date(MAX_YEAR, 12, 31)) or (not forward and day <= date(1, 1, 2)):
            return None
        day += step
        if is_business(day):
            return day
    raise InvalidSchedule(
        "exclusion_calendars",
        f"no business day within {MAX_DAYS} days {'after' if forward else 'before'} "
        f"{day.isoformat()}: the calendars and weekend days leave none",
    )
