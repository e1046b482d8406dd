"""Overlap policy ``buffer_one`` (issue #15): ``Schedule.overlap_policy`` (skip |
buffer_one, default skip) and ``Schedule.buffered_for`` (the slot buffered while a run ran),
and ``RunAttempt.origin`` (why an attempt was claimed: scheduled, triggered, buffered,
backfill; existing attempts read ``scheduled``).

On SQLite, adding a NOT NULL column rebuilds the table, and SQLite drops a table's triggers
(and 0004's claim index, which Django's migration state does not know) with it: the
append-only guards, the edit triggers and the index are installed again at the end
(idempotent on every backend, see db/guards.py and db/edits.py).
"""

from django.db import migrations, models


def install(apps, schema_editor):
    from django_durable_schedules.db import edits, guards

    guards.install(schema_editor.connection)
    edits.install(schema_editor.connection)
    if schema_editor.connection.vendor == "sqlite":  # the only backend that rebuilt the table
        schema_editor.execute(
            'CREATE INDEX IF NOT EXISTS "dds_sched_claim_idx" ON "durable_schedules_schedule" '
            "(\"next_run_at\") WHERE lease_token IS NULL AND status IN ('active', 'paused')"
        )


class Migration(migrations.Migration):
    dependencies = [
        ("durable_schedules", "0006_database_clock_created_at"),
    ]

    operations = [
        # Unapplying rebuilds the tables again (SQLite): re-install the triggers last then too.
        migrations.RunPython(migrations.RunPython.noop, install, elidable=False),
        migrations.AddField(
            model_name="runattempt",
            name="origin",
            field=models.CharField(
                choices=[
                    ("scheduled", "scheduled"),
                    ("triggered", "triggered"),
                    ("buffered", "buffered (overlap_policy buffer_one)"),
                    ("backfill", "backfill"),
                ],
                default="scheduled",
                help_text="Why it was claimed: its slot came due (scheduled), a trigger, a slot buffered while the previous run ran (overlap_policy buffer_one), or a backfill.",
                max_length=16,
            ),
        ),
        migrations.AddField(
            model_name="schedule",
            name="buffered_for",
            field=models.DateTimeField(
                blank=True,
                editable=False,
                help_text="A slot buffered while a run ran.",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="schedule",
            name="overlap_policy",
            field=models.CharField(
                choices=[
                    ("skip", "skip slots that come due while it runs"),
                    ("buffer_one", "run one of them right after the run, skip the others"),
                ],
                default="skip",
                help_text="Slots that come due while a run is still running: 'skip' counts them and waits for the next slot; 'buffer_one' runs the first of them right after the run (as its own occurrence) and counts the others as skipped.",
                max_length=16,
            ),
        ),
        # Last: on SQLite a table rebuild would drop triggers installed before it.
        migrations.RunPython(install, migrations.RunPython.noop, elidable=False),
    ]
