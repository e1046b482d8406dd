"""Admin and API search by a fragment of a schedule's name or callback, case-insensitive
(issue #29, item 5): on PostgreSQL, trigram indexes (``pg_trgm``, GIN) on ``UPPER(name)``
and ``UPPER(callback)``, the expressions Django's ``icontains`` compares, so a fragment
of three characters or more is an index search at a million schedules.

``pg_trgm`` ships with PostgreSQL and is a trusted extension from PostgreSQL 13 (the
database's owner may create it). Where it cannot be created (an older server, a role
without the right) the migration goes on without the indexes and says so: search still
works, by reading the table (docs/admin.md). SQLite and MariaDB have no trigram index:
their fallback is documented there too.

Kept out of ``Meta.indexes``, like 0004's claim index: they exist on PostgreSQL only, and
only where the extension could be created. ``CONCURRENTLY``: an existing deployment keeps
working while they build.
"""

import logging

from django.db import migrations

logger = logging.getLogger("django_durable_schedules.migrations")

TABLE = "durable_schedules_schedule"
INDEXES = {"dds_sched_name_trgm": "name", "dds_sched_callback_trgm": "callback"}


def create_indexes(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "postgresql":
        return
    quote = schema_editor.quote_name
    try:
        schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    except Exception as exc:  # noqa: BLE001 - no extension: search reads the table
        logger.warning(
            "pg_trgm could not be created (%s): schedule search by a fragment reads the "
            "table; create the extension and run migrate again to get its indexes",
            exc,
        )
        return
    for index, column in INDEXES.items():
        schema_editor.execute(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {quote(index)} ON {quote(TABLE)} "
            f"USING gin (UPPER({quote(column)}::text) gin_trgm_ops)"
        )


def drop_indexes(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for index in INDEXES:
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {schema_editor.quote_name(index)}")


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run inside a transaction
    dependencies = [("durable_schedules", "0025_overlap_buffer_all_replace")]

    operations = [
        migrations.RunPython(create_indexes, drop_indexes, atomic=False, elidable=False)
    ]
