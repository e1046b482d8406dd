"""Two database roles: the role that runs ``migrate`` owns the tables (and so the triggers
that keep history append-only); the runtime role of workers, the admin and the API gets
only the privileges they need, so it cannot rewrite history even by hand.

Only an owner (or a superuser) may ``DROP``/``ALTER`` a table, disable or drop its
triggers, replace the guard function (PostgreSQL) or ``TRUNCATE``; MariaDB/MySQL need
the ``TRIGGER`` privilege to drop a trigger. The runtime role gets none of these, and on
the append-only tables (attempts, receipts, audit events) only ``SELECT`` and ``INSERT``:
without ``DELETE`` it cannot use the retention gate either, so ``prune_runs`` runs as the
owner (or a retention role given ``DELETE`` on those three tables).

:func:`runtime_grants_sql` gives the statements, which ``manage.py runtime_grants ROLE``
prints for the owner to run (docs/operations.md, "Two database roles").
"""

from __future__ import annotations

#: Privileges of the runtime role on each of this app's tables.
RUNTIME_PRIVILEGES: dict[str, tuple[str, ...]] = {
    "durable_schedules_schedule": ("SELECT", "INSERT", "UPDATE", "DELETE"),
    "durable_schedules_workerheartbeat": ("SELECT", "INSERT", "UPDATE", "DELETE"),
    "durable_schedules_runattempt": ("SELECT", "INSERT"),
    "durable_schedules_runreceipt": ("SELECT", "INSERT"),
    "durable_schedules_scheduleevent": ("SELECT", "INSERT"),
}
#: What the runtime role must not hold on the append-only tables (revoked, in case a
#: blanket grant gave it).
_HISTORY_REVOKED = ("UPDATE", "DELETE", "TRUNCATE", "TRIGGER", "REFERENCES")


def runtime_grants_sql(vendor: str, role: str, database: str = "") -> list[str]:
    """The statements that give ``role`` the runtime privileges on this app's tables.

    ``vendor`` is ``"postgresql"`` or ``"mysql"`` (MariaDB too); ``role`` is a PostgreSQL
    role name, or a MariaDB/MySQL account as written in a ``GRANT`` (``'app'@'%'``);
    ``database`` is the MariaDB/MySQL schema (required there). On PostgreSQL the
    append-only tables' other privileges are revoked too; on MariaDB/MySQL privileges only
    add up, so the role must hold no database-wide ``UPDATE``/``DELETE``/``DROP``/``TRIGGER``
    grant. Raises ``ValueError`` for another vendor, or a ``database`` missing on MySQL.
    """
    if vendor == "postgresql":
        quoted = '"' + role.replace('"', '""') + '"'
        statements = [
            f"GRANT {', '.join(privileges)} ON {table} TO {quoted}"
            for table, privileges in RUNTIME_PRIVILEGES.items()
        ]
        statements += [
            f"REVOKE {', '.join(_HISTORY_REVOKED)} ON {table} FROM {quoted}"
            for table, privileges in RUNTIME_PRIVILEGES.items()
            if "UPDATE" not in privileges
        ]
        return statements
    if vendor == "mysql":
        if not database:
            raise ValueError("MariaDB/MySQL grants need the database (schema) name")
        schema = "`" + database.replace("`", "``") + "`"
        return [
            f"GRANT {', '.join(privileges)} ON {schema}.`{table}` TO {role}"
            for table, privileges in RUNTIME_PRIVILEGES.items()
        ]
    raise ValueError(f"no runtime grants for the {vendor!r} backend (PostgreSQL, MariaDB, MySQL)")
