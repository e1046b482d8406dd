"""Migration 0012: fewer index entries per run. The run tables keep no single-column index on
``schedule_id`` (composite indexes starting with it serve those lookups), the lease and
owner indexes of the schedule table are partial where the database has partial indexes,
every lookup they served still finds an index, and the migration goes both ways on every
backend with its rows, guards, edit triggers and claim index intact."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from django_durable_schedules.db import guards
from django_durable_schedules.models import RunAttempt, RunReceipt, Schedule

from .factories import T0
from .test_migration_enqueued import _cron_schedule_at, _edit_trigger_works, _migrate

APP = "durable_schedules"


def _indexes(model) -> dict[str, dict]:
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, model._meta.db_table)
    return {name: info for name, info in found.items() if info["index"] or info["unique"]}


def _pg_definition(name: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [name])
        (definition,) = cursor.fetchone()
    return definition


@pytest.mark.django_db
@pytest.mark.parametrize("model", [RunAttempt, RunReceipt])
def test_run_tables_have_no_index_of_schedule_id_alone(model):
    indexes = _indexes(model)
    assert not [n for n, i in indexes.items() if i["columns"] == ["schedule_id"]], indexes
    # ... and lookups by schedule have an index that starts with it.
    assert [n for n, i in indexes.items() if i["columns"][:1] == ["schedule_id"]]


@pytest.mark.django_db
def test_lease_and_owner_indexes_are_partial_where_the_database_can():
    indexes = _indexes(Schedule)
    assert indexes["dds_sched_lease_idx"]["columns"] == ["lease_expires_at"]
    assert indexes["dds_sched_owner_idx"]["columns"] == ["owner_id"]
    # The owner's own index is gone, on MariaDB/MySQL too (the foreign key uses the new
    # one there; its constraint is not an index).
    owner_only = [n for n, i in indexes.items() if i["columns"] == ["owner_id"] and i["index"]]
    assert owner_only == ["dds_sched_owner_idx"]
    if connection.vendor == "postgresql":
        assert "WHERE (lease_expires_at IS NOT NULL)" in _pg_definition("dds_sched_lease_idx")
        assert "WHERE (owner_id IS NOT NULL)" in _pg_definition("dds_sched_owner_idx")
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT sql FROM sqlite_master WHERE name IN "
                "('dds_sched_lease_idx', 'dds_sched_owner_idx') ORDER BY name"
            )
            sqls = [row[0] for row in cursor.fetchall()]
        assert [("WHERE" in s and "IS NOT NULL" in s) for s in sqls] == [True, True]


def _plan(qs, bitmaps: bool = False) -> str:
    """``qs``'s plan with sequential scans off (tiny tables are scanned otherwise) and, unless
    ``bitmaps``, bitmap scans off. An OR of ranges (``lease_expired``: expired, or beyond
    year 9000) has no plain index scan: with bitmaps off every index is a full scan with a
    filter, and which one the planner picks follows the table's statistics (so the test
    order), hence ``bitmaps=True`` for it."""
    with connection.cursor() as cursor:
        # Statistics of this test's rows, not of whatever ran before it (random order).
        cursor.execute(f"ANALYZE {qs.model._meta.db_table}")
        cursor.execute("SET LOCAL enable_seqscan = off")
        if not bitmaps:
            cursor.execute("SET LOCAL enable_bitmapscan = off")
    return qs.explain()


@pytest.mark.django_db
def test_the_lookups_of_the_dropped_indexes_still_use_an_index():
    if connection.vendor != "postgresql":
        pytest.skip("plan shapes checked on PostgreSQL")
    from django.contrib.auth import get_user_model

    from .factories import ScheduleFactory

    row = ScheduleFactory()
    # A table of some size, none of it leased or owned: a partial index is then much
    # cheaper than a full scan of another one (on a handful of rows every index costs the
    # same, and the planner's pick follows nothing this test controls).
    Schedule.objects.bulk_create(
        Schedule(name=f"idle-{i}", callback="tests.noop", kind="interval", interval_seconds=60)
        for i in range(2000)
    )
    user = get_user_model().objects.create(username="owner-of-nothing")
    now = T0
    assert "dds_sched_lease_idx" in _plan(Schedule.objects.lease_expired(now), bitmaps=True)
    assert "dds_sched_lease_idx" in _plan(Schedule.objects.leased().order_by("lease_expires_at"))
    assert "dds_sched_owner_idx" in _plan(Schedule.objects.filter(owner__in=[user.pk]))
    for model, index in ((RunAttempt, "dds_attempt"), (RunReceipt, "dds_receipt")):
        plan = _plan(model.objects.filter(schedule=row))
        assert index in plan and "Seq Scan" not in plan, plan


@pytest.mark.django_db(transaction=True)
def test_0012_both_ways_keeps_rows_guards_triggers_and_the_claim_index():
    from django.contrib.auth import get_user_model

    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes(APP)
    user = get_user_model().objects.create(username="owner-0012")
    try:
        node = (APP, "0011_schedule_kind_index")
        before = _cron_schedule_at(node, "before-0012", owner_id=user.pk)
        assert "dds_sched_lease_idx" in _indexes(Schedule)
    finally:
        _migrate(leaves)
    assert guards.installed(connection)
    row = Schedule.objects.get(pk=before.pk)
    assert row.owner_id == user.pk
    indexes = _indexes(Schedule)
    assert {"dds_sched_claim_idx", "dds_sched_lease_idx", "dds_sched_owner_idx"} <= set(indexes)
    # The edit trigger is back: a definition changed behind save() becomes due now.
    assert _edit_trigger_works(Schedule, row.pk)
    # Deleting the owner still sets the foreign key to NULL (SET_NULL, through its index).
    user.delete()
    row.refresh_from_db()
    assert row.owner_id is None
