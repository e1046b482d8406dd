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

from .guards import TABLES as APPEND_ONLY_TABLES

#: The runtime role's privileges on an append-only table (:data:`.guards.TABLES`): reading
#: and appending only. Retention (``prune_runs``) runs as the owner.
HISTORY_PRIVILEGES: tuple[str, ...] = ("SELECT", "INSERT")
#: The runtime role's privileges on every other table of the app (schedules, heartbeats,
#: backfills, exclusion calendars and their dates, the schedule-calendar links): the
#: workers, the admin and the API create, edit and delete their rows.
TABLE_PRIVILEGES: tuple[str, ...] = ("SELECT", "INSERT", "UPDATE", "DELETE")
#: What the runtime role must not hold on the append-only tables (revoked, in case a
#: blanket grant gave it).
_HISTORY_REVOKED = ("UPDATE", "DELETE", "TRUNCATE", "TRIGGER", "REFERENCES")


def runtime_privileges() -> dict[str, tuple[str, ...]]:
    """The runtime role's privileges on each table of the app, derived from its models:
    ``{table name: privileges}`` for every model of the ``durable_schedules`` app config,
    auto-created many-to-many tables included (a new model gets its grant without a list
    to keep up to date). Append-only tables get :data:`HISTORY_PRIVILEGES`, every other
    table :data:`TABLE_PRIVILEGES`. The mutable tables come first, each group in the
    models' order. Needs the app registry (``django.setup()``)."""
    from django.apps import apps

    models = apps.get_app_config("durable_schedules").get_models(include_auto_created=True)
    tables = list(dict.fromkeys(m._meta.db_table for m in models if not m._meta.proxy))
    privileges = {t: TABLE_PRIVILEGES for t in tables if t not in APPEND_ONLY_TABLES}
    privileges.update((t, HISTORY_PRIVILEGES) for t in tables if t in APPEND_ONLY_TABLES)
    return privileges


def runtime_grants_sql(vendor: str, role: str, database: str = "") -> list[str]:
    """The statements that give ``role`` the runtime privileges on this app's tables.

    ``vendor`` is ``"postgresql"`` or ``"mysql"`` (MariaDB too); ``role`` is a PostgreSQL
    role name, or a MariaDB/MySQL account as written in a ``GRANT`` (``'app'@'%'``);
    ``database`` is the MariaDB/MySQL schema (required there). On PostgreSQL the
    append-only tables' other privileges are revoked too; on MariaDB/MySQL privileges only
    add up, so the role must hold no database-wide ``UPDATE``/``DELETE``/``DROP``/``TRIGGER``
    grant. Raises ``ValueError`` for another vendor, or a ``database`` missing on MySQL.
    """
    privileges_of = runtime_privileges()
    if vendor == "postgresql":
        quoted = _pg_name(role)
        statements = [
            f"GRANT {', '.join(privileges)} ON {_pg_name(table)} TO {quoted}"
            for table, privileges in privileges_of.items()
        ]
        statements += [
            f"REVOKE {', '.join(_HISTORY_REVOKED)} ON {_pg_name(table)} FROM {quoted}"
            for table, privileges in privileges_of.items()
            if privileges == HISTORY_PRIVILEGES
        ]
        return statements
    if vendor == "mysql":
        if not database:
            raise ValueError("MariaDB/MySQL grants need the database (schema) name")
        schema = "`" + database.replace("`", "``") + "`"
        return [
            f"GRANT {', '.join(privileges)} ON {schema}.`{table.replace('`', '``')}` TO {role}"
            for table, privileges in privileges_of.items()
        ]
    raise ValueError(f"no runtime grants for the {vendor!r} backend (PostgreSQL, MariaDB, MySQL)")


def _pg_name(name: str) -> str:
    """``name`` as a quoted PostgreSQL identifier."""
    return '"' + name.replace('"', '""') + '"'
