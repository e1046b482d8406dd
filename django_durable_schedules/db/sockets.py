"""Client-side bounds on the worker's own connection: no read or write waits for ever.

``LOCK_TIMEOUT_SECONDS`` bounds a lock wait, but the server enforces it: a server that
stops answering (a failover that leaves the old primary's connections half open, a proxy
that holds a connection without forwarding) leaves the worker blocked in a read until the
kernel gives up, about 15 minutes on Linux. :func:`bound_sockets` makes the connection of
the calling thread (the worker's main thread: claims, renewals, completions, heartbeats)
give up after ``DURABLE_SCHEDULES["SOCKET_TIMEOUT_SECONDS"]`` instead; the worker then
handles the error as any database error (drops the connection, reconnects, writes the
outcomes that waited first).

What is set, for a bound of ``t`` seconds:

* PostgreSQL, connection options (libpq): ``connect_timeout`` ``t`` (at least 2),
  ``keepalives`` 1, ``keepalives_idle`` ``t/2``, ``keepalives_interval`` ``t/6``,
  ``keepalives_count`` 3 (whole seconds, at least 1), ``tcp_user_timeout`` ``t`` in
  milliseconds. They find a peer that is gone. A peer that still acknowledges packets but
  never answers (a proxy, a hung server) is found by psycopg 3's own wait: every
  statement, fetch, commit and rollback of the connection waits at most ``t`` seconds
  for its answer, then the connection is closed and an ``OperationalError`` raised.
* MariaDB/MySQL, connection options (mysqlclient): ``connect_timeout``, ``read_timeout``
  and ``write_timeout``, ``t`` rounded up to whole seconds (each read and write of the
  client library waits at most that long).
* SQLite: nothing (no socket).

The options are merged under the ``OPTIONS`` of the database's settings, so a value the
user set there explicitly wins, and are given to this thread's connection only: the
settings dictionary is shared by every thread, so the thread's connection gets a copy
with the merged options. Callback threads and child processes keep the user's settings.
With psycopg's connection pool (``OPTIONS["pool"]``) nothing is changed: the pool's
connections are shared with the callbacks' threads.
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Callable
from typing import Any

from django.db import connections
from django.db.backends.signals import connection_created

logger = logging.getLogger(__name__)

#: The attribute of a Django connection (a ``DatabaseWrapper``) that holds its bound.
_BOUND_ATTR = "_durable_schedules_socket_timeout"
#: The attribute of a psycopg connection whose ``wait`` is already bounded.
_WAIT_ATTR = "_durable_schedules_wait_bound"


#: Longest bound (seconds): a larger value is taken as this (the drivers' options are
#: C ints: libpq's ``tcp_user_timeout`` in milliseconds, Linux's keepalive idle at most
#: 32767 s).
MAX_SECONDS = 3600.0


def valid_seconds(value: Any) -> float | None:
    """``value`` as a bound in seconds, at most ``MAX_SECONDS``; None (no bound) for None,
    a non-number, a bool, zero, a negative or a non-finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or value <= 0:
        return None
    return min(float(value), MAX_SECONDS)


def connect_options(vendor: str, seconds: float) -> dict[str, Any]:
    """The connection options that bound every socket wait of a connection of ``vendor``
    (``connection.vendor``) to about ``seconds`` (a value of :func:`valid_seconds`); empty
    for SQLite and other vendors. See the module's docstring for the values."""
    whole = max(1, math.ceil(seconds))
    if vendor == "postgresql":
        return {
            "connect_timeout": max(2, whole),  # libpq ignores less than 2
            "keepalives": 1,
            "keepalives_idle": max(1, math.ceil(seconds / 2)),
            "keepalives_interval": max(1, math.ceil(seconds / 6)),
            "keepalives_count": 3,
            "tcp_user_timeout": max(1, math.ceil(seconds * 1000)),
        }
    if vendor == "mysql":
        return {"connect_timeout": whole, "read_timeout": whole, "write_timeout": whole}
    return {}


def _bound_wait(raw: Any, seconds: float) -> None:
    """Make every wait of the psycopg 3 connection ``raw`` give up after ``seconds``: close
    the connection and raise ``psycopg.OperationalError``. Needs a psycopg whose
    ``Connection.wait`` takes ``timeout`` (3.2+); otherwise, and for psycopg2, only the
    connection options apply."""
    if getattr(raw, _WAIT_ATTR, None) == seconds:
        return
    wait = getattr(type(raw), "wait", None)
    if wait is None or "timeout" not in inspect.signature(wait).parameters:
        return
    import psycopg

    timeout_error = getattr(psycopg.errors, "_WaitTimeout", psycopg.OperationalError)
    unbound = wait.__get__(raw)

    def bounded(gen: Any, interval: Any = None, timeout: float | None = None) -> Any:
        kwargs = {} if interval is None else {"interval": interval}
        limit = seconds if timeout is None else min(timeout, seconds)
        try:
            return unbound(gen, timeout=limit, **kwargs)
        except timeout_error as exc:
            if timeout is not None and timeout <= seconds:
                raise  # the caller's own timeout
            raw.close()  # mid-protocol: the connection cannot be used again
            raise psycopg.OperationalError(
                f"no answer from the database within {seconds:g}s"
                " (DURABLE_SCHEDULES['SOCKET_TIMEOUT_SECONDS']); connection closed"
            ) from exc

    raw.wait = bounded
    setattr(raw, _WAIT_ATTR, seconds)


def _connected(sender: Any, connection: Any, **kwargs: Any) -> None:
    """``connection_created`` receiver: bound the new connection of a bounded Django
    connection (one that :func:`bound_sockets` marked)."""
    seconds = getattr(connection, _BOUND_ATTR, None)
    if seconds is not None and connection.vendor == "postgresql":
        _bound_wait(connection.connection, seconds)


def bound_sockets(using: str, seconds: Any) -> Callable[[], None]:
    """Bound every socket wait of the calling thread's connection ``using`` to about
    ``seconds`` (see the module's docstring); returns a function that undoes it (the
    connection open then keeps its bounds until it is closed). ``seconds`` None, zero,
    negative, non-finite or not a number: nothing is changed. A connection already open
    without the bounds is closed, unless it is inside a transaction (it is bounded from
    its next connection on; psycopg 3's wait at once)."""
    bound = valid_seconds(seconds)
    connection = connections[using]
    original = connection.settings_dict
    options = original.get("OPTIONS") or {}
    if bound is None or "pool" in options:
        return lambda: None
    connection_created.connect(_connected, dispatch_uid="durable_schedules.sockets")
    merged = {**connect_options(connection.vendor, bound), **options}
    bounded_settings = {**original, "OPTIONS": merged}
    connection.settings_dict = bounded_settings
    setattr(connection, _BOUND_ATTR, bound)
    if connection.connection is not None:
        if connection.vendor == "postgresql":
            _bound_wait(connection.connection, bound)
        if not connection.in_atomic_block:
            connection.close()  # reopened with the options by the next statement

    def undo() -> None:
        if connection.settings_dict is bounded_settings:
            connection.settings_dict = original
        if getattr(connection, _BOUND_ATTR, None) == bound:
            delattr(connection, _BOUND_ATTR)

    return undo
