"""Session settings of a worker's own connection: a bound on how long it waits for a lock.

The worker's main thread renews leases, completes runs and heartbeats. If it waited for a
row lock for as long as someone held it (a callback that locks its own schedule row, an
operator's open transaction), the whole worker would stop: no heartbeats, no renewals, no
timeouts, signals noticed only at the end. Its transactions already skip rows that others
have locked where the database can (``SELECT ... FOR UPDATE SKIP LOCKED``); this module
bounds every other lock wait of that thread's connection:

* PostgreSQL: ``SET lock_timeout`` (milliseconds) for the session;
* MariaDB/MySQL: ``SET SESSION innodb_lock_wait_timeout`` (whole seconds, at least 1);
* SQLite: unchanged; its busy timeout is ``DATABASES[...]["OPTIONS"]["timeout"]``
  (Python's default 5 s), and a writer holding SQLite's one write lock blocks every
  other writer by design.

A wait past the bound raises an ``OperationalError`` in the worker, which handles it like
any database error (it reconnects and carries on); nothing is half-written.

Only the thread that calls :func:`limit_lock_waits` is affected (Django connections are
per thread): callbacks run in other threads and keep the database's defaults.
"""

from __future__ import annotations

import math
import threading
from typing import Any

from django.db import connections

_local = threading.local()


def _statement(vendor: str, seconds: float) -> str | None:
    if vendor == "postgresql":
        return f"SET lock_timeout = {max(1, math.ceil(seconds * 1000))}"
    if vendor == "mysql":
        return f"SET SESSION innodb_lock_wait_timeout = {max(1, math.ceil(seconds))}"
    return None


def _apply(connection: Any, seconds: float) -> None:
    sql = _statement(connection.vendor, seconds)
    if sql is None:
        return
    with connection.cursor() as cursor:
        cursor.execute(sql)


def apply_lock_wait_limit(using: str) -> None:
    """Apply the calling thread's limit (:func:`limit_lock_waits`) to its connection
    ``using`` if this connection does not have it yet; a no-op in any other thread. Called
    by :mod:`.locks` before a transaction of the state machine locks rows, so an idle
    worker, which locks nothing, sends no extra statement when it reconnects."""
    limits: dict[str, float] | None = getattr(_local, "limits", None)
    if not limits or using not in limits:
        return
    connection = connections[using]
    connection.ensure_connection()
    raw = connection.connection
    if getattr(connection, "_durable_schedules_lock_limited", None) is raw:
        return
    _apply(connection, limits[using])
    connection._durable_schedules_lock_limited = raw  # type: ignore[attr-defined]


def limit_lock_waits(using: str, seconds: float) -> None:
    """Bound every lock wait of the calling thread's connection ``using`` to ``seconds``
    (rounded up to milliseconds on PostgreSQL, to whole seconds on MariaDB/MySQL). The
    setting is sent on each connection before its first row-locking transaction
    (:func:`apply_lock_wait_limit`), and again after a reconnection. A non-finite or
    non-positive ``seconds`` leaves the database's default."""
    if not (isinstance(seconds, int | float) and math.isfinite(seconds) and seconds > 0):
        return
    limits = getattr(_local, "limits", None)
    if limits is None:
        limits = _local.limits = {}
    limits[using] = float(seconds)


def clear_lock_wait_limit(using: str) -> None:
    """Stop applying :func:`limit_lock_waits` to the calling thread's connections ``using``
    (an open connection keeps its setting until it is closed)."""
    limits = getattr(_local, "limits", None)
    if limits:
        limits.pop(using, None)
