"""The worker's database outages: how long to wait before trying again
(:func:`reconnect_delay`) and the bookkeeping of the current outage (:class:`Outage`: when
it began, when it was last logged).

What the worker does on an outage (drop its connection, forget the last look at the
schedules) stays in the loop (``Worker._unreachable``); this module only times and logs it,
and judges when a ``--once`` pass gives up (:meth:`Outage.give_up`: an error that waiting
cannot cure, or one that lasts ``ONCE_GIVE_UP_SECONDS``).
"""

from __future__ import annotations

import logging
import time

from django.db import Error as DatabaseError

# The worker's logger: every line the worker package logs about its loop carries this name.
logger = logging.getLogger("django_durable_schedules.worker")

#: Shortest wait before trying the database again after an error (seconds).
RECONNECT_MIN_SECONDS = 0.2
#: Longest wait between two attempts to reach the database (seconds). Kept short so that
#: a worker is back within this long of its database and writes the outcomes of runs that
#: finished during the outage while their leases are still valid.
RECONNECT_MAX_SECONDS = 2.0
#: While the database stays unreachable, the error is logged again at most this often
#: (seconds); the first failure and the recovery are always logged.
RECONNECT_LOG_SECONDS = 30.0
#: ``run_scheduler --once``: the longest database outage a pass waits out before it gives up
#: (seconds). A long-running worker waits for its database however long it takes.
ONCE_GIVE_UP_SECONDS = 30.0

#: PostgreSQL SQLSTATE classes and codes that waiting does not cure: class 42 (a missing
#: privilege, table or column: 42501 insufficient_privilege, 42P01 undefined_table), 28
#: (login refused), 3D000 (no such database).
_PG_PERMANENT = ("42", "28", "3D000")
#: MariaDB/MySQL error numbers that waiting does not cure: access denied (1044, 1045, 1142,
#: 1143, 1227, 1370), no such database, table or column (1049, 1146, 1054).
_MYSQL_PERMANENT = frozenset({1044, 1045, 1049, 1054, 1142, 1143, 1146, 1227, 1370})
#: SQLite messages (their start) of errors that waiting does not cure.
_SQLITE_PERMANENT = ("no such table", "no such column", "attempt to write a readonly database")


class GaveUp(Exception):
    """A ``--once`` worker met a database error it cannot get past (:meth:`Outage.give_up`);
    its message says which and why (``run_scheduler`` turns it into a ``CommandError``)."""


def permanent(exc: BaseException) -> bool:
    """Whether the database error ``exc`` (Django's wrapper, or the driver's own) is one
    that waiting does not cure: the role lacks a privilege, a table, column or database is
    missing, the login is refused. Reads the driver's code (PostgreSQL SQLSTATE, MariaDB/
    MySQL error number, SQLite message); an error it does not know is not permanent."""
    for error in (exc, exc.__cause__):
        if error is None:
            continue
        sqlstate = getattr(error, "sqlstate", None) or getattr(error, "pgcode", None)
        if isinstance(sqlstate, str):
            return sqlstate.startswith(_PG_PERMANENT)
        args = getattr(error, "args", ())
        if args and isinstance(args[0], int) and not isinstance(args[0], bool):
            return args[0] in _MYSQL_PERMANENT
        if args and isinstance(args[0], str) and args[0].lower().startswith(_SQLITE_PERMANENT):
            return True
    return False


def reconnect_delay(outage_seconds: float) -> float:
    """Seconds to wait before the next attempt to reach the database, ``outage_seconds``
    after the first failure of the outage: as long as the outage has lasted so far, within
    ``RECONNECT_MIN_SECONDS`` .. ``RECONNECT_MAX_SECONDS`` (so the waits double: 0.2, 0.2,
    0.4, 0.8, 1.6, then 2 s). It grows with elapsed time, not with a count of failed
    attempts, so however many statements failed the worker is back within
    ``RECONNECT_MAX_SECONDS`` of its database."""
    return min(RECONNECT_MAX_SECONDS, max(RECONNECT_MIN_SECONDS, outage_seconds))


class Outage:
    """The current outage of one worker's database, if any (main thread only)."""

    def __init__(self, worker_id: str):
        self.worker_id = worker_id
        # time.monotonic() of the first database error of the current outage, or None.
        self.since: float | None = None
        self.logged = 0.0  # time.monotonic() of the outage's last error log line

    def failed(self, exc: DatabaseError, message: str) -> float:
        """Note a database error and return the seconds to wait before the next attempt
        (:func:`reconnect_delay`, timed from the outage's first error). Logs the first
        error of an outage, then at most every ``RECONNECT_LOG_SECONDS`` (``message`` has
        one ``%s``: the worker id)."""
        mono = time.monotonic()
        if self.since is None:
            self.since = self.logged = mono
            log = True
        else:
            log = mono - self.logged >= RECONNECT_LOG_SECONDS
        delay = reconnect_delay(mono - self.since)
        if log:
            self.logged = mono
            logger.error(
                message + " (retry in %.1fs, then at most every %.1fs): %s",
                self.worker_id,
                delay,
                RECONNECT_MAX_SECONDS,
                exc,
            )
        return delay

    def give_up(self, exc: BaseException) -> GaveUp | None:
        """For a ``--once`` pass, after :meth:`failed`: a :class:`GaveUp` to raise when the
        error ``exc`` is :func:`permanent` or the outage has lasted ``ONCE_GIVE_UP_SECONDS``,
        else None (wait and try again)."""
        if permanent(exc):
            why = "the database refused it and waiting will not change that"
            hint = " (a missing grant or table: see `manage.py runtime_grants` and `migrate`)"
        elif self.since is not None and time.monotonic() - self.since >= ONCE_GIVE_UP_SECONDS:
            why, hint = f"the database error lasted {ONCE_GIVE_UP_SECONDS:.0f}s", ""
        else:
            return None
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return GaveUp(f"worker {self.worker_id} gave up its --once pass, {why}: {first}{hint}")

    def ended(self) -> None:
        """The database answered: end the current outage, if any (logged with its length)."""
        if self.since is not None:
            logger.warning(
                "worker %s reached the database again after %.1fs",
                self.worker_id,
                time.monotonic() - self.since,
            )
            self.since = None
