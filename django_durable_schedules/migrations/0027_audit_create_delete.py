"""Every create and delete of a schedule leaves an event (issue #31, item 4): triggers on the
schedule table write a ``created`` / ``deleted`` event (source ``database``) for a row
inserted or deleted where this app's Python does not run (raw SQL, ``dbshell``,
``loaddata``); ``save()``, ``bulk_create()``, ``delete()`` and the state functions mute
them and write their own (db/audit.py, state/code_events.py). On SQLite the mute is a
table, made here.
"""

from django.db import migrations


def install(apps, schema_editor):
    from django_durable_schedules.db import audit

    audit.install(schema_editor.connection)


def uninstall(apps, schema_editor):
    from django_durable_schedules.db import audit

    audit.uninstall(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [
        ("durable_schedules", "0026_search_trigram"),
    ]

    operations = [
        migrations.RunPython(install, uninstall, elidable=False),
    ]
