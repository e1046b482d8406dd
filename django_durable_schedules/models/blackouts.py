"""Blackout windows (issue #27): spans of time in which no run of the schedules that name
one may *start*, whatever its origin (grid, retry, buffered slot, backfill, a trigger
unless it says ``ignore_blackout``). A window is either one range (``start_at`` to
``end_at``) or recurring: an RFC 5545 ``rrule`` for its starts, read in its ``timezone``,
each lasting ``duration_seconds``. A schedule names its windows
(``Schedule.blackout_windows``) and says what its slots inside one do
(``Schedule.blackout_policy``: ``skip`` counts them, ``defer`` runs them once at the
window's end).

The model and its database constraints only; what a window means in time is
:mod:`..timing` 's, and what a claim does with it the state kernel's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.utils import timezone as dj_timezone

from .. import timing
from ..limits import BLACKOUT_MAX_SECONDS
from .calendars import calendar_name_validator

if TYPE_CHECKING:
    from .schedule import Schedule


class BlackoutWindowQuerySet(models.QuerySet["BlackoutWindow"]):
    """Named predicates of blackout windows."""

    def shared(self) -> BlackoutWindowQuerySet:
        """The windows open to owner-scoped API users (``shared``)."""
        return self.filter(shared=True)

    def recurring(self) -> BlackoutWindowQuerySet:
        """The windows defined by a rule (``rrule`` set)."""
        return self.exclude(rrule="")


class BlackoutWindow(models.Model):
    """A span of time in which the schedules that name it start no run.

    One range: ``start_at`` and ``end_at`` (aware instants, ``end_at`` after
    ``start_at``), no rule. Recurring: ``rrule`` (RFC 5545, no DTSTART/TZID/COUNT) gives
    the instants each window starts at, read in ``timezone``, anchored at ``start_at``
    when given (else midnight of the creation day), none starting after ``end_at`` when
    given; each lasts ``duration_seconds``. A window covers ``[start, start + duration)``:
    a slot at its end runs."""

    name = models.CharField(
        max_length=64,
        unique=True,
        validators=[calendar_name_validator],
        help_text="A short slug: 'db-maintenance', 'month-end-freeze'.",
    )
    description = models.CharField(max_length=500, blank=True, default="")
    timezone = models.CharField(
        max_length=64,
        default="UTC",
        help_text="IANA time zone the rule is read in ('Europe/Paris'); a range's instants "
        "are absolute.",
    )
    start_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="A range: when it starts. Recurring: the rule's anchor (optional).",
    )
    end_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="A range: when it ends (a slot at this instant runs). Recurring: no "
        "window starts after it (optional).",
    )
    rrule = models.CharField(
        max_length=500,
        blank=True,
        default="",
        help_text="Recurring: an RFC 5545 rule for the instants each window starts at, "
        "e.g. 'FREQ=DAILY;BYHOUR=2;BYMINUTE=0' (02:00 every day) or "
        "'FREQ=WEEKLY;BYDAY=SU;BYHOUR=22;BYMINUTE=0'. Blank: one range.",
    )
    duration_seconds = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Recurring: how long each window lasts (seconds).",
    )
    shared = models.BooleanField(
        default=False,
        help_text="Open to owner-scoped API users: they may read it and name it on their own "
        "schedules. Off: only full-access (staff) users see it.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = BlackoutWindowQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [
            # One range (both ends, no rule, no duration) or a rule with a duration.
            models.CheckConstraint(
                condition=(
                    Q(rrule="")
                    & Q(start_at__isnull=False)
                    & Q(end_at__isnull=False)
                    & Q(duration_seconds__isnull=True)
                )
                | (
                    ~Q(rrule="")
                    & Q(duration_seconds__gte=1)
                    & Q(duration_seconds__lte=BLACKOUT_MAX_SECONDS)
                ),
                name="dds_blackout_range_or_rule",
            ),
            models.CheckConstraint(
                condition=Q(start_at__isnull=True)
                | Q(end_at__isnull=True)
                | Q(end_at__gt=models.F("start_at")),
                name="dds_blackout_ordered",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def is_recurring(self) -> bool:
        """Whether it is defined by a rule (else one range)."""
        return bool(self.rrule)

    def clean(self) -> None:
        """Check the window as the engine will read it; raises ``ValidationError`` with
        field messages: ``timezone`` (an IANA zone), ``rrule`` (the checks of a schedule's
        rule: syntax, "can never fire", the planning budget), ``duration_seconds`` (1 to
        :data:`..limits.BLACKOUT_MAX_SECONDS`, required with a rule, none for a range),
        ``start_at``/``end_at`` (a range needs both, ordered)."""
        errors: dict[str, str] = {}
        self.rrule = (self.rrule or "").strip()
        try:
            self.timezone = timing.canonical_timezone(self.timezone or "UTC")
            timing.validate_timezone(self.timezone)
        except timing.InvalidSchedule as exc:
            errors["timezone"] = exc.message
        if self.start_at and self.end_at and self.end_at <= self.start_at:
            errors["end_at"] = "It must be after start_at."
        if not self.rrule:
            if self.start_at is None:
                errors["start_at"] = "A range needs start_at (or give an rrule)."
            if self.end_at is None:
                errors["end_at"] = "A range needs end_at (or give an rrule)."
            if self.duration_seconds is not None:
                errors["duration_seconds"] = "A range has no duration (it ends at end_at)."
        else:
            duration = self.duration_seconds
            if duration is None or not 1 <= duration <= BLACKOUT_MAX_SECONDS:
                errors["duration_seconds"] = (
                    f"A recurring window lasts 1 to {BLACKOUT_MAX_SECONDS} seconds."
                )
            elif "timezone" not in errors:
                try:
                    self.rrule = timing.parse_rrule(self.rrule).normalized
                    window_of(self).check()
                except timing.InvalidSchedule as exc:
                    errors[exc.field if exc.field in ("timezone", "rrule") else "rrule"] = (
                        exc.message
                    )
        if errors:
            raise ValidationError(errors)


def window_of(row: Any) -> timing.BlackoutRange | timing.BlackoutRule:
    """The timing value of a window row (a :class:`BlackoutWindow`, or any object with
    its attributes): a rule when ``rrule`` is set, else a range. Checks nothing: a value
    the engine cannot evaluate raises when the value is first used. An unsaved window's
    rule is anchored at ``start_at``, else today (the day it is being created)."""
    if row.rrule:
        created = row.created_at or row.start_at or dj_timezone.now()
        return timing.BlackoutRule(
            row.name,
            row.rrule,
            row.timezone or "UTC",
            row.duration_seconds,
            row.start_at,
            row.end_at,
            created,
        )
    return timing.BlackoutRange(row.name, row.start_at, row.end_at)


def _through() -> Any:
    from .schedule import Schedule

    return Schedule.blackout_windows.through


#: The attribute :func:`with_blackout_flag` annotates: whether a row links any window.
HAS_BLACKOUTS = "_dds_has_blackouts"
#: Where a row keeps its windows (:func:`load_blackouts`).
BLACKOUTS = "_dds_blackouts"
_WINDOW_FIELDS = ("name", "rrule", "timezone", "start_at", "end_at", "duration_seconds")


def with_blackout_flag(qs: Any) -> Any:
    """``qs`` (schedules) annotated with whether each row links a blackout window (an
    ``EXISTS`` on the link table, in the same statement), so that :func:`load_blackouts`
    reads nothing for the rows that link none."""
    links = _through().objects.filter(schedule_id=models.OuterRef("pk"))
    return qs.annotate(**{HAS_BLACKOUTS: models.Exists(links)})


def _links_none(row: Schedule) -> bool:
    flag = row.__dict__.get(HAS_BLACKOUTS)
    return flag is not None and not flag


class _Row:
    """A window's values as read (``values_list``), for :func:`window_of`."""

    def __init__(self, values: tuple[Any, ...]) -> None:
        (self.name, self.rrule, self.timezone, self.start_at, self.end_at,
         self.duration_seconds, self.created_at) = values  # fmt: skip


