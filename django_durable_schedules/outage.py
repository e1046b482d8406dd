"""The worker's database outages: how long to wait before trying again
(:func:`reconnect_delay`) and the bookkeeping of the current outage (:class:`Outage`: when
it began, when it was last logged).

Split out of :mod:`.worker` (which re-exports the constants and ``reconnect_delay``) as
flat modules beside it rather than a ``worker/`` package, so that ``Worker`` stays
``django_durable_schedules.worker.Worker`` (the documented sender of the signals). What
the worker does on an outage (drop its connection, forget the last look at the schedules)
stays in ``Worker._unreachable``; this module only times and logs it. Its log lines keep
the worker's logger name.
"""

from __future__ import annotations

import logging
import time

from django.db import Error as DatabaseError

# The worker's logger: these lines were the worker's before the split and keep its name.
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

    def ended(self) -> None:
        """The database answered: end the current outage, if any (logged with its length)."""
        if self.since is not None:
            logger.warning(
                "worker %s reached the database again after %.1fs",
                self.worker_id,
                time.monotonic() - self.since,
            )
            self.since = None
