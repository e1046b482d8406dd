"""A worker's stop requests (:class:`StopRequests`): the first SIGTERM/SIGINT (or
``Worker.request_stop``) stops claiming and drains, a second one (or ``force``) stops at
once. A signal handler only notes the request; the loop polls for it and logs it.
"""

from __future__ import annotations

import logging
import signal
from typing import Any

# The worker's logger: every line the worker package logs about its loop carries this name.
logger = logging.getLogger("django_durable_schedules.worker")


class StopRequests:
    """The stop state of one worker. Plain attributes, not Events: a signal handler writes
    them (:meth:`install_handlers`); the loop reads them at each decision."""

    def __init__(self, worker_id: str):
        self.worker_id = worker_id
        self.stopping = False  # stop claiming and drain
        self.forced = False  # stop at once
        self.noted: list[tuple[int, bool]] = []  # (signum, forced) noted by the handler

    def note(self, force: bool = False) -> bool:
        """Record a stop request with plain attribute writes only; returns ``forced`` (this
        request is the second, or ``force``)."""
        if self.stopping or force:
            self.forced = True
        self.stopping = True
        return self.forced

    def install_handlers(self) -> None:
        """SIGTERM/SIGINT: first drains, second forces (main thread only).

        The handler takes no lock: it runs in the main thread between two bytecodes, maybe
        while that thread holds the worker's wake-up event's lock (``Event.set`` would
        deadlock) or is inside a logging handler. It only notes the request (``noted``);
        the loop polls for it (``Worker._pause``) and logs it (:meth:`log`).
        """

        def handler(signum: int, frame: Any) -> None:
            self.noted.append((signum, self.note()))

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)

    def log(self) -> None:
        """Log (and so clear) the signals the handler noted."""
        while self.noted:
            signum, forced = self.noted.pop(0)
            logger.warning(
                "worker %s got signal %s: %s",
                self.worker_id,
                signum,
                "forcing exit" if forced else "draining",
            )
