"""Row locks for the state machine's transactions: ``SELECT ... FOR UPDATE`` (``SKIP LOCKED``
where the database has it), and on SQLite, which has no row locks, the database write lock
taken first. Called only inside a transaction that :mod:`..state` opened.
"""

from __future__ import annotations

from typing import Any, TypeVar

from django.db import connections
from django.db.models import QuerySet

from ..models import Schedule, WorkerHeartbeat
from .session import apply_lock_wait_limit

_QS = TypeVar("_QS", bound=QuerySet[Any])


def lock_for_write(using: str) -> None:
    """On backends without row locks (SQLite), take the database write lock first so the
    read that follows cannot be raced by another writer (a no-op UPDATE acquires it)."""
    conn = connections[using]
    apply_lock_wait_limit(using)  # the worker's own transactions never wait long for a lock
    if not conn.features.has_select_for_update:
        with conn.cursor() as cursor:
            cursor.execute(
                f"UPDATE {conn.ops.quote_name(WorkerHeartbeat._meta.db_table)} SET pid = pid WHERE 1 = 0"
            )


def locked(qs: _QS, using: str, *, skip_locked: bool) -> _QS:
    """``qs`` with ``SELECT ... FOR UPDATE`` (``SKIP LOCKED`` with ``skip_locked`` where
    the database has it), the lock wait bounded; unchanged where there are no row locks."""
    features = connections[using].features
    if not features.has_select_for_update:
        return qs
    apply_lock_wait_limit(using)
    if skip_locked and features.has_select_for_update_skip_locked:
        return qs.select_for_update(skip_locked=True)
    return qs.select_for_update()


def get_locked(schedule_id: Any, using: str) -> Schedule:
    """The schedule ``schedule_id``, locked for this transaction (waits for another lock)."""
    lock_for_write(using)
    return locked(
        Schedule.objects.using(using).filter(pk=schedule_id), using, skip_locked=False
    ).get()
