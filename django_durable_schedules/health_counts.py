"""The health snapshot's counts over the schedules, each read by an index (issue #32 goal 3).

:func:`schedule_counts` answers in one statement whatever the size of the table. Where the
database builds partial indexes (PostgreSQL, SQLite) the statement is a row of scalar
subqueries, each bounded by an index that holds only the rows it counts, or that it reads
without the table:

* by status: the ``(status, next_run_at)`` index (``dds_sched_due_idx``), one range each,
  index-only on PostgreSQL (the rows of a status are index entries, never table pages);
* due, overdue, due past the grace and the oldest due: the claim index
  (``dds_sched_claim_idx``, the claimable rows by ``next_run_at``), a range up to ``now``;
  whether any schedule waits at all: the first waiting row in that index's order;
* degraded, failing: their partial indexes (``dds_sched_degraded_idx``;
  ``dds_sched_failing_rank_idx``, which holds the status the count filters on);
* live and expired leases: the lease index (``dds_sched_lease_idx``: leased rows only),
  plus the occurrence leases of ``allow`` schedules (``OccurrenceLease``, by its
  ``lease_expires_at`` index): two more scalar subqueries, added to them;
* missed slots: the partial index ``dds_sched_missed_idx`` (rows with a missed slot only).

So the cost grows with the rows each count counts, not with the table: the counts by
status read every index entry of ``dds_sched_due_idx`` (one per schedule: 112 ms for
899,000 active ones on a busy machine, docs/benchmarks.md), the others the few rows they
count. MariaDB/MySQL build no partial index (Django drops the condition): there the counts are
one aggregate over the table, one pass whatever it holds (what every database did before).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db import connections
from django.db.models import (
    BigIntegerField,
    Count,
    Func,
    Max,
    Min,
    Q,
    QuerySet,
    Subquery,
    Sum,
)
from django.db.models.expressions import Star

from .models import OccurrenceLease, Schedule, ScheduleQuerySet, Status
from .verdict import due_now_q

__all__ = ["COUNT_KEYS", "schedule_counts"]

#: The keys of :func:`schedule_counts`' dict besides ``status_<status>`` (one per status).
COUNT_KEYS = (
    "due",
    "overdue",
    "degraded",
    "failing",
    "live",
    "expired",
    "missed",
    "due_past_grace",
    "waiting",
    "oldest",
)


def schedule_counts(now: datetime, overdue_after: float, using: str = "default") -> dict[str, Any]:
    """The schedules counted for the health snapshot at ``now`` (database clock), one query.

    Keys: ``status_<s>`` for each :class:`.Status` value; ``due`` (claimable at ``now``),
    ``overdue`` (claimable ``overdue_after`` seconds ago), ``due_past_grace``
    (:func:`.verdict.due_now_q`), ``degraded``, ``failing``, ``live`` and ``expired``
    (leases: the rows' own and the occurrence leases of ``allow`` schedules), ``missed`` (the sum of ``missed_count``; 0 without any) as ints; ``waiting``
    (any runnable, unleased row with a next run) a bool; ``oldest`` the earliest
    ``next_run_at`` of the claimable rows (aware UTC; None when none is due)."""
    q = ScheduleQuerySet
    schedules = Schedule.objects.using(using).order_by()
    if not connections[using].features.supports_partial_indexes:
        return _one_pass(schedules, now, overdue_after)
    counts: dict[str, Any] = {
        key: _count(schedules.filter(rows)) for key, rows in _counted(now, overdue_after).items()
    }
    claimable = schedules.filter(q.claimable_q(now))
    counts.update(
        oldest=Subquery(claimable.order_by("next_run_at").values("next_run_at")[:1]),
        # The first waiting row in the claim index's order (an EXISTS may be planned as a
        # sequential scan, which reads the whole table when none waits).
        waiting=Subquery(schedules.filter(q.waiting_q()).order_by("next_run_at").values("pk")[:1]),
        **_occurrence_counts(now, using, _count),
        missed=Subquery(
            schedules.filter(missed_count__gt=0).values(
                total=Func("missed_count", function="SUM", output_field=BigIntegerField())
            )
        ),
    )
    # One row of subqueries: on a schedules table's first row (an empty table counts
    # nothing, so its row is the defaults).
    row = schedules.annotate(**counts).values(*counts)[:1]
    found: dict[str, Any] | None = next(iter(row), None)
    if found is None:
        return _empty()
    found["live"] += found.pop("occ_live")
    found["expired"] += found.pop("occ_expired")
    found["missed"] = found["missed"] or 0
    found["waiting"] = found["waiting"] is not None
    return found


def _counted(now: datetime, overdue_after: float) -> dict[str, Q]:
    """The rows each plain count counts, by key (both ways of :func:`schedule_counts`)."""
    q = ScheduleQuerySet
    return {
        **{f"status_{s}": Q(status=s) for s in Status.values},
        "due": q.claimable_q(now),
        "overdue": q.claimable_q(now - timedelta(seconds=overdue_after)),
        "due_past_grace": due_now_q(now),
        "degraded": q.degraded_q(),
        "failing": q.failing_q(),
        "live": q.lease_live_q(now),
        "expired": q.lease_expired_q(now),
    }


def _count(rows: QuerySet[Schedule]) -> Subquery:
    """``(SELECT COUNT(*) FROM ... WHERE ...)``: ``COUNT(*)``, not of a column, so that an
    index holding none of the table's columns but its condition can answer it alone."""
    return Subquery(
        rows.values(n=Func(Star(), function="COUNT", output_field=BigIntegerField())),
        output_field=BigIntegerField(),
    )


def _occurrence_counts(now: datetime, using: str, count: Any) -> dict[str, Any]:
    """``occ_live`` and ``occ_expired``: the occurrence leases (``overlap_policy="allow"``,
    :class:`.models.OccurrenceLease`) live and expired at ``now``, each ``count(rows)`` (a
    scalar subquery of the one statement), on the leases' ``lease_expires_at`` index."""
    leases = OccurrenceLease.objects.using(using).order_by()
    return {
        "occ_live": count(leases.live(now)),
        "occ_expired": count(leases.expired(now)),
    }


def _one_pass(schedules: QuerySet[Schedule], now: datetime, overdue_after: float) -> dict[str, Any]:
    """:func:`schedule_counts` as one aggregate over the table (no partial indexes); the
    occurrence leases' counts as two uncorrelated scalar subqueries of the same statement
    (each evaluated once), under ``MAX`` so the aggregate may hold them."""
    q = ScheduleQuerySet
    agg = schedules.aggregate(
        **{key: Count("id", filter=rows) for key, rows in _counted(now, overdue_after).items()},
        **{key: Max(value) for key, value in _occurrence_counts(now, schedules.db, _count).items()},
        missed=Sum("missed_count"),
        waiting=Count("id", filter=q.waiting_q()),
        oldest=Min("next_run_at", filter=q.claimable_q(now)),
    )
    agg["live"] += agg.pop("occ_live") or 0
    agg["expired"] += agg.pop("occ_expired") or 0
    agg["missed"] = agg["missed"] or 0
    agg["waiting"] = bool(agg["waiting"])
    return agg


def _empty() -> dict[str, Any]:
    """The counts of an empty table."""
    counts: dict[str, Any] = {f"status_{s}": 0 for s in Status.values}
    counts.update({key: 0 for key in COUNT_KEYS}, waiting=False, oldest=None)
    return counts
