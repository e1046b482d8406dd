"""A claim with concurrency groups sends only bounded index scans whatever the number of
schedules (issue #28: "the claim-plan bench holds its floor ... and its cost with groups is
measured"; ``bench/claim_plan.py``'s ``groups_due`` at 1 k to 10 M schedules).

On PostgreSQL the plans are asked with sequential scans, bitmap scans and sorts disabled
(as tests/test_chain_plans.py does), so they name the index that serves each statement at
any size: the group's live leases are counted on a lease index (``dds_sched_group_lease_idx``,
the leased rows of grouped schedules only, or ``dds_sched_lease_idx``), every read of due
rows (the rows of no group, those of each group with room, and the read that fills the
places of the rows a full group held back) is a range of a claim index (migration 0004's
or ``dds_sched_pool_claim_idx``), and the group rows are locked by their primary key.
tests/test_claim_backlog.py: a full group's backlog is never read."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_durable_schedules import state
from django_durable_schedules.models import ConcurrencyGroup, Schedule

from .factories import T0
from .test_health_indexes import plan_of

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's plans"),
]
S = timedelta(seconds=1)
TABLE = Schedule._meta.db_table
GROUPS = ConcurrencyGroup._meta.db_table


def schedule(name: str, due: object, group: ConcurrencyGroup | None = None) -> Schedule:
    return Schedule(
        name=name,
        callback="tests.noop",
        kind="interval",
        interval_seconds=3600,
        start_at=due,
        next_run_at=due,
        concurrency_group=group,
    )


def a_full_group() -> ConcurrencyGroup:
    """A group of ``max_running`` 1 whose one place a run holds (an hour's lease), two more
    of its rows due at T0, ahead of three ungrouped rows due a second later, and 3,000 rows
    not due (the table analyzed: the planner then knows the rows are many, as at scale)."""
    group = ConcurrencyGroup.objects.create(name="partner-api", max_running=1)
    Schedule.objects.bulk_create(
        [schedule(f"grouped-{n}", T0, group) for n in range(3)]
        + [schedule(f"free-{n}", T0 + S) for n in range(3)]
        + [schedule(f"later-{n}", T0 + 3600 * S) for n in range(3000)]
    )
    with connection.cursor() as cursor:
        cursor.execute(f'ANALYZE "{TABLE}"')
    (running,) = state.claim_due(worker="w", now=T0, limit=1, lease_seconds=3600)
    assert running.schedule_name.startswith("grouped-")
    return group


def test_a_claim_held_back_by_a_full_group_reads_and_counts_by_indexes_only() -> None:
    a_full_group()
    # Past the group's recheck (full_until lapsed): the claim reads its held rows, counts
    # the group, holds them back and reads again for the ungrouped ones.
    with CaptureQueriesContext(connection) as queries:
        claims = state.claim_due(worker="w", now=T0 + 10 * S, limit=2)
    assert sorted(c.schedule_name for c in claims) == ["free-0", "free-1"]
    sql = [q["sql"] for q in queries]
    reads = [q for q in sql if q.startswith(f'SELECT "{TABLE}"."id"') and "FOR UPDATE" in q]
    # The rows of no group, the group's (at most its max_running: one), and the read that
    # fills the held place (the rows of no group again, the group left out).
    assert len(reads) == 3, sql
    for read in reads:
        plan = plan_of(read)
        assert f"Seq Scan on {TABLE}" not in plan and "Sort" not in plan, plan
        # One of the two claim indexes (the planner's choice on a small table): each an
        # ordered range of claimable rows, the scan stopped by the batch.
        assert "dds_sched_pool_claim_idx" in plan or "dds_sched_claim_idx" in plan, plan
    counts = [q for q in sql if "COUNT(" in q and "concurrency_group_id" in q]
    (count,) = [q for q in counts if f'FROM "{TABLE}"' in q]
    # overlap_policy allow: the groups' occurrence leases, counted from their own table
    # (joined to their schedules by primary key), never by reading the schedules.
    (occurrences,) = [q for q in counts if q not in (count,)]
    assert f"Seq Scan on {TABLE}" not in plan_of(occurrences), plan_of(occurrences)
    plan = plan_of(count)
    # The grouped leases' index, or every live lease's (the planner's choice when the
    # table holds few leases, as bench/claim_plan.py found at 1 M rows): either way bounded
    # by the runs in flight, never by the schedules.
    assert f"Seq Scan on {TABLE}" not in plan, plan
    assert "dds_sched_group_lease_idx" in plan or "dds_sched_lease_idx" in plan, plan
    locks = [q for q in sql if q.startswith(f'SELECT "{GROUPS}"') and "FOR UPDATE" in q]
    assert locks, sql
    for lock in locks:
        plan = plan_of(lock)
        assert f"{GROUPS}_pkey" in plan, plan
