"""Alerting (issue #26): ``Schedule.deadline_seconds`` and the engine's alert state
(``deadline_missed_occurrence``, ``open_alerts``); receipts get ``started_at`` and
``traceback``; ``ScheduleEvent`` gets ``occurrence`` and the engine's actions
(``deadline_missed``, ``failing``, ``degraded``, ``paused``, ``recovered``).

On SQLite, adding a NOT NULL column rebuilds the table, which drops its triggers and the
claim index: they are installed again at the end (idempotent, see db/rebuilds.py).
"""

import django.core.validators
from django.conf import settings
from django.db import migrations, models

# A table rebuild on SQLite drops the triggers and the claim index: installed again.
from django_durable_schedules.db.rebuilds import reinstall as install


class Migration(migrations.Migration):
    dependencies = [
        ("durable_schedules", "0015_degraded_kind"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        # Unapplying rebuilds the tables again (SQLite): re-install the triggers last then too.
        migrations.RunPython(migrations.RunPython.noop, install, elidable=False),
        migrations.RemoveConstraint(
            model_name="scheduleevent",
            name="dds_event_action_valid",
        ),
        migrations.AddField(
            model_name="runreceipt",
            name="started_at",
            field=models.DateTimeField(
                blank=True,
                help_text="When the callback started (UTC; blank: it never ran, e.g. missed or released). finished_at minus started_at is the run's duration.",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="runreceipt",
            name="traceback",
            field=models.JSONField(
                blank=True,
                help_text="A failed run's stack, innermost frame last: a list of {file, line, function}, bounded; never the value of a variable.",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="schedule",
            name="deadline_missed_occurrence",
            field=models.PositiveIntegerField(
                blank=True,
                editable=False,
                help_text="The last occurrence reported late.",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="schedule",
            name="deadline_seconds",
            field=models.PositiveIntegerField(
                blank=True,
                help_text="Each occurrence must succeed within this many seconds of its slot; when it does not, a deadline_missed event is written (blank = no deadline).",
                null=True,
                validators=[django.core.validators.MinValueValidator(1)],
            ),
        ),
        migrations.AddField(
            model_name="schedule",
            name="open_alerts",
            field=models.CharField(
                blank=True,
                default="",
                editable=False,
                help_text="Alert episodes open until the next success: late, failing, degraded.",
                max_length=64,
            ),
        ),
        migrations.AddField(
            model_name="scheduleevent",
            name="occurrence",
            field=models.PositiveIntegerField(
                blank=True, help_text="The occurrence an engine event is about.", null=True
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
                    ("deadline_missed", "deadline missed"),
                    ("failing", "failing (the failure streak reached its threshold)"),
                    ("degraded", "degraded (paused by the engine)"),
                    ("paused", "paused by the engine"),
                    ("recovered", "recovered (succeeded after an alert)"),
                ],
                max_length=16,
            ),
        ),
        migrations.AddConstraint(
            model_name="schedule",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("deadline_seconds__isnull", True),
                    ("deadline_seconds__gte", 1),
                    _connector="OR",
                ),
                name="dds_sched_deadline_positive",
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
                            "deadline_missed",
                            "failing",
                            "degraded",
                            "paused",
                            "recovered",
                        ],
                    )
                ),
                name="dds_event_action_valid",
            ),
        ),
        migrations.RunPython(install, migrations.RunPython.noop, elidable=False),
    ]
