"""Append-only guards: database triggers that refuse UPDATE and DELETE on run attempts and
run receipts, whoever issues them (ORM, raw SQL, ``dbshell``).

The one exception is the retention path (:mod:`.retention`): a DELETE is let through
while the *current session* has opened the retention gate:

* PostgreSQL: ``SET LOCAL durable_schedules.retention = 'open'`` (transaction-scoped);
* MySQL/MariaDB: the session variable ``@durable_schedules_retention = 'open'``;
* SQLite: the SQL function ``durable_schedules_retention_open()``, which this app defines
  on each of its own connections; any other client (the ``sqlite3`` shell) lacks it, so
  its DELETE fails.

UPDATE is refused always. On SQLite an INSERT that meets an existing row is refused too
(``INSERT OR REPLACE`` / ``REPLACE INTO`` would otherwise delete the old row without firing
the DELETE trigger and write a forged one in its place); on PostgreSQL and MariaDB/MySQL,
``INSERT ... ON CONFLICT DO UPDATE`` / ``ON DUPLICATE KEY UPDATE`` is an UPDATE (refused)
and MySQL's ``REPLACE`` fires the DELETE trigger (refused). The SQL is kept here as data; :func:`install` is idempotent
(MySQL DDL is not transactional) and runs from the app's migrations.
"""

from __future__ import annotations

from typing import Any

TABLES = (
    "durable_schedules_runattempt",
    "durable_schedules_runreceipt",
    "durable_schedules_scheduleevent",
)
SQLITE_GATE_FUNCTION = "durable_schedules_retention_open"
PG_GATE_SETTING = "durable_schedules.retention"
MYSQL_GATE_VARIABLE = "@durable_schedules_retention"
MESSAGE = "durable_schedules: {table} is append-only"


#: SQLite: the rows an INSERT would replace (``INSERT OR REPLACE``, ``REPLACE INTO``, an
#: upsert): one test per unique key of the table.
_SQLITE_CONFLICTS = {
    "durable_schedules_runattempt": "id = NEW.id OR lease_token = NEW.lease_token OR "
    "(schedule_id = NEW.schedule_id AND occurrence = NEW.occurrence AND attempt = NEW.attempt)",
    "durable_schedules_runreceipt": "id = NEW.id OR attempt_id = NEW.attempt_id OR "
    "(schedule_id = NEW.schedule_id AND succeeded_occurrence = NEW.succeeded_occurrence)",
    "durable_schedules_scheduleevent": "id = NEW.id",
}


def _sqlite(table: str) -> list[str]:
    msg = MESSAGE.format(table=table)
    # REPLACE deletes the conflicting row without firing DELETE triggers (unless the
    # connection set recursive_triggers), which would rewrite history: refuse any INSERT
    # that meets an existing row, before SQLite resolves the conflict.
    return [
        f"DROP TRIGGER IF EXISTS {table}_no_update",
        f"DROP TRIGGER IF EXISTS {table}_no_delete",
        f"DROP TRIGGER IF EXISTS {table}_no_replace",
        f"CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table} "
        f"BEGIN SELECT RAISE(ABORT, '{msg} (UPDATE refused)'); END",
        f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table} "
        f"WHEN {SQLITE_GATE_FUNCTION}() IS NOT 1 "
        f"BEGIN SELECT RAISE(ABORT, '{msg} (DELETE refused; use manage.py prune_runs)'); END",
        f"CREATE TRIGGER {table}_no_replace BEFORE INSERT ON {table} "
        f"WHEN EXISTS (SELECT 1 FROM {table} WHERE {_SQLITE_CONFLICTS[table]}) "
        f"BEGIN SELECT RAISE(ABORT, '{msg} (an INSERT that meets an existing row is refused)'); END",
    ]


_PG_FUNCTION = f"""
CREATE OR REPLACE FUNCTION durable_schedules_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('{PG_GATE_SETTING}', true) = 'open' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'durable_schedules: % is append-only (% refused)', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'integrity_constraint_violation',
              HINT = 'Old finished runs are removed with manage.py prune_runs.';
END
$$
"""


def _postgresql(table: str) -> list[str]:
    return [
        _PG_FUNCTION,
        f"DROP TRIGGER IF EXISTS {table}_append_only ON {table}",
        f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
        f"FOR EACH ROW EXECUTE FUNCTION durable_schedules_append_only()",
    ]


def _mysql(table: str) -> list[str]:
    msg = MESSAGE.format(table=table)
    return [
        f"DROP TRIGGER IF EXISTS {table}_no_update",
        f"DROP TRIGGER IF EXISTS {table}_no_delete",
        f"CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table} FOR EACH ROW "
        f"SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{msg} (UPDATE refused)'",
        f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table} FOR EACH ROW "
        f"BEGIN IF {MYSQL_GATE_VARIABLE} IS NULL OR {MYSQL_GATE_VARIABLE} <> 'open' THEN "
        f"SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{msg} (DELETE refused; use manage.py prune_runs)'; "
        f"END IF; END",
    ]


_BUILDERS = {"sqlite": _sqlite, "postgresql": _postgresql, "mysql": _mysql}


def install_sql(vendor: str) -> list[str]:
    """Statements that (re)create the guards on ``vendor``; ``[]`` for other backends."""
    builder = _BUILDERS.get(vendor)
    return [stmt for table in TABLES for stmt in builder(table)] if builder else []


def uninstall_sql(vendor: str) -> list[str]:
    """Statements that drop the guards on ``vendor``."""
    if vendor == "postgresql":
        return [f"DROP TRIGGER IF EXISTS {t}_append_only ON {t}" for t in TABLES] + [
            "DROP FUNCTION IF EXISTS durable_schedules_append_only()"
        ]
    if vendor in ("sqlite", "mysql"):
        suffixes = ("no_update", "no_delete", "no_replace")
        return [f"DROP TRIGGER IF EXISTS {t}_{s}" for t in TABLES for s in suffixes]
    return []


def install(connection: Any) -> None:
    """Create (or re-create) the triggers on ``connection``; idempotent."""
    with connection.cursor() as cursor:
        for stmt in install_sql(connection.vendor):
            cursor.execute(stmt)


def uninstall(connection: Any) -> None:
    """Drop the triggers (migration rollback only)."""
    with connection.cursor() as cursor:
        for stmt in uninstall_sql(connection.vendor):
            cursor.execute(stmt)


def installed(connection: Any) -> bool:
    """True when every guard trigger exists on ``connection`` (used by a system check)."""
    names = {
        stmt.split()[2]
        for stmt in install_sql(connection.vendor)
        if stmt.startswith("CREATE TRIGGER")
    }
    if not names:
        return True
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        elif connection.vendor == "postgresql":
            cursor.execute("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal")
        else:
            cursor.execute(
                "SELECT trigger_name FROM information_schema.triggers WHERE trigger_schema = DATABASE()"
            )
        present = {row[0] for row in cursor.fetchall()}
    return names <= present


def register_sqlite_gate(connection: Any) -> None:
    """Define the SQLite gate function on a new connection of this app (connection_created)."""
    if connection.vendor != "sqlite":
        return

    def gate() -> int:
        return 1 if getattr(connection, "_durable_schedules_retention_open", False) else 0

    connection.connection.create_function(SQLITE_GATE_FUNCTION, 0, gate)
