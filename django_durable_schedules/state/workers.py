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
from ..models import (
    ChainSlot,
    ChainSlotStatus,
    ConcurrencyGroup,
    OccurrenceLease,
    Schedule,
    WorkerHeartbeat,
)
from .claim_order import worker_pools
from .values import Wakeup
from .wakeup_due import Levels, due_reads, levels, levels_moved, walked

logger = logging.getLogger(__name__)


def next_wakeup(
    *, worker_id: str | None = None, using: str = "default", pools: Sequence[str] | None = None
) -> Wakeup:
    """The next due slot of an unleased runnable schedule of ``pools`` (default: the pool
    ``"default"``; the pools the worker claims), the next lease expiry and the
    next end of a pause (``ScheduleQuerySet.pause_ending_q``; aware UTC, None when there is
    none; ordered ``LIMIT 1`` reads). A schedule free to run
    the next slot of its open backfill (``backfill_ready``, by the database clock), or a
    kind ``after`` schedule free to settle a chain slot (``chain_ready``), makes ``due``
    the past: at once; the next deadline of a waiting chain slot is a due instant too.

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
    for ``due`` when a row is claimable or free to run a backfill or chain slot, and for
    ``lease_expiry`` when a lease expired; None otherwise."""
    now = db_now(using)
    schedules = Schedule.objects.using(using)
    mine = schedules.filter(pool__in=pools)
    due = (
        mine.claimable(now).exists()
        or mine.backfill_ready(now).exists()
        or mine.chain_ready(now).exists()
    )
    expired = (
        schedules.lease_expired(now).exists()
        or OccurrenceLease.objects.using(using).expired(now).exists()
    )
    resume = schedules.resume_due(now).exists()
    return Wakeup(
        due=now if due else None,
        lease_expiry=now if expired else None,
        resume=now if resume else None,
    )


def _next_wakeup(worker_id: str | None, using: str, pools: Sequence[str]) -> Wakeup:
    """The reads of :func:`next_wakeup` at the priority levels last found in ``pools``
    (:func:`.wakeup_due.levels`); when a row is at a level they do not name, again at the
    levels found now, and if the levels moved once more, by the walk (no level to miss)."""
    conn = connections[using]
    clock: Any = (
        RawSQL(CLOCK_SQL[conn.vendor], (), output_field=DateTimeField())
        if conn.vendor in CLOCK_SQL
        else db_now(using)
    )
    attempts = (
        lambda: levels(using, pools),
        lambda: levels(using, pools, refresh=True),
        lambda: walked(pools),
    )
    for attempt in attempts:
        found = attempt()
        values = _read_wakeup(worker_id, using, pools, clock, found)
        if not values["moved"]:
            break
    return _wakeup_of(values, values["seen"])


def _read_wakeup(
    worker_id: str | None, using: str, pools: Sequence[str], clock: Any, found: Levels
) -> dict[str, Any]:
    """The values of the reads at the levels ``found``, by name (``due``: the earliest of
    the due reads; ``seen``: the "at once" instant, None when nothing is at once): one
    statement on the worker's heartbeat row (compiled once per levels where the database
    clock is SQL) when ``worker_id`` has one, else one read each."""
    conn = connections[using]
    if worker_id is not None:

        def build() -> QuerySet[Any]:
            # Built only when compiled (once per worker and levels where the clock is SQL):
            # building the reads costs more Python than running the compiled statement.
            dues, instants, flags = _wakeup_reads(using, pools, clock, found)
            if (*instants, *flags) != WAKEUP_READS:
                raise AssertionError(f"wake-up reads {[*instants, *flags]} != {WAKEUP_READS}")
            subqueries = {
                **{f"dds_due_{n}": due for n, due in enumerate(dues)},
                **instants,
            }
            return (
                WorkerHeartbeat.objects.using(using)
                .filter(worker_id=worker_id)
                .annotate(
                    **{k: Subquery(q, output_field=DateTimeField()) for k, q in subqueries.items()},
                    **flags,
                )
                .values_list(*subqueries, *flags, "last_seen_at")
                .order_by("pk")[:1]
            )

        if conn.vendor in CLOCK_SQL:  # no parameter but the worker's id: compiled once
            key = ("next_wakeup", worker_id, tuple(pools), found)
            rows = read_values(key, using, build)
        else:
            rows = list(build())
        if rows:
            row = list(rows[0])
            heads = len(row) - len(WAKEUP_READS) - 1
            values = dict(zip([*WAKEUP_READS, "seen"], row[heads:], strict=True))
            values["due"] = _earliest(*row[:heads])
            return values
    dues, instants, flags = _wakeup_reads(using, pools, clock, found)
    values = {k: _first(q) for k, q in instants.items()}
    values["due"] = _earliest(*(_first(q) for q in dues))
    values.update({k: Schedule.objects.using(using).filter(f).exists() for k, f in flags.items()})
    at_once = values["backfill"] or values["chain"] or values["odd"]
    values["seen"] = db_now(using) if at_once else None
    return values


