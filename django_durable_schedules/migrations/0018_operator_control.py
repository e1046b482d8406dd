"""Operator control (issue #27): ``Schedule.paused_until`` (a pause with an end); the
pending trigger's payload override, blackout flag and re-run (``trigger_payload``,
``trigger_ignores_blackout``, ``rerun_occurrence``, ``rerun_attempt``); blackout windows
(``BlackoutWindow``, ``Schedule.blackout_windows``, ``blackout_policy``,
``blackout_count``); the payload an attempt ran with (``RunAttempt.payload``); a forced
re-run's receipt (``RunReceipt.forced``, outside the one-success key); attempt origins
``rerun`` and ``deferred``; the events ``rerun``, ``blackout`` and ``blackouts``.

On SQLite, a table rebuild drops its triggers and the claim index: they are installed
again at the end (idempotent, see db/rebuilds.py).
"""

import django.core.validators
from django.conf import settings
from django.db import migrations, models

# A table rebuild on SQLite drops the triggers and the claim index: installed again.
from django_durable_schedules.db.rebuilds import reinstall as install


class Migration(migrations.Migration):

    dependencies = [
        ('durable_schedules', '0017_notifications'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        # Unapplying rebuilds the tables again (SQLite): re-install the triggers last then too.
        migrations.RunPython(migrations.RunPython.noop, install, elidable=False),
        migrations.CreateModel(
            name='BlackoutWindow',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(help_text="A short slug: 'db-maintenance', 'month-end-freeze'.", max_length=64, unique=True, validators=[django.core.validators.RegexValidator('^[a-z0-9][a-z0-9_-]{0,63}\\Z', "1-64 of lower-case letters, digits, '_' or '-', starting with a letter or digit (e.g. fr-holidays).")])),
                ('description', models.CharField(blank=True, default='', max_length=500)),
                ('timezone', models.CharField(default='UTC', help_text="IANA time zone the rule is read in ('Europe/Paris'); a range's instants are absolute.", max_length=64)),
                ('start_at', models.DateTimeField(blank=True, help_text="A range: when it starts. Recurring: the rule's anchor (optional).", null=True)),
                ('end_at', models.DateTimeField(blank=True, help_text='A range: when it ends (a slot at this instant runs). Recurring: no window starts after it (optional).', null=True)),
                ('rrule', models.CharField(blank=True, default='', help_text="Recurring: an RFC 5545 rule for the instants each window starts at, e.g. 'FREQ=DAILY;BYHOUR=2;BYMINUTE=0' (02:00 every day) or 'FREQ=WEEKLY;BYDAY=SU;BYHOUR=22;BYMINUTE=0'. Blank: one range.", max_length=500)),
                ('duration_seconds', models.PositiveIntegerField(blank=True, help_text='Recurring: how long each window lasts (seconds).', null=True)),
                ('shared', models.BooleanField(default=False, help_text='Open to owner-scoped API users: they may read it and name it on their own schedules. Off: only full-access (staff) users see it.')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
            ],
            options={
                'ordering': ['name'],
            },
        ),
        migrations.RemoveConstraint(
            model_name='runreceipt',
            name='dds_receipt_success_key',
        ),
        migrations.RemoveConstraint(
            model_name='scheduleevent',
            name='dds_event_action_valid',
        ),
        migrations.AddField(
            model_name='runattempt',
            name='payload',
            field=models.JSONField(blank=True, help_text="The payload this attempt ran with, when it differs from the schedule's (a trigger's override); blank: the schedule's payload.", null=True),
        ),
        migrations.AddField(
            model_name='runreceipt',
            name='forced',
            field=models.BooleanField(default=False, help_text="A forced re-run of an occurrence that had succeeded: its success is not the occurrence's first, so it does not take the occurrence's one success."),
        ),
        migrations.AddField(
            model_name='schedule',
            name='blackout_count',
            field=models.PositiveBigIntegerField(default=0, help_text='Slots not run (or deferred) because a blackout window covered them.'),
        ),
        migrations.AddField(
            model_name='schedule',
            name='blackout_policy',
            field=models.CharField(choices=[('skip', 'skip: count the slots inside a window, run none of them'), ('defer', "defer: run the slots inside a window once, at the window's end")], default='skip', help_text="Slots inside one of its blackout windows: 'skip' counts them and runs none; 'defer' runs them once, at the window's end.", max_length=16),
        ),
        migrations.AddField(
            model_name='schedule',
            name='paused_until',
            field=models.DateTimeField(blank=True, editable=False, help_text='A pause with an end: at this instant a worker resumes the schedule (as enable does: no catch-up). Blank: paused until enabled.', null=True),
        ),
        migrations.AddField(
            model_name='schedule',
            name='rerun_attempt',
            field=models.PositiveIntegerField(blank=True, editable=False, help_text='The attempt number of the re-run.', null=True),
        ),
        migrations.AddField(
            model_name='schedule',
            name='rerun_occurrence',
            field=models.PositiveIntegerField(blank=True, editable=False, help_text='The pending trigger is a re-run of this earlier occurrence (its own idempotency key), as attempt rerun_attempt.', null=True),
        ),
        migrations.AddField(
            model_name='schedule',
            name='trigger_ignores_blackout',
            field=models.BooleanField(default=False, editable=False, help_text='The pending trigger may start inside a blackout window.'),
        ),
        migrations.AddField(
            model_name='schedule',
            name='trigger_payload',
            field=models.JSONField(blank=True, editable=False, help_text="The pending trigger's payload override (merged over payload at the top level), kept for the retries of the occurrence it started; blank: none.", null=True),
        ),
        migrations.AlterField(
            model_name='runattempt',
            name='origin',
            field=models.CharField(choices=[('scheduled', 'scheduled'), ('triggered', 'triggered'), ('buffered', 'buffered (overlap_policy buffer_one)'), ('backfill', 'backfill'), ('rerun', 're-run of an earlier occurrence'), ('deferred', "deferred to a blackout window's end")], default='scheduled', help_text='Why it was claimed: its slot came due (scheduled), a trigger, a slot buffered while the previous run ran (overlap_policy buffer_one), a backfill, a re-run of an earlier occurrence, or slots deferred past a blackout window.', max_length=16),
        ),
        migrations.AlterField(
            model_name='schedule',
            name='pause_reason',
            field=models.CharField(blank=True, default='', help_text="Why it is paused: the scheduler's reason, or the operator's note.", max_length=500),
        ),
        migrations.AlterField(
            model_name='scheduleevent',
            name='action',
            field=models.CharField(choices=[('created', 'created'), ('edited', 'edited'), ('enabled', 'enabled'), ('disabled', 'disabled'), ('cancelled', 'cancelled'), ('triggered', 'triggered'), ('deleted', 'deleted'), ('backfill', 'backfill requested'), ('backfill_cancel', 'backfill cancelled'), ('backfill_done', 'backfill completed'), ('excluded', 'excluded by a calendar'), ('calendars', 'exclusion calendars changed'), ('deadline_missed', 'deadline missed'), ('failing', 'failing (the failure streak reached its threshold)'), ('degraded', 'degraded (paused by the engine)'), ('paused', 'paused by the engine'), ('recovered', 'recovered (succeeded after an alert)'), ('rerun', 're-run of an occurrence requested'), ('blackout', 'slots blacked out by a window'), ('blackouts', 'blackout windows changed')], max_length=16),
        ),
        migrations.AddConstraint(
            model_name='runreceipt',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('forced', False), ('status__in', ('succeeded', 'enqueued')), ('succeeded_occurrence', models.F('occurrence')), ('succeeded_occurrence__isnull', False)), models.Q(('forced', True), ('status__in', ('succeeded', 'enqueued')), ('succeeded_occurrence__isnull', True)), models.Q(models.Q(('status__in', ('succeeded', 'enqueued')), _negated=True), ('succeeded_occurrence__isnull', True)), _connector='OR'), name='dds_receipt_success_key'),
        ),
        migrations.AddConstraint(
            model_name='scheduleevent',
            constraint=models.CheckConstraint(condition=models.Q(('action__in', ['created', 'edited', 'enabled', 'disabled', 'cancelled', 'triggered', 'deleted', 'backfill', 'backfill_cancel', 'backfill_done', 'excluded', 'calendars', 'deadline_missed', 'failing', 'degraded', 'paused', 'recovered', 'rerun', 'blackout', 'blackouts'])), name='dds_event_action_valid'),
        ),
        migrations.AddConstraint(
            model_name='blackoutwindow',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('rrule', ''), ('start_at__isnull', False), ('end_at__isnull', False), ('duration_seconds__isnull', True)), models.Q(models.Q(('rrule', ''), _negated=True), ('duration_seconds__gte', 1), ('duration_seconds__lte', 2678400)), _connector='OR'), name='dds_blackout_range_or_rule'),
        ),
        migrations.AddConstraint(
            model_name='blackoutwindow',
            constraint=models.CheckConstraint(condition=models.Q(('start_at__isnull', True), ('end_at__isnull', True), ('end_at__gt', models.F('start_at')), _connector='OR'), name='dds_blackout_ordered'),
        ),
        migrations.AddField(
            model_name='schedule',
            name='blackout_windows',
            field=models.ManyToManyField(blank=True, help_text='Windows in which no run of it may start (see blackout_policy).', related_name='schedules', to='durable_schedules.blackoutwindow'),
        ),
        migrations.AddConstraint(
            model_name='schedule',
            constraint=models.CheckConstraint(condition=models.Q(('blackout_policy__in', ['skip', 'defer'])), name='dds_sched_blackout_policy_valid'),
        ),
        migrations.AddConstraint(
            model_name='schedule',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('rerun_attempt__isnull', True), ('rerun_occurrence__isnull', True)), models.Q(('rerun_attempt__gte', 1), ('rerun_occurrence__gte', 1), ('triggered_at__isnull', False)), _connector='OR'), name='dds_sched_rerun_paired'),
        ),
        migrations.RunPython(install, migrations.RunPython.noop, elidable=False),
    ]
