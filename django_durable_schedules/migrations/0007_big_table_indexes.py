"""Indexes behind the filters of the admin's and the API's lists, so that a filtered page
reads the rows it shows rather than the whole table (docs/scale.md): a schedule's attempts
and one worker's attempts newest first, receipts of one status newest first, and the
degraded and failing schedules by name (partial indexes: healthy rows have no entry, so
claims and completions do not write them; MariaDB/MySQL have none, Django's check
``models.W037`` says so).

``CREATE INDEX`` holds off writes to its table while it builds (about a minute per 10
million receipts on a small machine): on a busy PostgreSQL database, build them beforehand
with ``CREATE INDEX CONCURRENTLY`` (the same names and columns) and mark this migration
applied with ``migrate durable_schedules 0007 --fake`` (docs/upgrading.md).
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("durable_schedules", "0006_database_clock_created_at"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="runattempt",
            index=models.Index(
                fields=["schedule", "claimed_at"], name="dds_attempt_sched_claimed_idx"
            ),
        ),
        migrations.AddIndex(
            model_name="runattempt",
            index=models.Index(fields=["worker", "claimed_at"], name="dds_attempt_worker_idx"),
        ),
        migrations.AddIndex(
            model_name="runreceipt",
            index=models.Index(fields=["status", "finished_at"], name="dds_receipt_status_idx"),
        ),
        migrations.AddIndex(
            model_name="schedule",
            index=models.Index(
                condition=models.Q(("degraded_reason", ""), _negated=True),
                fields=["name"],
                name="dds_sched_degraded_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="schedule",
            index=models.Index(
                condition=models.Q(("failure_count__gt", 0)),
                fields=["name"],
                name="dds_sched_failing_idx",
            ),
        ),
    ]
