"""Row arithmetic of exclusion calendars at a claim: count the slots that fell on excluded
dates since the previous check, record each date in the audit trail, and pass over a due
slot whose date a calendar excludes now.

Pure: the functions read and write a locked :class:`~..models.Schedule` row as plain
attributes and build unsaved :class:`~..models.ScheduleEvent` rows; :mod:`.runs` writes
them in the claim's transaction.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from typing import Any

from .. import timing
from ..models import NO_GRID, EventAction, Kind, Schedule, ScheduleEvent, Status
from ..uuids import uuid4
from .machine import complete_if_no_slot
from .transitions import implements

ONE_SECOND = timedelta(seconds=1)
#: Excluded dates recorded one event each per claim; more are summed up in one more event.
MAX_EVENTS_PER_CLAIM = 20


def _event(row: Schedule, now: datetime, changes: dict[str, object]) -> ScheduleEvent:
    return ScheduleEvent(
        id=uuid4(),
        schedule_id=row.pk,
        schedule_name=row.name,
        action=EventAction.EXCLUDED,
        at=now,
        actor_repr="",
        source="worker",
        changes=changes,
    )


@implements("claim.excluded_counted", "claim.excluded_moved")
def count_excluded(
    row: Schedule,
    spec: timing.Spec,
    now: datetime,
    events: list[ScheduleEvent],
    *,
    to_end: bool = False,
) -> int:
    """The one counting rule of excluded slots: count the slots of ``row``'s grid that fall
    on an excluded date in ``(since, until]`` and record them. ``since`` is
    ``exclusions_checked_at`` (how far the previous count went; set by enable), else
    ``last_run_at`` (the previous claim), else ``created_at``. ``until`` is ``now``, or
    with ``to_end`` (no slot of the grid is left to run: see :func:`count_excluded_to_end`)
    the grid's last slot, so the slots that nothing will ever reach are counted too.

    With an ``exclusion_policy`` that moves excluded slots to a business day, the slots of
    an excluded date that run moved are not counted (their run is the receipt), only those
    coalesced into another run (or left without a business day); the date's event then
    says where they moved (``policy``, ``moved``, ``moved_to``).

    Adds them to ``excluded_count``, appends one ``excluded`` event per date (calendar,
    date, reason, slots, first slot; at most :data:`MAX_EVENTS_PER_CLAIM`, then one event
    with the rest) to ``events`` and moves ``exclusions_checked_at`` to ``until`` (never
    back: a slot is counted once, whichever path reaches it first). Only for a row with
    exclusion calendars that is active (or, ``to_end``, completed); returns the number of
    slots counted.

    Raises :class:`.timing.InvalidSchedule` for a calendar the engine cannot evaluate."""
    if not spec.exclusions and not spec.moves_slots:
        return 0
    if row.status != Status.ACTIVE and not (to_end and row.status == Status.COMPLETED):
        return 0
    since = row.exclusions_checked_at or row.last_run_at or row.created_at or now
    since = timing.truncate_to_second(since)
    until: datetime | None = timing.truncate_to_second(now)
    if to_end:
        until = timing.last_grid_slot(spec, since + ONE_SECOND)
    if until is None or until <= since:
        return 0
    days = timing.excluded_days(spec, since + ONE_SECOND, until + ONE_SECOND)
    row.exclusions_checked_at = until
    total = sum(day.count for day in days)
    row.excluded_count += total
    events.extend(_excluded_events(row, now, days))
    return total


def _excluded_events(row: Schedule, now: datetime, days: list[Any]) -> list[ScheduleEvent]:
    """The ``excluded`` events (unsaved) of the excluded ``days`` that
    :func:`count_excluded` counted at ``now``: one per date, at most
    :data:`MAX_EVENTS_PER_CLAIM`, then one with the rest (how many dates and slots, from
    and to which date)."""
    found: list[ScheduleEvent] = []
    for day in days[:MAX_EVENTS_PER_CLAIM]:
        changes: dict[str, object] = {
            "calendar": day.exclusion.calendar,
            "date": day.exclusion.date.isoformat(),
            "reason": day.exclusion.reason,
            "slots": day.count,
            "first_slot": day.first.isoformat(),
        }
        if day.moved_to is not None or day.moved:
            # exclusion_policy moved the date's slots to a business day: where the first
            # ran, how many ran moved (``slots``: those coalesced into another run).
            changes["policy"] = row.exclusion_policy
            changes["moved"] = day.moved
            changes["moved_to"] = day.moved_to.isoformat() if day.moved_to else None
        found.append(_event(row, now, changes))
    rest = days[MAX_EVENTS_PER_CLAIM:]
    if rest:
        found.append(
            _event(
                row,
                now,
                {
                    "more_dates": len(rest),
                    "slots": sum(day.count for day in rest),
                    "from": rest[0].exclusion.date.isoformat(),
                    "to": rest[-1].exclusion.date.isoformat(),
                },
            )
        )
    return found


def no_slot_left(row: Schedule) -> bool:
    """Whether ``row``'s grid has no slot left to run: a recurring row, active or
    completed, with no next run and no occurrence waiting (retry, trigger, buffered
    slot), whose runs did not end at ``max_runs`` (the slots after the last of its
    ``max_runs`` runs are not its to count). Never a ``manual`` row: it has no grid (no
    slot left is its normal state; it waits for a trigger)."""
    return (
        row.kind not in (Kind.ONCE, *NO_GRID)
        and row.status in (Status.ACTIVE, Status.COMPLETED)
        and row.next_run_at is None
        and row.retry_scheduled_for is None
        and row.triggered_at is None
        and row.buffered_for is None
        and not (row.max_runs is not None and row.occurrence >= row.max_runs)
    )


def count_excluded_to_end(row: Schedule, now: datetime, events: list[ScheduleEvent]) -> int:
    """Every path that leaves ``row`` without a slot to run (:func:`no_slot_left`: the
    claim of its last slot, a completion, a re-plan after a calendar change, an edit, an
    enable) calls this once it has decided: the excluded slots of the rest of its grid
    are counted now (:func:`count_excluded` with ``to_end``), so the count is the same
    whether a worker was up as they passed, came late, or the calendar excluded them
    before they came. Returns the number counted (0 for a row that has a slot left or no
    calendars). Raises :class:`.timing.InvalidSchedule` like :func:`count_excluded`."""
    if not no_slot_left(row):
        return 0
    spec = row.spec()
    if not spec.exclusions and not spec.moves_slots:
        return 0
    return count_excluded(row, spec, now, events, to_end=True)


@implements("claim.excluded_now")
def excluded_at_claim(row: Schedule, spec: timing.Spec, now: datetime) -> bool:
    """Whether every slot of ``row``'s grid due since its ``next_run_at`` (jitter
    included) falls on a date its calendars exclude now: a date added after the slot was
    planned. Then nothing runs: the slots were counted by :func:`count_excluded`, and
    ``next_run_at`` moves to the first slot after ``now`` that is not excluded (the row
    completes when there is none). Returns False, changing nothing, otherwise."""
    if not (spec.exclusions or spec.moves_slots) or row.next_run_at is None:
        return False
    earliest = row.next_run_at - timedelta(seconds=row.jitter_bound())
    if timing.latest_slot_at_or_before(spec, now, not_before=earliest) is not None:
        return False
    grid = dataclasses.replace(spec, exclusions=None, exclusion_policy="skip")
    if timing.latest_slot_at_or_before(grid, now, not_before=earliest) is None:
        # Not a slot of the grid (a next run written behind save()): the claim's usual
        # fallback runs it, unless its own date is excluded.
        day = timing.local_date(row.next_run_at, spec.timezone)
        if spec.exclusions is None or spec.exclusions.excluded_by(day) is None:
            return False
    row.next_run_at = row.due_at(timing.next_slot_after(spec, now))
    complete_if_no_slot(row)
    return True
