"""Fewer index entries per run (issue #14, goal 2): every claim and every completion
rewrites the schedule's row (no column of it is HOT-updatable: the claim index reads the
lease), so each index on the table takes a new entry per claim and per completion unless
it is partial and the new row is outside it; each attempt and receipt takes one entry in
every index of its table.

* ``RunAttempt.schedule`` and ``RunReceipt.schedule`` lose their single-column indexes:
  ``dds_attempt_sched_claimed_idx`` / the per-occurrence unique constraint and
  ``dds_receipt_sched_idx`` / the one-success constraint start with the same column and
  serve every lookup by schedule (one entry less per attempt and per receipt).
* ``dds_sched_lease_idx`` holds leased rows only (``lease_expires_at IS NOT NULL``): the
  completion, which clears the lease, writes no entry in it. Lease recovery
  (``lease_expires_at <= now``) and the "running" filter imply the condition.
* ``Schedule.owner``'s index becomes ``dds_sched_owner_idx``, partial on ``owner_id IS
  NOT NULL``: a claim or a completion of a row without an owner writes no entry in it;
  deleting a user (``owner_id IN (...)``) and the owner filter still use it.

MariaDB/MySQL have no partial indexes: Django builds these two as plain ones there (the
owner's is created before the field's own index is dropped, so the foreign key always has
an index). The lease index is left as it is on MariaDB/MySQL (dropping and rebuilding it
would change nothing). On SQLite, altering a field rebuilds the table, which drops its
triggers and 0004's claim index: they are installed again at the end, as in 0010.

On a large PostgreSQL table, building the two partial indexes takes a write lock for the
time of one scan of the schedule table (about a second per million rows on a small
machine); see docs/upgrading.md.
"""

from django.conf import settings
from django.db import migrations, models
from django.db.models import Q

import django.db.models.deletion

# A table rebuild on SQLite drops the triggers and the claim index: installed again.
from django_durable_schedules.db.rebuilds import reinstall as install


LEASE_INDEX = models.Index(
    fields=["lease_expires_at"],
    condition=Q(lease_expires_at__isnull=False),
    name="dds_sched_lease_idx",
)
#: ... and the index it replaces (0001's).
PLAIN_LEASE_INDEX = models.Index(fields=["lease_expires_at"], name="dds_sched_lease_idx")


def _lease_index(apps, schema_editor, old, new):
    if schema_editor.connection.vendor == "mysql":  # no partial indexes: nothing changes
        return
    model = apps.get_model("durable_schedules", "Schedule")
    schema_editor.remove_index(model, old)
    schema_editor.add_index(model, new)


def partial_lease_index(apps, schema_editor):
    _lease_index(apps, schema_editor, PLAIN_LEASE_INDEX, LEASE_INDEX)


def plain_lease_index(apps, schema_editor):
    _lease_index(apps, schema_editor, LEASE_INDEX, PLAIN_LEASE_INDEX)


class Migration(migrations.Migration):
    dependencies = [
        ("durable_schedules", "0011_schedule_kind_index"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        # Unapplying rebuilds the tables again (SQLite): re-install the triggers last then too.
        migrations.RunPython(migrations.RunPython.noop, install, elidable=False),
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunPython(partial_lease_index, plain_lease_index, elidable=False)
            ],
            state_operations=[
                migrations.RemoveIndex(model_name="schedule", name="dds_sched_lease_idx"),
                migrations.AddIndex(model_name="schedule", index=LEASE_INDEX),
            ],
        ),
        migrations.AddIndex(
            model_name="schedule",
            index=models.Index(
                condition=Q(owner__isnull=False), fields=["owner"], name="dds_sched_owner_idx"
            ),
        ),
        migrations.AlterField(
            model_name="schedule",
            name="owner",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="durable_schedules",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AlterField(
            model_name="runattempt",
            name="schedule",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="attempts",
                to="durable_schedules.schedule",
            ),
        ),
        migrations.AlterField(
            model_name="runreceipt",
            name="schedule",
            field=models.ForeignKey(
                db_constraint=False,
                db_index=False,
                on_delete=django.db.models.deletion.DO_NOTHING,
                related_name="receipts",
                to="durable_schedules.schedule",
            ),
        ),
        migrations.RunPython(install, migrations.RunPython.noop, elidable=False),
    ]
