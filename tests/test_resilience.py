"""A worker survives its database connections being killed (a database restart or a
proxy dropping idle connections): it logs, reconnects with backoff and keeps running."""

from __future__ import annotations

import pytest
from django.db import connection

from django_durable_schedules.models import RunReceipt, Schedule

from .conftest import wait_until

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]


def kill_other_connections() -> int:
    """Terminate every other session on the test database (what a restart does to them)."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            return len(cursor.fetchall())
        cursor.execute(
            "SELECT id FROM information_schema.processlist WHERE db = DATABASE() AND id <> CONNECTION_ID()"
        )
        ids = [row[0] for row in cursor.fetchall()]
        for pid in ids:
            cursor.execute(f"KILL {int(pid)}")
        return len(ids)


@pytest.mark.skipif("connection.vendor == 'sqlite'", reason="SQLite has no server connections")
def test_worker_reconnects_after_its_connections_are_killed(start_worker):
    Schedule.objects.create(
        name="tick", callback="tests.record", kind="interval", interval_seconds=1
    )
    worker = start_worker("--max-idle", "0.3", "--worker-id", "resilient")
    wait_until(
        lambda: RunReceipt.objects.filter(status="succeeded").count() >= 2, 30, message="first runs"
    )
    for _ in range(3):
        before = RunReceipt.objects.filter(status="succeeded").count()
        assert kill_other_connections() >= 1
        wait_until(
            lambda b=before: RunReceipt.objects.filter(status="succeeded").count() >= b + 2,
            30,
            message=f"runs after the connections were killed\n{worker.output()[-3000:]}",
        )
    assert worker.proc.poll() is None, worker.output()[-3000:]
    worker.stop()
    assert worker.proc.returncode == 0, worker.output()[-3000:]
    assert (
        not RunReceipt.objects.exclude(status="succeeded").exclude(status="lease_expired").exists()
    )
