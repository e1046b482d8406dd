"""Overlap policy ``buffer_one`` (issue #15): ``Schedule.overlap_policy`` (skip |
buffer_one, default skip) and ``Schedule.buffered_for`` (the slot buffered while a run ran),
and ``RunAttempt.origin`` (why an attempt was claimed: scheduled, triggered, buffered,
backfill; existing attempts read ``scheduled``). Backfill (issue #15 item 3): the
``Backfill`` table (a past range of one schedule, its slots, a cursor) and the audit
actions ``backfill``, ``backfill_cancel`` and ``backfill_done``.

On SQLite, adding a NOT NULL column rebuilds the table, and SQLite drops a table's triggers
(and 0004's claim index, which Django's migration state does not know) with it: the
append-only guards, the edit triggers and the index are installed again at the end
(idempotent on every backend, see db/guards.py and db/edits.py).
"""

import uuid

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

# A table rebuild on SQLite drops the triggers and the claim index: installed again.
from django_durable_schedules.db.rebuilds import reinstall as install


class Migration(migrations.Migration):
    dependencies = [
        ("durable_schedules", "0008_rrule"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        # Unapplying rebuilds the tables again (SQLite): re-install the triggers last then too.
        migrations.RunPython(migrations.RunPython.noop, install, elidable=False),
        migrations.AddField(
            model_name="runattempt",
            name="origin",
            field=models.CharField(
                choices=[
                    ("scheduled", "scheduled"),
                    ("triggered", "triggered"),
                    ("buffered", "buffered (overlap_policy buffer_one)"),
                    ("backfill", "backfill"),
                ],
                default="scheduled",
                help_text="Why it was claimed: its slot came due (scheduled), a trigger, a slot buffered while the previous run ran (overlap_policy buffer_one), or a backfill.",
                max_length=16,
            ),
        ),
        migrations.AddField(
            model_name="schedule",
            name="buffered_for",
            field=models.DateTimeField(
                blank=True,
                editable=False,
                help_text="A slot buffered while a run ran.",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="schedule",
            name="overlap_policy",
            field=models.CharField(
                choices=[
                    ("skip", "skip slots that come due while it runs"),
                    ("buffer_one", "run one of them right after the run, skip the others"),
                ],
                default="skip",
                help_text="Slots that come due while a run is still running: 'skip' counts them and waits for the next slot; 'buffer_one' runs the first of them right after the run (as its own occurrence) and counts the others as skipped.",
                max_length=16,
            ),
        ),
        migrations.CreateModel(
            name='Backfill',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('schedule_name', models.CharField(max_length=128)),
                ('start', models.DateTimeField(help_text='First instant of the range (included).')),
                ('end', models.DateTimeField(help_text='End of the range (excluded).')),
                ('include_succeeded', models.BooleanField(default=False, help_text='Run slots that already have a successful receipt too.')),
                ('slots', models.JSONField(default=list, help_text='The slots to run, in order (UTC).')),
                ('skipped_succeeded', models.PositiveIntegerField(default=0, help_text='Slots of the range left out: they already succeeded.')),
                ('position', models.PositiveIntegerField(default=0, help_text='Index of the next slot.')),
                ('occurrence', models.PositiveIntegerField(blank=True, null=True)),
                ('attempt', models.PositiveIntegerField(default=0)),
                ('status', models.CharField(choices=[('active', 'active'), ('completed', 'completed'), ('cancelled', 'cancelled')], default='active', max_length=16)),
                ('created_at', models.DateTimeField(help_text='When it was requested (database clock).')),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('created_by_repr', models.CharField(blank=True, default='', max_length=200)),
                ('source', models.CharField(help_text='api, admin, command or code.', max_length=32)),
            ],
            options={
                'ordering': ['-created_at'],
            },
        ),
        migrations.RemoveConstraint(
            model_name='scheduleevent',
            name='dds_event_action_valid',
        ),
        migrations.AlterField(
            model_name='scheduleevent',
            name='action',
            field=models.CharField(choices=[('created', 'created'), ('edited', 'edited'), ('enabled', 'enabled'), ('disabled', 'disabled'), ('cancelled', 'cancelled'), ('triggered', 'triggered'), ('deleted', 'deleted'), ('backfill', 'backfill requested'), ('backfill_cancel', 'backfill cancelled'), ('backfill_done', 'backfill completed')], max_length=16),
        ),
        migrations.AddConstraint(
            model_name='scheduleevent',
            constraint=models.CheckConstraint(condition=models.Q(('action__in', ['created', 'edited', 'enabled', 'disabled', 'cancelled', 'triggered', 'deleted', 'backfill', 'backfill_cancel', 'backfill_done'])), name='dds_event_action_valid'),
        ),
        migrations.AddField(
            model_name='backfill',
            name='created_by',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL),
        ),
        migrations.AddField(
            model_name='backfill',
            name='schedule',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='backfills', to='durable_schedules.schedule'),
        ),
        migrations.AddIndex(
            model_name='backfill',
            index=models.Index(fields=['status', 'schedule'], name='dds_backfill_open_idx'),
        ),
        migrations.AddConstraint(
            model_name='backfill',
            constraint=models.CheckConstraint(condition=models.Q(('status__in', ['active', 'completed', 'cancelled'])), name='dds_backfill_status_valid'),
        ),
        migrations.AddConstraint(
            model_name='backfill',
            constraint=models.CheckConstraint(condition=models.Q(('end__gt', models.F('start'))), name='dds_backfill_range_ordered'),
        ),
        # Last: on SQLite a table rebuild would drop triggers installed before it.
        migrations.RunPython(install, migrations.RunPython.noop, elidable=False),
    ]
