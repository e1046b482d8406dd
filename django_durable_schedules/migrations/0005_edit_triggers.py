"""Edits behind ``save()`` take effect like the state machine's own (db/edits.py): a trigger
on the schedule table re-plans a definition changed by ``QuerySet.update()`` or raw SQL at
the next claim, clears the next run of a row paused that way and re-plans one resumed that
way from now. Also (SQLite) the append-only guards now refuse an INSERT that would replace
an existing attempt, receipt or event (``INSERT OR REPLACE``): installed again here.
"""

from django.db import migrations, models


def install(apps, schema_editor):
    from django_durable_schedules.db import edits, guards

    guards.install(schema_editor.connection)
    edits.install(schema_editor.connection)


def uninstall(apps, schema_editor):
    from django_durable_schedules.db import edits

    edits.uninstall(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [
        ("durable_schedules", "0004_claim_index"),
    ]

    operations = [
        migrations.AlterField(
            model_name="schedule",
            name="timeout_seconds",
            field=models.FloatField(
                blank=True,
                help_text="Longest run (seconds): the callback runs in a child process that is "
                "killed at the deadline (receipt failed, Timeout). Blank = no limit.",
                null=True,
            ),
        ),
        # Last: on SQLite a table rebuild would drop triggers installed before it.
        migrations.RunPython(install, uninstall, elidable=False),
    ]
