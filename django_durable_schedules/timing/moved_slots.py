"""Excluded slots that move to a business day (``exclusion_policy`` ``previous_business_day``
or ``next_business_day``): the grid a schedule fires on, searched a local day at a time.

The rule (``docs/concepts.md`` has worked examples):

- A slot of the grid on a local date that is no business day (:mod:`.business_days`: a
  date a calendar excludes, or a weekend day) moves to the nearest business day before it
  or after it, at the same wall time (the time its nominal instant reads in the schedule's zone), in the
  zone's rules of that day. A wall time the target day does not have (a spring-forward
  gap) follows the kind's rule for such times: a cron job runs at the first instant after
  the gap, a rule (RRULE) reads it with the offset before the gap; a wall time the target
  day has twice runs at its first reading. Slots on business days stay where they are.
  (With ``exclusion_policy`` ``skip``, weekend days change nothing: only excluded dates
  are left out.)
- The slots a schedule fires at are those that stay and the moved ones. A moved slot that
  lands on an instant another slot fires at is one run: the slot that stayed there fires
  (else the earliest nominal slot that moved there) and each other is **coalesced** into it
  and counted (``excluded_count``, an ``excluded`` event). A moved slot that lands outside
  ``[start_at, end_at]``, or that finds no business day, is counted the same way.
- Bounded: a search steps a local day at a time over the days with slots (one grid search
  each) and over the non-business days around a business day, at most
  :data:`.business_days.MAX_DAYS` of them; the slots of one local day are read one search
  each, at most :data:`MAX_SLOTS_PER_DAY`.

The grid itself is searched by :mod:`.grid`. :func:`moved_grid` is a spec's
:class:`MovedGrid` (cached on the spec); :func:`moved_from` and :func:`upcoming_moved` are
what :mod:`.slots` and the package offer on top of it.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING

from .business_days import DAY_NAMES, MAX_DAYS, nearest_business_day
from .cron import first_instant_after_gap
from .errors import InvalidSchedule
from .excluded_slots import ExcludedDay, SlotView
from .exclusions import Exclusion, Exclusions, day_start, local_date, next_day_start
from .grid import narrow_window, next_raw
from .instants import LAST_INSTANT, SECOND, UTC, truncate_to_second
from .zones import zone_info

if TYPE_CHECKING:
    from .spec import Spec

#: Slots of one local day read at most when slots move (a cron job every minute has 1,440).
MAX_SLOTS_PER_DAY = 2_000
_ONE_DAY = timedelta(days=1)

Raw = Callable[[datetime], "datetime | None"]


@dataclass(frozen=True, order=True)
class Move:
    """One slot the schedule fires at: ``at`` (aware UTC), its ``nominal`` slot of the
    grid (``at`` itself when it stayed), the :class:`Exclusion` it moved away from (None:
    it stayed) and the ``coalesced`` nominal slots that moved onto it too."""

    at: datetime
    nominal: datetime
    exclusion: Exclusion | None = None
    coalesced: tuple[datetime, ...] = ()

    @property
    def moved(self) -> bool:
        return self.exclusion is not None


def moved_instant(spec: Spec, nominal: datetime, day: date) -> datetime:
    """The instant on local ``day`` with the wall time ``nominal`` reads in the zone (the
    DST rules of the module docstring)."""
    tz = zone_info(spec.timezone)
    wall = datetime.combine(day, nominal.astimezone(tz).time().replace(fold=0))
    candidates = sorted({wall.replace(tzinfo=tz, fold=f).astimezone(UTC) for f in (0, 1)})
    real = [u for u in candidates if u.astimezone(tz).replace(tzinfo=None, fold=0) == wall]
    if real:
        return real[0]
    if spec.kind == "rrule":
        return wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
    return first_instant_after_gap(tz, wall, candidates[0], candidates[-1])


@dataclass(frozen=True)
class WeekendDay(Exclusion):
    """Why a slot moved off a day no calendar excludes: it is a weekend day."""

    def __str__(self) -> str:
        name = DAY_NAMES[self.date.weekday()]
        return f"{self.date.isoformat()} is a weekend day ({name})"


class MovedGrid:
    """The slots of one spec with a moving policy, searched with ``raw`` (the grid's first
    slot at or after an instant, excluded dates included, inside ``[start_at, end_at]``)
    and ``inside`` (whether an instant is inside ``[start_at, end_at]``)."""

    def __init__(self, spec: Spec, raw: Raw, inside: Callable[[datetime], bool]) -> None:
        self.spec = spec
        self.exclusions = spec.exclusions or Exclusions()
        self.raw = raw
        self.inside = inside
        self.forward = spec.exclusion_policy == "next_business_day"
        self.is_business = spec.business_day_test()
        self._days: dict[date, tuple[Move, ...]] = {}
        self._represented: dict[date, list[tuple[date, Exclusion]]] = {}

    def reason(self, day: date) -> Exclusion | None:
        """Why ``day`` is no business day (its exclusion, or :class:`WeekendDay`), or None."""
        why = self.exclusions.excluded_by(day)
        if why is None and day.isoweekday() in self.spec.weekend_days:
            why = WeekendDay("weekend", day, DAY_NAMES[day.weekday()])
        return why

    # -- one day ---------------------------------------------------------------------

    def raw_on(self, day: date) -> list[datetime]:
        """The grid's slots on local ``day``, in order (at most :data:`MAX_SLOTS_PER_DAY`)."""
        start = day_start(day, self.spec.timezone)
        end = next_day_start(day, self.spec.timezone)
        if start is None:
            return []
        found: list[datetime] = []
        slot = self.raw(start)
        while slot is not None and (end is None or slot < end):
            found.append(slot)
            if len(found) >= MAX_SLOTS_PER_DAY:
                break
            slot = self.raw(slot + SECOND)
        return found

    def target(self, day: date) -> date | None:
        """The business day a non-business ``day``'s slots move to (None: none)."""
        return nearest_business_day(day, self.forward, self.is_business)

    def represented(self, day: date) -> list[tuple[date, Exclusion]]:
        """The non-business days whose slots move to the business ``day``, in date order:
        those just before it (``next_business_day``) or just after it (``previous_...``)."""
        cached = self._represented.get(day)
        if cached is not None:
            return cached
        found: list[tuple[date, Exclusion]] = []
        step = -_ONE_DAY if self.forward else _ONE_DAY
        other = day
        for _ in range(MAX_DAYS):
            try:
                other += step
            except OverflowError:
                break
            why = self.reason(other)
            if why is None:
                break
            found.append((other, why))
        else:
            raise InvalidSchedule(
                "exclusion_calendars", f"more than {MAX_DAYS} days without a business day"
            )
        result = sorted(found, key=lambda item: item[0])
        self._represented[day] = result
        return result

    def on(self, day: date) -> tuple[Move, ...]:
        """The slots fired on local ``day`` (cached per instance), in time order: none on
        a day that is no business day."""
        cached = self._days.get(day)
        if cached is not None:
            return cached
        moves: dict[datetime, Move] = {}
        if self.reason(day) is None:
            for slot in self.raw_on(day):
                moves[slot] = Move(slot, slot)
            for other, why in self.represented(day):
                for slot in self.raw_on(other):
                    at = moved_instant(self.spec, slot, day)
                    if not self.inside(at):
                        continue
                    held = moves.get(at)
                    if held is None:
                        moves[at] = Move(at, slot, why)
                    else:
                        moves[at] = Move(
                            held.at, held.nominal, held.exclusion, (*held.coalesced, slot)
                        )
        result = tuple(sorted(moves.values()))
        self._days[day] = result
        return result

    # -- searches --------------------------------------------------------------------

    def _next_day(self, after: date) -> date | None:
        """The first local day after ``after`` that may hold a slot to fire."""
        zone = self.spec.timezone
        best: date | None = None
        if self.forward and self.reason(after) is not None:
            best = self.target(after)
        cursor = next_day_start(after, zone)
        for _ in range(MAX_DAYS):
            if cursor is None:
                break
            slot = self.raw(cursor)
            if slot is None:
                break
            day = local_date(slot, zone)
            if best is not None and day >= best:
                break
            candidate: date | None = day
            if self.reason(day) is not None:
                candidate = self.target(day)
                if candidate is not None and candidate <= after:
                    candidate = None
            if candidate is not None and (best is None or candidate < best):
                best = candidate
            cursor = next_day_start(day, zone)
        return best

    def first_from(self, lo: datetime) -> Move | None:
        """The first slot fired at or after ``lo``, or None."""
        day: date | None = local_date(lo, self.spec.timezone)
        for _ in range(MAX_DAYS):
            if day is None:
                return None
            found = self._first_on(day, lo)
            if found is not None:
                return found
            day = self._next_day(day)
        raise InvalidSchedule(
            "exclusion_calendars", f"no slot to run in the {MAX_DAYS} days after {lo.isoformat()}"
        )

    def _first_on(self, day: date, lo: datetime) -> Move | None:
        """The first slot fired on local ``day`` at or after ``lo``: one grid search when
        no slot moves to ``day`` (most days), else from :meth:`on` (the day's slots worked
        out once per instance)."""
        if self.reason(day) is not None:
            return None
        if self.represented(day):
            moves = self.on(day)
            index = bisect.bisect_left([m.at for m in moves], lo)
            return moves[index] if index < len(moves) else None
        zone = self.spec.timezone
        start, end = day_start(day, zone), next_day_start(day, zone)
        if start is None:
            return None
        own = self.raw(max(lo, start))
        if own is not None and (end is None or own < end):
            return Move(own, own)
        return None

    def latest(self, lo: datetime, hi: datetime) -> Move | None:
        """The latest slot fired in ``[lo, hi]``, by bisection over :meth:`first_from`."""
        best = self.first_from(lo)
        if best is None or best.at > hi:
            return None
        top = hi
        while best.at < top:
            middle = best.at + timedelta(seconds=math.ceil((top - best.at) / SECOND / 2))
            found = self.first_from(middle)
            if found is not None and found.at <= hi:
                best = found
            else:
                top = middle - SECOND
        return best

    def count(self, lo: datetime, hi: datetime, cap: int) -> int:
        """Slots fired in ``[lo, hi]``, at most ``cap`` (one search each)."""
        total = 0
        cursor = lo
        while total < cap:
            move = self.first_from(cursor)
            if move is None or move.at > hi:
                break
            total += 1
            cursor = move.at + SECOND
        return total

    def counted_days(self, lo: datetime, hi: datetime) -> list[ExcludedDay]:
        """The local days that are no business day with slots in ``[lo, hi]`` (one grid
        search per day with slots, at most :data:`.business_days.MAX_DAYS`): for each,
        how many of those slots do not fire (``count``: coalesced into another slot, or
        left without a business day or outside ``[start_at, end_at]``), the first such
        slot, where the first one that fires moved to (``moved_to``) and how many fire."""
        zone = self.spec.timezone
        days: list[ExcludedDay] = []
        cursor: datetime | None = lo
        for _ in range(MAX_DAYS):
            slot = self.raw(cursor) if cursor is not None else None
            if slot is None or slot > hi:
                break
            day = local_date(slot, zone)
            cursor = next_day_start(day, zone)
            why = self.reason(day)
            if why is None:
                continue
            slots = [s for s in self.raw_on(day) if lo <= s <= hi]
            target = self.target(day)
            fired: dict[datetime, datetime] = {}
            if target is not None:
                for move in self.on(target):
                    if move.exclusion is not None:
                        fired[move.nominal] = move.at
            lost = [s for s in slots if s not in fired]
            moved_to = next((fired[s] for s in slots if s in fired), None)
            first = (lost or slots or [slot])[0]
            days.append(ExcludedDay(why, first, len(lost), moved_to, len(slots) - len(lost)))
        return days


