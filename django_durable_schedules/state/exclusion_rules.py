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

from .. import timing
from ..models import EventAction, Schedule, ScheduleEvent, Status
from ..uuids import uuid4

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


def count_excluded(
    row: Schedule, spec: timing.Spec, now: datetime, events: list[ScheduleEvent]
) -> int:
    """Count the slots of ``row``'s grid that fell on an excluded date in ``(since, now]``
    and record them: ``since`` is ``exclusions_checked_at`` (set by the previous count and
    by enable), else ``last_run_at`` (the previous claim), else ``created_at``. Adds them
    to ``excluded_count``, appends one ``excluded`` event per date (calendar, date, reason,
    slots, first slot; at most :data:`MAX_EVENTS_PER_CLAIM`, then one event with the rest)
    to ``events`` and moves ``exclusions_checked_at`` to ``now``. Only for an active row
    with exclusion calendars; returns the number of slots counted.

    Raises :class:`.timing.InvalidSchedule` for a calendar the engine cannot evaluate."""
    if not spec.exclusions or row.status != Status.ACTIVE:
        return 0
    since = row.exclusions_checked_at or row.last_run_at or row.created_at or now
    since = timing.truncate_to_second(since)
    days = timing.excluded_days(spec, since + ONE_SECOND, now + ONE_SECOND) if since < now else []
    row.exclusions_checked_at = now
    total = sum(day.count for day in days)
    row.excluded_count += total
    for day in days[:MAX_EVENTS_PER_CLAIM]:
        changes: dict[str, object] = {
            "calendar": day.exclusion.calendar,
            "date": day.exclusion.date.isoformat(),
            "reason": day.exclusion.reason,
            "slots": day.count,
            "first_slot": day.first.isoformat(),
        }
        events.append(_event(row, now, changes))
    rest = days[MAX_EVENTS_PER_CLAIM:]
    if rest:
        events.append(
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
    return total


def excluded_at_claim(row: Schedule, spec: timing.Spec, now: datetime) -> bool:
    """Whether every slot of ``row``'s grid due since its ``next_run_at`` (jitter
    included) falls on a date its calendars exclude now: a date added after the slot was
    planned. Then nothing runs: the slots were counted by :func:`count_excluded`, and
    ``next_run_at`` moves to the first slot after ``now`` that is not excluded (the row
    completes when there is none). Returns False, changing nothing, otherwise."""
    if not spec.exclusions or row.next_run_at is None:
        return False
    earliest = row.next_run_at - timedelta(seconds=row.jitter_bound())
    if timing.latest_slot_at_or_before(spec, now, not_before=earliest) is not None:
        return False
    grid = dataclasses.replace(spec, exclusions=None)
    if timing.latest_slot_at_or_before(grid, now, not_before=earliest) is None:
        # Not a slot of the grid (a next run written behind save()): the claim's usual
        # fallback runs it, unless its own date is excluded.
        day = timing.local_date(row.next_run_at, spec.timezone)
        if spec.exclusions.excluded_by(day) is None:
            return False
    row.next_run_at = row.due_at(timing.next_slot_after(spec, now))
    if row.next_run_at is None:
        row.status = Status.COMPLETED
    return True
