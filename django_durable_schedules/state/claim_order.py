"""The order a claim takes due rows in: its worker's pools only, higher priorities first,
then the earliest due (issue #28, items 2 and 3).

The claim index ``dds_sched_pool_claim_idx`` holds the claimable rows by ``(pool,
priority, concurrency_group, next_run_at)``. "Due rows of one pool and one priority level,
earliest first" is a few bounded range scans of it at any table size (the rows of no
group, and those of each group with room: :mod:`.claim_reads`); "due rows, highest priority first" over
every level is not (a level's rows that are not due yet would be read through before the
next level's due ones). So a claim walks the levels that hold claimable rows, highest
first, each found with one probe of the same index (``ORDER BY priority DESC LIMIT 1``
below the last level: a loose index scan), and reads each level's due rows until its
batch is full (:func:`take_in_order`). With one pool and one level (no priorities, the
default) that is one probe and one read; every further level costs one probe and one
read, each a bounded index scan.

Several pools: at each level the pools that have it are read, and their rows merged by
``next_run_at`` (stable: the pools' order breaks ties), so no pool of a worker starves
another at the same priority.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from django.db.models import F, QuerySet, SmallIntegerField
from django.db.models.expressions import RawSQL

from ..db.fast_orm import PLACEHOLDER, read_values
from ..models import DEFAULT_POOL, PRIORITY_MAX, Schedule, Status

_T = TypeVar("_T")

#: Above every priority a row can hold: the first probe asks for the levels below it.
ABOVE_ALL = PRIORITY_MAX + 1


def take_in_order(
    pools: Sequence[str],
    limit: int,
    top_level: Callable[[str, int], int | None],
    read_level: Callable[[str, int, int], list[_T]],
    due_at: Callable[[_T], Any],
) -> list[_T]:
    """Up to ``limit`` items in claim order: the highest priority level first, each level's
    items as ``read_level(pool, level, n)`` returns them (up to ``n``, earliest due first),
    the pools at one level merged by ``due_at(item)``.

    ``top_level(pool, below)``: the highest level under ``below`` that holds claimable
    rows in ``pool`` (None: no more). A pure function of the three callables: the state
    package passes database reads, tests pass lists."""
    levels = {pool: top_level(pool, ABOVE_ALL) for pool in dict.fromkeys(pools)}
    taken: list[_T] = []
    while len(taken) < limit:
        known = {pool: level for pool, level in levels.items() if level is not None}
        if not known:
            break
        level = max(known.values())
        at = [pool for pool, found in known.items() if found == level]
        want = limit - len(taken)
        found_rows = [item for pool in at for item in read_level(pool, level, want)]
        if len(at) > 1:
            found_rows.sort(key=lambda item: _sortable(due_at(item)))
        taken += found_rows[:want]
        if len(taken) >= limit:
            break
        for pool in at:
            levels[pool] = top_level(pool, level)
    return taken


def _sortable(instant: datetime | None) -> tuple[bool, Any]:
    return (instant is None, instant)


def claimable_in(pool: str, using: str) -> QuerySet[Schedule]:
    """The rows of ``pool`` that the claim index holds (unleased, active or paused): the
    set whose priority levels a claim walks (``ScheduleQuerySet.claimable`` narrows it to
    what is due)."""
    return Schedule.objects.using(using).filter(
        pool=pool, lease_token__isnull=True, status__in=(Status.ACTIVE, Status.PAUSED)
    )


def top_level(pool: str, below: int, using: str) -> int | None:
    """The highest priority under ``below`` among ``pool``'s claimable rows, None when
    there is none: one backward probe of the claim index, compiled once per pool."""

    def build() -> QuerySet[Any]:
        limit = RawSQL("%s", (PLACEHOLDER,), output_field=SmallIntegerField())
        return (
            claimable_in(pool, using)
            .alias(below=limit)
            .filter(priority__lt=F("below"))
            .order_by("-priority")
            .values_list("priority")[:1]
        )

    found = read_values(("claim_level", pool), using, build, value=below)
    return found[0][0] if found else None


def levels_in(pool: str, using: str, most: int) -> tuple[int, ...] | None:
    """The priority levels of ``pool``'s claimable rows (:func:`claimable_in`), highest
    first: one :func:`top_level` probe per level and one more; None when there are more
    than ``most``."""
    found: list[int] = []
    level = top_level(pool, ABOVE_ALL, using)
    while level is not None:
        if len(found) == most:
            return None
        found.append(level)
        level = top_level(pool, level, using)
    return tuple(found)


def worker_pools(pools: Sequence[str] | None) -> tuple[str, ...]:
    """The pools a worker claims: ``pools`` without repeats, in order; ``("default",)``
    when none is given."""
    chosen = tuple(dict.fromkeys(pools or ()))
    return chosen or (DEFAULT_POOL,)
