"""Health at 10 M (issue #32 goal 3): the health snapshot counts each thing by an index
(health_counts.py). Two were missing: the total of missed slots (``missed_count`` summed,
from the rows that missed one only: ``dds_sched_missed_idx``) and the paused, not degraded
schedules in the order health lists them (``paused_until`` first, then ``name``:
``dds_sched_paused_idx``; a worker's resume of ended pauses reads it too). Without them
each read the whole schedules table. Partial: a row that never missed a slot or is not
paused writes no entry; MariaDB/MySQL build them plain (check models.W037)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("durable_schedules", "0031_deadline_index"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="schedule",
            index=models.Index(
                condition=models.Q(("missed_count__gt", 0)),
                fields=["missed_count"],
                name="dds_sched_missed_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="schedule",
            index=models.Index(
                condition=models.Q(("degraded_reason", ""), ("status", "paused")),
                fields=["paused_until", "name"],
                name="dds_sched_paused_idx",
            ),
        ),
    ]
