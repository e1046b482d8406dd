"""Blackout windows as data (issue #27): spans of time in which no run may start.

A window is one range (``start`` to ``end``, aware instants) or recurring: an RFC 5545
rule for the instants each window starts at, read in its zone from a DTSTART (as a
schedule's rule, :mod:`.rrule`: the same parser, validation and planning budget), none
starting after ``until``, each lasting ``duration_seconds``. A window covers
``[start, start + duration)``: an instant at its end is outside it.

:class:`Blackouts` is a set of windows with the searches the claim needs:
:meth:`~Blackouts.window_at`, :meth:`~Blackouts.end_of_blackout` (following windows that
overlap or touch), :meth:`~Blackouts.windows_between` and :meth:`~Blackouts.spans` (the
covered time of a range as disjoint spans). Every instant out is aware UTC, whole
seconds. Bounded: a search lists at most :data:`MAX_WINDOWS` windows and follows at
most :data:`MAX_CHAIN` to an end, else :class:`.errors.InvalidSchedule` (windows that never
end: a rule whose windows cover all time).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ..limits import BLACKOUT_MAX_SECONDS
from .errors import InvalidSchedule
from .instants import LAST_INSTANT, SECOND, UTC, require_aware, truncate_to_second
from .rrule import compile_rrule, rrule_dtstart, rrule_latest, rrule_upcoming
from .rrule_grid import RulePlan
from .zones import validate_timezone

#: The field a window's problem is reported on (a schedule's).
FIELD = "blackout_windows"
#: Windows one search lists at most.
MAX_WINDOWS = 10_000
#: Windows that overlap or touch followed to an end at most (:meth:`Blackouts.end_of_blackout`).
MAX_CHAIN = 500


@dataclass(frozen=True, slots=True)
class Window:
    """One window in time: ``name`` (of the :class:`BlackoutRange` or
    :class:`BlackoutRule` it comes from) and ``[start, end)`` (aware UTC, whole seconds)."""

    name: str
    start: datetime
    end: datetime

    def covers(self, instant: datetime) -> bool:
        """Whether ``instant`` lies in ``[start, end)``."""
        return self.start <= instant < self.end


@dataclass(frozen=True, slots=True)
class BlackoutRange:
    """One range: ``[start, end)``, aware instants (truncated to whole seconds)."""

    name: str
    start: datetime
    end: datetime

    def check(self) -> None:
        """Raise :class:`InvalidSchedule` unless both ends are aware and ordered."""
        start = require_aware(self.start, "start_at")
        end = require_aware(self.end, "end_at")
        if end <= start:
            raise InvalidSchedule("end_at", "a range must end after it starts")

    def between(self, lo: datetime, hi: datetime) -> list[Window]:
        """The window, when it intersects ``[lo, hi)``."""
        start, end = truncate_to_second(self.start), truncate_to_second(self.end)
        if start < hi and end > lo and end > start:
            return [Window(self.name, start, end)]
        return []

    def at(self, instant: datetime) -> list[Window]:
        """The window, when it covers ``instant``."""
        return self.between(instant, instant + SECOND)


@dataclass(frozen=True, slots=True)
class BlackoutRule:
    """Recurring windows: ``rrule`` (RFC 5545, no DTSTART) read in ``timezone`` from its
    DTSTART (``start_at`` read in the zone, else local midnight of the day of
    ``created``: :func:`.rrule.rrule_dtstart`), no window starting after ``until``
    (aware; None: no end), each ``duration_seconds`` long (>= 1). Nothing is checked
    until first used (:meth:`check`), so a value written behind ``save()`` is the
    problem of the schedules that use it, when they do."""

    name: str
    rrule: str
    timezone: str
    duration_seconds: int
    start_at: datetime | None = None
    until: datetime | None = None
    created: datetime | None = None
    _plan: list[RulePlan] = field(default_factory=list, compare=False, repr=False)

    def plan(self) -> RulePlan:
        """The compiled rule (cached on the value). Raises :class:`InvalidSchedule`."""
        if not self._plan:
            validate_timezone(self.timezone)
            duration = self.duration_seconds
            if type(duration) is not int or not 1 <= duration <= BLACKOUT_MAX_SECONDS:
                raise InvalidSchedule(
                    "duration_seconds",
                    f"a duration from 1 to {BLACKOUT_MAX_SECONDS} seconds, not {duration!r}",
                )
            dtstart = rrule_dtstart(self.timezone, self.start_at, self.created)
            self._plan.append(compile_rrule(self.rrule, self.timezone, dtstart))
        return self._plan[0]

    def check(self) -> None:
        """Raise :class:`InvalidSchedule` for a rule, zone or duration the engine cannot
        evaluate (the rule's checks of :func:`.rrule.validate_rrule`)."""
        self.plan()

    @property
    def duration(self) -> timedelta:
        """How long each window lasts."""
        return timedelta(seconds=self.duration_seconds)

    def between(self, lo: datetime, hi: datetime) -> list[Window]:
        """The windows intersecting ``[lo, hi)`` (at most :data:`MAX_WINDOWS` + 1): those
        starting in ``(lo - duration, hi)``."""
        plan = self.plan()
        first = lo - self.duration + SECOND
        last = hi - SECOND
        if self.until is not None:
            last = min(last, truncate_to_second(self.until))
        if last < first:
            return []
        starts = rrule_upcoming(plan, first, last, MAX_WINDOWS + 1)
        return [Window(self.name, s, min(s + self.duration, LAST_INSTANT)) for s in starts]

    def at(self, instant: datetime) -> list[Window]:
        """The latest-starting window covering ``instant`` (one search), if any."""
        plan = self.plan()
        last = instant if self.until is None else min(instant, truncate_to_second(self.until))
        first = instant - self.duration + SECOND
        if last < first:
            return []
        start = rrule_latest(plan, first, last)
        if start is None:
            return []
        return [Window(self.name, start, start + self.duration)]


@dataclass(frozen=True)
class Blackouts:
    """A set of windows (ranges and rules); empty: none, and every search is free."""

    windows: tuple[BlackoutRange | BlackoutRule, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.windows)

    @property
    def names(self) -> list[str]:
        """The windows' names, in order."""
        return [w.name for w in self.windows]

    def validate(self) -> None:
        """Raise :class:`InvalidSchedule` (field ``blackout_windows``) naming the first
        window the engine cannot evaluate and why."""
        for window in self.windows:
            try:
                window.check()
            except InvalidSchedule as exc:
                raise InvalidSchedule(FIELD, f"blackout window {window.name!r}: {exc}") from exc

    def windows_between(self, lo: datetime, hi: datetime) -> list[Window]:
        """The windows intersecting ``[lo, hi)`` (aware), by start then end. Raises
        :class:`InvalidSchedule` for more than :data:`MAX_WINDOWS` of them, or a window
        the engine cannot evaluate."""
        if not self.windows:
            return []
        lo, hi = truncate_to_second(lo), truncate_to_second(hi)
        self.validate()
        found = [w for window in self.windows for w in window.between(lo, hi)]
        if len(found) > MAX_WINDOWS:
            raise InvalidSchedule(FIELD, f"more than {MAX_WINDOWS} blackout windows in a search")
        return sorted(found, key=lambda w: (w.start, w.end, w.name))

    def window_at(self, instant: datetime) -> Window | None:
        """The window covering ``instant`` (aware), or None; of several, the one ending
        last."""
        if not self.windows:
            return None
        instant = truncate_to_second(instant)
        self.validate()
        found = [w for window in self.windows for w in window.at(instant)]
        return max(found, key=lambda w: (w.end, w.name)) if found else None

    def end_of_blackout(self, instant: datetime) -> datetime:
        """The first instant at or after ``instant`` covered by no window: ``instant``
        (truncated, UTC) when none covers it, else the end of the covering window,
        following the windows that overlap or touch it. Raises :class:`InvalidSchedule`
        when no end is found within :data:`MAX_CHAIN` windows."""
        at = truncate_to_second(instant).astimezone(UTC)
        for _ in range(MAX_CHAIN):
            window = self.window_at(at)
            if window is None:
                return at
            at = window.end
        raise InvalidSchedule(FIELD, f"the blackout windows do not end after {instant.isoformat()}")

    def spans(self, lo: datetime, hi: datetime) -> list[Window]:
        """The time of ``[lo, hi)`` covered by windows, as disjoint spans in order (windows
        that overlap or touch merged, clipped to the range; each named after the first
        window of its span)."""
        merged: list[Window] = []
        for w in self.windows_between(lo, hi):
            start, end = max(w.start, truncate_to_second(lo)), min(w.end, truncate_to_second(hi))
            if merged and start <= merged[-1].end:
                last = merged[-1]
                merged[-1] = Window(last.name, last.start, max(last.end, end))
            elif end > start:
                merged.append(Window(w.name, start, end))
        return merged


NO_BLACKOUTS = Blackouts()
