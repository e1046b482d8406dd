"""Several specs (issue #30, item 4): ``Schedule.extra_specs``, further cron expressions or
rules a cron or rrule schedule fires on too (the union of the grids).

The edit triggers (db/edits.py) watch the definition columns, now ``extra_specs`` too: they
are installed again at the end, with the append-only guards, the audit triggers and (SQLite,
whose table this rebuilds) 0004's claim index, as 0008 does.
"""

from django.db import migrations, models

# A table rebuild on SQLite drops the triggers and the claim index: installed again.
from django_durable_schedules.db.rebuilds import reinstall as install


def uninstall_edits(apps, schema_editor):
    """Before the column is dropped (unapplying): PostgreSQL refuses to drop a column a
    trigger names. The first operation installs them again, without the column."""
    from django_durable_schedules.db import edits

    edits.uninstall(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [
        ("durable_schedules", "0027_audit_create_delete"),
    ]

    operations = [
        # Unapplying rebuilds the table again (SQLite) and drops the column: re-install the
        # triggers last then too (without the column).
        migrations.RunPython(migrations.RunPython.noop, install, elidable=False),
        migrations.AddField(
            model_name="schedule",
            name="extra_specs",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text="Further specs for a cron or rrule schedule, each a cron expression "
                "or a rule (starting with FREQ= or RRULE:), read in the same zone, window and "
                "exclusion calendars: the schedule fires on the union, once at an instant "
                "several of them share. ['0 9 * * 1-5', "
                "'FREQ=MONTHLY;BYMONTHDAY=1;BYHOUR=9;BYMINUTE=0']; at most 10.",
            ),
        ),
        # Last: on SQLite a table rebuild would drop triggers installed before it.
        migrations.RunPython(install, uninstall_edits, elidable=False),
    ]
