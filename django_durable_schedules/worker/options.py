"""The options of one worker (:class:`WorkerOptions`, what ``run_scheduler``'s arguments
set) and its default id (:func:`default_worker_id`)."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Sequence
from dataclasses import dataclass


def default_worker_id() -> str:
    """``host:pid:random`` - unique per process."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


@dataclass
class WorkerOptions:
    """Options of one worker (seconds for durations); ``None`` means the setting's default.
    ``pools``: the pools it claims (``run_scheduler --pool``); empty or None: ``("default",)``."""

    worker_id: str | None = None
    batch_size: int | None = None
    concurrency: int | None = None
    lease_seconds: float | None = None
    poll_max_seconds: float | None = None
    claim_ahead_seconds: float | None = None
    once: bool = False
    using: str = "default"
    pools: Sequence[str] | None = None
