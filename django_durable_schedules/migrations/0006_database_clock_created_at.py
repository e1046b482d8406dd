"""``Schedule.created_at`` has no host-clock default any more: ``save()`` and
``bulk_create()`` set it from the database clock (the interval grid's origin must be the
same clock that decides what is due). The receipt status ``cancelled``, never written, is
no longer allowed. ``max_attempts`` and ``max_runs`` validate at least 1, and ``name`` a
full match, and ``cron`` and ``timezone`` have help texts with examples (no SQL).

On SQLite, changing a CHECK constraint or a column rebuilds the table, and SQLite drops a
table's triggers with it: the append-only guards and the edit triggers are installed again
at the end (idempotent on every backend, see db/guards.py and db/edits.py), and so is
0004's claim index, which Django's migration state does not know.
"""

import re

import django.core.validators

import django_durable_schedules.models
from django.db import migrations, models

# A table rebuild on SQLite drops the triggers and the claim index: installed again.
from django_durable_schedules.db.rebuilds import reinstall as install


class Migration(migrations.Migration):
    dependencies = [
        ("durable_schedules", "0005_edit_triggers"),
    ]

    operations = [
        # Unapplying rebuilds the tables again (SQLite): re-install the triggers last then too.
        migrations.RunPython(migrations.RunPython.noop, install, elidable=False),
        migrations.RemoveConstraint(
            model_name="runreceipt",
            name="dds_receipt_status_valid",
        ),
        migrations.AlterField(
            model_name="runreceipt",
            name="status",
            field=models.CharField(
                choices=[
                    ("succeeded", "succeeded"),
                    ("enqueued", "enqueued"),
                    ("skipped", "skipped"),
                    ("failed", "failed"),
                    ("degraded", "degraded"),
                    ("lease_expired", "lease expired"),
                    ("lease_lost", "lease lost"),
                    ("released", "released"),
                    ("missed", "missed"),
                ],
                max_length=16,
            ),
        ),
        migrations.AlterField(
            model_name="schedule",
            name="created_at",
            field=models.DateTimeField(
                editable=False,
                help_text="When the row was created, by the database clock (the interval grid's origin when start_at is blank). Set by save() and bulk_create() when not given.",
            ),
        ),
        migrations.AddConstraint(
            model_name="runreceipt",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    (
                        "status__in",
                        [
                            "succeeded",
                            "enqueued",
                            "skipped",
                            "failed",
                            "degraded",
                            "lease_expired",
                            "lease_lost",
                            "released",
                            "missed",
                        ],
                    )
                ),
                name="dds_receipt_status_valid",
            ),
        ),
        # Validators only (no SQL): the admin refuses what the API refuses, and a name
        # with a trailing newline is refused (a full match, not "$").
        migrations.AlterField(
            model_name="schedule",
            name="max_attempts",
            field=models.PositiveIntegerField(
                blank=True,
                help_text="Attempts per occurrence; blank = the MAX_ATTEMPTS setting.",
                null=True,
                validators=[django.core.validators.MinValueValidator(1)],
            ),
        ),
        migrations.AlterField(
            model_name="schedule",
            name="max_runs",
            field=models.PositiveIntegerField(
                blank=True, null=True, validators=[django.core.validators.MinValueValidator(1)]
            ),
        ),
        migrations.AlterField(
            model_name="schedule",
            name="name",
            field=models.CharField(
                max_length=128,
                validators=[
                    django.core.validators.RegexValidator(
                        re.compile("\\A[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}\\Z"),
                        "1-128 of letters, digits, '_', '.', ':' or '-', starting with a letter "
                        "or digit.",
                    )
                ],
            ),
        ),
        migrations.AlterField(
            model_name="schedule",
            name="cron",
            field=models.CharField(
                blank=True,
                default="",
                help_text="Five fields, minute hour day-of-month month day-of-week, in the "
                "schedule's zone: '30 2 * * *' (02:30 daily), '0 9 * * 1-5' (09:00 on weekdays), "
                "'*/15 * * * *' (every 15 minutes), '0 0 1 * *' (monthly); or @daily, @hourly, "
                "@weekly, @monthly.",
                max_length=200,
            ),
        ),
        migrations.AlterField(
            model_name="schedule",
            name="timezone",
            field=models.CharField(
                blank=True,
                default=django_durable_schedules.models._default_timezone,
                help_text="IANA time zone the cron and the instants are read in: "
                "'Europe/Paris', 'America/New_York', 'Asia/Tokyo', 'UTC' (any case). Blank: "
                "the TIME_ZONE setting.",
                max_length=64,
            ),
        ),
        # Last: on SQLite a table rebuild would drop triggers installed before it.
        migrations.RunPython(install, migrations.RunPython.noop, elidable=False),
    ]
