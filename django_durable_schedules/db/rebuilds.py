"""What a table rebuild drops, installed again: SQLite applies ``AlterField``, ``AddField``
of a NOT NULL column and friends by copying the table, which drops its triggers (the
append-only guards of :mod:`.guards`, the edit triggers of :mod:`.edits`) and the claim
index of migration 0004 (kept out of the migration state, so Django does not re-create it).
Migrations that may rebuild the schedule or run tables call :func:`reinstall` last (and
first when unapplied). Idempotent on every backend.

The audit triggers of :mod:`.audit` (migration 0027) are on the schedule table and write
to the event table. SQLite refuses to rename a table while a trigger names a table that
is missing, which a rebuild of the *event* table does: a migration that may rebuild it
calls :func:`drop_audit` first (and :func:`reinstall` last, which installs them again).
"""

from __future__ import annotations

from typing import Any

#: Migration 0004's claim index, as SQLite (the only backend that rebuilds) creates it.
CLAIM_INDEX_SQL = (
    'CREATE INDEX IF NOT EXISTS "dds_sched_claim_idx" ON "durable_schedules_schedule" '
    "(\"next_run_at\") WHERE lease_token IS NULL AND status IN ('active', 'paused')"
)


def reinstall(apps: Any, schema_editor: Any) -> None:
    """A ``RunPython`` operation: install the guards and edit triggers again, and on SQLite
    the claim index (``apps`` is unused: the triggers are raw SQL)."""
    from . import audit, edits, guards

    guards.install(schema_editor.connection)
    edits.install(schema_editor.connection)
    if audit.installed_here(schema_editor.connection):  # from 0027 on
        audit.install(schema_editor.connection)
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(CLAIM_INDEX_SQL)


def drop_audit(apps: Any, schema_editor: Any) -> None:
    """A ``RunPython`` operation before a rebuild of the event table on SQLite: drop the
    audit triggers (:mod:`.audit`; the mute table stays, so :func:`reinstall` installs
    them again). A no-op on the other backends, which rebuild no table."""
    from . import audit

    if schema_editor.connection.vendor == "sqlite":
        audit.uninstall(schema_editor.connection, keep_mute_table=True)
