"""The schedules with a deadline, indexed (issue #32, health at 10 M): the late count of
the health snapshot and the deadline sweep read only rows with ``deadline_seconds``, and
read the whole table without it (427 ms at 1 M schedules with none: bench/big_tables.py).
Partial: a row without a deadline writes no entry; MariaDB/MySQL build no partial index
(check models.W037)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("durable_schedules", "0030_previous_success"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="schedule",
            index=models.Index(
                condition=models.Q(("deadline_seconds__isnull", False)),
                fields=["status"],
                name="dds_sched_deadline_idx",
            ),
        ),
    ]
