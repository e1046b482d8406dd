"""Where each of one worker's claims runs (:class:`Placement`): in its run thread, or in a
child process of the hard-timeout pool (:class:`.isolation.IsolationPool`), which is
started on first use and closed with the worker.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from . import isolation

if TYPE_CHECKING:
    from ...state import Claim

# The worker's logger: every line the worker package logs about its loop carries this name.
logger = logging.getLogger("django_durable_schedules.worker")


class Placement:
    """One worker's choice between thread and child process (main thread only)."""

    def __init__(self, worker_id: str, concurrency: int):
        self.worker_id = worker_id
        self.concurrency = concurrency  # the pool's size
        self.pool: isolation.IsolationPool | None = None  # started by the first claim
        self.checked = False  # unavailable_reason() looked at (and logged) once
        self.off: str | None = None  # why child processes cannot be used

    def pool_for(self, claim: Claim) -> isolation.IsolationPool | None:
        """The isolation pool if ``claim`` runs in a child process (hard timeout, see
        :func:`.isolation.isolates`), started on first use, else ``None`` (it runs in a
        thread). Where children cannot be used (:func:`.isolation.unavailable_reason`:
        logged once), every claim runs in a thread."""
        if not isolation.isolates(claim):
            return None
        if not self.checked:
            self.checked = True
            self.off = isolation.unavailable_reason()
            if self.off:
                logger.warning(
                    "worker %s: runs with timeout_seconds run in threads (a sync callback "
                    "past its timeout cannot be stopped): %s",
                    self.worker_id,
                    self.off,
                )
        if self.off:
            return None
        if self.pool is None:
            self.pool = isolation.IsolationPool(self.concurrency)
        return self.pool

    def close(self, force: bool = False) -> None:
        """Stop the pool's children, if it was started (:meth:`.IsolationPool.close`)."""
        if self.pool is not None:
            self.pool.close(force=force)
