"""Flow control (issue #28): ``Schedule.pool`` (the worker pool that claims it, default
``"default"``, never empty: ``dds_sched_pool_named``), ``Schedule.priority`` (higher
first among due rows), ``WorkerHeartbeat.pools`` (what each worker claims, for health),
and the claim's index, ``dds_sched_pool_claim_idx``: ``(pool, priority, next_run_at)``
over the claimable rows (partial where the database has partial indexes, as migration
0004's).

On SQLite adding a NOT NULL column and a CHECK constraint rebuilds the table, which drops
its triggers and migration 0004's index: they are installed again last (db/rebuilds.py).
"""

import django.core.validators
from django.db import migrations, models

from django_durable_schedules.db.rebuilds import reinstall as install


class Migration(migrations.Migration):
    dependencies = [
        ("durable_schedules", "0020_blackout_deferred"),
    ]

    operations = [
        migrations.RunPython(migrations.RunPython.noop, install, elidable=False),
        migrations.AddField(
            model_name="schedule",
            name="pool",
            field=models.CharField(
                default="default",
                help_text="The worker pool that runs it: only workers started with 'run_scheduler --pool NAME' for this name claim it (a worker without --pool claims the pool 'default').",
                max_length=64,
                validators=[
                    django.core.validators.RegexValidator(
                        "^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}\\Z",
                        "1-64 of letters, digits, '_', '.', ':' or '-', starting with a letter or digit.",
                    )
                ],
            ),
        ),
        migrations.AddField(
            model_name="schedule",
            name="priority",
            field=models.SmallIntegerField(
                default=0,
                help_text="Among schedules due at once, a claim takes higher priorities first, then the earliest due (-32768 to 32767; default 0).",
                validators=[
                    django.core.validators.MinValueValidator(-32768),
                    django.core.validators.MaxValueValidator(32767),
                ],
            ),
        ),
        migrations.AddField(
            model_name="workerheartbeat",
            name="pools",
            field=models.CharField(
                blank=True,
                default="default",
                help_text="The pools it claims (run_scheduler --pool), comma-separated.",
                max_length=1000,
            ),
        ),
        migrations.AddIndex(
            model_name="schedule",
            index=models.Index(
                condition=models.Q(
                    ("lease_token__isnull", True), ("status__in", ["active", "paused"])
                ),
                fields=["pool", "priority", "next_run_at"],
                name="dds_sched_pool_claim_idx",
            ),
        ),
        migrations.AddConstraint(
            model_name="schedule",
            constraint=models.CheckConstraint(
                condition=models.Q(("pool", ""), _negated=True), name="dds_sched_pool_named"
            ),
        ),
        migrations.RunPython(install, migrations.RunPython.noop, elidable=False),
    ]
