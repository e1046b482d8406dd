"""Exclusion calendars as pure data: the local dates a schedule must not fire on.

A schedule may name calendars (``ExclusionCalendar`` rows); each holds dates kept in the
database and/or a country's (and subdivision's) public holidays from the ``holidays``
package. Here they are plain values: :class:`Exclusions` holds the dates (with the name of
the calendar and a reason) and the holiday sources of every calendar of one schedule, and
answers "is this local date excluded, and by what?". A slot is excluded when the **local
date of its instant, in the schedule's time zone**, is excluded.

Holiday dates are computed by ``holidays`` per (country, subdivision, year) and cached in
the process (they are pure: the same inputs give the same dates). No Django, no database.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import Any

from .business_days import DEFAULT_WEEKEND, weekend_days
from .errors import InvalidSchedule
from .instants import MAX_YEAR, UTC
from .zones import zone_info

#: The schedule field the errors of this module name (the API and the admin show it there).
FIELD = "exclusion_calendars"
#: How far a search looks past excluded dates before it gives up (the Gregorian calendar
#: repeats every 400 years; a calendar that excludes every slot for that long always will).
HORIZON_YEARS = 400
_ONE_DAY = timedelta(days=1)


@functools.cache
def _supported() -> dict[str, frozenset[str]]:
    import holidays

    return {
        code: frozenset(subdivisions)
        for code, subdivisions in holidays.list_supported_countries().items()
    }


def holiday_countries() -> dict[str, list[str]]:
    """The ISO 3166 codes the ``holidays`` package knows, each with its subdivision codes
    (sorted), for choices and messages."""
    return {code: sorted(subs) for code, subs in sorted(_supported().items())}


def check_holidays(country: str, subdivision: str = "", calendar: str = "") -> None:
    """Raise :class:`InvalidSchedule` when ``holidays`` does not know ``country`` (an ISO
    3166 code, e.g. ``"FR"``) or that country has no ``subdivision`` (e.g. ``"BY"`` of
    ``"DE"``; blank: the whole country). ``calendar`` names the calendar in the message.
    The field is :data:`FIELD` (``exclusion_calendars``)."""
    where = f"calendar {calendar!r}: " if calendar else ""
    known = _supported()
    if not isinstance(country, str) or country not in known:
        raise InvalidSchedule(
            FIELD,
            f"{where}the holidays package has no country {country!r} (ISO 3166 codes: FR, DE, US, ...)",
        )
    if subdivision and subdivision not in known[country]:
        codes = ", ".join(sorted(known[country])[:12]) or "none"
        raise InvalidSchedule(
            FIELD,
            f"{where}country {country!r} has no subdivision {subdivision!r} in the holidays "
            f"package (its subdivisions: {codes})",
        )


@functools.lru_cache(maxsize=4096)
def _holiday_dates(country: str, subdivision: str, year: int) -> dict[date, str]:
    """{date: holiday name} of one country (and subdivision) for one year (cached). The
    names are in the country's own default language (``Fête nationale`` for FR),
    whatever the process's locale: without ``language=``, holidays translates them
    through gettext, which reads ``LANGUAGE``/``LANG`` (``C.UTF-8`` gave English names
    on one Python and French on another)."""
    import holidays

    found = holidays.country_holidays(
        country, subdiv=subdivision or None, years=year, language=_language(country)
    )
    return {day: str(name) for day, name in found.items() if day.year == year}


@functools.lru_cache(maxsize=512)
def _language(country: str) -> str | None:
    """The default language of ``country``'s holidays (``fr`` for FR; None if unknown)."""
    import holidays

    return getattr(type(holidays.country_holidays(country)), "default_language", None)


@dataclass(frozen=True)
class HolidaySource:
    """The public holidays of ``country`` (ISO 3166 code) and optional ``subdivision``,
    as the calendar named ``calendar`` excludes them."""

    calendar: str
    country: str
    subdivision: str = ""


