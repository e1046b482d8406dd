"""Slot arithmetic on a :class:`~.spec.Spec`, the slots that fire: the next slot, the next
few (``upcoming``), the latest slot of a window, the number of slots in one, and what
exclusion calendars left out (``excluded_days``, ``upcoming_slots``).

The grid is searched by :mod:`.grid` (interval arithmetic, :mod:`.cron`, :mod:`.rrule`,
the union of ``extra`` specs' grids). No slot is earlier than ``start_at`` or later than
``end_at``.

A spec with ``extra`` specs has the union of its members' grids (:meth:`.spec.Spec.members`):
the next slot is the earliest of theirs, the latest the latest, an instant on several grids
is one slot (counted once); exclusions and ``[start_at, end_at]`` apply to the union. A
spec without ``extra`` takes none of these paths.

A spec with ``exclusions`` (exclusion calendars) has the same grid, but a slot whose local
date (in ``timezone``) is excluded does not fire: the searches step over excluded dates a
whole local day at a time, and ``count_slots`` counts only the slots that fire. The walks
past excluded dates are bounded (:mod:`.excluded_slots`). A spec whose
``exclusion_policy`` moves excluded slots to a business day is searched on its
:func:`.moved_slots.moved_grid`.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from .blackouts import MAX_CHAIN, Blackouts
from .excluded_slots import (
    ExcludedDay,
    SlotView,
    count_excluded_days,
    exclusion_of,
    latest_not_excluded,
    skip_excluded,
)
from .grid import count_raw, latest_raw, narrow_window, next_raw
from .instants import LAST_INSTANT, SECOND, truncate_to_second
from .moved_slots import moved_grid, upcoming_moved
from .rrule import rrule_upcoming
from .spec import Spec

_ONE_DAY = timedelta(days=1)


# --------------------------------------------------------------------------------------
# Public slot arithmetic
# --------------------------------------------------------------------------------------


def next_slot_after(spec: Spec, after: datetime, *, inclusive: bool = False) -> datetime | None:
    """The first slot strictly after ``after`` (at or after it when ``inclusive``), as an
    aware UTC datetime with whole seconds, or None when there is none (a once schedule
    already past, ``end_at`` passed, nothing before year MAX_YEAR).

    ``after`` (aware) is truncated to whole seconds first. Slots are never before
    ``start_at`` nor after ``end_at``. Interval: ``anchor + n * interval_seconds``
    computed in integer UTC seconds, whatever the zone. Cron: wall time
    in ``spec.timezone`` with the DST rules of the package docstring. Rrule: the RFC 5545
    rule expanded in ``spec.timezone`` from its DTSTART, local times mapped by RFC 5545
    §3.3.5 (a gap: the offset before it; an overlap: the first occurrence). Once:
    ``run_at``. Manual: never (None; it runs only when triggered).

    Raises :class:`InvalidSchedule` if the spec is invalid (``spec.validate()``) or
    ``after`` is naive.
    """
    spec.validate()
    after = min(truncate_to_second(after, "after"), LAST_INSTANT + SECOND)
    return _next_slot(spec, after if inclusive else after + SECOND)


def planned_slot(spec: Spec, now: datetime, *, first: bool = False) -> datetime | None:
    """The slot a schedule is planned for at ``now`` (aware, whole seconds), or None.

    ``first`` (a new schedule): a ``once`` at ``run_at`` even if past (a one-shot created
    late still runs); an interval without ``start_at`` at its anchor when that is at or
    before ``now`` (slot 0 is the creation time, so a new interval is due at once even when
    ``created_at`` was set a moment before ``now``); otherwise the first slot at or after
    ``now``. Not ``first`` (an edit, an enable, a re-plan): the first slot strictly after
    ``now``, so planning never fires a run by itself.
    """
    if first and spec.kind == "once":
        return spec.run_at
    if first and spec.kind == "interval" and spec.start_at is None and spec.anchor is not None:
        now = min(now, spec.anchor)
    return next_slot_after(spec, now, inclusive=first)


def _next_slot(spec: Spec, lo: datetime) -> datetime | None:
    """First slot >= lo (whole-second UTC) of a validated spec, inside [start_at, end_at],
    on a date its exclusion calendars do not exclude."""
    if spec.moves_slots:
        move = moved_grid(spec).first_from(lo) if lo <= LAST_INSTANT else None
        return move.at if move is not None else None
    slot = next_raw(spec, lo)
    if slot is None or not spec.exclusions:
        return slot
    return skip_excluded(spec, slot, lambda at: next_raw(spec, at))


def upcoming(spec: Spec, after: datetime, count: int) -> list[datetime]:
    """The next ``count`` slots strictly after ``after`` (aware UTC, whole seconds), fewer
    if the schedule ends. Raises ``ValueError`` for a negative ``count`` and
    :class:`InvalidSchedule` like :func:`next_slot_after`."""
    if count < 0:
        raise ValueError("count must not be negative")
    spec.validate()
    slots: list[datetime] = []
    cursor = min(truncate_to_second(after, "after"), LAST_INSTANT)
    if spec.extra and not spec.exclusions and not spec.moves_slots:  # members' slots, merged
        merged = {at for m in spec.members() for at in upcoming(m, cursor, count)}
        return sorted(merged)[:count]
    if (
        spec.kind == "rrule"
        and not spec.exclusions
        and not spec.extra
        and not spec.rrule_business_days
        and not spec.moves_slots
    ):  # one walk of the rule rather than one search per slot
        lo, hi = narrow_window(spec, cursor + SECOND, None)
        return rrule_upcoming(spec.rrule_plan(), lo, hi, count)
    while len(slots) < count:
        slot = _next_slot(spec, cursor + SECOND)
        if slot is None:
            break
        slots.append(slot)
        cursor = slot
    return slots


def latest_slot_at_or_before(spec: Spec, now: datetime, *, not_before: datetime) -> datetime | None:
    """The most recent slot ``s`` with ``not_before <= s <= now`` (and inside
    ``[start_at, end_at]``), or None. Used to coalesce missed slots into one late run.

    Bounded whatever the gap: interval and once are O(1) arithmetic; cron and rrule bisect
    over the forward search, O(log(now - not_before)) searches. Both bounds are
    truncated to whole seconds first. Raises :class:`InvalidSchedule` like
    :func:`next_slot_after`.
    """
    spec.validate()
    lo, hi = narrow_window(
        spec, truncate_to_second(not_before, "not_before"), truncate_to_second(now, "now")
    )
    if hi < lo:
        return None
    if spec.moves_slots:
        move = moved_grid(spec).latest(lo, hi)
        return move.at if move is not None else None
    if spec.exclusions:
        return latest_not_excluded(spec, lo, hi, lambda a, b: latest_raw(spec, a, b))
    return latest_raw(spec, lo, hi)


def last_grid_slot(spec: Spec, not_before: datetime) -> datetime | None:
    """The last slot ``s >= not_before`` of the grid, excluded dates included (aware UTC,
    whole seconds): where a grid that ends ends (``end_at``, an rrule's COUNT or UNTIL),
    else the last one before year :data:`MAX_YEAR` ends. None when no slot is left.
    Bounded like :func:`latest_slot_at_or_before`; raises :class:`InvalidSchedule` like
    :func:`next_slot_after`."""
    spec.validate()
    lo, hi = narrow_window(spec, truncate_to_second(not_before, "not_before"), LAST_INSTANT)
    return latest_raw(spec, lo, hi) if lo <= hi else None


def nearest_slot(spec: Spec, at: datetime, *, after: datetime | None = None) -> datetime | None:
    """The slot nearest to ``at`` (aware, truncated to whole seconds): ``at`` itself when it
    is a slot, else the nearer of the first slot after it and the latest slot before it
    (equally near: the one before), or None when there is neither. With ``after``, only
    slots strictly after ``after`` count (the one before is looked for no further back).

    An instant planned under other zone rules (a tzdata update) is off the current grid
    by the change of the zone's UTC offset, much less than the distance between slots
    of a schedule it moves off its grid: its nearest slot is the same wall time under
    the current rules. Bounded: two searches. Raises :class:`InvalidSchedule` like
    :func:`next_slot_after`."""
    spec.validate()
    at = truncate_to_second(at, "at")
    first = at if after is None else max(at, truncate_to_second(after, "after") + SECOND)
    following = _next_slot(spec, first) if first <= LAST_INSTANT else None
    if following == at:
        return at
    reach = (following - at) if following is not None else _ONE_DAY
    lo = at - reach
    if after is not None:
        lo = max(lo, truncate_to_second(after, "after") + SECOND)
    if lo > at - SECOND:
        return following
    before = latest_slot_at_or_before(spec, at - SECOND, not_before=lo)
    return before if before is not None else following


def count_slots(spec: Spec, start: datetime, end: datetime, *, cap: int = 100_000) -> int:
    """Number of slots ``s`` with ``start <= s < end`` (and inside ``[start_at, end_at]``),
    at most ``cap``. Interval and once: O(1) arithmetic. Cron: a walk that counts whole
    DST-free local days arithmetically and stops at ``cap``. Rrule: a walk over the
    occurrences that stops at ``cap``. ``start`` and ``end`` are
    truncated to whole seconds first. Raises ``ValueError`` for a negative ``cap`` and
    :class:`InvalidSchedule` like :func:`next_slot_after`."""
    if cap < 0:
        raise ValueError("cap must not be negative")
    spec.validate()
    start, end = truncate_to_second(start, "start"), truncate_to_second(end, "end")
    if end <= start or cap == 0:
        return 0
    lo, hi = narrow_window(spec, start, end - SECOND)
    if hi < lo:
        return 0
    if spec.moves_slots:
        return moved_grid(spec).count(lo, hi, cap)
    raw = count_raw(spec, lo, hi, cap)
    if not raw or not spec.exclusions or raw >= cap:
        return raw  # at the cap the window holds more slots than are counted: cap
    excluded = count_excluded_days(spec, lo, hi, lambda a, b: count_raw(spec, a, b, cap))
    return max(0, raw - sum(day.count for day in excluded))


# --------------------------------------------------------------------------------------
# Exclusion calendars: what was left out
# --------------------------------------------------------------------------------------


def excluded_days(spec: Spec, start: datetime, end: datetime) -> list[ExcludedDay]:
    """The excluded local dates whose slots lie in ``[start, end)`` (and inside
    ``[start_at, end_at]``): for each, the :class:`.excluded_slots.ExcludedDay` with the
    calendar, the date, the reason, the first such slot (aware UTC) and how many slots of
    the window fall on it. Empty for a spec without exclusions. Bounded (holidays looked at
    for at most 400 years from ``start``). Raises :class:`InvalidSchedule` like
    :func:`next_slot_after`."""
    spec.validate()
    start, end = truncate_to_second(start, "start"), truncate_to_second(end, "end")
    if end <= start or not (spec.exclusions or spec.moves_slots):
        return []
    lo, hi = narrow_window(spec, start, min(end - SECOND, LAST_INSTANT))
    if hi < lo:
        return []
    if spec.moves_slots:
        return moved_grid(spec).counted_days(lo, hi)
    return count_excluded_days(
        spec,
        lo,
        hi,
        lambda a, b: count_raw(spec, a, b, 100_000),
        lambda a: next_raw(spec, a),
    )


def upcoming_slots(
    spec: Spec, after: datetime, count: int, blackouts: Blackouts | None = None
) -> list[SlotView]:
    """:func:`upcoming_excluded_slots`, and with ``blackouts`` the slots inside a window
    marked (``blacked_out_by``: its name; at most ``count`` of those, listed, not counted
    among the ``count`` that fire): the windows are stepped over, one search each,
    at most ``4 * count + 16`` of them (fewer fire times when windows cover the grid). Raises :class:`InvalidSchedule` like
    :func:`next_slot_after` and for a window the engine cannot evaluate."""
    if not blackouts:
        return upcoming_excluded_slots(spec, after, count)
    views: list[SlotView] = []
    fired = blacked = 0
    cursor = after
    for _ in range(min(MAX_CHAIN, 4 * count + 16)):  # grids that every window covers
        batch = upcoming_excluded_slots(spec, cursor, count - fired)
        if not batch:
            break
        for view in batch:
            cursor = view.at
            window = None if view.excluded_by else blackouts.window_at(view.at)
            if window is None:
                views.append(view)
                fired += view.excluded_by is None
                continue
            if blacked < count:
                views.append(SlotView(view.at, None, window.name))
                blacked += 1
            # Step over the rest of the blackout (one search), then list on from there.
            cursor = max(cursor, blackouts.end_of_blackout(view.at) - SECOND)
            break
        if fired >= count:
            break
    return views


def upcoming_excluded_slots(spec: Spec, after: datetime, count: int) -> list[SlotView]:
    """The next ``count`` slots that fire strictly after ``after``, and the excluded slots
    before the last of them (at most ``count`` of those, the first ones), in time order:
    one :class:`.excluded_slots.SlotView` each (``excluded_by`` None: it fires). Without
    exclusions it is :func:`upcoming`. Raises ``ValueError`` for a negative ``count`` and
    :class:`InvalidSchedule` like :func:`next_slot_after`."""
    if spec.moves_slots:
        if count < 0:
            raise ValueError("count must not be negative")
        spec.validate()
        return upcoming_moved(spec, after, count)
    if not spec.exclusions:
        return [SlotView(at) for at in upcoming(spec, after, count)]
    if count < 0:
        raise ValueError("count must not be negative")
    spec.validate()
    views: list[SlotView] = []
    fired = excluded = 0
    cursor = min(truncate_to_second(after, "after"), LAST_INSTANT) + SECOND
    while fired < count:
        slot = next_raw(spec, cursor)
        if slot is None:
            break
        why = exclusion_of(spec, slot)
        if why is None:
            views.append(SlotView(slot))
            fired += 1
            cursor = slot + SECOND
            continue
        if excluded < count:
            views.append(SlotView(slot, why))
            excluded += 1
            cursor = slot + SECOND
            continue
        # Listed enough excluded slots: step over the rest of this date, bounded as ever.
        nxt = skip_excluded(spec, slot, lambda at: next_raw(spec, at))
        if nxt is None:
            break
        cursor = nxt
    return views
