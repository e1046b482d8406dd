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

from django.db import models
from django.db.models import Q

from ..limits import BLACKOUT_MAX_SECONDS
from .calendars import calendar_name_validator


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