@dataclass(frozen=True)
class Exclusion:
    """Why one local ``date`` is excluded: the ``calendar`` that excludes it and the
    ``reason`` (the date's own, or the holiday's name)."""

    calendar: str
    date: date
    reason: str = ""

    def __str__(self) -> str:
        why = f": {self.reason}" if self.reason else ""
        return f"excluded by calendar {self.calendar} ({self.date.isoformat()}{why})"


@dataclass(frozen=True)
class Exclusions:
    """Every excluded local date of one schedule: ``dates`` kept in the database (one
    :class:`Exclusion` each) and ``holidays`` sources. When several calendars exclude one
    date, the first calendar by name is the one reported. Empty: nothing is excluded."""

    dates: tuple[Exclusion, ...] = ()
    holidays: tuple[HolidaySource, ...] = ()
    #: ``(calendar, text)`` of each date the database holds that is no date the engine can
    #: read (year 10000, text that is no date: written by raw SQL); any makes
    #: :meth:`validate` raise.
    unreadable: tuple[tuple[str, str], ...] = ()
    #: ``(calendar, weekend days)`` of each calendar: its ISO weekday numbers (a tuple), or
    #: the message of a value the engine cannot read (text: written behind ``save()``);
    #: any such makes :meth:`validate` raise. Weekend days exclude nothing: they say which
    #: days are business days (:mod:`.business_days`).
    weekends: tuple[tuple[str, tuple[int, ...] | str], ...] = ()
    _index: dict[date, Exclusion] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        index: dict[date, Exclusion] = {}
        for item in sorted(self.dates, key=lambda e: (e.date, e.calendar)):
            index.setdefault(item.date, item)
        object.__setattr__(self, "_index", index)
        object.__setattr__(self, "holidays", tuple(sorted(set(self.holidays), key=_source_key)))

    def __bool__(self) -> bool:
        bad = any(isinstance(days, str) for _, days in self.weekends)
        return bool(self.dates or self.holidays or self.unreadable or bad)

    def weekend_days(self) -> frozenset[int]:
        """The weekend days of the business days: those of any calendar (ISO numbers;
        values the engine cannot read left out), or Saturday and Sunday without calendars."""
        if not self.weekends:
            return DEFAULT_WEEKEND
        return frozenset(d for _, days in self.weekends if not isinstance(days, str) for d in days)

    @property
    def calendars(self) -> list[str]:
        """The names of the calendars that contribute, sorted."""
        return sorted(
            {e.calendar for e in self.dates}
            | {h.calendar for h in self.holidays}
            | {name for name, _ in self.unreadable}
            | {name for name, _ in self.weekends}
        )

    def validate(self) -> None:
        """Raise :class:`InvalidSchedule` (field ``exclusion_calendars``) for a date the
        engine cannot read (:attr:`unreadable`) or a holiday source the ``holidays``
        package does not know (a country or subdivision code stored behind the forms, or
        one a newer ``holidays`` removed)."""
        for name, text in sorted(self.unreadable)[:1]:
            raise InvalidSchedule(
                FIELD, f"calendar {name!r} holds a date the engine cannot read: {text!r}"
            )
        for name, days in self.weekends:
            if isinstance(days, str):
                raise InvalidSchedule(FIELD, f"calendar {name!r}: {days}")
        for source in self.holidays:
            check_holidays(source.country, source.subdivision, source.calendar)

    def excluded_by(self, day: date) -> Exclusion | None:
        """The :class:`Exclusion` of the local date ``day``, or None when it is not
        excluded. Raises :class:`InvalidSchedule` for an unknown holiday source."""
        found = self._index.get(day)
        for source in self.holidays:
            if found is not None and found.calendar <= source.calendar:
                break
            name = _holidays_of(source, day.year).get(day)
            if name is not None:
                found = Exclusion(source.calendar, day, name)
                break
        return found

    def in_range(self, first: date, last: date) -> list[Exclusion]:
        """The excluded dates ``d`` with ``first <= d <= last``, sorted (holidays are
        looked at for at most :data:`HORIZON_YEARS` years from ``first``)."""
        days = {d for d in self._index if first <= d <= last}
        final = min(last.year, first.year + HORIZON_YEARS, MAX_YEAR)
        for source in self.holidays:
            for year in range(first.year, final + 1):
                days.update(d for d in _holidays_of(source, year) if first <= d <= last)
        found = (self.excluded_by(d) for d in sorted(days))
        return [e for e in found if e is not None]


