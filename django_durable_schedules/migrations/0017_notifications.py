"""Notifications (issue #26 item 2): ``NotificationDelivery``, the outbox of alert
notifications, one row per (event, notifier), unique; an index for the due predicate."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('durable_schedules', '0016_alerting'),
    ]

    operations = [
        migrations.CreateModel(
            name='NotificationDelivery',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('notifier', models.CharField(help_text="The NOTIFIERS entry's name.", max_length=100)),
                ('schedule_name', models.CharField(max_length=128)),
                ('action', models.CharField(max_length=16)),
                ('occurrence', models.PositiveIntegerField(blank=True, null=True)),
                ('status', models.CharField(choices=[('pending', 'pending'), ('delivered', 'delivered'), ('abandoned', 'abandoned (gave up after NOTIFY_MAX_TRIES)')], default='pending', max_length=16)),
                ('tries', models.PositiveIntegerField(default=0, help_text='Sends attempted so far.')),
                ('next_try_at', models.DateTimeField(help_text='When it may be sent (again), UTC.')),
                ('lease_until', models.DateTimeField(blank=True, help_text='A worker is sending it until then (UTC).', null=True)),
                ('leased_by', models.CharField(blank=True, default='', max_length=250)),
                ('last_error', models.CharField(blank=True, default='', max_length=1000)),
                ('delivered_at', models.DateTimeField(blank=True, null=True)),
                ('created_at', models.DateTimeField()),
                ('event', models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='deliveries', to='durable_schedules.scheduleevent')),
            ],
            options={
                'verbose_name': 'notification delivery',
                'verbose_name_plural': 'notification deliveries',
                'ordering': ['-created_at', '-id'],
                'indexes': [models.Index(fields=['notifier', 'status', 'next_try_at'], name='dds_delivery_due_idx'), models.Index(fields=['created_at'], name='dds_delivery_created_idx')],
                'constraints': [models.UniqueConstraint(fields=('event', 'notifier'), name='dds_delivery_once'), models.CheckConstraint(condition=models.Q(('status__in', ['pending', 'delivered', 'abandoned'])), name='dds_delivery_status_valid')],
            },
        ),
    ]
