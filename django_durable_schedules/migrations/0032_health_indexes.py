"""Health at 10 M (issue #32 goal 3): the health snapshot counts each thing by an index
(health_counts.py). Missing were: the total of missed slots (``missed_count`` summed,
from the rows that missed one only: ``dds_sched_missed_idx``); the paused, not degraded
schedules in the order health lists them (``paused_until`` first, then ``name``:
``dds_sched_paused_idx``; a worker's resume of ended pauses reads it too); the failing
ones with their status, most failures first (``dds_sched_failing_rank_idx``: counted
without the table, and the admin health page's list in its order). Without them each read
the whole schedules table, or every failing row's page. Partial: a row that never missed a
slot, is not paused or does not fail writes no entry; MariaDB/MySQL build them plain
(check models.W037)."""

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
        migrations.AddIndex(
            model_name="schedule",
            index=models.Index(
                condition=models.Q(("failure_count__gt", 0)),
                fields=["-failure_count", "name", "status"],
                name="dds_sched_failing_rank_idx",
            ),
        ),
    ]
