"""Migration 0010 (exclusion calendars) adds columns to the schedule table, which SQLite
applies by rebuilding it (dropping its triggers): the append-only guards and the edit
triggers must be back after migrating backwards and forwards, on every backend, and rows
written before it read ``excluded_count = 0`` and no calendars."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from django_durable_schedules.db import guards
from django_durable_schedules.models import Schedule

from .test_migration_enqueued import _cron_schedule_at, _edit_trigger_works, _migrate

APP = "durable_schedules"


@pytest.mark.django_db(transaction=True)
def test_0010_both_ways_keeps_guards_and_edit_triggers():
    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes(APP)
    try:
        before = _cron_schedule_at((APP, "0009_overlap_backfill"), "before-0010")
    finally:
        _migrate(leaves)
    assert guards.installed(connection)
    row = Schedule.objects.get(pk=before.pk)
    assert row.excluded_count == 0 and row.exclusions_checked_at is None
    assert not row.exclusion_calendars.exists() and not row.exclusions()
    # The edit trigger is back: a definition changed behind save() becomes due now.
    assert _edit_trigger_works(Schedule, row.pk)