# --------------------------------------------------------------------------------------
# A spec's moved grid
# --------------------------------------------------------------------------------------


def moved_grid(spec: Spec) -> MovedGrid:
    """The :class:`MovedGrid` of a validated spec that moves excluded slots (cached on the
    spec: its days are worked out once)."""
    cached = spec.__dict__.get("_moved_grid")
    if cached is None:

        def inside(at: datetime) -> bool:
            lo, hi = narrow_window(spec, at, at)
            return lo <= at and (hi is None or at <= hi)

        cached = MovedGrid(spec, lambda at: next_raw(spec, at), inside)
        object.__setattr__(spec, "_moved_grid", cached)
    return cached


def moved_from(spec: Spec, at: datetime) -> datetime | None:
    """The nominal slot of the fire time ``at`` (aware) when it is a slot that moved to a
    business day (``exclusion_policy``), else None (it did not move, or is no fire time).
    Raises :class:`InvalidSchedule` if the spec is invalid or ``at`` is naive."""
    if not spec.moves_slots:
        return None
    spec.validate()
    at = truncate_to_second(at, "at")
    move = moved_grid(spec).first_from(at)
    if move is None or move.at != at or move.exclusion is None:
        return None
    return move.nominal


def upcoming_moved(spec: Spec, after: datetime, count: int) -> list[SlotView]:
    """The next ``count`` slots that fire strictly after ``after`` (aware) of a validated
    spec that moves excluded slots, in time order: one :class:`.excluded_slots.SlotView`
    each, a moved one with its nominal slot, the exclusion and the policy."""
    grid = moved_grid(spec)
    views: list[SlotView] = []
    cursor = min(truncate_to_second(after, "after"), LAST_INSTANT) + SECOND
    while len(views) < count and cursor <= LAST_INSTANT:
        move = grid.first_from(cursor)
        if move is None:
            break
        if move.exclusion is None:
            views.append(SlotView(move.at))
        else:
            views.append(
                SlotView(
                    move.at,
                    nominal=move.nominal,
                    moved_by=move.exclusion,
                    policy=spec.exclusion_policy,
                )
            )
        cursor = move.at + SECOND
    return views
