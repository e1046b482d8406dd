"""``ExclusionCalendar.shared``: a calendar open to owner-scoped API users (they may read
it and name it on their own schedules). Existing calendars are not shared (staff only, as
the API's ``calendars/`` was). A column on the calendar table only: the schedule table,
its guards and its edit triggers are untouched on every backend."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("durable_schedules", "0012_fewer_index_entries_per_run"),
    ]

    operations = [
        migrations.AddField(
            model_name="exclusioncalendar",
            name="shared",
            field=models.BooleanField(
                default=False,
                help_text="Open to owner-scoped API users: they may read it (dates and "
                "reasons) and name it on their own schedules. Off: only full-access (staff) "
                "users see it.",
            ),
        ),
    ]
