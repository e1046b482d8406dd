"""The previous run (issue #30, item 2): ``Schedule.previous_occurrence``,
``previous_scheduled_for``, ``previous_finished_at`` and ``previous_result``, the last
successful run by nominal instant, written by the completion's update of the row and read by
the claim's (``RunContext.previous``). Rows that ran before keep None until their next success.

Nullable columns without a default: an ``ADD COLUMN`` everywhere. The triggers are installed
again at the end all the same, as 0028 does, in case a backend rebuilds the table (SQLite).
"""

from django.db import migrations, models

# A table rebuild on SQLite drops the triggers and the claim index: installed again.
from django_durable_schedules.db.rebuilds import reinstall as install


class Migration(migrations.Migration):
    dependencies = [
        ("durable_schedules", "0029_business_days"),
    ]

    operations = [
        # Unapplying drops the columns (SQLite: a table rebuild): re-install the triggers last.
        migrations.RunPython(migrations.RunPython.noop, install, elidable=False),
        migrations.AddField(
            model_name="schedule",
            name="previous_occurrence",
            field=models.PositiveIntegerField(
                blank=True,
                editable=False,
                help_text="The last successful occurrence (the latest nominal instant that "
                "succeeded).",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="schedule",
            name="previous_scheduled_for",
            field=models.DateTimeField(
                blank=True, editable=False, help_text="Its nominal instant.", null=True
            ),
        ),
        migrations.AddField(
            model_name="schedule",
            name="previous_finished_at",
            field=models.DateTimeField(
                blank=True, editable=False, help_text="When it finished.", null=True
            ),
        ),
        migrations.AddField(
            model_name="schedule",
            name="previous_result",
            field=models.JSONField(
                blank=True,
                editable=False,
                help_text="Its result, bounded as its receipt stores it (RESULT_MAX_BYTES).",
                null=True,
            ),
        ),
        # Last: on SQLite a table rebuild would drop triggers installed before it.
        migrations.RunPython(install, migrations.RunPython.noop, elidable=False),
    ]
