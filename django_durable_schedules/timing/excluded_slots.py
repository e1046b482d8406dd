"""The walks past excluded dates: the next slot that fires, the latest one of a window,
and the slots of a window that fall on excluded dates (counted per date).

Each function takes the grid's own search (``raw``: the slots of the schedule with excluded
dates included) as a callable, so it works the same for every kind. Bounded: a walk steps
over one excluded local date at a time (never slot by slot inside an excluded day) and gives
up after :data:`.exclusions.HORIZON_YEARS` years, or :data:`MAX_STEPS` excluded dates, with
:class:`InvalidSchedule` (field ``exclusion_calendars``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from .errors import InvalidSchedule
from .exclusions import FIELD, HORIZON_YEARS, Exclusion, day_start, local_date, next_day_start
from .instants import SECOND

if TYPE_CHECKING:
    from .spec import Spec

#: Excluded dates one walk steps over at most before it gives up.
MAX_STEPS = 50_000
_HORIZON = timedelta(days=146_097 * HORIZON_YEARS // 400)  # 400 Gregorian years


@dataclass(frozen=True)
class ExcludedDay:
    """The slots of one excluded local date inside a window: the :class:`Exclusion`,
    the first such slot (aware UTC) and how many of them do not fire (``count``). With an
    exclusion policy that moves slots (:mod:`.moved_slots`), ``moved_to`` is where the
    first slot that fires moved to and ``moved`` how many fire moved (``count``: those
    coalesced into another slot or left without a business day)."""

    exclusion: Exclusion
    first: datetime
    count: int
    moved_to: datetime | None = None
    moved: int = 0


@dataclass(frozen=True)
class SlotView:
    """One slot of the grid (aware UTC, whole seconds) and, when it does not fire, the
    :class:`Exclusion` that excludes it or the name of the blackout window that covers it
    (``blacked_out_by``)."""

    at: datetime
    excluded_by: Exclusion | None = None
    blacked_out_by: str | None = None
    #: A slot that moved to a business day (``exclusion_policy``): its nominal slot and
    #: the :class:`Exclusion` it moved away from (None: it did not move).
    nominal: datetime | None = None
    moved_by: Exclusion | None = None
    policy: str = ""

    @property
    def why_moved(self) -> str:
        """Why the slot fires away from its nominal slot ("" when it does not)."""
        if self.moved_by is None or self.nominal is None:
            return ""
        where = "previous" if self.policy == "previous_business_day" else "next"
        return f"moved from {self.nominal.isoformat()} to the {where} business day: {self.moved_by}"

    @property
    def fires(self) -> bool:
        """Whether the slot runs: neither excluded nor inside a blackout window."""
        return self.excluded_by is None and self.blacked_out_by is None

    @property
    def why_not(self) -> str:
        """Why it does not run ("" when it does): the exclusion, or the window."""
        if self.excluded_by is not None:
            return str(self.excluded_by)
        if self.blacked_out_by is not None:
            return f"blackout window {self.blacked_out_by}"
        return ""


def exclusion_of(spec: Spec, slot: datetime) -> Exclusion | None:
    """Why ``slot`` does not fire (its local date in ``spec.timezone`` is excluded), or
    None. Raises :class:`InvalidSchedule` for a holiday source ``holidays`` does not know."""
    if not spec.exclusions:
        return None
    return spec.exclusions.excluded_by(local_date(slot, spec.timezone))


def _gave_up(spec: Spec, since: datetime, why: str) -> InvalidSchedule:
    names = ", ".join(spec.exclusions.calendars) if spec.exclusions else ""
    return InvalidSchedule(
        FIELD,
        f"no slot to run: {why} after {since.isoformat()} is on a date its exclusion "
        f"calendars ({names}) exclude",
    )


def skip_excluded(
    spec: Spec, slot: datetime | None, raw: Callable[[datetime], datetime | None]
) -> datetime | None:
    """The first slot at or after ``slot`` (a slot of the grid) that is not excluded, or
    None when the grid ends first. ``raw(at)`` is the grid's first slot at or after ``at``.
    Raises :class:`InvalidSchedule` when every slot for :data:`HORIZON_YEARS` years (or
    :data:`MAX_STEPS` excluded dates) is excluded."""
    if slot is None:
        return None
    since = slot
    for _ in range(MAX_STEPS):
        why = exclusion_of(spec, slot)
        if why is None:
            return slot
        if slot - since > _HORIZON:
            raise _gave_up(spec, since, f"every slot for {HORIZON_YEARS} years")
        after = next_day_start(why.date, spec.timezone)
        if after is None:
            return None
        found = raw(max(after, slot + SECOND))
        if found is None:
            return None
        slot = found
    raise _gave_up(spec, since, f"every slot of {MAX_STEPS} dates")


def latest_not_excluded(
    spec: Spec,
    lo: datetime,
    hi: datetime,
    raw: Callable[[datetime, datetime], datetime | None],
) -> datetime | None:
    """The latest slot in ``[lo, hi]`` that is not excluded, or None. ``raw(lo, hi)`` is
    the grid's latest slot in that window. Bounded by the excluded dates of the window (at
    most :data:`MAX_STEPS`; past that, None: the window holds no slot to run that a
    bounded walk can find)."""
    slot = raw(lo, hi)
    for _ in range(MAX_STEPS):
        if slot is None:
            return None
        why = exclusion_of(spec, slot)
        if why is None:
            return slot
        start = day_start(why.date, spec.timezone)
        hi = min(start, slot) - SECOND if start is not None else slot - SECOND
        if hi < lo:
            return None
        slot = raw(lo, hi)
    return None


def count_excluded_days(
    spec: Spec,
    lo: datetime,
    hi: datetime,
    raw: Callable[[datetime, datetime], int],
    first: Callable[[datetime], datetime | None] | None = None,
) -> list[ExcludedDay]:
    """The excluded local dates with slots in ``[lo, hi]`` (aware UTC, inclusive), each with
    its number of slots there (``raw(a, b)`` counts the grid's slots in ``[a, b]``) and its
    first slot there (``first(a)``: the grid's first slot at or after ``a``; without it, the
    first instant of the date in the window). Sorted by date; the holidays are looked at
    for at most :data:`HORIZON_YEARS` years from ``lo``."""
    if not spec.exclusions:
        return []
    zone = spec.timezone
    days: list[ExcludedDay] = []
    for exclusion in spec.exclusions.in_range(local_date(lo, zone), local_date(hi, zone)):
        start = day_start(exclusion.date, zone)
        end = next_day_start(exclusion.date, zone)
        a = max(lo, start) if start is not None else lo
        b = min(hi, end - SECOND) if end is not None else hi
        if b < a:
            continue
        count = raw(a, b)
        if count:
            at = first(a) if first is not None else None
            days.append(ExcludedDay(exclusion, at or a, count))
    return days
