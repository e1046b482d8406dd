"""Worker bookkeeping: the heartbeat row, and when to wake up next."""

from __future__ import annotations

import logging
import math
import socket
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import connections
from django.db.models import DateTimeField, Exists, QuerySet, Subquery
from django.db.models.expressions import RawSQL
from django.utils import timezone as dj_timezone

from .. import timing
from ..db.batch import ROW_PROBLEMS
from ..db.clock import CLOCK_SQL, db_now
from ..db.fast_orm import read_values
from ..models import ConcurrencyGroup, Schedule, WorkerHeartbeat
from .claim_order import worker_pools
from .values import Wakeup

logger = logging.getLogger(__name__)


def next_wakeup(
    *, worker_id: str | None = None, using: str = "default", pools: Sequence[str] | None = None
) -> Wakeup:
    """The next due slot of an unleased runnable schedule of ``pools`` (default: the pool
    ``"default"``; the pools the worker claims), the next lease expiry and the
    next end of a pause (``ScheduleQuerySet.pause_ending_q``; aware UTC, None when there is
    none; ordered ``LIMIT 1`` reads). A schedule free to run
    the next slot of its open backfill (``backfill_ready``, by the database clock) makes
    ``due`` the past: at once.

    With ``worker_id`` (the worker's own call) the reads are subqueries of one statement
    on its heartbeat row, whose ``last_seen_at`` (database clock) is the "at once"; without
    it, or before the worker's first heartbeat, they are separate reads.

    Rows written behind ``save()`` never stop it: a lease expiry outside the instants the
    engine grants (``ScheduleQuerySet.lease_unreadable_q``: PostgreSQL ``-infinity``, a year
    beyond 9999, SQLite text) is never read, it makes ``lease_expiry`` "at once" (the
    recovery takes it); and if a value still cannot be read (SQLite text that sorts among
    instants), the answer comes from existence tests that read no value
    (:func:`_cautious_wakeup`): "at once" only for what a claim or a recovery can take
    now, else None (the worker polls)."""
    try:
        return _next_wakeup(worker_id, using, worker_pools(pools))
    except ROW_PROBLEMS as exc:
        if connections[using].in_atomic_block:
            raise
        logger.debug("the wake-up read met a value it cannot read (%s)", exc)
        return _cautious_wakeup(using, worker_pools(pools))


def _cautious_wakeup(using: str, pools: Sequence[str]) -> Wakeup:
    """The wake-up when a row's value cannot be read: "at once" (the database clock's now)
    for ``due`` when a row is claimable or free to run a backfill slot, and for
    ``lease_expiry`` when a lease expired; None otherwise."""
    now = db_now(using)
    schedules = Schedule.objects.using(using)
    mine = schedules.filter(pool__in=pools)
    due = mine.claimable(now).exists() or mine.backfill_ready(now).exists()
    expired = schedules.lease_expired(now).exists()
    resume = schedules.resume_due(now).exists()
    return Wakeup(
        due=now if due else None,
        lease_expiry=now if expired else None,
        resume=now if resume else None,
    )


def _next_wakeup(worker_id: str | None, using: str, pools: Sequence[str]) -> Wakeup:
    conn = connections[using]
    clock: Any = (
        RawSQL(CLOCK_SQL[conn.vendor], (), output_field=DateTimeField())
        if conn.vendor in CLOCK_SQL
        else db_now(using)
    )
    schedules = Schedule.objects.using(using)
    mine = schedules.filter(pool__in=pools)
    # Rows held back by their concurrency group are not waited for; the end of the hold
    # is (a group's rate_until, or the lapse of its full_until: state/group_rules.py).
    room = mine.filter(schedules.group_room_q(clock))
    waiting = room.waiting().order_by("next_run_at").values("next_run_at")[:1]
    groups = ConcurrencyGroup.objects.using(using)
    rate_end = groups.filter(rate_until__gt=clock).order_by("rate_until").values("rate_until")
    full_end = groups.filter(full_until__gt=clock).order_by("full_until").values("full_until")
    leased = (
        schedules.filter(schedules.lease_readable_q())
        .order_by("lease_expires_at")
        .values("lease_expires_at")[:1]
    )
    ending = (
        schedules.filter(schedules.pause_ending_q())
        .order_by("paused_until")
        .values("paused_until")[:1]
    )
    ready = Exists(mine.backfill_ready(clock))
    odd = Exists(schedules.filter(schedules.lease_unreadable_q()))
    if worker_id is not None:

        def build() -> QuerySet[Any]:
            return (
                WorkerHeartbeat.objects.using(using)
                .filter(worker_id=worker_id)
                .annotate(
                    due=Subquery(waiting, output_field=DateTimeField()),
                    expiry=Subquery(leased, output_field=DateTimeField()),
                    resume=Subquery(ending, output_field=DateTimeField()),
                    backfill=ready,
                    odd=odd,
                    rate_end=Subquery(rate_end[:1], output_field=DateTimeField()),
                    full_end=Subquery(full_end[:1], output_field=DateTimeField()),
                )
                .values_list(
                    "due",
                    "expiry",
                    "resume",
                    "backfill",
                    "odd",
                    "last_seen_at",
                    "rate_end",
                    "full_end",
                )
                .order_by("pk")[:1]
            )

        if conn.vendor in CLOCK_SQL:  # no parameter but the worker's id: compiled once
            found = read_values(("next_wakeup", worker_id, pools), using, build)
        else:
            found = list(build())
        row = found[0] if found else None
        if row is not None:
            due, expiry, resume, backfill, unreadable, seen, rate, full = row
            return Wakeup(
                due=_earliest(due, seen if backfill else None, rate, full),
                lease_expiry=_earliest(expiry, seen if unreadable else None),
                resume=resume,
            )
    due = waiting.values_list("next_run_at", flat=True).first()
    due = _earliest(due, rate_end.values_list("rate_until", flat=True).first())
    due = _earliest(due, full_end.values_list("full_until", flat=True).first())
    if mine.filter(ready).exists():
        due = _earliest(due, db_now(using))
    expiry = leased.values_list("lease_expires_at", flat=True).first()
    if schedules.filter(odd).exists():
        expiry = _earliest(expiry, db_now(using))
    resume = ending.values_list("paused_until", flat=True).first()
    return Wakeup(due=due, lease_expiry=expiry, resume=resume)


def _earliest(*instants: datetime | None) -> datetime | None:
    known = [t for t in instants if t is not None]
    return min(known) if known else None


def heartbeat(
    worker_id: str,
    *,
    in_flight: int = 0,
    runs_finished: int = 0,
    stopping: bool = False,
    started_at: datetime | None = None,
    using: str = "default",
    pools: Sequence[str] | None = None,
) -> datetime:
    """Upsert the worker's heartbeat row (database clock) and return the database time.
    Records host-minus-database clock skew, the tzdata release of the worker's zones
    (:func:`.timing.rules_version`) and the pools it claims (``pools``, default
    ``("default",)``; stored comma-joined in ``WorkerHeartbeat.pools``) for health."""
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
        "tzdata_version": timing.rules_version(),
        "stopped_at": now if stopping else None,
        "pools": ",".join(worker_pools(pools)),
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
