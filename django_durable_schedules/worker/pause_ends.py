"""A worker's duty of ending pauses (:class:`PauseEnds`): the schedules paused ``until``
an instant are resumed by :func:`.state.resume_paused` once it has come, and an idle
worker's sleep ends in time for the earliest end (issue #27).
"""

from __future__ import annotations

import logging
import math
import time
from datetime import datetime

from .. import state
from .clock import WorkerClock

logger = logging.getLogger("django_durable_schedules.worker")

#: Shortest time between two resumes while an end is known to have come (seconds): a row
#: another worker holds, or one whose values cannot be read, never makes a worker spin.
RESUME_RETRY_SECONDS = 1.0


class PauseEnds:
    """When a worker resumes paused schedules. The last look at the schedules (the sleep's
    :func:`.state.next_wakeup`) tells the earliest end (:meth:`note`); until a look has
    told it (at the start, after a resume) the duty runs at most every ``poll_seconds``.

    ``using``: the database alias; ``limit``: most schedules one resume takes; ``clock``:
    the worker's, told when a resume made the next due slot unknown."""

    def __init__(self, using: str, limit: int, poll_seconds: float, clock: WorkerClock):
        self.using = using
        self.clock = clock
        self.limit = limit
        self.poll_seconds = poll_seconds
        self.known = False  # the last look told the earliest end (None: no end at all)
        self.next_at: datetime | None = None
        self.last = -math.inf  # time.monotonic() of the last resume

    def note(self, ends_at: datetime | None) -> None:
        """What the last look said: the earliest end of a pause (database clock), or None."""
        self.known, self.next_at = True, ends_at

    def due(self, now: datetime, mono: float) -> bool:
        """Whether to resume now: the known end has come by ``now`` (the pass's database
        clock) and no resume ran in the last :data:`RESUME_RETRY_SECONDS`, or no end is
        known and none ran in the last ``poll_seconds`` (``mono``: ``time.monotonic()``)."""
        if not self.known:
            return mono - self.last >= self.poll_seconds
        return (
            self.next_at is not None
            and self.next_at <= now
            and mono - self.last >= RESUME_RETRY_SECONDS
        )

    def run(self, now: datetime) -> bool:
        """Resume the schedules whose pause ended, when :meth:`due`; each judged again by
        the database clock under its lock. Returns whether any was resumed (their next
        runs are then unknown to the worker's clock: the next claim asks the database)."""
        mono = time.monotonic()
        if not self.due(now, mono):
            return False
        resumed = state.resume_paused(limit=self.limit, using=self.using)
        self.last, self.known = mono, False
        if resumed:
            self.clock.due_known = False
        return bool(resumed)

    def seconds(self, estimate: datetime) -> float:
        """Seconds an idle worker may sleep before the next end (``estimate``: the database
        clock now): ``inf`` without one; never sooner than a retry allows."""
        if self.next_at is None:
            return math.inf
        wait = max(0.0, (self.next_at - estimate).total_seconds())
        return max(wait, self.last + RESUME_RETRY_SECONDS - time.monotonic())
