"""Why a schedule is degraded becomes data (``Schedule.degraded_kind``, issue #25): rows
degraded before are given their kind from the words their reason begins with, as the
engine read them until now. A reason no engine wrote (an edit behind ``save()``) gets
``definition``: it waits for an operator rather than coming back by itself."""

from django.db import migrations, models

# A table rebuild on SQLite drops the triggers and the claim index: installed again.
from django_durable_schedules.db.rebuilds import reinstall as install

#: (what the reason begins with, the kind), as the engine wrote them before 0015.
PREFIXES = (
    ("callback ", "callback"),
    ("cannot evaluate the schedule: ", "definition"),
    ("its expired lease could not be recovered: ", "lease"),
    ("the database refused its claim: ", "claim"),
)


def kinds_from_reasons(apps, schema_editor):
    Schedule = apps.get_model("durable_schedules", "Schedule")
    rows = Schedule.objects.using(schema_editor.connection.alias).exclude(degraded_reason="")
    for prefix, kind in PREFIXES:
        rows.filter(degraded_kind="", degraded_reason__startswith=prefix).update(degraded_kind=kind)
    rows.filter(degraded_kind="").update(degraded_kind="definition")


class Migration(migrations.Migration):
    dependencies = [
        ("durable_schedules", "0014_worker_tzdata"),
    ]

    operations = [
        # Unapplying rebuilds the table again (SQLite): re-install the triggers last then too.
        migrations.RunPython(migrations.RunPython.noop, install, elidable=False),
        migrations.AddField(
            model_name="schedule",
            name="degraded_kind",
            field=models.CharField(
                blank=True,
                choices=[
                    ("callback", "its callback is not registered"),
                    ("definition", "its definition cannot be evaluated"),
                    ("lease", "its expired lease could not be recovered"),
                    ("claim", "the database refused its claim"),
                ],
                default="",
                editable=False,
                max_length=16,
            ),
        ),
        migrations.RunPython(kinds_from_reasons, migrations.RunPython.noop),
        migrations.RunPython(install, migrations.RunPython.noop, elidable=False),
    ]
