"""Pools with due work and no worker, for the health snapshot (issue #28 item 3).

A schedule of pool ``reports`` runs only on a worker started with ``run_scheduler --pool
reports``: when no live worker claims a pool (``WorkerHeartbeat.pools``), its due schedules
wait for ever. :func:`pools_without_workers` finds those pools with bounded reads at any
table size, all on the claim index ``dds_sched_pool_claim_idx`` (``pool, priority,
concurrency_group, next_run_at`` over the unleased active or paused rows):

* the pools present among those rows, by a loose index scan (``ORDER BY pool LIMIT 1``
  above the last pool found), at most :data:`POOLS_SCANNED` of them;
* for each pool no live worker claims, whether it has a due row: per priority level (the
  levels found the same way, highest first) an ``exists()`` of a row due by then, a
  range of the index that stops at the first due row (the rows of a group that are not
  due yet are read through: the group sits before ``next_run_at`` in the index).

Read-only; :func:`.health.snapshot` lists the pools and reports a problem.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from .models import Schedule, ScheduleQuerySet, Status

#: Most pools a snapshot looks at (one index probe each, plus a few for each pool without a
#: worker).
POOLS_SCANNED = 50
#: Most priority levels of one pool looked at for a due row (one probe and one ``exists()``
#: each); past them the pool counts as due (a worker is missing for it either way).
LEVELS_SCANNED = 20


def _indexed(using: str) -> ScheduleQuerySet:
    """The rows the claim index holds (unleased, active or paused)."""
    return Schedule.objects.using(using).filter(
        lease_token__isnull=True, status__in=(Status.ACTIVE, Status.PAUSED)
    )


def indexed_pools(using: str = "default", limit: int = POOLS_SCANNED) -> list[str]:
    """The distinct pools of the unleased active or paused schedules, in name order, at most
    ``limit`` of them: one ``ORDER BY pool LIMIT 1`` probe of the claim index per pool."""
    found: list[str] = []
    rows = _indexed(using).order_by("pool").values_list("pool", flat=True)
    while len(found) < limit:
        following = rows.filter(pool__gt=found[-1]) if found else rows
        pool = following.first()
        if pool is None:
            break
        found.append(pool)
    return found


def pool_has_due(pool: str, now: datetime, using: str = "default") -> bool:
    """Whether ``pool`` holds a schedule a claim may take at ``now`` (``claimable``),
    looked up level by level (highest priority first), each a bounded index range."""
    rows = _indexed(using).filter(pool=pool)
    levels = rows.order_by("-priority").values_list("priority", flat=True)
    level = levels.first()
    for _ in range(LEVELS_SCANNED):
        if level is None:
            return False
        if rows.filter(priority=level).claimable(now).exists():
            return True
        level = levels.filter(priority__lt=level).first()
    return level is not None


def live_pools(pool_lists: Iterable[str]) -> set[str]:
    """The pools the live workers claim, from their ``WorkerHeartbeat.pools`` values
    (comma-separated names; an empty value, written by no version, counts as none)."""
    return {name.strip() for value in pool_lists for name in value.split(",") if name.strip()}


def pools_without_workers(
    now: datetime, claimed: Iterable[str], using: str = "default"
) -> list[str]:
    """The pools (name order; among the first :data:`POOLS_SCANNED`) with a schedule due at
    ``now`` (database clock) that no pool in ``claimed`` covers: ``claimed`` is what the
    live workers claim (:func:`live_pools`)."""
    covered = set(claimed)
    return [
        pool
        for pool in indexed_pools(using)
        if pool not in covered and pool_has_due(pool, now, using)
    ]
