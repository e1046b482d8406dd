"""Creates and deletes behind ``save()``: database triggers that write the ``created`` and
``deleted`` events of a schedule inserted or deleted where no Python of this app runs (raw
SQL, ``dbshell``, a data load with ``loaddata``, another program), and the mute that keeps
them quiet where Python writes the event itself.

Every create and delete of a schedule leaves exactly one event:

* the state functions (:func:`~..state.create_schedule`, :func:`~..state.delete_schedule`,
  the admin, the API, the commands, the sync of declared schedules) write their own event
  (who, from where, what), with the trigger muted;
* ``Schedule.save()`` of a new row, ``bulk_create()``, ``Model.delete()`` and
  ``QuerySet.delete()`` write one event per row from Python (source ``code``, no actor,
  :mod:`..state.code_events`), with the trigger muted;
* anything else is written by the trigger: source ``database``, no actor, no changes, the
  database clock. Such an event is not told to ``NOTIFIERS`` and sends no
  ``schedule_changed`` signal (no Python runs).

**The mute** is a per-session flag, set just before the Python path's own statement and
cleared right after it (:func:`muted`), so a raw statement later in the same transaction
is audited again:

* PostgreSQL: ``set_config('durable_schedules.audit', 'muted', true)``, transaction-local
  (a rolled-back savepoint takes it back with it);
* MySQL/MariaDB: the session variable ``@durable_schedules_audit``;
* SQLite: a row in the table ``durable_schedules_audit_mute`` (written inside the caller's
  transaction: SQLite has one writer, so no other connection sees it). A function defined
  on this app's connections, as the retention gate uses, cannot be used here: a trigger
  that calls an unknown function fails, and the ``sqlite3`` shell must still insert.

PostgreSQL: two statement-level triggers reading the transition tables (one ``INSERT``
of events per statement, whatever the number of rows). MySQL/MariaDB and SQLite: one row
trigger per ``INSERT`` and ``DELETE``. SQLite refuses to rename a table that a trigger
of another table names, so a migration that rebuilds the event table on SQLite must drop
these triggers first (:func:`uninstall`) and install them again after it
(:func:`.rebuilds.reinstall` does, once migration 0027 made the mute table).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connections

TABLE = "durable_schedules_schedule"
EVENTS = "durable_schedules_scheduleevent"
MUTE_TABLE = "durable_schedules_audit_mute"
PG_SETTING = "durable_schedules.audit"
MYSQL_VARIABLE = "@durable_schedules_audit"
#: The source of the events the triggers write.
SOURCE = "database"
_PG_FUNCTION = "durable_schedules_schedule_audit"
_TRIGGERS = {"created": "dds_schedule_created", "deleted": "dds_schedule_deleted"}
_COLUMNS = (
    "id, schedule_id, schedule_name, action, at, actor_id, actor_repr, source, changes, occurrence"
)


def _postgresql() -> list[str]:
    function = f"""
CREATE OR REPLACE FUNCTION {_PG_FUNCTION}() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO {EVENTS} ({_COLUMNS})
        SELECT gen_random_uuid(), id, name, 'created', statement_timestamp(), NULL, '',
               '{SOURCE}', '{{}}'::jsonb, NULL FROM dds_rows;
    ELSE
        INSERT INTO {EVENTS} ({_COLUMNS})
        SELECT gen_random_uuid(), id, name, 'deleted', statement_timestamp(), NULL, '',
               '{SOURCE}', '{{}}'::jsonb, NULL FROM dds_rows;
    END IF;
    RETURN NULL;
