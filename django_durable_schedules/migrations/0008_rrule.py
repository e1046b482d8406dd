"""Calendar-rule schedules: the kind ``rrule`` and its field ``rrule`` (an RFC 5545
recurrence rule evaluated in the schedule's zone), a rule required for that kind.

The edit triggers (db/edits.py) watch the definition columns, now ``rrule`` too: they are
installed again at the end, with the append-only guards, and (SQLite, whose table this
rebuilds) 0004's claim index, as 0006 does.
"""

from django.db import migrations, models

import django_durable_schedules.models

# A table rebuild on SQLite drops the triggers and the claim index: installed again.
from django_durable_schedules.db.rebuilds import reinstall as install


def uninstall_edits(apps, schema_editor):
    """Before the column is dropped (unapplying): PostgreSQL refuses to drop a column a
    trigger names. The first operation installs them again, without the column."""
    from django_durable_schedules.db import edits

    edits.uninstall(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [
        ("durable_schedules", "0007_big_table_indexes"),
    ]

    operations = [
        # Unapplying rebuilds the table again (SQLite) and drops the column: re-install the
        # triggers last then too (without the column).
        migrations.RunPython(migrations.RunPython.noop, install, elidable=False),
        migrations.RemoveConstraint(
            model_name="schedule",
            name="dds_sched_kind_valid",
        ),
        migrations.AddField(
            model_name="schedule",
            name="rrule",
            field=models.CharField(
                blank=True,
                default="",
                help_text="An RFC 5545 recurrence rule in the schedule's zone: "
                "'FREQ=WEEKLY;INTERVAL=2;BYDAY=TU;BYHOUR=9;BYMINUTE=0' (every other Tuesday at "
                "09:00), 'FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1' (the last weekday of "
                "the month). Times it leaves out come from start_at, else midnight of the "
                "creation day. No COUNT (use max_runs), DTSTART or TZID.",
                max_length=500,
            ),
        ),
        migrations.AlterField(
            model_name="schedule",
            name="kind",
            field=models.CharField(
                choices=[
                    ("interval", "interval"),
                    ("cron", "cron"),
                    ("once", "once"),
                    ("rrule", "rrule"),
                ],
                default="interval",
                max_length=16,
            ),
        ),
        migrations.AlterField(
            model_name="schedule",
            name="timezone",
            field=models.CharField(
                blank=True,
                default=django_durable_schedules.models._default_timezone,
                help_text="IANA time zone the cron, the rule and the instants are read in: "
                "'Europe/Paris', 'America/New_York', 'Asia/Tokyo', 'UTC' (any case). Blank: "
                "the TIME_ZONE setting.",
                max_length=64,
            ),
        ),
        migrations.AddConstraint(
            model_name="schedule",
            constraint=models.CheckConstraint(
                condition=models.Q(("kind__in", ["interval", "cron", "once", "rrule"])),
                name="dds_sched_kind_valid",
            ),
        ),
        migrations.AddConstraint(
            model_name="schedule",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("kind", "rrule"), _negated=True),
                    models.Q(("rrule", ""), _negated=True),
                    _connector="OR",
                ),
                name="dds_sched_rrule_needs_rule",
            ),
        ),
        # Last: on SQLite a table rebuild would drop triggers installed before it.
        migrations.RunPython(install, uninstall_edits, elidable=False),
    ]
