"""The next due slot an idle worker waits for (``state.next_wakeup``'s ``due``), read
without a held concurrency group's backlog, as the claim reads due rows (issue #28,
:mod:`.claim_reads`).

``due`` is the earliest ``next_run_at`` of the waiting rows (``ScheduleQuerySet.waiting``)
of the worker's pools that neither their concurrency group (``full_until`` /
``rate_until``: ``ScheduleQuerySet.group_room_q``) nor ``max_parallel``
(``parallel_room_q``) holds back at the clock. Per pool and priority level it is the
earliest of two reads, each a bounded range of the claim index ``dds_sched_pool_claim_idx``
(``pool, priority, concurrency_group, next_run_at``):

* the rows of no group: the first row of their range (:func:`.claim_reads.no_group`);
* the groups with room: one probe of each one's range, the earliest head
  (:func:`.claim_reads.rooms_by_head`; every group with room is probed, so none is missed:
  no limit like the claim's ``GROUP_READS`` is needed, the cost is one probe per group).

A held group's rows are never read (before, the wake-up walked the waiting rows in
``next_run_at`` order and dropped a held group's rows one at a time: 100,000 held rows
cost each idle wake-up 85-150 ms on PostgreSQL; tests/test_wakeup_backlog.py).

The index holds the priority before the group, so each level is a read of its own, and the
wake-up is one statement: the levels of each pool are found with the claim's probes
(:func:`.claim_order.levels_in`) and kept (:func:`levels`), and the statement reads those
levels and, beside them, probes the gaps between them (:func:`levels_moved`: a claimable
row at a level it does not read). When a gap holds a row the statement's answer is thrown
away, the levels are found again and the statement sent again (:func:`.workers.next_wakeup`):
a new level costs a wasted statement, never a late wake-up. A level kept that has no row
left costs its empty reads until then. A pool with more than :data:`WAKEUP_LEVELS` levels
is read by the walk, as before (correct; its cost grows with a held backlog), and its
levels are counted again after :data:`WALK_RECHECK_SECONDS`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from django.db.models import BooleanField, Exists, ExpressionWrapper, Q, QuerySet

from ..models import Schedule
from .claim_order import claimable_in, levels_in
from .claim_reads import in_level, no_group, rooms_by_head

#: Most priority levels of one pool the wake-up reads level by level (two reads and one
#: gap probe each); a pool with more is read by the walk.
WAKEUP_LEVELS = 8
#: Seconds after which the levels of a pool read by the walk are counted again.
WALK_RECHECK_SECONDS = 60.0

#: Per pool's levels, highest first (None: more than WAKEUP_LEVELS), by (alias, pool),
#: with the monotonic time after which a walked pool's are counted again.
_LEVELS: dict[tuple[str, str], tuple[tuple[int, ...] | None, float]] = {}

Levels = tuple[tuple[int, ...] | None, ...]


def levels(using: str, pools: Sequence[str], *, refresh: bool = False) -> Levels:
    """The priority levels of each of ``pools`` (in their order; each highest first, None
    for a pool with more than :data:`WAKEUP_LEVELS`): as last found, or found now (probes
    of the claim index: :func:`.claim_order.levels_in`) the first time, with ``refresh``,
    or for a walked pool after :data:`WALK_RECHECK_SECONDS`."""
    now = time.monotonic()
    found: list[tuple[int, ...] | None] = []
    for pool in pools:
        entry = _LEVELS.get((using, pool))
        if refresh or entry is None or (entry[0] is None and now >= entry[1]):
            entry = (levels_in(pool, using, WAKEUP_LEVELS), now + WALK_RECHECK_SECONDS)
            _LEVELS[(using, pool)] = entry
        found.append(entry[0])
    return tuple(found)


def walked(pools: Sequence[str]) -> Levels:
    """Levels that read every one of ``pools`` by the walk (no gap to probe)."""
    return tuple(None for _ in pools)


def forget_levels() -> None:
    """Forget the levels found (tests: a table emptied between them)."""
    _LEVELS.clear()


def due_reads(using: str, pools: Sequence[str], clock: Any, found: Levels) -> list[QuerySet[Any]]:
    """The ordered ``LIMIT 1`` reads (one ``next_run_at`` each) whose earliest is ``due``
    at ``clock`` (an instant or the database clock's SQL), for ``pools`` at the levels
    ``found`` (:func:`levels`): per level, the rows of no group and the groups with room;
    per walked pool, the walk."""
    waiting = Schedule.objects.using(using).waiting()
    reads: list[QuerySet[Any]] = []
    for pool, pool_levels in zip(pools, found, strict=True):
        if pool_levels is None:
            room = waiting.filter(
                Schedule.objects.group_room_q(clock), Schedule.objects.parallel_room_q(clock)
            )
            reads.append(room.filter(pool=pool).order_by("next_run_at").values("next_run_at")[:1])
            continue
        for level in pool_levels:
            rows = in_level(waiting, pool, level, clock)
            reads.append(no_group(rows).values("next_run_at")[:1])
            reads.append(rooms_by_head(rows, using, clock).values("dds_head")[:1])
    return reads


def levels_moved(using: str, pools: Sequence[str], found: Levels) -> ExpressionWrapper:
    """Whether a claimable row of ``pools`` is at a level ``found`` does not name (a pool
    read by the walk has none): one probe of the claim index per gap between the levels
    (above the highest, between two, below the lowest; a pool without levels: any row)."""
    gaps: list[Q] = []
    for pool, pool_levels in zip(pools, found, strict=True):
        if pool_levels is None:
            continue
        bounds = [None, *pool_levels, None]
        for above, below in zip(bounds, bounds[1:], strict=False):
            gap = Q()
            if above is not None:
                gap &= Q(priority__lt=above)
            if below is not None:
                gap &= Q(priority__gt=below)
            gaps.append(Q(Exists(claimable_in(pool, using).filter(gap))))
    moved = gaps[0] if gaps else Q(pk__in=[])  # no gap: never
    for gap in gaps[1:]:
        moved |= gap
    return ExpressionWrapper(moved, output_field=BooleanField())
