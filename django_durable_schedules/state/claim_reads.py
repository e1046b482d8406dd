"""The claim's reads of due rows, one priority level of one pool at a time (issue #28):
the rows of no concurrency group and, separately, the rows of each group with room.

The claim index ``dds_sched_pool_claim_idx`` holds the claimable rows by ``(pool,
priority, concurrency_group, next_run_at)``. Each read is a range of it, earliest due
first, that stops after the rows asked for:

* the rows of no group (``concurrency_group IS NULL``): one range;
* the rows of one group: one range per group the claim may start a run in (the groups not
  held back by ``full_until`` / ``rate_until``: :class:`GroupRooms`), at most as many
  rows as the group's ``max_running``.

Merged by ``next_run_at``, the first ``n`` are the level's rows in claim order. A group at
its limit is never read: its backlog, however long, costs a claim nothing (before, the
claim walked every due row of the level in ``next_run_at`` order and dropped a held group's
rows one at a time, so a backlog of 100,000 held rows cost each claim about 160 ms:
docs/benchmarks.md). A deployment without groups sends one read per level, as before: the
read of the ungrouped rows says in the same statement whether any group exists.

The groups read are found once per claim and level (:class:`GroupRooms`): those with room
and a due row there, the one whose earliest due row is the earliest first, at most
:data:`GROUP_READS` (the others in the next claims, as their rows become the earliest).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django.db import connections
from django.db.models import Exists, F, IntegerField, OuterRef, QuerySet, Subquery
from django.db.models.expressions import RawSQL

from ..db.fast_orm import PLACEHOLDER, read_values
from ..models import ConcurrencyGroup, Schedule

_T = TypeVar("_T")

#: Most groups with room a claim reads rows of at one level (one range each): those whose
#: earliest due row is the earliest.
GROUP_READS = 16
#: The order of a range of the claim index: by group, then due. Within one range the group
#: is one value, so this is the earliest due first; said in full, it is an order migration
#: 0004's index (``next_run_at`` alone) cannot give, so PostgreSQL's planner never walks
#: that one instead, filtering the held groups' rows one at a time (at 100,000 held rows
#: it did, for the rows of no group: ``IS NULL`` makes no equality it can drop).
CLAIM_ORDER = ("concurrency_group_id", "next_run_at")
#: The attribute the ungrouped read sets on its rows: whether any concurrency group exists.
GROUPS_FLAG = "_dds_groups_exist"


def in_level(rows: QuerySet[Schedule], pool: str, level: int, at: Any) -> QuerySet[Schedule]:
    """``rows`` of ``pool`` at priority ``level`` not held at ``max_parallel`` running
    occurrences at ``at`` (``ScheduleQuerySet.parallel_room_q``), earliest due first: the
    claim index's ranges of one level (:func:`no_group`, :func:`of_group`)."""
    return rows.filter(Schedule.objects.parallel_room_q(at), pool=pool, priority=level).order_by(
        "next_run_at"
    )


def due_in_level(using: str, due_before: Any, pool: str, level: int) -> QuerySet[Schedule]:
    """Rows of ``pool`` at priority ``level`` a claim may take (``ScheduleQuerySet.claimable``;
    not held at ``max_parallel`` running occurrences), earliest due first. Narrowed by
    :func:`ungrouped` or :func:`of_group` to one range of the claim index."""
    claimable = Schedule.objects.using(using).claimable(due_before)
    return in_level(claimable, pool, level, due_before)


def no_group(qs: QuerySet[Schedule]) -> QuerySet[Schedule]:
    """``qs`` narrowed to the rows of no concurrency group, in :data:`CLAIM_ORDER` (one
    range of the claim index when ``qs`` is one pool and level: :func:`in_level`)."""
    return qs.filter(concurrency_group__isnull=True).order_by(*CLAIM_ORDER)


def ungrouped(qs: QuerySet[Schedule], using: str) -> QuerySet[Schedule]:
    """``qs`` narrowed to the rows of no concurrency group, each annotated with
    :data:`GROUPS_FLAG` (an uncorrelated ``EXISTS``: evaluated once a statement)."""
    groups = ConcurrencyGroup.objects.using(using)
    return no_group(qs).annotate(**{GROUPS_FLAG: Exists(groups)})


