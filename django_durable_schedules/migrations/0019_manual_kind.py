"""Manual-only schedules: the kind ``manual`` (no spec: never due by itself, runs only when
triggered), in the kind's choices and its check constraint ``dds_sched_kind_valid``.

On SQLite, changing a CHECK constraint rebuilds the table, which drops its triggers and the
claim index: they are installed again at the end (idempotent, see db/rebuilds.py).
"""

from django.db import migrations, models

# A table rebuild on SQLite drops the triggers and the claim index: installed again.
from django_durable_schedules.db.rebuilds import reinstall as install

KINDS = ["interval", "cron", "once", "rrule", "manual"]


class Migration(migrations.Migration):
    dependencies = [
        ("durable_schedules", "0018_operator_control"),
    ]

    operations = [
        # Unapplying rebuilds the table again (SQLite): re-install the triggers last then too.
        migrations.RunPython(migrations.RunPython.noop, install, elidable=False),
        migrations.RemoveConstraint(
            model_name="schedule",
            name="dds_sched_kind_valid",
        ),
        migrations.AlterField(
            model_name="schedule",
            name="kind",
            field=models.CharField(
                choices=[(kind, kind) for kind in KINDS],
                default="interval",
                max_length=16,
            ),
        ),
        migrations.AddConstraint(
            model_name="schedule",
            constraint=models.CheckConstraint(
                condition=models.Q(("kind__in", KINDS)),
                name="dds_sched_kind_valid",
            ),
        ),
        # Last: on SQLite a table rebuild would drop triggers installed before it.
        migrations.RunPython(install, migrations.RunPython.noop, elidable=False),
    ]