END
$$
"""
    unmuted = f"current_setting('{PG_SETTING}', true) IS DISTINCT FROM 'muted'"
    created, deleted = _TRIGGERS["created"], _TRIGGERS["deleted"]
    return [
        function,
        f"DROP TRIGGER IF EXISTS {created} ON {TABLE}",
        f"DROP TRIGGER IF EXISTS {deleted} ON {TABLE}",
        f"CREATE TRIGGER {created} AFTER INSERT ON {TABLE} REFERENCING NEW TABLE AS dds_rows "
        f"FOR EACH STATEMENT WHEN ({unmuted}) EXECUTE FUNCTION {_PG_FUNCTION}()",
        f"CREATE TRIGGER {deleted} AFTER DELETE ON {TABLE} REFERENCING OLD TABLE AS dds_rows "
        f"FOR EACH STATEMENT WHEN ({unmuted}) EXECUTE FUNCTION {_PG_FUNCTION}()",
    ]


def _mysql() -> list[str]:
    statements = []
    for action, name in _TRIGGERS.items():
        row, event = ("NEW", "INSERT") if action == "created" else ("OLD", "DELETE")
        statements += [
            f"DROP TRIGGER IF EXISTS {name}",
            f"CREATE TRIGGER {name} AFTER {event} ON {TABLE} FOR EACH ROW BEGIN "
            f"IF {MYSQL_VARIABLE} IS NULL OR {MYSQL_VARIABLE} <> 'muted' THEN "
            f"INSERT INTO {EVENTS} ({_COLUMNS}) VALUES (REPLACE(UUID(), '-', ''), "
            f"{row}.id, {row}.name, '{action}', UTC_TIMESTAMP(6), NULL, '', '{SOURCE}', "
            "'{}', NULL); END IF; END",
        ]
    return statements


def _sqlite() -> list[str]:
    now = "strftime('%Y-%m-%d %H:%M:%f', 'now') || '000'"  # microseconds, as Django writes
    statements = [f"CREATE TABLE IF NOT EXISTS {MUTE_TABLE} (muted integer NOT NULL)"]
    for action, name in _TRIGGERS.items():
        row, event = ("NEW", "INSERT") if action == "created" else ("OLD", "DELETE")
        statements += [
            f"DROP TRIGGER IF EXISTS {name}",
            f"CREATE TRIGGER {name} AFTER {event} ON {TABLE} "
            f"WHEN NOT EXISTS (SELECT 1 FROM {MUTE_TABLE}) BEGIN "
            f"INSERT INTO {EVENTS} ({_COLUMNS}) VALUES (lower(hex(randomblob(16))), "
            f"{row}.id, {row}.name, '{action}', {now}, NULL, '', '{SOURCE}', '{{}}', NULL); "
            "END",
        ]
    return statements


_BUILDERS = {"sqlite": _sqlite, "postgresql": _postgresql, "mysql": _mysql}


def install_sql(vendor: str) -> list[str]:
    """Statements that (re)create the audit triggers (and on SQLite the mute table) on
    ``vendor``; ``[]`` for other backends."""
    builder = _BUILDERS.get(vendor)
    return builder() if builder else []


def uninstall_sql(vendor: str, *, keep_mute_table: bool = False) -> list[str]:
    """Statements that drop the audit triggers on ``vendor`` (and on SQLite the mute table,
    unless ``keep_mute_table``: a table rebuild drops the triggers only)."""
    names = list(_TRIGGERS.values())
    if vendor == "postgresql":
        return [f"DROP TRIGGER IF EXISTS {n} ON {TABLE}" for n in names] + [
            f"DROP FUNCTION IF EXISTS {_PG_FUNCTION}()"
        ]
    if vendor == "mysql":
        return [f"DROP TRIGGER IF EXISTS {n}" for n in names]
    if vendor == "sqlite":
        drop_table = [] if keep_mute_table else [f"DROP TABLE IF EXISTS {MUTE_TABLE}"]
        return [f"DROP TRIGGER IF EXISTS {n}" for n in names] + drop_table
    return []


def install(connection: Any) -> None:
    """Create (or re-create) the audit triggers on ``connection``; idempotent."""
    with connection.cursor() as cursor:
        for stmt in install_sql(connection.vendor):
            cursor.execute(stmt)


def uninstall(connection: Any, *, keep_mute_table: bool = False) -> None:
    """Drop the audit triggers (a migration's rollback, or before a SQLite rebuild of the
    event table with ``keep_mute_table``)."""
    with connection.cursor() as cursor:
        for stmt in uninstall_sql(connection.vendor, keep_mute_table=keep_mute_table):
            cursor.execute(stmt)


def installed_here(connection: Any) -> bool:
    """True once migration 0027 set the audit up on ``connection``'s database (SQLite: its
    mute table exists; elsewhere: the trigger does). A table rebuild before 0027 must not
    install the triggers early."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = %s", [MUTE_TABLE]
            )
        elif connection.vendor == "postgresql":
            cursor.execute("SELECT 1 FROM pg_trigger WHERE tgname = %s", [_TRIGGERS["created"]])
        elif connection.vendor == "mysql":
            cursor.execute(
                "SELECT 1 FROM information_schema.triggers WHERE trigger_schema = DATABASE() "
                "AND trigger_name = %s",
                [_TRIGGERS["created"]],
            )
        else:
            return False
        return cursor.fetchone() is not None


def _set(cursor: Any, vendor: str, on: bool) -> None:
    if vendor == "postgresql":
        cursor.execute("SELECT set_config(%s, %s, true)", [PG_SETTING, "muted" if on else ""])
    elif vendor == "mysql":
        cursor.execute(f"SET {MYSQL_VARIABLE} = {'%s' if on else 'NULL'}", ["muted"] if on else [])
    elif vendor == "sqlite":
        cursor.execute(
            f"INSERT INTO {MUTE_TABLE} (muted) VALUES (1)" if on else f"DELETE FROM {MUTE_TABLE}"
        )


@contextmanager
def muted(using: str = "default") -> Iterator[None]:
    """Mute the audit triggers on ``using``'s connection for the block: the caller writes
    the events of the rows it inserts or deletes there itself. Must be used inside
    ``transaction.atomic`` (PostgreSQL scopes the flag to the transaction, SQLite's mute row
    is written in it). One statement to mute and one to unmute.

    When the block raises, PostgreSQL's flag and SQLite's mute row are left to the rollback
    that follows (no savepoint is opened inside the block: the rollback that undoes its
    statement undoes the mute too); MySQL's session variable, which no rollback undoes, is
    cleared at once."""
    conn = connections[using]
    vendor = conn.vendor
    with conn.cursor() as cursor:
        _set(cursor, vendor, True)
    try:
        yield
    except BaseException:
        if vendor == "mysql":
            try:  # past Django's broken-transaction check: the variable outlives it
                with conn.connection.cursor() as cursor:
                    cursor.execute(f"SET {MYSQL_VARIABLE} = NULL")
            except Exception:  # noqa: BLE001 - the connection is gone: so is its variable
                pass
        elif vendor == "sqlite" and not conn.needs_rollback:
            with conn.cursor() as cursor:
                _set(cursor, vendor, False)
        raise
    with conn.cursor() as cursor:
        _set(cursor, vendor, False)
