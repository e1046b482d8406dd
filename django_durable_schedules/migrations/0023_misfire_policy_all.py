"""``misfire_policy`` ``all`` (issue #28): every missed slot runs, oldest first, at most
``CATCH_UP_MAX`` of them (the older ones counted missed). Only the field's choices change:
no CHECK constraint lists the misfire policies.

A table rebuild on SQLite drops the triggers and migration 0004's index: installed again
last (db/rebuilds.py).
"""

from django.db import migrations, models

from django_durable_schedules.db.rebuilds import reinstall as install


class Migration(migrations.Migration):
    dependencies = [
        ("durable_schedules", "0022_concurrency_groups"),
    ]

    operations = [
        migrations.RunPython(migrations.RunPython.noop, install, elidable=False),
        migrations.AlterField(
            model_name="schedule",
            name="misfire_policy",
            field=models.CharField(
                choices=[
                    ("coalesce", "coalesce missed slots into one late run"),
                    ("skip", "skip missed slots"),
                    ("all", "run every missed slot, oldest first (at most CATCH_UP_MAX)"),
                ],
                default="coalesce",
                max_length=16,
            ),
        ),
        migrations.RunPython(install, migrations.RunPython.noop, elidable=False),
    ]
