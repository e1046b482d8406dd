"""A concurrency group's run state (``full_until``, ``rate_until``) is an instant every
backend reads back (issue #28, totality): a CHECK constraint refuses PostgreSQL's
``infinity``, SQLite text and years outside ``[1000, 9000]``, whatever writes the row.

The run state is a cache the next claim recomputes from the live leases and ``starts``, so
the values already stored are cleared first (one statement, no row read): no row that
would fail the constraint is left, and no limit is lifted (the next claim counts the
group's live leases under its lock).
"""

import datetime

from django.db import migrations, models

FLOOR = datetime.datetime(1000, 1, 1, 0, 0, tzinfo=datetime.UTC)
CEILING = datetime.datetime(9000, 1, 1, 0, 0, tzinfo=datetime.UTC)


def clear_run_state(apps, schema_editor):
    group = apps.get_model("durable_schedules", "ConcurrencyGroup")
    group.objects.using(schema_editor.connection.alias).update(full_until=None, rate_until=None)


class Migration(migrations.Migration):
    dependencies = [
        ("durable_schedules", "0023_misfire_policy_all"),
    ]

    operations = [
        migrations.RunPython(clear_run_state, migrations.RunPython.noop, elidable=False),
        migrations.AddConstraint(
            model_name="concurrencygroup",
            constraint=models.CheckConstraint(
                condition=models.Q(("full_until__isnull", True))
                | models.Q(("full_until__gte", FLOOR), ("full_until__lte", CEILING)),
                name="dds_group_full_until_readable",
            ),
        ),
        migrations.AddConstraint(
            model_name="concurrencygroup",
            constraint=models.CheckConstraint(
                condition=models.Q(("rate_until__isnull", True))
                | models.Q(("rate_until__gte", FLOOR), ("rate_until__lte", CEILING)),
                name="dds_group_rate_until_readable",
            ),
        ),
    ]
