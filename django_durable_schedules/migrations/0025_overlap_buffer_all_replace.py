"""``overlap_policy`` gains ``buffer_all`` (every slot that came due during a run runs
after it, oldest first, at most ``BUFFER_MAX`` queued) and ``replace`` (the running
occurrence is stopped, its receipt ``replaced``, and the new slot runs), and receipts the
status ``replaced`` (issue #28, item 4). ``Schedule.buffered_through``: the last slot of a
``buffer_all`` queue (state/overlap_rules.py). The event action ``group``: a concurrency
group the schedule names was changed.

On SQLite, changing the receipts' CHECK constraint rebuilds the table and drops its
triggers (the append-only guards): installed again last, as are 0004's claim index and the
edit triggers (db/rebuilds.py).
"""

from django.db import migrations, models

from django_durable_schedules.db.rebuilds import reinstall as install


class Migration(migrations.Migration):
    dependencies = [
        ("durable_schedules", "0024_group_run_state_readable"),
    ]

    operations = [
        # Unapplying rebuilds the tables again (SQLite): re-install the triggers last then too.
        migrations.RunPython(migrations.RunPython.noop, install, elidable=False),
        migrations.RemoveConstraint(
            model_name="runreceipt",
            name="dds_receipt_status_valid",
        ),
        migrations.AlterField(
            model_name="runreceipt",
            name="status",
            field=models.CharField(
                choices=[
                    ("succeeded", "succeeded"),
                    ("enqueued", "enqueued"),
                    ("skipped", "skipped"),
                    ("failed", "failed"),
                    ("degraded", "degraded"),
                    ("lease_expired", "lease expired"),
                    ("lease_lost", "lease lost"),
                    ("released", "released"),
                    ("missed", "missed"),
                    ("replaced", "replaced by the next slot (overlap_policy replace)"),
                ],
                max_length=16,
            ),
        ),
        migrations.AlterField(
            model_name="schedule",
            name="overlap_policy",
            field=models.CharField(
                choices=[
                    ("skip", "skip slots that come due while it runs"),
                    ("buffer_one", "run one of them right after the run, skip the others"),
                    (
                        "buffer_all",
                        "run each of them after the run, oldest first (at most BUFFER_MAX)",
                    ),
                    ("replace", "stop the running one (receipt replaced) and run the new slot"),
                ],
                default="skip",
                help_text="Slots that come due while a run is still running: 'skip' counts them and waits for the next slot; 'buffer_one' runs the first of them right after the run (as its own occurrence) and counts the others as skipped; 'buffer_all' runs each of them in turn, oldest first (at most BUFFER_MAX queued, older ones counted); 'replace' stops the running one (needs timeout_seconds) and runs the new slot.",
                max_length=16,
            ),
        ),
        migrations.AddConstraint(
            model_name="runreceipt",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    (
                        "status__in",
                        [
                            "succeeded",
                            "enqueued",
                            "skipped",
                            "failed",
                            "degraded",
                            "lease_expired",
                            "lease_lost",
                            "released",
                            "missed",
                            "replaced",
                        ],
                    )
                ),
                name="dds_receipt_status_valid",
            ),
        ),
        migrations.AddField(
            model_name="schedule",
            name="buffered_through",
            field=models.DateTimeField(
                blank=True,
                editable=False,
                help_text="The last slot queued behind the buffered one (overlap_policy buffer_all).",
                null=True,
            ),
        ),

        migrations.RemoveConstraint(
            model_name="scheduleevent",
            name="dds_event_action_valid",
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
                    ("rerun", "re-run of an occurrence requested"),
                    ("blackout", "slots blacked out by a window"),
                    ("blackouts", "blackout windows changed"),
                    ("group", "concurrency group changed"),
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
                            "deadline_missed",
                            "failing",
                            "degraded",
                            "paused",
                            "recovered",
                            "rerun",
                            "blackout",
                            "blackouts",
                            "group",
                        ],
                    )
                ),
                name="dds_event_action_valid",
            ),
        ),
        migrations.RunPython(install, migrations.RunPython.noop, elidable=False),
    ]
