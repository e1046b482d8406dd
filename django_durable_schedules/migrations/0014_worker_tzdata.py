"""The tzdata release each worker reads (``WorkerHeartbeat.tzdata_version``), so that
health can warn about a fleet whose hosts plan the same zones under different rules
(docs/time.md, "Time zone database updates"). A plain column with a default: no table
rebuild, reversible.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("durable_schedules", "0013_calendar_visibility"),
    ]

    operations = [
        migrations.AddField(
            model_name="workerheartbeat",
            name="tzdata_version",
            field=models.CharField(
                blank=True,
                default="",
                help_text="The tzdata release the worker's time zones come from.",
                max_length=40,
            ),
        ),
    ]
