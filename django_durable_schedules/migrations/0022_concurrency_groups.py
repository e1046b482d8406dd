"""Concurrency groups (issue #28): the model ``ConcurrencyGroup`` (``max_running``,
``rate``, and the run state a claim keeps on it: ``full_until``, ``rate_until``,
``starts``), ``Schedule.concurrency_group`` (PROTECT: a group named by schedules is not
deleted under them), and ``dds_sched_group_lease_idx``, the leased rows of grouped
schedules, which each claim granting a lease in a group counts.

A table rebuild on SQLite drops the triggers and migration 0004's index: installed again
last (db/rebuilds.py).
"""

import django.core.validators
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

from django_durable_schedules.db.rebuilds import reinstall as install


class Migration(migrations.Migration):
    dependencies = [
        ("durable_schedules", "0021_pools_and_priority"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RunPython(migrations.RunPython.noop, install, elidable=False),
        migrations.CreateModel(
            name="ConcurrencyGroup",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "name",
                    models.CharField(
                        help_text="A short slug: 'partner-api', 'reports'.",
                        max_length=64,
                        unique=True,
                        validators=[
                            django.core.validators.RegexValidator(
                                "^[a-z0-9][a-z0-9_-]{0,63}\\Z",
                                "1-64 of lower-case letters, digits, '_' or '-', starting with a letter or digit (e.g. fr-holidays).",
                            )
                        ],
                    ),
                ),
                ("description", models.CharField(blank=True, default="", max_length=500)),
                (
                    "max_running",
                    models.PositiveIntegerField(
                        blank=True,
                        help_text="The most runs of the group's schedules at once (blank: no cap).",
                        null=True,
                        validators=[django.core.validators.MinValueValidator(1)],
                    ),
                ),
                (
                    "rate",
                    models.CharField(
                        blank=True,
                        default="",
                        help_text="The most starts per second, minute or hour: '2/s', '10/m', '100/h' (blank: no rate limit).",
                        max_length=16,
                    ),
                ),
                ("full_until", models.DateTimeField(blank=True, editable=False, null=True)),
                ("rate_until", models.DateTimeField(blank=True, editable=False, null=True)),
                ("starts", models.JSONField(blank=True, default=list, editable=False)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
            ],
            options={
                "ordering": ["name"],
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(
                            ("max_running__isnull", True), ("max_running__gte", 1), _connector="OR"
                        ),
                        name="dds_group_max_running_positive",
                    ),
                    models.CheckConstraint(
                        condition=models.Q(
                            ("max_running__isnull", False),
                            models.Q(("rate", ""), _negated=True),
                            _connector="OR",
                        ),
                        name="dds_group_has_a_limit",
                    ),
                ],
            },
        ),
        migrations.AddField(
            model_name="schedule",
            name="concurrency_group",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                help_text="A limit shared with other schedules: at most its max_running runs at once and its rate of starts; a slot held back waits, due, and is never lost.",
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="schedules",
                to="durable_schedules.concurrencygroup",
            ),
        ),
        migrations.AddIndex(
            model_name="schedule",
            index=models.Index(
                condition=models.Q(
                    ("concurrency_group__isnull", False), ("lease_token__isnull", False)
                ),
                fields=["concurrency_group"],
                name="dds_sched_group_lease_idx",
            ),
        ),
        migrations.RunPython(install, migrations.RunPython.noop, elidable=False),
    ]
