"""Row arithmetic of blackout windows at a claim (issue #27): no run starts inside a window
of the schedule, whatever its origin, except a trigger that says ``ignore_blackout``.

* ``skip`` (:class:`~..models.BlackoutPolicy`): the grid's slots inside a window are
  counted (``blackout_count``, one ``blackout`` event per window), never run; the next run
  is the first grid slot no window covers.
* ``defer``: the grid's slots inside a window are counted too, and become one run at the
  window's end (``blackout_deferred`` until then; the attempt's origin is ``deferred``,
  its ``missed_slots`` the slots it stands for).
* A retry, a trigger or a buffered slot due inside a window waits for its end (kept
  pending, ``next_run_at`` moved to the end); so does a backfill slot (not claimed).

Pure: the functions read and write a locked :class:`~..models.Schedule` row as plain
attributes (its windows attached by :func:`~..models.load_blackouts`) and build unsaved
events; :mod:`.runs` writes them in the claim's transaction. A window the engine cannot
evaluate raises :class:`~..timing.InvalidSchedule`: the claim quarantines that row alone.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from .. import timing
from ..models import AttemptOrigin, BlackoutPolicy, EventAction, Kind, Schedule, ScheduleEvent
from ..uuids import uuid4
from .machine import GRID, complete_if_no_slot, pending
from .transitions import implements

if TYPE_CHECKING:
    from .slot_rules import SlotChoice

ONE_SECOND = timedelta(seconds=1)
#: Windows recorded one ``blackout`` event each per claim; more are summed up in one more.
MAX_EVENTS_PER_CLAIM = 20
#: Grid slots a search past windows steps over at most (a rule that blacks out every slot
#: is the row's problem: :class:`~..timing.InvalidSchedule`).
MAX_STEPS = 1000


def _event(row: Schedule, now: datetime, changes: dict[str, object]) -> ScheduleEvent:
    return ScheduleEvent(
        id=uuid4(),
        schedule_id=row.pk,
        schedule_name=row.name,
        action=EventAction.BLACKOUT,
        at=now,
        actor_repr="",
        source="worker",
        changes=changes,
    )


def blackout_events(
    row: Schedule, now: datetime, counted: list[tuple[timing.Window, int]]
) -> list[ScheduleEvent]:
    """The ``blackout`` events (unsaved) of the slots counted at ``now``, per window span:
    window, its start and end, policy, slots; at most :data:`MAX_EVENTS_PER_CLAIM`, then
    one with the rest (how many windows and slots)."""
    counted = [(w, n) for w, n in counted if n]
    policy = row.blackout_policy
    found = [
        _event(
            row,
            now,
            {
                "window": w.name,
                "start": w.start.isoformat(),
                "end": w.end.isoformat(),
                "policy": policy,
                "slots": n,
            },
        )
        for w, n in counted[:MAX_EVENTS_PER_CLAIM]
    ]
    rest = counted[MAX_EVENTS_PER_CLAIM:]
    if rest:
        more = {"more_windows": len(rest), "slots": sum(n for _, n in rest), "policy": policy}
        found.append(_event(row, now, more))
    return found


def count_in_windows(
    spec: timing.Spec, blackouts: timing.Blackouts, lo: datetime, hi: datetime
) -> list[tuple[timing.Window, int]]:
    """The grid slots of ``spec`` in ``[lo, hi)`` that a window covers, per disjoint span
    of windows (:meth:`.timing.Blackouts.spans`): ``[(span, slots), ...]``."""
    return [(w, timing.count_slots(spec, w.start, w.end)) for w in blackouts.spans(lo, hi)]


def first_clear_slot(
    spec: timing.Spec, blackouts: timing.Blackouts, at: datetime
) -> datetime | None:
    """The first slot of the grid at or after ``at`` that no window covers (None: the grid
    has none). Raises :class:`~..timing.InvalidSchedule` after :data:`MAX_STEPS` windows."""
    slot = timing.next_slot_after(spec, at - ONE_SECOND)
    for _ in range(MAX_STEPS):
        if slot is None:
            return None
        end = blackouts.end_of_blackout(slot)
        if end == slot:
            return slot
        slot = timing.next_slot_after(spec, end - ONE_SECOND)
    raise timing.InvalidSchedule(
        timing.blackouts.FIELD, f"no slot outside its blackout windows after {at.isoformat()}"
    )


def absorb_deferred(row: Schedule, choice: SlotChoice) -> SlotChoice:
    """The run about to be granted takes the slots deferred to it (``blackout_deferred``):
    its attempt stands for them (``deferred``); a grid run is then of origin
    ``deferred``. Unchanged when none were deferred."""
    if not row.blackout_deferred:
        return choice
    deferred, row.blackout_deferred = row.blackout_deferred, 0
    origin = AttemptOrigin.DEFERRED if choice.origin == AttemptOrigin.SCHEDULED else choice.origin
    return dataclasses.replace(choice, deferred=choice.deferred + deferred, origin=origin)


@implements("claim.blackout_wait", "claim.blackout_skip", "claim.blackout_defer")
def apply_blackouts(
    row: Schedule, choice: SlotChoice, now: datetime, events: list[ScheduleEvent]
) -> SlotChoice | None:
    """What becomes of ``choice`` (what :func:`.slot_rules.choose_slot` would run at ``now``)
    under ``row``'s blackout windows: the choice to grant (perhaps with slots counted or
    deferred into it), or None when nothing starts now (the row moved on: counted,
    deferred, or waiting for a window's end). A row with no window, or a trigger with
    ``trigger_ignores_blackout``, keeps its choice. Raises
    :class:`~..timing.InvalidSchedule` for a window the engine cannot evaluate."""
    blackouts = row.blackouts()
    if choice.origin == AttemptOrigin.TRIGGERED and row.trigger_ignores_blackout:
        return choice  # it may start inside a window; slots deferred stay for the end
    if not blackouts:
        return absorb_deferred(row, choice)
    grid = pending(row) == GRID and choice.origin == AttemptOrigin.SCHEDULED
    covering = blackouts.window_at(now)
    if grid and covering is None and row.kind == Kind.ONCE and row.blackout_deferred:
        return absorb_deferred(row, choice)  # its one slot was counted when deferred
    if not grid:
        if covering is None:
            return absorb_deferred(row, choice)
        return wait_for_end(row, blackouts, now)
    return _grid_under_blackouts(row, choice, now, blackouts, covering, events)


@implements("claim.blackout_wait")
def wait_for_end(row: Schedule, blackouts: timing.Blackouts, now: datetime) -> None:
    """A retry, trigger or buffered slot due while a window covers ``now``: it waits for
    the end of the blackout (:meth:`.timing.Blackouts.end_of_blackout`); its pending
    field is kept, nothing is counted. Returns None (nothing runs now)."""
    row.next_run_at = blackouts.end_of_blackout(now)
    return None


def _grid_under_blackouts(
    row: Schedule,
    choice: SlotChoice,
    now: datetime,
    blackouts: timing.Blackouts,
    covering: timing.Window | None,
    events: list[ScheduleEvent],
) -> SlotChoice | None:
    """The grid's due slots (``choice.since`` to ``choice.slot``; ``choice.missed`` + 1
    of them) under the windows: :func:`skip_blacked_out` or :func:`defer_blacked_out`."""
    spec = row.spec()
    since = choice.slot if row.kind == Kind.ONCE else (choice.since or choice.slot)
    due_windows = count_in_windows(spec, blackouts, since, choice.slot + ONE_SECOND)
    clear = max(choice.missed + 1 - sum(n for _, n in due_windows), 0)
    if covering is None and not sum(n for _, n in due_windows):
        return absorb_deferred(row, choice)
    rule = defer_blacked_out if row.blackout_policy == BlackoutPolicy.DEFER else skip_blacked_out
    return rule(row, choice, now, blackouts, since, covering is not None, clear, events)


def _add_counts(
    row: Schedule,
    now: datetime,
    counted: list[tuple[timing.Window, int]],
    events: list[ScheduleEvent],
) -> int:
    total = sum(n for _, n in counted)
    row.blackout_count += total
    events.extend(blackout_events(row, now, counted))
    return total


@implements("claim.blackout_skip")
def skip_blacked_out(
    row: Schedule,
    choice: SlotChoice,
    now: datetime,
    blackouts: timing.Blackouts,
    since: datetime,
    covered: bool,
    clear: int,
    events: list[ScheduleEvent],
) -> SlotChoice | None:
    """Policy ``skip``: the due grid slots (from ``since``) a window covers are counted
    (``blackout_count``, event ``blackout``). While a window covers ``now``
    (``covered``), nothing starts: the slots up to the first grid slot no window covers
    are counted too (the ``clear`` due ones no window covers, late, are counted missed)
    and ``next_run_at`` becomes that slot (the row completes when none is left). After
    the windows, a due slot no window covers runs (the others missed), else nothing."""
    spec = row.spec()
    if not covered:
        _add_counts(
            row, now, count_in_windows(spec, blackouts, since, choice.slot + ONE_SECOND), events
        )
        if clear:
            return dataclasses.replace(absorb_deferred(row, choice), missed=clear - 1)
        row.next_run_at = choice.next_run_at
        complete_if_no_slot(row)
        return None
    end = blackouts.end_of_blackout(now)
    clear_slot = first_clear_slot(spec, blackouts, end)
    _add_counts(row, now, count_in_windows(spec, blackouts, since, clear_slot or end), events)
    row.missed_count += clear
    row.next_run_at = row.due_at(clear_slot) if clear_slot is not None else None
    complete_if_no_slot(row)
    return None


@implements("claim.blackout_defer")
def defer_blacked_out(
    row: Schedule,
    choice: SlotChoice,
    now: datetime,
    blackouts: timing.Blackouts,
    since: datetime,
    covered: bool,
    clear: int,
    events: list[ScheduleEvent],
) -> SlotChoice | None:
    """Policy ``defer``: the grid slots (from ``since``) a window covers are counted
    (``blackout_count``, event ``blackout``) and become one run at the window's end.
    While a window covers ``now`` (``covered``), the slots up to the end of the blackout
    are deferred (``blackout_deferred``; the ``clear`` due ones no window covers, late,
    are counted missed) and ``next_run_at`` becomes that end; after it, the run starts
    now, of origin ``deferred``."""
    spec = row.spec()
    if not covered:
        counted = count_in_windows(spec, blackouts, since, choice.slot + ONE_SECOND)
        row.blackout_deferred += _add_counts(row, now, counted, events)
        return dataclasses.replace(absorb_deferred(row, choice), missed=max(clear - 1, 0))
    end = blackouts.end_of_blackout(now)
    counted = count_in_windows(spec, blackouts, since, end)
    row.blackout_deferred += _add_counts(row, now, counted, events)
    row.missed_count += clear
    row.next_run_at = end
    return None


def blacked_out_now(row: Schedule, now: datetime) -> bool:
    """Whether a window of ``row`` covers ``now`` (a backfill slot is not claimed then).
    Raises :class:`~..timing.InvalidSchedule` for a window the engine cannot evaluate."""
    return row.blackouts().window_at(now) is not None