def _first(q: QuerySet[Any]) -> Any:
    row = q.first()
    return next(iter(row.values())) if row else None


#: The names of :func:`_wakeup_reads`' instants, then of its flags, in their order (its
#: due reads come first, as many as the levels read).
WAKEUP_READS = (
    "rate_end",
    "full_end",
    "expiry",
    "occurrence_expiry",
    "resume",
    "chain_deadline",
    "backfill",
    "chain",
    "odd",
    "moved",
)


def _wakeup_reads(
    using: str, pools: Sequence[str], clock: Any, found: Levels
) -> tuple[list[QuerySet[Any]], dict[str, QuerySet[Any]], dict[str, Any]]:
    """The wake-up's reads at ``clock``: the due reads (ordered ``LIMIT 1`` reads whose
    earliest is ``due``, the next slot of an unleased runnable row of ``pools`` its
    concurrency group does not hold back, at the priority levels ``found``:
    :func:`.wakeup_due.due_reads`), the ordered ``LIMIT 1`` reads of its other instants by
    name (``rate_end`` / ``full_end``: the next end of a group's hold; ``expiry``,
    ``resume``; ``chain_deadline``: the next deadline of a waiting chain slot) and its
    flags (``backfill``: a backfill slot free to run now; ``chain``: a kind ``after``
    schedule free to settle a chain slot now; ``odd``: a lease expiry that cannot be
    read; ``moved``: a row at a level ``found`` does not name, :func:`.wakeup_due.levels_moved`)."""
    schedules = Schedule.objects.using(using)
    mine = schedules.filter(pool__in=pools)
    groups = ConcurrencyGroup.objects.using(using)
    instants = {
        "rate_end": groups.filter(ConcurrencyGroup.rate_holding_q(clock))
        .order_by("rate_until")
        .values("rate_until")[:1],
        "full_end": groups.filter(ConcurrencyGroup.full_holding_q(clock))
        .order_by("full_until")
        .values("full_until")[:1],
        "expiry": schedules.filter(schedules.lease_readable_q())
        .order_by("lease_expires_at")
        .values("lease_expires_at")[:1],
        # overlap_policy allow: the next expiry of an occurrence's lease (a row held at
        # max_parallel is claimable again by then at the latest: parallel_full_until).
        "occurrence_expiry": OccurrenceLease.objects.using(using)
        .filter(schedules.lease_readable_q())
        .order_by("lease_expires_at")
        .values("lease_expires_at")[:1],
        "resume": schedules.filter(schedules.pause_ending_q())
        .order_by("paused_until")
        .values("paused_until")[:1],
        # The next deadline of a chain slot still waiting (kind after: counted missed then).
        "chain_deadline": ChainSlot.objects.using(using)
        .filter(status=ChainSlotStatus.WAITING, deadline__gt=clock, downstream__pool__in=pools)
        .order_by("deadline")
        .values("deadline")[:1],
    }
    flags = {
        "backfill": Exists(mine.backfill_ready(clock)),
        "chain": Exists(mine.chain_ready(clock)),
        "odd": Exists(schedules.filter(schedules.lease_unreadable_q())),
        "moved": levels_moved(using, pools, found),
    }
    return due_reads(using, pools, clock, found), instants, flags


def _wakeup_of(values: dict[str, Any], now: datetime | None) -> Wakeup:
    """The :class:`.values.Wakeup` of the reads' ``values``; ``now``: "at once" (for a
    backfill slot free to run, a lease expiry that cannot be read)."""
    return Wakeup(
        due=_earliest(
            values["due"],
            values["rate_end"],
            values["full_end"],
            values["chain_deadline"],
            now if values["backfill"] or values["chain"] else None,
        ),
        lease_expiry=_earliest(
            values["expiry"], values["occurrence_expiry"], now if values["odd"] else None
        ),
        resume=values["resume"],
    )


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
