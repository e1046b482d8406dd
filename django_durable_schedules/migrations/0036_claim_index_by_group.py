"""The claim index by concurrency group (issue #28): ``dds_sched_pool_claim_idx`` becomes
``(pool, priority, concurrency_group, next_run_at)`` over the claimable rows, so that a
claim reads the rows of no group, and those of each group with room, as ranges of their
own (``state/claim_reads.py``) and never walks the backlog of a group at its limit. The
same rows as before, one index replaced by another: a claim or a completion writes no more
index entries than before. Rebuilding it reads the schedule table once.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("durable_schedules", "0035_parallel_occurrences"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="schedule", name="dds_sched_pool_claim_idx"),
        migrations.AddIndex(
            model_name="schedule",
            index=models.Index(
                condition=models.Q(lease_token__isnull=True, status__in=["active", "paused"]),
                fields=["pool", "priority", "concurrency_group", "next_run_at"],
                name="dds_sched_pool_claim_idx",
            ),
        ),
    ]