def load_blackouts(rows: Sequence[Schedule], using: str = "default") -> None:
    """Read the blackout windows of ``rows`` (saved schedules) now and attach each row's
    :class:`.timing.Blackouts` (read by ``Schedule.blackouts()``): one query (the links
    joined to their windows); none for no rows, nor for rows read through
    :func:`with_blackout_flag` that link none. Never raises for a window's value: one the
    engine cannot evaluate raises when a rule uses it, for that row alone."""
    rows = [r for r in rows if not r._state.adding]
    for row in rows:
        if _links_none(row):
            row.__dict__[BLACKOUTS] = timing.NO_BLACKOUTS
    rows = [r for r in rows if not _links_none(r)]
    if not rows:
        return
    fields = [f"blackoutwindow__{f}" for f in (*_WINDOW_FIELDS, "created_at")]
    links = (
        _through()
        .objects.using(using)
        .filter(schedule_id__in=[r.pk for r in rows])
        .order_by("blackoutwindow__name")
        .values_list("schedule_id", *fields)
    )
    by_row: dict[Any, list[Any]] = defaultdict(list)
    for schedule_id, *values in links:
        by_row[schedule_id].append(window_of(_Row(tuple(values))))
    for row in rows:
        found = by_row.get(row.pk)
        row.__dict__[BLACKOUTS] = timing.Blackouts(tuple(found)) if found else timing.NO_BLACKOUTS


class BlackoutsMixin:
    """What ``Schedule`` knows of its blackout windows (read once per instance, or
    attached for a batch by :func:`load_blackouts`)."""

    _state: Any

    def blackouts(self) -> timing.Blackouts:
        """This schedule's windows as a :class:`.timing.Blackouts`: as attached by
        :func:`load_blackouts` (the claim reads a batch's in one query), else read now
        (one query, kept on the instance: :meth:`forget_blackouts` after a change). An
        unsaved row has none."""
        cached = self.__dict__.get(BLACKOUTS)
        if cached is None:
            if self._state.adding:
                return timing.NO_BLACKOUTS
            load_blackouts([self], self._state.db or "default")  # type: ignore[list-item]
            cached = self.__dict__[BLACKOUTS]
        return cached  # type: ignore[no-any-return]

    def forget_blackouts(self) -> None:
        """Drop the windows read by :meth:`blackouts` (the next read queries again)."""
        self.__dict__.pop(BLACKOUTS, None)

    def refresh_from_db(self, *args: Any, **kwargs: Any) -> None:
        """As Django's, and the windows are read again when next needed."""
        self.forget_blackouts()
        super().refresh_from_db(*args, **kwargs)  # type: ignore[misc]
