"""A worker's heartbeat row (:class:`Heartbeats`): written every ``renew_every`` seconds
and once more when it stops, each reading of the database clock handed to the worker's
clock (:class:`.clock.WorkerClock`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from datetime import datetime

from django.db import Error as DatabaseError
from django.db import connections

from .. import state
from .clock import WorkerClock

logger = logging.getLogger("django_durable_schedules.worker")

#: How long a forced stop waits for its last heartbeat (``stopped_at``) to be written, in
#: seconds: the write runs on a connection of its own (the worker's may have been closed by
#: an idle pause) and a database that does not answer within this never holds the exit.
FORCED_STOP_REPORT_SECONDS = 1.0


class Heartbeats:
    """The heartbeats of worker ``worker_id`` on database ``using``, claiming ``pools``;
    ``started_at`` is the database time of its first one (kept across beats)."""

    def __init__(self, worker_id: str, using: str, clock: WorkerClock, pools: Sequence[str] = ()):
        self.worker_id = worker_id
        self.using = using
        self.clock = clock
        self.pools = tuple(pools)
        self.started_at: datetime | None = None

    def beat(self, in_flight: int, runs_finished: int) -> None:
        """Write the heartbeat (:func:`.state.heartbeat`) and anchor the clock's estimate
        to the database time it read (from the instant before the write was sent: see
        :meth:`.clock.WorkerClock.note_reading`). Database errors propagate (the loop's
        outage)."""
        sent = time.monotonic()
        db_now = state.heartbeat(
            self.worker_id,
            in_flight=in_flight,
            runs_finished=runs_finished,
            started_at=self.started_at,
            using=self.using,
            pools=self.pools,
        )
        self.started_at = self.started_at or db_now
        self.clock.note_reading(db_now, sent)

    def final(self, in_flight: int, runs_finished: int) -> None:
        """Say the worker stopped (``stopped_at``); a database error is logged, not raised."""
        try:
            state.heartbeat(
                self.worker_id,
                in_flight=in_flight,
                runs_finished=runs_finished,
                stopping=True,
                using=self.using,
                pools=self.pools,
            )
        except DatabaseError:
            logger.warning("worker %s could not record its stop", self.worker_id)

    def final_bounded(
        self, in_flight: int, runs_finished: int, seconds: float = FORCED_STOP_REPORT_SECONDS
    ) -> bool:
        """:meth:`final` for a forced stop: on a thread of its own (its own connection,
        opened if need be and closed after), waited for at most ``seconds``. Returns whether
        the stop was written in time; when not, the thread is left (a daemon: the exit does
        not wait for it) and the heartbeat goes stale as it would have."""

        def write() -> None:
            try:
                self.final(in_flight, runs_finished)
            finally:
                connections.close_all()

        thread = threading.Thread(target=write, name="dds-final-beat", daemon=True)
        thread.start()
        thread.join(seconds)
        if thread.is_alive():
            logger.warning(
                "worker %s could not record its stop within %.1fs", self.worker_id, seconds
            )
            return False
        return True
