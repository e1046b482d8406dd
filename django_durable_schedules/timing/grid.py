"""The grid of a :class:`~.spec.Spec` searched as it is, excluded dates included: its first
slot at or after an instant, its latest and its number of slots in a window, each inside
``[start_at, end_at]``.

Interval schedules are elapsed UTC time: slot ``n`` is ``anchor + n * interval``, computed in
integer seconds. Cron schedules are searched by :mod:`.cron`, calendar rules by
:mod:`.rrule` (by :mod:`.business_rrule` when they count business days). A spec with
``extra`` specs has the union of its members' grids (:meth:`.spec.Spec.members`): an
instant on several grids is one slot (counted once).

Exclusion calendars and moving policies are applied on top of these searches, by
:mod:`.slots` and :mod:`.moved_slots`.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, overload

from .business_rrule import business_rule_count, business_rule_from, business_rule_latest
from .cron import cron_count, cron_from, cron_latest
from .cron_plan import compile_cron
from .instants import LAST_INSTANT, SECOND, from_seconds, to_seconds, truncate_to_second
from .rrule import rrule_count, rrule_from, rrule_latest
from .spec import NO_GRID_KINDS

if TYPE_CHECKING:
    from .spec import Spec


@overload
def narrow_window(spec: Spec, lo: datetime, hi: datetime) -> tuple[datetime, datetime]: ...
@overload
def narrow_window(spec: Spec, lo: datetime, hi: None) -> tuple[datetime, datetime | None]: ...
def narrow_window(
    spec: Spec, lo: datetime, hi: datetime | None
) -> tuple[datetime, datetime | None]:
    """``[lo, hi]`` (whole-second aware UTC; ``hi`` None: open) narrowed to the spec's
    ``[start_at, end_at]``, as ``(lo, hi)``; empty when ``hi < lo`` comes back."""
    if spec.start_at is not None:
        lo = max(lo, truncate_to_second(spec.start_at))
    if spec.end_at is not None:
        end = truncate_to_second(spec.end_at)
        hi = end if hi is None else min(hi, end)
    return lo, hi


def _interval_grid(spec: Spec) -> tuple[int, int]:
    """(anchor in epoch seconds, interval seconds) of a validated interval spec."""
    anchor = spec.anchor if spec.anchor is not None else spec.start_at
    assert anchor is not None and spec.interval_seconds is not None  # Spec.validate() checked
    return to_seconds(truncate_to_second(anchor, "anchor")), spec.interval_seconds


def _run_at(spec: Spec) -> datetime:
    """``run_at`` (whole-second UTC) of a validated once spec."""
    assert spec.run_at is not None  # Spec.validate() checked
    return truncate_to_second(spec.run_at, "run_at")


def _first_slot_from(spec: Spec, lo: datetime) -> datetime | None:
    """First slot >= lo (whole-second UTC), ignoring end_at; a manual spec has none."""
    if spec.kind in NO_GRID_KINDS:
        return None
    if spec.kind == "once":
        run_at = _run_at(spec)
        return run_at if lo <= run_at <= LAST_INSTANT else None
    if spec.kind == "interval":
        anchor, every = _interval_grid(spec)
        n = max(0, -((anchor - to_seconds(lo)) // every))  # ceil((lo - anchor) / every)
        return from_seconds(anchor + n * every)
    if spec.kind == "rrule":
        if spec.rrule_business_days:
            return business_rule_from(spec.rrule_plan(), spec.business_day_test(), lo)
        return rrule_from(spec.rrule_plan(), lo)
    return cron_from(compile_cron(spec.cron, spec.timezone), lo)


def next_raw(spec: Spec, lo: datetime) -> datetime | None:
    """The first slot ``>= lo`` (whole-second aware UTC) of a validated spec's grid, excluded
    dates included, inside ``[start_at, end_at]`` (aware UTC, whole seconds), or None."""
    if lo > LAST_INSTANT:
        return None
    if spec.extra:
        found = [slot for m in spec.members() if (slot := next_raw(m, lo)) is not None]
        return min(found, default=None)
    lo, hi = narrow_window(spec, lo, None)
    slot = _first_slot_from(spec, lo)
    if slot is None or (hi is not None and slot > hi):
        return None
    return slot


def latest_raw(spec: Spec, lo: datetime, hi: datetime) -> datetime | None:
    """The latest slot of a validated spec's grid in ``[lo, hi]`` (whole-second aware UTC,
    already narrowed by :func:`narrow_window`), excluded dates included, or None (always for a
    manual spec: it has no grid)."""
    if spec.extra:
        found = [slot for m in spec.members() if (slot := latest_raw(m, lo, hi)) is not None]
        return max(found, default=None)
    if spec.kind in NO_GRID_KINDS:
        return None
    if spec.kind == "once":
        run_at = _run_at(spec)
        return run_at if lo <= run_at <= hi else None
    if spec.kind == "interval":
        anchor, every = _interval_grid(spec)
        n = (to_seconds(hi) - anchor) // every
        slot = from_seconds(anchor + n * every) if n >= 0 else None
        return slot if slot is not None and slot >= lo else None
    if spec.kind == "rrule":
        if spec.rrule_business_days:
            return business_rule_latest(spec.rrule_plan(), spec.business_day_test(), lo, hi)
        return rrule_latest(spec.rrule_plan(), lo, hi)
    return cron_latest(compile_cron(spec.cron, spec.timezone), lo, hi)


def count_raw(spec: Spec, lo: datetime, hi: datetime, cap: int) -> int:
    """Slots of a validated spec's grid in ``[lo, hi]`` (whole-second aware UTC, already
    narrowed by :func:`narrow_window`), excluded dates included, at most ``cap`` (0 for a manual
    spec: it has no grid)."""
    if spec.extra:
        return _union_count(spec.members(), lo, hi, cap)
    if spec.kind in NO_GRID_KINDS:
        return 0
    if spec.kind == "once":
        return 1 if lo <= _run_at(spec) <= hi else 0
    if spec.kind == "interval":
        anchor, every = _interval_grid(spec)
        first = max(0, -((anchor - to_seconds(lo)) // every))
        last = (to_seconds(hi) - anchor) // every
        return max(0, min(cap, last - first + 1))
    if spec.kind == "rrule":
        if spec.rrule_business_days:
            test = spec.business_day_test()
            return business_rule_count(spec.rrule_plan(), test, lo, hi + SECOND, cap)
        return rrule_count(spec.rrule_plan(), lo, hi + SECOND, cap)
    return cron_count(compile_cron(spec.cron, spec.timezone), lo, hi + SECOND, cap)


def _union_count(members: tuple[Spec, ...], lo: datetime, hi: datetime, cap: int) -> int:
    """Instants of the union of ``members``' grids in [lo, hi], at most ``cap``: the
    members' own counts, then (when two or more have slots) the slots of each member but the
    densest that no member before it has, one search per slot and earlier member. Bounded by
    the members' counts (each at most ``cap``)."""
    counted = sorted(((count_raw(m, lo, hi, cap), i) for i, m in enumerate(members)), reverse=True)
    dense = [(n, members[i]) for n, i in counted if n]
    if len(dense) <= 1 or dense[0][0] >= cap:
        return min(cap, dense[0][0]) if dense else 0
    total = dense[0][0]
    for index in range(1, len(dense)):
        earlier = [m for _, m in dense[:index]]
        member = dense[index][1]
        cursor: datetime | None = lo
        while cursor is not None and cursor <= hi:
            slot = next_raw(member, cursor)
            if slot is None or slot > hi:
                break
            if all(next_raw(m, slot) != slot for m in earlier):
                total += 1
                if total >= cap:
                    return cap
            cursor = slot + SECOND if slot < LAST_INSTANT else None
    return total
