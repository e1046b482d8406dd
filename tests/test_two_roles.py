"""A two-role deployment (PostgreSQL and MariaDB): the role that migrated owns the tables;
a runtime role with the grants of ``manage.py runtime_grants`` runs a real worker, and by
hand it can neither rewrite history nor remove the guards that keep it append-only."""

from __future__ import annotations

import uuid
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection

from django_durable_schedules.db.roles import RUNTIME_PRIVILEGES, runtime_grants_sql
from django_durable_schedules.models import RunReceipt, Schedule

from .conftest import database_url
from .factories import ReceiptFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]

RECEIPTS = "durable_schedules_runreceipt"


def _settings():
    return connection.settings_dict


@pytest.fixture
def runtime_role():
    """A login role for the runtime, granted as a project grants its other tables, and as
    ``runtime_grants`` prints for this app's; dropped afterwards."""
    if connection.vendor not in ("postgresql", "mysql"):
        pytest.skip("roles and grants: PostgreSQL and MariaDB/MySQL")
    name = f"dds_rt_{uuid.uuid4().hex[:8]}"
    database = _settings()["NAME"]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f'CREATE ROLE "{name}" LOGIN')
            cursor.execute(
                f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO "{name}"'
            )
            cursor.execute(f'GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO "{name}"')
            for statement in runtime_grants_sql("postgresql", name):
                cursor.execute(statement)
        else:
            account = f"'{name}'@'%'"
            cursor.execute(f"CREATE USER {account}")
            for table in connection.introspection.table_names(cursor):
                if table not in RUNTIME_PRIVILEGES:
                    cursor.execute(
                        f"GRANT SELECT, INSERT, UPDATE, DELETE ON `{database}`.`{table}` "
                        f"TO {account}"
                    )
            for statement in runtime_grants_sql("mysql", account, database):
                cursor.execute(statement)
    yield name
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f'DROP OWNED BY "{name}"')
            cursor.execute(f'DROP ROLE "{name}"')
        else:
            cursor.execute(f"DROP USER '{name}'@'%'")


def _connect(role: str):
    s = _settings()
    host, port = s.get("HOST") or "127.0.0.1", int(s.get("PORT") or 0)
    if connection.vendor == "postgresql":
        import psycopg

        return psycopg.connect(host=host, port=port or 5432, dbname=s["NAME"], user=role)
    import MySQLdb

    return MySQLdb.connect(host=host, port=port or 3306, user=role, database=s["NAME"])


def _hostile_statements() -> list[list[str]]:
    """Ways to rewrite history or drop its guards, each a transaction of its own."""
    if connection.vendor == "postgresql":
        return [
            [f"UPDATE {RECEIPTS} SET error_message = 'forged'"],
            ["SET LOCAL durable_schedules.retention = 'open'", f"DELETE FROM {RECEIPTS}"],
            [f"TRUNCATE {RECEIPTS}"],
            [f"ALTER TABLE {RECEIPTS} DISABLE TRIGGER ALL"],
            [f"DROP TRIGGER {RECEIPTS}_append_only ON {RECEIPTS}"],
            [
                "CREATE OR REPLACE FUNCTION durable_schedules_append_only() RETURNS trigger "
                "LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$"
            ],
            [f"DROP TABLE {RECEIPTS}"],
        ]
    return [
        [f"UPDATE {RECEIPTS} SET error_message = 'forged'"],
        ["SET @durable_schedules_retention = 'open'", f"DELETE FROM {RECEIPTS}"],
        [f"TRUNCATE {RECEIPTS}"],
        [f"DROP TRIGGER {RECEIPTS}_no_update"],
        [f"ALTER TABLE {RECEIPTS} ADD COLUMN forged INT"],
        [f"DROP TABLE {RECEIPTS}"],
    ]


def test_the_runtime_role_cannot_rewrite_history_or_drop_its_guards(runtime_role):
    receipt = ReceiptFactory(status="succeeded", error_message="")
    refused = []
    raw = _connect(runtime_role)
    try:
        for statements in _hostile_statements():
            cursor = raw.cursor()
            try:
                for statement in statements:
                    cursor.execute(statement)
            except Exception as exc:  # the driver's own permission error class
                refused.append(statements[-1])
                text = str(exc).lower()
                assert "denied" in text or "owner" in text or "permission" in text, text
            finally:
                raw.rollback()
    finally:
        raw.close()
    assert refused == [s[-1] for s in _hostile_statements()]
    receipt.refresh_from_db()
    assert RunReceipt.objects.count() == 1 and receipt.error_message == ""


def test_a_real_worker_runs_as_the_runtime_role(runtime_role, start_worker):
    s = Schedule.objects.create(
        name="as-runtime", callback="tests.noop", kind="interval", interval_seconds=3600
    )
    url = database_url()
    scheme, rest = url.split("://", 1)
    host = rest.split("@", 1)[1]
    worker = start_worker("--once", env={"DATABASE_URL": f"{scheme}://{runtime_role}@{host}"})
    assert worker.wait(90) == 0, worker.output()
    [receipt] = RunReceipt.objects.filter(schedule_id=s.pk)
    assert receipt.status == "succeeded", worker.output()


def test_runtime_grants_prints_the_statements():
    out = StringIO()
    if connection.vendor not in ("postgresql", "mysql"):
        from django.core.management import CommandError

        with pytest.raises(CommandError, match="no runtime grants"):
            call_command("runtime_grants", "app", stdout=out)
        return
    call_command("runtime_grants", "app", stdout=out)
    text = out.getvalue()
    assert "GRANT SELECT, INSERT ON" in text and "durable_schedules_runreceipt" in text
    assert "UPDATE, DELETE" in text  # on the schedules, not on history
