"""The chain's statements are bounded index scans whatever the number of schedules (issue
#30: "the claim stays a bounded index scan at 10 M schedules with chains present").

On PostgreSQL the plans are asked with sequential scans, bitmap scans and sorts disabled
(as tests/test_health_indexes.py does), so they name the index that serves each statement
at any size: the locking read of the kind ``after`` schedules that have a chain slot ready
or past its deadline is driven by the chain slots' index (``dds_chain_slot_deadline_idx``),
never by a scan of the schedules; the live claim's read pays one ``EXISTS`` on the links."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_durable_schedules import state
from django_durable_schedules.models import ChainSlot, Schedule, ScheduleLink
from django_durable_schedules.state import Outcome

from .factories import T0
from .test_health_indexes import plan_of

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's plans"),
]
S = timedelta(seconds=1)
TABLE = Schedule._meta.db_table
SLOTS = ChainSlot._meta.db_table


def a_chain_ready() -> None:
    """import (hourly) -> aggregate, import's slot at T0 succeeded: aggregate's is ready."""
    a = Schedule.objects.create(
        name="import",
        callback="tests.noop",
        kind="interval",
        interval_seconds=3600,
        start_at=T0,
    )
    b = Schedule.objects.create(name="aggregate", callback="tests.noop", kind="after")
    ScheduleLink.objects.create(downstream=b, upstream=a)
    # Other schedules, not due, and the table analyzed: the planner then knows the pool's
    # rows are many, as at scale (on a table it thinks tiny, any index is as good).
    Schedule.objects.bulk_create(
        Schedule(
            name=f"other-{n}",
            callback="tests.noop",
            kind="interval",
            interval_seconds=60,
            start_at=T0 + 3600 * S,
            next_run_at=T0 + 3600 * S,
        )
        for n in range(3000)
    )
    with connection.cursor() as cursor:
        cursor.execute(f'ANALYZE "{TABLE}"')
    claims = state.claim_due(worker="w", now=T0)
    state.complete([Outcome(c, "succeeded") for c in claims], now=T0 + S)


def test_the_claim_of_ready_chain_slots_is_driven_by_the_chain_slots_index() -> None:
    a_chain_ready()
    with CaptureQueriesContext(connection) as queries:
        claims = state.claim_due(worker="w", now=T0 + 2 * S)
    assert [c.schedule_name for c in claims] == ["aggregate"]
    # The slots due (ready, or waiting past their deadline): range reads of the index.
    due = [q["sql"] for q in queries if q["sql"].startswith(f'SELECT "{SLOTS}"."downstream_id"')]
    assert len(due) == 2, [q["sql"] for q in queries]
    for sql in due:
        plan = plan_of(sql)
        assert "dds_chain_slot_deadline_idx" in plan and f"Seq Scan on {SLOTS}" not in plan, plan
    # Then the schedules they name, locked by primary key.
    (read,) = [
        q["sql"]
        for q in queries
        if f'FROM "{TABLE}"' in q["sql"] and "FOR UPDATE" in q["sql"] and "'after'" in q["sql"]
    ]
    plan = plan_of(read)
    assert f"Seq Scan on {TABLE}" not in plan, plan
    # By primary key, or by kind (the kind ``after`` rows only): either way bounded by the
    # chains, not by the schedules (the planner picks the more selective of the two).
    assert f"{TABLE}_pkey" in plan or "Index Cond: ((kind)::text = 'after'" in plan, plan


def test_the_live_claim_reads_the_links_once_per_statement() -> None:
    a_chain_ready()
    with CaptureQueriesContext(connection) as queries:
        state.claim_due(worker="w", now=T0 + 3600 * S)
    (live,) = [
        q["sql"]
        for q in queries
        if "schedulelink" in q["sql"] and "next_run_at" in q["sql"] and "FOR UPDATE" in q["sql"]
    ]
    plan = plan_of(live)
    assert f"Seq Scan on {TABLE}" not in plan, plan
    assert plan.count("InitPlan") >= 1 and "schedulelink" in plan, plan
