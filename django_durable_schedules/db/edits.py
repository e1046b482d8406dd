"""Edits behind ``save()``: database triggers that make ``QuerySet.update()`` and raw SQL on
schedules behave like the state machine's own edits.

``Schedule.save()`` and the state functions plan ``next_run_at`` themselves. A write that
bypasses them (``Schedule.objects.filter(...).update(...)``, a data migration, ``dbshell``)
cannot, so a trigger on the schedule table does the part that needs the database:

* **a definition changed** (``kind``, ``interval_seconds``, ``cron``, ``timezone``,
  ``run_at``, ``start_at``, ``end_at``, ``rrule``, ``extra_specs``) while its fingerprint ``definition_hash`` did not
  (``save()`` always rewrites it), on an active, unleased row: ``next_run_at`` becomes now
  (database clock, whole seconds). The next claim then sees the fingerprint mismatch and
  re-plans to the first slot of the new definition strictly after now; it never fires a
  run by itself;
* **paused** (``status`` set to ``paused`` without a pending trigger): ``next_run_at``
  becomes NULL, as :func:`~django_durable_schedules.state.disable` leaves it;
* **resumed** (``paused`` -> ``active`` with no ``next_run_at``, i.e. not by ``enable()``):
  ``definition_hash`` is cleared and ``next_run_at`` becomes now, so the next claim
  re-plans from now: time spent paused produces no catch-up.

PostgreSQL and MariaDB/MySQL: one ``BEFORE UPDATE`` trigger (on PostgreSQL with a ``WHEN``
clause, so the claim and completion writes of the worker never enter PL/pgSQL); SQLite
cannot change ``NEW`` in a trigger, so three ``AFTER UPDATE OF ...`` triggers re-write the
row. SQLite drops a table's triggers when a migration rebuilds it: such a migration must
call :func:`install` again (:func:`.rebuilds.reinstall` does, with the guards).

The triggers name the definition columns the table has when they are installed (the
``rrule`` column arrives with migration 0008, ``extra_specs`` with 0028,
``exclusion_policy`` and ``rrule_business_days`` with 0029; earlier migrations install them
without it).
"""

from __future__ import annotations

from typing import Any

TABLE = "durable_schedules_schedule"
DEFINITION_COLUMNS = (
    "kind",
    "interval_seconds",
    "cron",
    "timezone",
    "run_at",
    "start_at",
    "end_at",
    "rrule",
    "extra_specs",
    "exclusion_policy",
    "rrule_business_days",
)
_PG_FUNCTION_NAME = "durable_schedules_schedule_edits"
_SQLITE_TRIGGERS = ("dds_schedule_edited", "dds_schedule_paused", "dds_schedule_resumed")


def _row(prefix: str, columns: tuple[str, ...]) -> str:
    return ", ".join(f"{prefix}.{c}" for c in columns)


def _postgresql(columns: tuple[str, ...]) -> list[str]:
    function = f"""
CREATE OR REPLACE FUNCTION {_PG_FUNCTION_NAME}() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.definition_hash IS NOT DISTINCT FROM OLD.definition_hash
       AND ({_row("NEW", columns)}) IS DISTINCT FROM ({_row("OLD", columns)})
       AND NEW.status = 'active' AND NEW.lease_token IS NULL THEN
        NEW.next_run_at := date_trunc('second', statement_timestamp());
    END IF;
    IF NEW.status = 'paused' AND OLD.status <> 'paused' AND NEW.triggered_at IS NULL THEN
        NEW.next_run_at := NULL;
    END IF;
    IF NEW.status = 'active' AND OLD.status = 'paused' AND NEW.next_run_at IS NULL
       AND NEW.lease_token IS NULL THEN
        NEW.definition_hash := '';
        NEW.next_run_at := date_trunc('second', statement_timestamp());
    END IF;
    RETURN NEW;
END
$$
"""
    when = (
        "OLD.status IS DISTINCT FROM NEW.status OR "
        "(OLD.definition_hash IS NOT DISTINCT FROM NEW.definition_hash "
        f"AND ({_row('NEW', columns)}) IS DISTINCT FROM ({_row('OLD', columns)}))"
    )
    return [
        function,
        f"DROP TRIGGER IF EXISTS {_PG_FUNCTION_NAME} ON {TABLE}",
        f"CREATE TRIGGER {_PG_FUNCTION_NAME} BEFORE UPDATE ON {TABLE} FOR EACH ROW "
        f"WHEN ({when}) EXECUTE FUNCTION {_PG_FUNCTION_NAME}()",
    ]


