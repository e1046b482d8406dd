"""Concurrency groups (issue #28, item 1): a cap shared by the schedules that name one
(``Schedule.concurrency_group``): at most ``max_running`` of their runs hold a live lease
at once, and at most ``rate`` of them start per window (``"10/m"``, ``"2/s"``).

The model, its rate's syntax and its database constraints only; the claim enforces the
limits (:mod:`..state.group_rules`, the arithmetic; :mod:`..state.groups`, the locked
reads and writes). Two run-state columns, written only by the state package, let a claim
skip the rows of a group at its limit without reading them one by one: ``full_until``
(the group was at ``max_running``; a run of the group that finishes clears it, and it
lapses by itself as a safety net) and ``rate_until`` (the instant the rate window lets the
next run start); ``starts`` keeps the last starts the rate needs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import Q

from ..limits import RATE_HOLD_MAX_SECONDS, RECHECK_SECONDS
from .calendars import calendar_name_validator
from .instants import LEASE_CEILING, LEASE_FLOOR

#: A rate: a whole number of starts per second, minute or hour ("10/m", "2/s", "100/h").
RATE_RE = re.compile(r"^\s*(\d{1,4})\s*/\s*(s|m|h)\s*\Z")
#: The most starts a rate may allow per window: the ``starts`` a group keeps.
RATE_MAX_COUNT = 1000
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600}


@dataclass(frozen=True)
class Rate:
    """A parsed rate: at most ``count`` starts in any ``seconds``-long window."""

    count: int
    seconds: int


def parse_rate(text: Any) -> Rate | None:
    """The :class:`Rate` of ``text`` ("10/m": ten per minute), None for a blank one.
    Raises ``ValidationError`` (``rate``) for anything else: not text, a unit other than
    s/m/h, a count of 0 or above :data:`RATE_MAX_COUNT`."""
    if text is None or (isinstance(text, str) and not text.strip()):
        return None
    match = RATE_RE.match(text) if isinstance(text, str) else None
    if match is None:
        raise ValidationError(
            {"rate": ["A count per second, minute or hour: '2/s', '10/m', '100/h'."]}
        )
    count = int(match.group(1))
    if not 1 <= count <= RATE_MAX_COUNT:
        raise ValidationError({"rate": [f"The count must be from 1 to {RATE_MAX_COUNT}."]})
    return Rate(count, _UNIT_SECONDS[match.group(2)])


class ConcurrencyGroup(models.Model):
    """A limit shared by the schedules that name it: ``max_running`` runs at once (blank:
    no cap) and ``rate`` starts per window (blank: none); at least one of the two."""

    name = models.CharField(
        max_length=64,
        unique=True,
        validators=[calendar_name_validator],
        help_text="A short slug: 'partner-api', 'reports'.",
    )
    description = models.CharField(max_length=500, blank=True, default="")
    max_running = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="The most runs of the group's schedules at once (blank: no cap).",
    )
    rate = models.CharField(
        max_length=16,
        blank=True,
        default="",
        help_text="The most starts per second, minute or hour: '2/s', '10/m', '100/h' "
        "(blank: no rate limit).",
    )
    full_until = models.DateTimeField(null=True, blank=True, editable=False)
    rate_until = models.DateTimeField(null=True, blank=True, editable=False)
    starts = models.JSONField(default=list, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=Q(max_running__isnull=True) | Q(max_running__gte=1),
                name="dds_group_max_running_positive",
            ),
            models.CheckConstraint(
                condition=Q(max_running__isnull=False) | ~Q(rate=""),
                name="dds_group_has_a_limit",
            ),
            # The run state is an instant a claim wrote, whatever writes the row: one
            # every backend reads back (not PostgreSQL's infinity, not SQLite text).
            models.CheckConstraint(
                condition=Q(full_until__isnull=True)
                | Q(full_until__gte=LEASE_FLOOR, full_until__lte=LEASE_CEILING),
                name="dds_group_full_until_readable",
            ),
            models.CheckConstraint(
                condition=Q(rate_until__isnull=True)
                | Q(rate_until__gte=LEASE_FLOOR, rate_until__lte=LEASE_CEILING),
                name="dds_group_rate_until_readable",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        """A valid rate, and at least one limit."""
        parse_rate(self.rate)
        if self.max_running is None and not (self.rate or "").strip():
            raise ValidationError("Give max_running, a rate, or both.")
        self.rate = (self.rate or "").replace(" ", "")

    @staticmethod
    def holding_q(now: Any) -> Q:
        """The group holds its rows back at ``now`` (an instant, or an expression such as
        ``Now()``): at ``max_running`` (``full_until`` in ``(now, now + RECHECK_SECONDS]``)
        or out of its rate (``rate_until`` in ``(now, now + RATE_HOLD_MAX_SECONDS]``). An
        instant later than any a claim writes holds nothing (see
        :data:`RATE_HOLD_MAX_SECONDS`)."""
        return ConcurrencyGroup.full_holding_q(now) | ConcurrencyGroup.rate_holding_q(now)

    @staticmethod
    def rate_holding_q(now: Any) -> Q:
        """The rate part of :meth:`holding_q`: ``rate_until`` holds the group at ``now``."""
        return Q(rate_until__gt=now, rate_until__lte=_later(now, RATE_HOLD_MAX_SECONDS))

    @staticmethod
    def full_holding_q(now: Any) -> Q:
        """The ``max_running`` part of :meth:`holding_q`."""
        return Q(full_until__gt=now, full_until__lte=_later(now, RECHECK_SECONDS))

    def parsed_rate(self) -> Rate | None:
        """The group's :class:`Rate`, None without one. Raises ``ValidationError`` for
        one written behind ``save()`` that does not parse (a claim then starts none of
        the group's runs, and health names the group: :mod:`..state.group_rules`)."""
        return parse_rate(self.rate)


def _later(now: Any, seconds: float) -> Any:
    """``now`` plus ``seconds``: an instant, or an expression for one (``Now()``)."""
    return now + timedelta(seconds=seconds)
