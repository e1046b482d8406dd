"""Receipt status ``enqueued``: the run handed its task to an execution engine
(django.tasks, Celery); like ``succeeded`` it finishes the occurrence. The success key
check also refuses a success whose ``succeeded_occurrence`` is NULL (a CHECK passes on NULL).

On SQLite, changing a CHECK constraint rebuilds the table, and SQLite drops a table's
triggers with it: the append-only guards are installed again at the end (idempotent on
every backend, see db/guards.py).
"""

from django.db import migrations, models


def install_guards(apps, schema_editor):
    from django_durable_schedules.db import guards

    guards.install(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [
        ("durable_schedules", "0002_append_only_guards"),
    ]

    operations = [
        # Unapplying rebuilds the table again (SQLite): re-install the guards last then too.
        migrations.RunPython(migrations.RunPython.noop, install_guards, elidable=False),
        migrations.RemoveConstraint(
            model_name="runreceipt",
            name="dds_receipt_status_valid",
        ),
        migrations.RemoveConstraint(
            model_name="runreceipt",
            name="dds_receipt_success_key",
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
                    ("cancelled", "cancelled"),
                    ("missed", "missed"),
                ],
                max_length=16,
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
                            "cancelled",
                            "missed",
                        ],
                    )
                ),
                name="dds_receipt_status_valid",
            ),
        ),
        migrations.AddConstraint(
            model_name="runreceipt",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(
                        ("status__in", ("succeeded", "enqueued")),
                        ("succeeded_occurrence", models.F("occurrence")),
                        ("succeeded_occurrence__isnull", False),
                    ),
                    models.Q(
                        models.Q(("status__in", ("succeeded", "enqueued")), _negated=True),
                        ("succeeded_occurrence__isnull", True),
                    ),
                    _connector="OR",
                ),
                name="dds_receipt_success_key",
            ),
        ),
        migrations.RunPython(install_guards, migrations.RunPython.noop, elidable=False),
    ]
