"""The help text of ``Schedule.rrule_business_days`` names FREQ=YEARLY (with BYMONTH) beside
FREQ=MONTHLY: issue #30 made yearly rules count over business days too. Only the help text
changes (no SQL)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("durable_schedules", "0033_chains"),
    ]

    operations = [
        migrations.AlterField(
            model_name="schedule",
            name="rrule_business_days",
            field=models.BooleanField(
                default=False,
                help_text="Count the rule's BYMONTHDAY and BYSETPOS over business days only (FREQ=MONTHLY, or FREQ=YEARLY with BYMONTH): 'FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1' is then the last business day of the month, 'FREQ=YEARLY;BYMONTH=12;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1' that of December, its calendars' holidays removed before the pick.",
            ),
        ),
    ]
