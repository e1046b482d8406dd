"""``overlap_policy`` replace: a run still running when its schedule's next slot comes due
is stopped (its child process killed, as at a timeout), receipted ``replaced``, and the
newest due slot runs at once.

Pure: the functions read a :class:`~..models.Schedule` row's attributes (a claim's, or a
locked one at completion) and return what the claim and :func:`.outcomes.plan_overlap`
need; nothing here writes to the database.

Replace needs a run the worker can stop: one in a child process, which only
``timeout_seconds`` gives (:mod:`..worker.execution.isolation`). ``Schedule.clean()``
refuses replace without it; a row written behind ``save()`` with replace and no
``timeout_seconds`` behaves as ``skip`` (:func:`replaces`).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from .. import timing
from ..models import NO_GRID, AttemptOrigin, Kind, OverlapPolicy, Schedule
from .transitions import implements

ONE_SECOND = timedelta(seconds=1)
#: The origins of the attempts a replace may stop: those that move the live grid (a
#: backfill slot or a re-run leaves it as it is, and is never replaced).
REPLACEABLE_ORIGINS = frozenset(
    {AttemptOrigin.SCHEDULED, AttemptOrigin.TRIGGERED, AttemptOrigin.BUFFERED}
)


def replaces(row: Schedule) -> bool:
    """Whether ``row``'s overlap rule is replace in effect: ``overlap_policy`` replace
    with ``timeout_seconds`` (its runs in a child process the worker can stop). Without
    ``timeout_seconds`` (a row written behind ``save()``) it behaves as ``skip``."""
    return row.overlap_policy == OverlapPolicy.REPLACE and bool(row.timeout_seconds)


@implements("outcome.replaced")
def replace_at(
    row: Schedule, occurrence: int, origin: str, claimed_at: datetime
) -> datetime | None:
    """When the worker stops the run of ``occurrence`` (attempt origin ``origin``) claimed
    at ``claimed_at`` on ``row``, whose ``next_run_at`` its claim has just planned: that
    next due instant (aware UTC), for a row that :func:`replaces` and a recurring
    occurrence that has a next slot to give way to. None (never replaced): any other
    policy, a ``once`` or ``manual`` row, the last of ``max_runs``, a backfill slot or a
    re-run, no next slot, or a next slot already due at the claim (``misfire_policy``
    all catching up: each backlog slot runs in turn)."""
    nxt = row.next_run_at
    if not replaces(row) or nxt is None or nxt <= claimed_at:
        return None
    if row.kind in (Kind.ONCE, *NO_GRID) or origin not in REPLACEABLE_ORIGINS:
        return None
    if row.max_runs is not None and occurrence >= row.max_runs:
        return None
    return nxt


@implements("outcome.replaced")
def newest_passed_slot(row: Schedule, now: datetime) -> tuple[datetime | None, int]:
    """The replace rule for the slots of ``row`` that came due while its occurrence ran,
    when that occurrence ends at ``now`` (aware UTC): replaced, or finished by itself
    just after a slot came due. ``row.next_run_at`` is the slot its claim planned after
    itself (already due at ``now``: the caller checked). The newest passed slot runs at
    once: returns its due instant (:meth:`~..models.Schedule.due_at`: the slot plus its
    jitter) and how many passed slots before it are skipped (counted, ``missed_count`` and
    the receipt's ``slots_skipped``). Raises :class:`.timing.InvalidSchedule` for a
    definition the engine cannot evaluate."""
    nxt = row.next_run_at
    assert nxt is not None
    spec = row.spec()
    earliest = nxt - timedelta(seconds=row.jitter_bound())
    newest = timing.latest_slot_at_or_before(spec, now, not_before=earliest)
    if newest is None:  # nothing on the grid in between (an excluded date): as skip
        skipped = timing.count_slots(spec, nxt, now + ONE_SECOND)
        return row.due_at(timing.next_slot_after(spec, now)), skipped
    passed = timing.count_slots(spec, earliest, newest + ONE_SECOND)
    return row.due_at(newest), max(0, passed - 1)