def _source_key(source: HolidaySource) -> tuple[str, str, str]:
    return source.calendar, source.country, source.subdivision


def _holidays_of(source: HolidaySource, year: int) -> dict[date, str]:
    check_holidays(source.country, source.subdivision, source.calendar)
    if not 1 <= year <= MAX_YEAR:
        return {}
    try:
        return _holiday_dates(source.country, source.subdivision, year)
    except (NotImplementedError, KeyError, ValueError) as exc:  # what holidays raises
        raise InvalidSchedule(
            FIELD, f"calendar {source.calendar!r}: the holidays package failed: {exc}"
        ) from None


def exclusions_of(
    dates: Iterable[tuple[str, Any, Any]],
    holidays: Iterable[tuple[str, str, str]],
    weekends: Iterable[tuple[str, Any]] = (),
) -> Exclusions:
    """Build :class:`Exclusions` from ``(calendar, date, reason)`` and ``(calendar,
    country, subdivision)`` tuples (what the database rows hold). A date that is no
    ``date`` (the text of one the database driver could not read, or None) goes to
    :attr:`Exclusions.unreadable` (its text cut to 40 characters); a reason that is no
    text is ``""``. ``weekends``: ``(calendar, weekend_days)`` of each calendar (a value
    that is no list of weekdays is kept as its message, for :meth:`Exclusions.validate`)."""
    readable: list[Exclusion] = []
    unreadable: set[tuple[str, str]] = set()
    for c, d, r in dates:
        if isinstance(d, date) and not isinstance(d, datetime):
            readable.append(Exclusion(c, d, r if isinstance(r, str) else ""))
        else:
            unreadable.add((c, d[:40] if isinstance(d, str) else type(d).__name__))
    read: dict[str, tuple[int, ...] | str] = {}
    for name, value in weekends:
        try:
            read[name] = weekend_days(value)
        except InvalidSchedule as exc:
            read[name] = f"weekend_days: {exc.message}"
    return Exclusions(
        weekends=tuple(sorted(read.items())),
        dates=tuple(readable),
        holidays=tuple(HolidaySource(c, country, sub or "") for c, country, sub in holidays),
        unreadable=tuple(sorted(unreadable)),
    )


# ---------------------------------------------------------------------------------------
# Local days
# ---------------------------------------------------------------------------------------


def local_date(instant: datetime, zone: str) -> date:
    """The date that the aware ``instant`` reads in the IANA ``zone``."""
    return instant.astimezone(zone_info(zone)).date()


def day_start(day: date, zone: str) -> datetime | None:
    """The first instant (aware UTC) whose reading in ``zone`` is on ``day``: local
    midnight, or the end of a gap that skips it. None past year MAX_YEAR."""
    if day.year > MAX_YEAR:
        return None
    local = datetime.combine(day, time(0), tzinfo=zone_info(zone))  # fold=0: before a gap
    return local.astimezone(UTC)


def next_day_start(day: date, zone: str) -> datetime | None:
    """The first instant after local ``day`` (aware UTC), or None past year MAX_YEAR."""
    if day >= date(MAX_YEAR, 12, 31):
        return None
    return day_start(day + _ONE_DAY, zone)


def describe_exclusion(value: Any) -> str:
    """A short text for an :class:`Exclusion` (or ``""`` for None)."""
    return str(value) if isinstance(value, Exclusion) else ""
