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


@pytest.mark.django_db(transaction=True)
def test_0013_calendar_visibility_both_ways():
    """``shared`` is added (existing calendars: not shared, staff only) and dropped again;
    the schedule table's guards and edit triggers are untouched."""
    from django_durable_schedules.models import ExclusionCalendar

    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes(APP)
    node = (APP, "0012_fewer_index_entries_per_run")
    try:
        executor = _migrate([node])
        old = executor.loader.project_state(node).apps.get_model(APP, "ExclusionCalendar")
        assert "shared" not in {f.name for f in old._meta.get_fields()}
        made = old.objects.create(name="plant")
    finally:
        _migrate(leaves)
    assert ExclusionCalendar.objects.get(pk=made.pk).shared is False
    ExclusionCalendar.objects.filter(pk=made.pk).update(shared=True)
    try:
        executor = _migrate([node])  # backwards: the column goes, the row stays
        columns = [
            c.name
            for c in connection.introspection.get_table_description(
                connection.cursor(), ExclusionCalendar._meta.db_table
            )
        ]
        assert "shared" not in columns
        assert (
            executor.loader.project_state(node)
            .apps.get_model(APP, "ExclusionCalendar")
            .objects.filter(name="plant")
            .exists()
        )
    finally:
        _migrate(leaves)
    assert ExclusionCalendar.objects.get(pk=made.pk).shared is False
    assert guards.installed(connection)
    before = _cron_schedule_at(node, "after-0013")
    _migrate(leaves)
    assert _edit_trigger_works(Schedule, Schedule.objects.get(pk=before.pk).pk)
