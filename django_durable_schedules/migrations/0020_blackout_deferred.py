"""Blackout windows, policy defer (issue #27): ``Schedule.blackout_deferred``, how many
slots inside a window the run waiting for the window's end stands for."""

from django.db import migrations, models

from django_durable_schedules.db.rebuilds import reinstall as install


class Migration(migrations.Migration):
    dependencies = [
        ("durable_schedules", "0019_manual_kind"),
    ]

    operations = [
        migrations.RunPython(migrations.RunPython.noop, install, elidable=False),
        migrations.AddField(
            model_name="schedule",
            name="blackout_deferred",
            field=models.PositiveIntegerField(
                default=0,
                editable=False,
                help_text="Policy defer: the run waiting for next_run_at (a blackout window's "
                "end) stands for this many slots inside the window; 0: none waits.",
            ),
        ),
        migrations.RunPython(install, migrations.RunPython.noop, elidable=False),
    ]
