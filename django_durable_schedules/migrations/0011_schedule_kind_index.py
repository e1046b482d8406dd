"""An index behind the schedule list's ``kind`` filter: ``(kind, name)``, so that a page of
a rare kind (the few ``rrule`` schedules among a million interval ones) reads the rows it
shows in name order instead of the whole table (docs/scale.md). On a busy PostgreSQL
database build it beforehand with ``CREATE INDEX CONCURRENTLY`` (the same name and
columns) and mark this migration applied with ``migrate durable_schedules 0011 --fake``
(docs/upgrading.md).
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("durable_schedules", "0010_exclusion_calendars"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="schedule",
            index=models.Index(fields=["kind", "name"], name="dds_sched_kind_idx"),
        ),
    ]
