"""Migration 0010 (exclusion calendars) adds columns to the schedule table, which SQLite
applies by rebuilding it (dropping its triggers): the append-only guards and the edit
triggers must be back after migrating backwards and forwards, on every backend, and rows
written before it read ``excluded_count = 0`` and no calendars."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from django_durable_schedules.db import guards
from django_durable_schedules.models import Schedule

from .factories import T0
from .test_migration_enqueued import _migrate

APP = "durable_schedules"


@pytest.mark.django_db(transaction=True)
def test_0010_both_ways_keeps_guards_and_edit_triggers():
    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes(APP)
    try:
        node = (APP, "0009_overlap_backfill")
        executor = _migrate([node])
        assert guards.installed(connection)
        old = executor.loader.project_state(node).apps
        before = old.get_model(APP, "Schedule").objects.create(
            name="before-0010",
            callback="tests.noop",
            kind="cron",
            cron="0 7 * * *",
            timezone="Europe/Paris",
            created_at=T0,
            next_run_at=T0.replace(year=2030),
        )
    finally:
        _migrate(leaves)
    assert guards.installed(connection)
    row = Schedule.objects.get(pk=before.pk)
    assert row.excluded_count == 0 and row.exclusions_checked_at is None
    assert not row.exclusion_calendars.exists() and not row.exclusions()
    # The edit trigger is back: a definition changed behind save() becomes due now.
    Schedule.objects.filter(pk=row.pk).update(cron="0 8 * * *")
    row.refresh_from_db()
    assert row.next_run_at.year < 2030