def rooms_by_head(rows: QuerySet[Schedule], using: str, at: Any) -> QuerySet[Any]:
    """The concurrency groups not held back at ``at`` (``ConcurrencyGroup.holding_q``) with
    a row in ``rows`` (one pool and level, earliest first: :func:`in_level`), annotated
    ``dds_head``: their earliest row's ``next_run_at``, a probe of the group's range of the
    claim index in :data:`CLAIM_ORDER`; the earliest head first, then by id. A held group's
    rows are never read."""
    group = OuterRef("pk")
    if connections[using].vendor == "postgresql":
        # The group as a range of one id, not an equality: equated with the outer row's
        # id, PostgreSQL takes the order by group as given and may walk migration 0004's
        # index by next_run_at through other groups' rows (a held backlog) to the group's
        # first one. (MariaDB answers that range, correlated, with no row: an equality.)
        one = {"concurrency_group_id__gte": group, "concurrency_group_id__lte": group}
    else:
        one = {"concurrency_group_id": group}
    heads = rows.filter(**one).order_by(*CLAIM_ORDER).values("next_run_at")[:1]
    rooms: QuerySet[Any] = (
        ConcurrencyGroup.objects.using(using)
        .exclude(ConcurrencyGroup.holding_q(at))
        .annotate(dds_head=Subquery(heads))
        .filter(dds_head__isnull=False)
        .order_by("dds_head", "pk")
    )
    return rooms


def of_group(qs: QuerySet[Any], group: Any) -> QuerySet[Any]:
    """``qs`` narrowed to the rows of the group ``group`` (its id; :data:`PLACEHOLDER`:
    the value of each call of a statement compiled once, ``fast_orm``)."""
    if group is not PLACEHOLDER:
        return qs.filter(concurrency_group_id=group).order_by(*CLAIM_ORDER)
    value = RawSQL("%s", (PLACEHOLDER,), output_field=IntegerField())
    narrowed: QuerySet[Any] = qs.alias(dds_group=value).filter(concurrency_group_id=F("dds_group"))
    return narrowed.order_by(*CLAIM_ORDER)


class GroupRooms:
    """The concurrency groups one claim reads rows of, per pool and level (:meth:`found`):
    those neither at ``max_running`` nor out of their rate as the last claim left them
    (``full_until`` / ``rate_until``; ``ConcurrencyGroup.holding_q``) that have a due row
    there, the earliest due first. The claim still locks and counts each group it admits a
    row of (:class:`.groups.Admission`): this read only spares it the rows it could not
    start."""

    def __init__(self, using: str, due_before: Any, *, cached: bool = False) -> None:
        self.using = using
        self.due_before = due_before
        #: ``due_before`` is the database clock (no parameter): compiled once.
        self.cached = cached
        self._found: dict[tuple[str, int], list[tuple[int, int | None]]] = {}

    def found(self, pool: str, level: int) -> list[tuple[int, int | None]]:
        """``(id, max_running)`` of at most :data:`GROUP_READS` groups with room and a due
        row of ``pool`` at ``level``, the group whose earliest due row is the earliest
        first (then by id): one statement the first time, a probe of the claim index per
        group with room (its first row in the group's range is its earliest)."""
        key = (pool, level)
        if key not in self._found:

            def build() -> QuerySet[Any]:
                rows = due_in_level(self.using, self.due_before, pool, level)
                rooms = rooms_by_head(rows, self.using, self.due_before)
                return rooms.values_list("pk", "max_running")[:GROUP_READS]

            if self.cached:
                found = read_values(("claim_rooms", pool, level), self.using, build)
            else:
                found = list(build())
            self._found[key] = [(pk, cap) for pk, cap in found]
        return self._found[key]


def read_level(
    n: int,
    rooms: Callable[[], list[tuple[int, int | None]]],
    read_ungrouped: Callable[[int], list[_T]],
    read_group: Callable[[int, int], list[_T]],
    due_at: Callable[[_T], Any],
    groups_known: Callable[[list[_T]], bool],
    skip_groups: frozenset[Any] = frozenset(),
) -> list[_T]:
    """Up to ``n`` due rows of one level in claim order (earliest due first): the rows of
    no group (``read_ungrouped(n)``) and those of each group with room
    (``read_group(group_id, k)``, ``k`` at most its ``max_running``; the groups
    ``rooms()`` names: :meth:`GroupRooms.found`), merged by ``due_at``. ``groups_known(rows)``: whether the ungrouped read's rows say that no group
    exists (then no group is read). ``skip_groups``: groups left out (found full by this
    claim). Pure but for the callables: the claim passes database reads, tests lists."""
    rows = read_ungrouped(n)
    if rows and groups_known(rows):
        return rows
    merged = list(rows)
    for group, cap in rooms():
        if group in skip_groups:
            continue
        merged += read_group(group, min(n, cap) if cap else n)
    if len(merged) > len(rows):
        merged.sort(key=lambda item: _sortable(due_at(item)))
    return merged[:n]


def no_groups(rows: list[Schedule]) -> bool:
    """Whether the ungrouped read's ``rows`` say that no concurrency group exists."""
    flag = rows[0].__dict__.get(GROUPS_FLAG)
    return flag is not None and not flag


def _sortable(instant: Any) -> tuple[bool, Any]:
    return (instant is None, instant)