def _mysql(columns: tuple[str, ...]) -> list[str]:
    same = " AND ".join(f"NEW.{c} <=> OLD.{c}" for c in columns)
    return [
        f"DROP TRIGGER IF EXISTS {_PG_FUNCTION_NAME}",
        f"CREATE TRIGGER {_PG_FUNCTION_NAME} BEFORE UPDATE ON {TABLE} FOR EACH ROW BEGIN "
        f"IF NEW.definition_hash <=> OLD.definition_hash AND NOT ({same}) "
        "AND NEW.status = 'active' AND NEW.lease_token IS NULL THEN "
        "SET NEW.next_run_at = UTC_TIMESTAMP(); END IF; "
        "IF NEW.status = 'paused' AND OLD.status <> 'paused' AND NEW.triggered_at IS NULL THEN "
        "SET NEW.next_run_at = NULL; END IF; "
        "IF NEW.status = 'active' AND OLD.status = 'paused' AND NEW.next_run_at IS NULL "
        "AND NEW.lease_token IS NULL THEN "
        "SET NEW.definition_hash = ''; SET NEW.next_run_at = UTC_TIMESTAMP(); END IF; "
        "END",
    ]


def _sqlite(columns: tuple[str, ...]) -> list[str]:
    now = "strftime('%Y-%m-%d %H:%M:%S', 'now')"
    same = " AND ".join(f"NEW.{c} IS OLD.{c}" for c in columns)
    edited, paused, resumed = _SQLITE_TRIGGERS
    return [
        *(f"DROP TRIGGER IF EXISTS {name}" for name in _SQLITE_TRIGGERS),
        f"CREATE TRIGGER {edited} AFTER UPDATE OF {', '.join(columns)} ON {TABLE} "
        f"WHEN NEW.definition_hash IS OLD.definition_hash AND NOT ({same}) "
        "AND NEW.status = 'active' AND NEW.lease_token IS NULL "
        f"BEGIN UPDATE {TABLE} SET next_run_at = {now} WHERE id = NEW.id; END",
        f"CREATE TRIGGER {paused} AFTER UPDATE OF status ON {TABLE} "
        "WHEN NEW.status = 'paused' AND OLD.status <> 'paused' AND NEW.triggered_at IS NULL "
        "AND NEW.next_run_at IS NOT NULL "
        f"BEGIN UPDATE {TABLE} SET next_run_at = NULL WHERE id = NEW.id; END",
        f"CREATE TRIGGER {resumed} AFTER UPDATE OF status ON {TABLE} "
        "WHEN NEW.status = 'active' AND OLD.status = 'paused' AND NEW.next_run_at IS NULL "
        "AND NEW.lease_token IS NULL "
        f"BEGIN UPDATE {TABLE} SET definition_hash = '', next_run_at = {now} "
        "WHERE id = NEW.id; END",
    ]


_BUILDERS = {"sqlite": _sqlite, "postgresql": _postgresql, "mysql": _mysql}


def install_sql(vendor: str, columns: tuple[str, ...] = DEFINITION_COLUMNS) -> list[str]:
    """Statements that (re)create the triggers on ``vendor`` watching ``columns`` (the
    definition columns); ``[]`` for other backends."""
    builder = _BUILDERS.get(vendor)
    return builder(columns) if builder else []


def uninstall_sql(vendor: str) -> list[str]:
    """Statements that drop the triggers on ``vendor``."""
    if vendor == "postgresql":
        return [
            f"DROP TRIGGER IF EXISTS {_PG_FUNCTION_NAME} ON {TABLE}",
            f"DROP FUNCTION IF EXISTS {_PG_FUNCTION_NAME}()",
        ]
    if vendor == "mysql":
        return [f"DROP TRIGGER IF EXISTS {_PG_FUNCTION_NAME}"]
    if vendor == "sqlite":
        return [f"DROP TRIGGER IF EXISTS {name}" for name in _SQLITE_TRIGGERS]
    return []


def present_columns(connection: Any) -> tuple[str, ...]:
    """The definition columns the schedule table has now (a migration before 0008 runs
    without ``rrule``, one before 0028 without ``extra_specs``, before 0029 without ``exclusion_policy`` and
    ``rrule_business_days``)."""
    with connection.cursor() as cursor:
        names = {c.name for c in connection.introspection.get_table_description(cursor, TABLE)}
    return tuple(c for c in DEFINITION_COLUMNS if c in names)


def install(connection: Any) -> None:
    """Create (or re-create) the triggers on ``connection`` for the definition columns the
    table has; idempotent."""
    columns = present_columns(connection)
    with connection.cursor() as cursor:
        for stmt in install_sql(connection.vendor, columns):
            cursor.execute(stmt)


def uninstall(connection: Any) -> None:
    """Drop the triggers (migration rollback only)."""
    with connection.cursor() as cursor:
        for stmt in uninstall_sql(connection.vendor):
            cursor.execute(stmt)
