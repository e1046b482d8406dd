"""The claim index: due rows in ``next_run_at`` order, bounded by the batch at any size.

``state.claim_due`` asks for ``status IN ('active', 'paused') AND lease_token IS NULL AND
next_run_at <= now ORDER BY next_run_at LIMIT n FOR UPDATE SKIP LOCKED``. The
``(status, next_run_at)`` index cannot give that order for two statuses, so with many rows
due at once PostgreSQL read and sorted every due row (100,000 due: a sequential scan and a
740 ms sort per claim; ``bench/claim_plan.py``). A partial index on ``next_run_at`` holding
only claimable rows is read in order and the scan stops after the batch.

Partial indexes exist on PostgreSQL and SQLite. MySQL/MariaDB have none (Django builds
``Index(condition=...)`` there without its condition and warns, models.W037), so they get
a plain ``next_run_at`` index, which their optimizer uses for ``ORDER BY ... LIMIT``.

Kept out of the model's ``Meta.indexes`` so that MySQL projects get no W037 warning; the
cost is that Django's migration state does not know the index. A later migration that
rebuilds the schedule table on SQLite (``AlterField`` and friends) must re-create it:
``tests/test_migrations.py`` checks that it exists after migrating.
"""

from django.db import migrations

INDEX = "dds_sched_claim_idx"
TABLE = "durable_schedules_schedule"
CONDITION = "lease_token IS NULL AND status IN ('active', 'paused')"


def create_index(apps, schema_editor):
    quote = schema_editor.quote_name
    if schema_editor.connection.vendor == "postgresql":
        # CONCURRENTLY: an existing deployment keeps claiming while the index builds.
        schema_editor.execute(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {quote(INDEX)} ON {quote(TABLE)} "
            f"({quote('next_run_at')}) WHERE {CONDITION}"
        )
    elif schema_editor.connection.features.supports_partial_indexes:
        schema_editor.execute(
            f"CREATE INDEX {quote(INDEX)} ON {quote(TABLE)} ({quote('next_run_at')}) "
            f"WHERE {CONDITION}"
        )
    else:
        schema_editor.execute(
            f"CREATE INDEX {quote(INDEX)} ON {quote(TABLE)} ({quote('next_run_at')})"
        )


def drop_index(apps, schema_editor):
    quote = schema_editor.quote_name
    if schema_editor.connection.vendor == "mysql":
        schema_editor.execute(f"DROP INDEX {quote(INDEX)} ON {quote(TABLE)}")
    else:
        schema_editor.execute(f"DROP INDEX {quote(INDEX)}")


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run inside a transaction
    dependencies = [("durable_schedules", "0003_receipt_enqueued")]

    operations = [migrations.RunPython(create_index, drop_index, atomic=False, elidable=False)]
