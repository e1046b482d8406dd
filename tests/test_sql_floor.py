"""bench/sql_floor.py's statements against the real schema (PostgreSQL): the raw SQL floor of
``throughput.py --sql-floor`` and ``herd_floor.py`` claims the due rows, writes their
attempts and receipts as the engine would (one attempt and one ``succeeded`` receipt per
run, the lease released, the next run one interval on), and with ``--record-starts`` the
receipt carries the run's start. A migration that changes a column the floor writes fails
here rather than in a bench run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from django_durable_schedules.models import (
    Kind,
    RunAttempt,
    RunReceipt,
    Schedule,
    Status,
)
from tests.bench_modules import import_bench

(sql_floor,) = import_bench("sql_floor")
psycopg = pytest.importorskip("psycopg")

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the floor is PostgreSQL SQL"),
]


def floor_connection():
    """A connection of the floor's own (psycopg, autocommit) to the test database."""
    s = connection.settings_dict
    return psycopg.connect(
        dbname=s["NAME"],
        host=s["HOST"] or None,
        port=s["PORT"] or None,
        user=s["USER"] or None,
        password=s["PASSWORD"] or None,
        autocommit=True,
    )


def make(n: int, due: datetime) -> list[Schedule]:
    rows = [
        Schedule(
            name=f"floor-{i}",
            callback="tests.noop",
            kind=Kind.INTERVAL,
            interval_seconds=60,
            status=Status.ACTIVE,
            next_run_at=due,
        )
        for i in range(n)
    ]
    for row in rows:
        row.definition_hash = row.compute_definition_hash()
    return Schedule.objects.bulk_create(rows)


@pytest.mark.parametrize("record_starts", [False, True])
def test_floor_claims_runs_and_receipts_each_due_row_once(record_starts):
    due = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=5)
    make(3, due)
    with floor_connection() as conn:
        runs = sql_floor.claim(conn, "cte", 100, "floor-test")
        assert len(runs) == 3
        assert sql_floor.claim(conn, "cte", 100, "floor-test") == []  # leased: not due again
        started = datetime.now(UTC) if record_starts else None
        starts = [started] * len(runs) if started else None
        assert sql_floor.complete(conn, "cte", runs, starts) == 3
    assert RunAttempt.objects.count() == 3
    receipts = list(RunReceipt.objects.all())
    assert [r.status for r in receipts] == ["succeeded"] * 3
    assert {r.started_at for r in receipts} == {started}
    for row in Schedule.objects.all():
        assert row.lease_token is None
        assert row.next_run_at == due + timedelta(seconds=60)
        assert row.occurrence == 1


def test_floor_split_form_does_the_same_work():
    make(2, datetime.now(UTC) - timedelta(seconds=1))
    with floor_connection() as conn:
        runs = sql_floor.claim(conn, "split", 100, "floor-test")
        assert sql_floor.complete(conn, "split", runs) == 2
    assert RunReceipt.objects.filter(status="succeeded").count() == 2
    assert not Schedule.objects.filter(lease_token__isnull=False).exists()
