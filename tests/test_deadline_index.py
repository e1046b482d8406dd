"""The health snapshot's count of late schedules is served by ``dds_sched_deadline_idx``
(migration 0031, partial: the schedules with a deadline) on PostgreSQL: without it the
count read the whole schedules table (427 ms at a million rows: docs/benchmarks.md).
Sequential scans are disabled for the one ``EXPLAIN`` so the plan says which index can
serve the query at any size; without the index there is none to name."""

from __future__ import annotations

import pytest
from django.db import connection

from django_durable_schedules import state
from django_durable_schedules.models import Schedule

pytestmark = pytest.mark.django_db


@pytest.mark.skipif(connection.vendor != "postgresql", reason="partial indexes: PostgreSQL's plan")
def test_the_late_count_is_served_by_the_deadline_index():
    late = Schedule.objects.overdue_deadline(state.db_now())  # what health counts
    sql, params = late.values("pk").query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN SELECT COUNT(*) FROM ({sql}) AS late", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "dds_sched_deadline_idx" in plan, plan
