"""The health snapshot's counts are each read by an index (issue #32 goal 3, migration
0032; :mod:`django_durable_schedules.health_counts`), so none reads the whole schedules
table: one sequential scan of a million rows took 360-390 ms (docs/benchmarks.md).

On PostgreSQL the plan is asked with sequential scans disabled, so it names the index that
can serve each count at any size; without migration 0032 there is none for the missed
slots or the paused list, and the plan falls back on a (disabled) sequential scan. On
every database the indexed counts equal the one-pass aggregate (MariaDB's way)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_durable_schedules import health, health_counts, state
from django_durable_schedules.models import Schedule

from .factories import T0

pytestmark = pytest.mark.django_db
S = timedelta(seconds=1)
TABLE = Schedule._meta.db_table


def mk(name, **kw):
    kw.setdefault("interval_seconds", 60)
    return Schedule.objects.create(
        name=name, callback="tests.noop", kind="interval", created_at=T0, **kw
    )


def a_mix():
    """Rows for every count: due, leased, degraded, failing, paused, missed, ended."""
    for n in range(3):
        mk(f"due-{n}")
    mk("later", start_at=T0 + 7200 * S)
    mk("leased")
    state.claim_due(worker="w", now=T0 + 60 * S, lease_seconds=30, limit=1)
    Schedule.objects.filter(name="due-0").update(missed_count=4)
    Schedule.objects.filter(name="due-1").update(missed_count=2, failure_count=3)
    mk("paused", status="paused", paused_until=T0 + 900 * S, pause_reason="deploy")
    mk("paused-2", status="paused")
    mk("degraded", status="paused", degraded_reason="callback not registered")
    mk("gone", status="cancelled")
    mk("broke", status="failed", failure_count=5)


@pytest.mark.parametrize("at", [0, 90, 4000])
def test_the_indexed_counts_equal_the_one_pass_aggregate(monkeypatch, at):
    a_mix()
    now = T0 + at * S
    indexed = health_counts.schedule_counts(now, 60.0)
    monkeypatch.setattr(connection.features, "supports_partial_indexes", False)
    assert health_counts.schedule_counts(now, 60.0) == indexed
    assert indexed["missed"] >= 6 and indexed["degraded"] == 1 and indexed["failing"] == 1
    assert indexed["status_paused"] == 3 and indexed["waiting"] is True


def test_an_empty_table_counts_nothing():
    counts = health_counts.schedule_counts(T0, 60.0)
    assert counts["due"] == 0 and counts["missed"] == 0 and counts["oldest"] is None
    assert counts["waiting"] is False and counts["status_active"] == 0


def test_the_counts_are_one_query():
    a_mix()
    with CaptureQueriesContext(connection) as queries:
        health_counts.schedule_counts(T0 + 90 * S, 60.0)
    assert len(queries) == 1


def plan_of(sql: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        # Bitmap scans and sorts off too: on a table this small (analyzed or not, vacuumed
        # or not) a bitmap scan or a sort of a few rows is as cheap as anything; off, the
        # plan names the ordered index scans the planner takes at scale, and a sort left
        # in it means no index gives the order.
        cursor.execute("SET LOCAL enable_bitmapscan = off")
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute(f"EXPLAIN {sql}")
        return "\n".join(row[0] for row in cursor.fetchall())


@pytest.mark.skipif(connection.vendor != "postgresql", reason="partial indexes: PostgreSQL's plan")
def test_every_count_of_health_is_served_by_an_index():
    a_mix()
    now = state.db_now()
    with CaptureQueriesContext(connection) as queries:
        health_counts.schedule_counts(now, 60.0)
    plan = plan_of(queries[0]["sql"])
    # Each count is one subquery, each read by an index (which one, on a table this
    # small, is the planner's choice; tests/bench: docs/benchmarks.md).
    assert f"Seq Scan on {TABLE}" not in plan, plan
    assert plan.count("InitPlan") == 17, plan  # 15, and the occurrence leases live, expired
    assert "dds_sched_missed_idx" in plan, plan  # migration 0032
    # The counts by status read the (status, next_run_at) index: index-only at scale
    # (docs/benchmarks.md); on a small table never vacuumed (no page known all-visible)
    # the planner may as well take a plain index scan of it.
    assert re.search(r"Index (Only )?Scan using dds_sched_due_idx", plan), plan


@pytest.mark.skipif(connection.vendor != "postgresql", reason="partial indexes: PostgreSQL's plan")
def test_the_paused_list_is_served_by_the_paused_index():
    a_mix()
    now = state.db_now()
    with CaptureQueriesContext(connection) as queries:
        health.snapshot(now=now)
    (listed,) = [q["sql"] for q in queries if "pause_reason" in q["sql"]]
    plan = plan_of(listed)
    assert "dds_sched_paused_idx" in plan and "Sort" not in plan, plan
