"""Install the append-only triggers on run attempts and receipts (see db/guards.py).

Idempotent (DROP IF EXISTS + CREATE), so it is safe to re-run on MySQL/MariaDB, whose DDL
is not transactional. A later migration that rebuilds either table on SQLite must run
``guards.install`` again (SQLite drops a table's triggers with the table).
"""

from django.db import migrations


def install(apps, schema_editor):
    from django_durable_schedules.db import guards

    guards.install(schema_editor.connection)


def uninstall(apps, schema_editor):
    from django_durable_schedules.db import guards

    guards.uninstall(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [("durable_schedules", "0001_initial")]

    operations = [migrations.RunPython(install, uninstall, elidable=False)]
