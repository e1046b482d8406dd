"""Exclusion calendars: ``ExclusionCalendar`` (a country's public holidays from the
``holidays`` package, and/or dates kept in the database) and ``ExclusionDate`` (one date
of a calendar). A schedule names the calendars whose dates it must not fire on
(``Schedule.exclusion_calendars``); :func:`load_exclusions` reads them for many schedules
in two queries.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import DataError, models
from django.db.models.functions import Cast
from django.utils import timezone as dj_timezone

from .. import timing

if TYPE_CHECKING:
    from .schedule import Schedule

calendar_name_validator = RegexValidator(
    r"^[a-z0-9][a-z0-9_-]{0,63}\Z",
    "1-64 of lower-case letters, digits, '_' or '-', starting with a letter or digit "
    "(e.g. fr-holidays).",
)


class ExclusionCalendarQuerySet(models.QuerySet["ExclusionCalendar"]):
    """Named predicates of calendars."""

    def shared(self) -> ExclusionCalendarQuerySet:
        """The calendars open to owner-scoped API users (``shared``)."""
        return self.filter(shared=True)


def default_weekend_days() -> list[int]:
    """Saturday and Sunday (ISO weekday numbers): the default of ``weekend_days``."""
    return sorted(timing.DEFAULT_WEEKEND)


class ExclusionCalendar(models.Model):
    """Dates on which the schedules that name it must not fire: the public holidays of
    ``holidays_country`` (ISO 3166 code, ``"FR"``) and ``holidays_subdivision`` (``"BY"``
    for Bavaria; blank: the whole country), and/or the calendar's own dates
    (:class:`ExclusionDate`). Dates are local dates, read in each schedule's own zone.
    ``shared`` opens it to owner-scoped API users (see ``docs/api.md``)."""

    name = models.CharField(
        max_length=64,
        unique=True,
        validators=[calendar_name_validator],
        help_text="A short slug: 'fr-holidays', 'plant-shutdowns'.",
    )
    description = models.CharField(max_length=500, blank=True, default="")
    holidays_country = models.CharField(
        max_length=8,
        blank=True,
        default="",
        help_text="ISO 3166 code of a country whose public holidays are excluded ('FR', "
        "'DE', 'US'), as the holidays package knows them; blank: none.",
    )
    holidays_subdivision = models.CharField(
        max_length=32,
        blank=True,
        default="",
        help_text="A subdivision of that country ('BY' for Bavaria, 'CA' for California); "
        "blank: the country's nationwide holidays.",
    )
    weekend_days = models.JSONField(
        default=default_weekend_days,
        blank=True,
        help_text="ISO weekday numbers (1 Monday ... 7 Sunday) or names ('saturday', 'sun') "
        "of the days that are no business days: [6, 7] (Saturday and Sunday) unless told; "
        "[] for none. They exclude nothing: they say which days a schedule's "
        "exclusion_policy and rrule_business_days count as business days.",
    )
    shared = models.BooleanField(
        default=False,
        help_text="Open to owner-scoped API users: they may read it (dates and reasons) and "
        "name it on their own schedules. Off: only full-access (staff) users see it.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ExclusionCalendarQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=~models.Q(holidays_country="") | models.Q(holidays_subdivision=""),
                name="dds_calendar_subdivision_needs_country",
            )
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        """Upper-case the codes and check them against ``holidays``; raises
        ``ValidationError`` with field messages (``holidays_country``,
        ``holidays_subdivision``)."""
        self.holidays_country = (self.holidays_country or "").strip().upper()
        self.holidays_subdivision = (self.holidays_subdivision or "").strip()
        known = timing.holiday_countries()
        if self.holidays_subdivision.upper() in known.get(self.holidays_country, []):
            self.holidays_subdivision = self.holidays_subdivision.upper()
        errors: dict[str, str] = {}
        try:
            self.weekend_days = list(
                timing.weekend_days(self.weekend_days if self.weekend_days is not None else [])
            )
        except timing.InvalidSchedule as exc:
            errors["weekend_days"] = exc.message
        if self.holidays_subdivision and not self.holidays_country:
            errors["holidays_subdivision"] = "A subdivision needs holidays_country."
        elif self.holidays_country and self.holidays_country not in known:
            errors["holidays_country"] = (
                f"The holidays package has no country {self.holidays_country!r} "
                "(ISO 3166 codes such as FR, DE, US)."
            )
        elif self.holidays_subdivision and self.holidays_subdivision not in known.get(
            self.holidays_country, []
        ):
            codes = ", ".join(known[self.holidays_country][:20]) or "none"
            errors["holidays_subdivision"] = (
                f"{self.holidays_country} has no subdivision {self.holidays_subdivision!r} "
                f"(its subdivisions: {codes})."
            )
        if errors:
            raise ValidationError(errors)

    def holiday_source(self) -> timing.HolidaySource | None:
        """The holiday source of this calendar, or None when it names no country."""
        if not self.holidays_country:
            return None
        return timing.HolidaySource(self.name, self.holidays_country, self.holidays_subdivision)


class ExclusionDate(models.Model):
    """One local date of an :class:`ExclusionCalendar`, with an optional reason."""

    calendar = models.ForeignKey(ExclusionCalendar, on_delete=models.CASCADE, related_name="dates")
    date = models.DateField(help_text="A local date, read in each schedule's own time zone.")
    reason = models.CharField(max_length=200, blank=True, default="")

    class Meta:
        ordering = ["date"]
        constraints = [
            models.UniqueConstraint(fields=["calendar", "date"], name="dds_calendar_date_unique")
        ]

    def __str__(self) -> str:
        return f"{self.calendar_id}: {self.date.isoformat()}"


#: What a read of a date column raises for a value the driver cannot make a ``date`` of
#: (psycopg: year 10000; Django's SQLite converter: ``2024-02-30``).
_UNREADABLE_DATE = (DataError, ValueError, TypeError, OverflowError)


def read_dates(dates: models.QuerySet[ExclusionDate]) -> list[tuple[int, Any, Any]]:
    """``(calendar_id, date, reason)`` of each row of ``dates``, never raising for a value
    written behind ``save()``: a date the driver cannot read (year 10000 on PostgreSQL and
    SQLite, text that is no date on SQLite) is read again as text, and that text (or None)
    stands for it, for :func:`.timing.exclusions_of` to report. One query; a second only
    when a date could not be read."""
    try:
        rows = list(dates.values_list("calendar_id", "date", "reason"))
    except _UNREADABLE_DATE:
        rows = None
    if rows is not None and all(type(day) is date for _, day, _ in rows):
        return rows
    as_text = dates.annotate(_dds_day=Cast("date", models.CharField()))
    return [
        (cal_id, _as_date(text), reason)
        for cal_id, text, reason in as_text.values_list("calendar_id", "_dds_day", "reason")
    ]


def _as_date(text: Any) -> Any:
    """The ``date`` an ISO text (``YYYY-MM-DD``) reads as, else the text itself."""
    if not isinstance(text, str):
        return text
    try:
        return date.fromisoformat(text)
    except ValueError:
        return text


def _through() -> Any:
    from .schedule import Schedule

    return Schedule.exclusion_calendars.through


#: The attribute :func:`with_calendar_flag` annotates: whether a row links any calendar.
HAS_CALENDARS = "_dds_has_calendars"
_NO_EXCLUSIONS = timing.Exclusions()


def with_calendar_flag(qs: Any) -> Any:
    """``qs`` (schedules) annotated with whether each row links an exclusion calendar
    (an ``EXISTS`` on the link table's unique index, in the same statement), so that
    :func:`load_exclusions` reads nothing for the rows that link none (most of them)."""
    links = _through().objects.filter(schedule_id=models.OuterRef("pk"))
    return qs.annotate(**{HAS_CALENDARS: models.Exists(links)})


def _links_none(row: Schedule) -> bool:
    """Whether ``row`` was read with the flag of :func:`with_calendar_flag` saying it links
    no calendar (``False``; ``0`` where a raw read returns the database's integer)."""
    flag = row.__dict__.get(HAS_CALENDARS)
    return flag is not None and not flag


def load_exclusions(rows: Sequence[Schedule], using: str = "default") -> None:
    """Read the exclusion calendars of ``rows`` (saved schedules) and attach each row's
    :class:`.timing.Exclusions` (used by ``Schedule.spec()``): one query for the links and
    their calendars, one more for the dates when a calendar has any; none for no rows, nor
    for rows read through :func:`with_calendar_flag` that link no calendar."""
    unlinked = [r for r in rows if _links_none(r)]
    for row in unlinked:
        row.__dict__["_dds_exclusions"] = _NO_EXCLUSIONS
    rows = [r for r in rows if not r._state.adding and not _links_none(r)]
    if not rows:
        return
    links = list(
        _through()
        .objects.using(using)
        .filter(schedule_id__in=[r.pk for r in rows])
        .values_list(
            "schedule_id",
            "exclusioncalendar_id",
            "exclusioncalendar__name",
            "exclusioncalendar__holidays_country",
            "exclusioncalendar__holidays_subdivision",
            "exclusioncalendar__weekend_days",
        )
    )
    dates: dict[int, list[tuple[str, Any, str]]] = defaultdict(list)
    if links:
        names = {cal_id: name for _, cal_id, name, *_ in links}
        for cal_id, day, reason in read_dates(
            ExclusionDate.objects.using(using).filter(calendar_id__in=list(names))
        ):
            dates[cal_id].append((names[cal_id], day, reason))
    by_row: dict[Any, list[tuple[Any, str, str, str, Any]]] = defaultdict(list)
    for schedule_id, cal_id, name, country, subdivision, weekend in links:
        by_row[schedule_id].append((cal_id, name, country, subdivision, weekend))
    for row in rows:
        cals = by_row.get(row.pk, [])
        row.__dict__["_dds_exclusions"] = timing.exclusions_of(
            [d for cal_id, *_ in cals for d in dates.get(cal_id, [])],
            [(name, country, sub) for _, name, country, sub, _ in cals if country],
            [(name, weekend) for _, name, _, _, weekend in cals],
        )


def exclusions_of_calendars(calendars: Iterable[ExclusionCalendar]) -> timing.Exclusions:
    """The :class:`.timing.Exclusions` of unsaved-schedule calendars (a preview in a form):
    one query per calendar for its dates."""
    dates: list[tuple[str, Any, str]] = []
    sources: list[tuple[str, str, str]] = []
    weekends: list[tuple[str, Any]] = []
    for cal in calendars:
        weekends.append((cal.name, cal.weekend_days))
        dates += [(cal.name, d, r) for _, d, r in read_dates(cal.dates.all())]
        if cal.holidays_country:
            sources.append((cal.name, cal.holidays_country, cal.holidays_subdivision))
    return timing.exclusions_of(dates, sources, weekends)


class ExclusionsMixin:
    """What ``Schedule`` knows of its exclusion calendars: the dates they exclude (read
    once per instance, or attached for a batch by :func:`load_exclusions`) and the
    upcoming slots with the excluded ones marked."""

    _state: Any

    def exclusions(self) -> timing.Exclusions:
        """The dates this schedule must not fire on, from its ``exclusion_calendars``: as
        attached by :func:`.calendars.load_exclusions` (the worker loads a batch's in two
        queries), else read now (two queries, kept on the instance: call
        :meth:`forget_exclusions` after a change). An unsaved row has none."""
        cached = self.__dict__.get("_dds_exclusions")
        if cached is None:
            if self._state.adding:
                return timing.Exclusions()
            load_exclusions([self], self._state.db or "default")  # type: ignore[list-item]
            cached = self.__dict__["_dds_exclusions"]
        return cached  # type: ignore[no-any-return]

    def forget_exclusions(self) -> None:
        """Drop the exclusions read by :meth:`exclusions` (the next read queries again)."""
        self.__dict__.pop("_dds_exclusions", None)

    def refresh_from_db(self, *args: Any, **kwargs: Any) -> None:
        """As Django's, and the calendars are read again when next needed."""
        self.forget_exclusions()
        super().refresh_from_db(*args, **kwargs)  # type: ignore[misc]

    def upcoming_slots(
        self, count: int = 5, after: datetime | None = None
    ) -> list[timing.SlotView]:
        """The next ``count`` fire times strictly after ``after`` (default: now) and the
        slots its exclusion calendars exclude before the last of them (at most ``count``),
        and those inside its blackout windows (at most ``count``), in time order: each a
        :class:`.timing.SlotView` (``at``: aware UTC; ``excluded_by``: None, or the
        calendar, local date and reason; ``blacked_out_by``: None, or the window's name)."""
        self._normalize()  # type: ignore[attr-defined]
        after = timing.require_aware(after, "after") if after else dj_timezone.now()
        spec = self.spec()  # type: ignore[attr-defined]
        blackouts = self.blackouts()  # type: ignore[attr-defined]
        return timing.upcoming_slots(spec, after, count, blackouts)
