"""Business days (issue #30, item 3): ``ExclusionCalendar.weekend_days``,
``Schedule.exclusion_policy``, ``Schedule.rrule_business_days`` and
``RunAttempt.nominal_for`` (the nominal slot of a run that moved).

The edit triggers (db/edits.py) watch the definition columns, now the two schedule fields
too: they are installed again at the end, with the append-only guards, the audit triggers
and (SQLite, whose table this rebuilds) 0004's claim index, as 0028 does.
"""

from django.db import migrations, models

import django_durable_schedules.models.calendars

# A table rebuild on SQLite drops the triggers and the claim index: installed again.
from django_durable_schedules.db.rebuilds import reinstall as install


def uninstall_edits(apps, schema_editor):
    """Before the columns are dropped (unapplying): PostgreSQL refuses to drop a column a
    trigger names. The first operation installs them again, without the columns."""
    from django_durable_schedules.db import edits

    edits.uninstall(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [
        ("durable_schedules", "0028_extra_specs"),
    ]

    operations = [
        migrations.RunPython(migrations.RunPython.noop, install, elidable=False),
        migrations.AddField(
            model_name="exclusioncalendar",
            name="weekend_days",
            field=models.JSONField(
                blank=True,
                default=django_durable_schedules.models.calendars.default_weekend_days,
                help_text="ISO weekday numbers (1 Monday ... 7 Sunday) or names ('saturday', "
                "'sun') of the days that are no business days: [6, 7] (Saturday and Sunday) "
                "unless told; [] for none. They exclude nothing: they say which days a "
                "schedule's exclusion_policy and rrule_business_days count as business days.",
            ),
        ),
        migrations.AddField(
            model_name="schedule",
            name="exclusion_policy",
            field=models.CharField(
                choices=[
                    ("skip", "skip: count the excluded slot, run none"),
                    (
                        "previous_business_day",
                        "previous business day: run it on the nearest business day before, "
                        "same wall time",
                    ),
                    (
                        "next_business_day",
                        "next business day: run it on the nearest business day after, same "
                        "wall time",
                    ),
                ],
                default="skip",
                help_text="A slot whose local date one of its exclusion calendars excludes: "
                "'skip' counts it and runs none; 'previous_business_day' / 'next_business_day' "
                "run it on the nearest business day (not excluded, not a weekend day of its "
                "calendars) before / after it, at the same wall time (cron and rrule "
                "schedules). A moved slot that lands on another slot runs once.",
                max_length=24,
            ),
        ),
        migrations.AddField(
            model_name="schedule",
            name="rrule_business_days",
            field=models.BooleanField(
                default=False,
                help_text="Count the rule's BYMONTHDAY and BYSETPOS over business days only "
                "(FREQ=MONTHLY): 'FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1' is then the "
                "last business day of the month, its calendars' holidays removed before the "
                "pick.",
            ),
        ),
        migrations.AddField(
            model_name="runattempt",
            name="nominal_for",
            field=models.DateTimeField(
                blank=True,
                help_text="The nominal slot of a run that its schedule's exclusion_policy moved "
                "to a business day (scheduled_for is the instant it became due); blank: it did "
                "not move.",
                null=True,
            ),
        ),
        # Last: on SQLite a table rebuild would drop triggers installed before it.
        migrations.RunPython(install, uninstall_edits, elidable=False),
    ]
