"""The overlap rule, pure (issue #15 item 4, issue #28 item 4): what becomes of the slots of
a schedule that came due while one of its occurrences ran (:func:`plan_overlap`, at the
occurrence's completion), and which slot a buffered claim runs next (:func:`after_buffered`).

* ``skip``: every passed slot is counted (``missed_count``, the receipt's
  ``slots_skipped``); the next run is the next slot after the completion.
* ``buffer_one``: the first passed slot runs right after, as its own occurrence
  (``buffered_for``); the later ones are counted.
* ``buffer_all``: every passed slot runs, oldest first, one occurrence after the other; at
  most ``BUFFER_MAX`` of them are queued at a completion, the older ones counted. The queue
  is the row's grid itself: a completion sets ``buffered_for`` to its first slot and
  ``buffered_through`` to its last; the claim of the first plans ``next_run_at`` on the
  slot after it (already due while the queue lasts), so each buffered run's completion
  buffers the next, and a slot that comes due meanwhile joins the queue. The claim reads
  ``buffered_through``, not the policy, so an edit of the policy between a completion
  and the claim after it loses no queued slot (the next completion applies the new one).

* ``replace`` (with ``timeout_seconds``, else as ``skip``): the newest passed slot runs at
  once (due at its own instant), the earlier ones are counted
  (:func:`.replace_rules.newest_passed_slot`); the run that held it up was stopped when
  the first of them came due (receipt ``replaced``) or finished just after.

Every slot is run or counted once: a buffered occurrence that does not finish (retried,
handed back, degraded) counts the queue behind it (:func:`end_backlog`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from .. import timing
from ..conf import app_settings
from ..frozen import quick_init
from ..models import AttemptOrigin, Kind, MisfirePolicy, OverlapPolicy, Schedule
from .replace_rules import newest_passed_slot, replaces
from .transitions import implements

ONE_SECOND = timedelta(seconds=1)
#: The overlap policies that buffer the slots passed while a run ran.
BUFFERING = (OverlapPolicy.BUFFER_ONE, OverlapPolicy.BUFFER_ALL)


@quick_init
@dataclass(frozen=True)
class Overlap:
    """What :func:`plan_overlap` decides for the slots that came due during a run."""

    #: The schedule's next due instant (aware UTC, whole seconds), None: no slot left.
    next_run_at: datetime | None
    #: The slot to run next as its own occurrence (``buffer_one``, ``buffer_all``), else None.
    buffered_for: datetime | None = None
    #: Slots passed over, counted (``missed_count``, the receipt's ``slots_skipped``).
    skipped: int = 0
    #: ``buffer_all``: the last slot queued behind ``buffered_for``, else None.
    buffered_through: datetime | None = None


def oldest_of_newest(spec: timing.Spec, first: datetime, latest: datetime, cap: int) -> datetime:
    """Of the slots from ``first`` to ``latest`` (aware UTC, whole seconds; both slots of
    ``spec``), the oldest of the newest ``cap`` (>= 1): ``first`` when there are at most
    ``cap``. Bounded whatever their number: the count stops at ``cap + 1`` and the answer
    is found by bisection over instants (``count_slots(spec, t, latest + 1s)`` does not
    grow with ``t``). Raises :class:`~..timing.InvalidSchedule` like
    :func:`.timing.count_slots`."""
    end = latest + ONE_SECOND
    if timing.count_slots(spec, first, end, cap=cap + 1) <= cap:
        return first
    lo, hi = first, end  # cap slots or more from lo on; fewer from hi on
    while hi - lo > ONE_SECOND:
        mid = lo + timedelta(seconds=int((hi - lo).total_seconds()) // 2)
        if timing.count_slots(spec, mid, end, cap=cap) >= cap:
            lo = mid
        else:
            hi = mid
    return lo


@implements("outcome.buffered", "outcome.buffered_all", "outcome.replaced")
def plan_overlap(row: Schedule, now: datetime) -> Overlap:
    """The overlap rule (module docstring) for ``row``, whose occurrence finishes at
    ``now`` (aware UTC).

    ``row.next_run_at`` is the slot its claim planned after itself; when it is still
    ahead, nothing overlapped; nor when ``misfire_policy`` is ``all`` and it was already
    due when the occurrence was claimed (``row.last_run_at``): a backlog slot, kept, so
    the catch-up goes on. A buffered slot is due at ``now`` (whole seconds) and claimed
    next as its own occurrence with that slot as ``scheduled_for``.

    Pure (reads the row's attributes and the ``BUFFER_MAX`` setting). Raises
    :class:`.timing.InvalidSchedule` for a definition the engine cannot evaluate."""
    nxt = row.next_run_at
    if nxt is None or nxt > now:
        return Overlap(next_run_at=nxt)
    if row.misfire_policy == MisfirePolicy.ALL and row.last_run_at and nxt <= row.last_run_at:
        # Policy "all": a backlog slot already due when this run was claimed is no overlap.
        return Overlap(next_run_at=nxt)
    if replaces(row):
        due, skipped = newest_passed_slot(row, now)
        return Overlap(next_run_at=due, skipped=skipped)
    spec = row.spec()
    if row.overlap_policy in BUFFERING:
        # next_run_at may include jitter: its nominal slot lies up to jitter_seconds before.
        earliest = nxt - timedelta(seconds=row.jitter_bound())
        first = timing.next_slot_after(spec, earliest, inclusive=True)
        if first is not None and first <= now:
            if row.overlap_policy == OverlapPolicy.BUFFER_ALL:
                latest = timing.latest_slot_at_or_before(spec, now, not_before=first) or first
                kept = oldest_of_newest(spec, first, latest, app_settings.BUFFER_MAX)
                skipped = timing.count_slots(spec, first, kept)
                return Overlap(timing.truncate_to_second(now), kept, skipped, latest)
            passed = timing.count_slots(spec, first, now + ONE_SECOND)
            return Overlap(timing.truncate_to_second(now), first, max(0, passed - 1))
    skipped = timing.count_slots(spec, nxt, now + ONE_SECOND)
    return Overlap(row.due_at(timing.next_slot_after(spec, now)), None, skipped)


@implements("claim.buffered")
def after_buffered(row: Schedule, spec: timing.Spec, now: datetime) -> tuple[datetime | None, int]:
    """A claim at ``now`` runs the buffered slot of ``row`` (``row.buffered_for``): the
    row's next due instant and the slots it counts missed, ``(next_run_at, missed)``.
    A queue (``buffered_through`` set, ``buffer_all``): the slot after the buffered one,
    already due while the queue lasts, nothing counted (the queue is the grid). A slot
    buffered alone (``buffer_one``): the next slot after ``now``, the slots that came due
    since the buffering counted."""
    slot = row.buffered_for
    assert slot is not None
    if queued_behind(row) is not None:
        return row.due_at(timing.next_slot_after(spec, slot)), 0
    finished = timing.truncate_to_second(row.next_run_at or now)
    missed = timing.count_slots(spec, finished + ONE_SECOND, now + ONE_SECOND)
    return row.due_at(timing.next_slot_after(spec, now)), missed


def queued_behind(row: Schedule) -> datetime | None:
    """The last slot of ``row``'s queue (``buffered_through``) while a queue is pending
    (``buffered_for`` set, not after it), else None: a slot buffered alone, no buffered
    slot, or a value written behind ``save()`` before it."""
    first, last = row.buffered_for, row.buffered_through
    if isinstance(first, datetime) and isinstance(last, datetime) and last >= first:
        return last
    return None


def dropped_with_buffered(row: Schedule) -> int:
    """How many slots dropping ``row``'s buffered slot drops (a pause, a cancel, a trigger
    that runs instead): the buffered one and, for a queue, the slots queued behind it up
    to ``buffered_through``; 0 with none buffered. Raises
    :class:`~..timing.InvalidSchedule` like :func:`.timing.count_slots`."""
    if row.buffered_for is None:
        return 0
    last = queued_behind(row)
    if last is None:
        return 1
    return 1 + timing.count_slots(row.spec(), row.buffered_for + ONE_SECOND, last + ONE_SECOND)


@implements("outcome.retried", "outcome.released", "outcome.degraded", "claim.unregistered")
def end_backlog(row: Schedule, origin: str) -> int:
    """``misfire_policy`` all, ``overlap_policy`` buffer_all: a catch-up run of ``row``
    (``origin`` scheduled) or a buffered one (``origin`` buffered) that does not finish
    (retried, handed back, degraded at its claim or after; ``origin``: its attempt's)
    ends the backlog or queue behind it: the slots already due at its claim
    (``row.last_run_at``) from its planned next run (``row.next_run_at``) on are counted
    missed (``missed_count``), as its retry counts those that come due after the claim:
    every slot is run or counted once. Returns how many it counted (0 for any other
    policy, origin or row)."""
    nxt, claimed = row.next_run_at, row.last_run_at
    catch_up = row.misfire_policy == MisfirePolicy.ALL and origin == AttemptOrigin.SCHEDULED
    queue = row.overlap_policy == OverlapPolicy.BUFFER_ALL and origin == AttemptOrigin.BUFFERED
    if not (catch_up or queue):
        return 0
    if nxt is None or claimed is None or nxt > claimed or row.kind == Kind.ONCE:
        return 0
    earliest = nxt - timedelta(seconds=row.jitter_bound())
    end = timing.truncate_to_second(claimed) + ONE_SECOND
    counted = timing.count_slots(row.spec(), earliest, end)
    row.missed_count += counted
    return counted
