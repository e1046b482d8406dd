"""Exclusion calendars (issue #15): the ``ExclusionCalendar`` table (a country's public
holidays from the ``holidays`` package and/or dates of its own), ``ExclusionDate`` (one
local date of a calendar), ``Schedule.exclusion_calendars`` (many to many: a new link
table, which the schedule table's edit triggers do not watch), ``Schedule.excluded_count``
(slots not run because a calendar excluded their date; existing rows read 0),
``Schedule.exclusions_checked_at`` and the audit actions ``excluded`` and ``calendars``.

On SQLite, adding a NOT NULL column rebuilds the table, and SQLite drops a table's triggers
(and 0004's claim index) with it: the append-only guards, the edit triggers and the index
are installed again at the end, as in 0009 (idempotent on every backend).
"""

import django.core.validators
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

# A table rebuild on SQLite drops the triggers and the claim index: installed again.
from django_durable_schedules.db.rebuilds import reinstall as install


class Migration(migrations.Migration):
    dependencies = [
        ("durable_schedules", "0009_overlap_backfill"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        # Unapplying rebuilds the tables again (SQLite): re-install the triggers last then too.
        migrations.RunPython(migrations.RunPython.noop, install, elidable=False),
        migrations.CreateModel(
            name="ExclusionCalendar",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "name",
                    models.CharField(
                        help_text="A short slug: 'fr-holidays', 'plant-shutdowns'.",
                        max_length=64,
                        unique=True,
                        validators=[
                            django.core.validators.RegexValidator(
                                "^[a-z0-9][a-z0-9_-]{0,63}\\Z",
                                "1-64 of lower-case letters, digits, '_' or '-', starting with a letter or digit (e.g. fr-holidays).",
                            )
                        ],
                    ),
                ),
                ("description", models.CharField(blank=True, default="", max_length=500)),
                (
                    "holidays_country",
                    models.CharField(
                        blank=True,
                        default="",
                        help_text="ISO 3166 code of a country whose public holidays are excluded ('FR', 'DE', 'US'), as the holidays package knows them; blank: none.",
                        max_length=8,
                    ),
                ),
                (
                    "holidays_subdivision",
                    models.CharField(
                        blank=True,
                        default="",
                        help_text="A subdivision of that country ('BY' for Bavaria, 'CA' for California); blank: the country's nationwide holidays.",
                        max_length=32,
                    ),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
            ],
            options={
                "ordering": ["name"],
            },
        ),
        migrations.CreateModel(
            name="ExclusionDate",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "date",
                    models.DateField(
                        help_text="A local date, read in each schedule's own time zone."
                    ),
                ),
                ("reason", models.CharField(blank=True, default="", max_length=200)),
            ],
            options={
                "ordering": ["date"],
            },
        ),
        migrations.RemoveConstraint(
            model_name="scheduleevent",
            name="dds_event_action_valid",
        ),
        migrations.AddField(
            model_name="schedule",
            name="excluded_count",
            field=models.PositiveBigIntegerField(
                default=0, help_text="Slots not run because a calendar excluded their date."
            ),
        ),
        migrations.AddField(
            model_name="schedule",
            name="exclusions_checked_at",
            field=models.DateTimeField(
                blank=True,
                editable=False,
                help_text="Slots up to this instant were checked against the exclusion calendars (the excluded ones counted); blank: since the last claim.",
                null=True,
            ),
        ),
        migrations.AlterField(
            model_name="scheduleevent",
            name="action",
            field=models.CharField(
                choices=[
                    ("created", "created"),
                    ("edited", "edited"),
                    ("enabled", "enabled"),
                    ("disabled", "disabled"),
                    ("cancelled", "cancelled"),
                    ("triggered", "triggered"),
                    ("deleted", "deleted"),
                    ("backfill", "backfill requested"),
                    ("backfill_cancel", "backfill cancelled"),
                    ("backfill_done", "backfill completed"),
                    ("excluded", "excluded by a calendar"),
                    ("calendars", "exclusion calendars changed"),
                ],
                max_length=16,
            ),
        ),
        migrations.AddConstraint(
            model_name="scheduleevent",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    (
                        "action__in",
                        [
                            "created",
                            "edited",
                            "enabled",
                            "disabled",
                            "cancelled",
                            "triggered",
                            "deleted",
                            "backfill",
                            "backfill_cancel",
                            "backfill_done",
                            "excluded",
                            "calendars",
                        ],
                    )
                ),
                name="dds_event_action_valid",
            ),
        ),
        migrations.AddConstraint(
            model_name="exclusioncalendar",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("holidays_country", ""), _negated=True),
                    ("holidays_subdivision", ""),
                    _connector="OR",
                ),
                name="dds_calendar_subdivision_needs_country",
            ),
        ),
        migrations.AddField(
            model_name="schedule",
            name="exclusion_calendars",
            field=models.ManyToManyField(
                blank=True,
                help_text="Calendars whose dates (local dates, in this schedule's zone) it must not fire on. Not for a once schedule.",
                related_name="schedules",
                to="durable_schedules.exclusioncalendar",
            ),
        ),
        migrations.AddField(
            model_name="exclusiondate",
            name="calendar",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="dates",
                to="durable_schedules.exclusioncalendar",
            ),
        ),
        migrations.AddConstraint(
            model_name="exclusiondate",
            constraint=models.UniqueConstraint(
                fields=("calendar", "date"), name="dds_calendar_date_unique"
            ),
        ),
        # Last: on SQLite a table rebuild would drop triggers installed before it.
        migrations.RunPython(install, migrations.RunPython.noop, elidable=False),
    ]
