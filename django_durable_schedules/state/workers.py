"""Worker bookkeeping: the heartbeat row, and when to wake up next."""

from __future__ import annotations

import math
import socket
from datetime import datetime

from django.utils import timezone as dj_timezone

from ..db.clock import db_now
from ..models import Schedule, WorkerHeartbeat
from .values import Wakeup


def next_wakeup(*, using: str = "default") -> Wakeup:
    """The next due slot of an unleased active schedule and the next lease expiry (two
    index-ordered ``LIMIT 1`` reads)."""
    due = (
        Schedule.objects.using(using)
        .waiting()  # as claim_due: runnable and unleased
        .order_by("next_run_at")
        .values_list("next_run_at", flat=True)
        .first()
    )
    expiry = (
        Schedule.objects.using(using)
        .filter(lease_expires_at__isnull=False)
        .order_by("lease_expires_at")
        .values_list("lease_expires_at", flat=True)
        .first()
    )
    return Wakeup(due=due, lease_expiry=expiry)


def heartbeat(
    worker_id: str,
    *,
    in_flight: int = 0,
    runs_finished: int = 0,
    stopping: bool = False,
    started_at: datetime | None = None,
    using: str = "default",
) -> datetime:
    """Upsert the worker's heartbeat row (database clock) and return the database time.
    Records host-minus-database clock skew for health."""
    import os

    host_now = dj_timezone.now()
    now = db_now(using)
    values = {
        "hostname": socket.gethostname()[:200],
        "pid": os.getpid(),
        "last_seen_at": now,
        "in_flight": in_flight,
        "runs_finished": runs_finished,
        "clock_skew_seconds": round((host_now - now).total_seconds(), 3),
        "stopped_at": now if stopping else None,
    }
    updated = WorkerHeartbeat.objects.using(using).filter(worker_id=worker_id).update(**values)
    if not updated:
        WorkerHeartbeat.objects.using(using).create(
            worker_id=worker_id, started_at=started_at or now, **values
        )
    return now


def seconds_until(when: datetime | None, now: datetime) -> float:
    """Seconds from ``now`` to ``when`` (``inf`` for None, 0 if past); never overflows."""
    if when is None:
        return math.inf
    return max(0.0, (when - now).total_seconds())
