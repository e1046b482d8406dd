"""The health snapshot: counts over schedules, leases, attempts and workers, and a verdict.

Used by the API's ``health/`` endpoint (200 when healthy, 503 when not), the admin page and
``manage.py schedules health``. Read-only; a handful of aggregate queries.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypedDict

from django.db.models import Count, Sum

from .conf import app_settings
from .models import RunAttempt, Schedule, ScheduleQuerySet, Status, WorkerHeartbeat


class DegradedRow(TypedDict):
    """One schedule in :attr:`Health.degraded_schedules`: paused because the engine could
    not run or evaluate it."""

    id: str
    name: str
    degraded_reason: str


#: Most degraded schedules a snapshot lists by name (the count is always complete).
DEGRADED_LISTED = 20


class WorkerRow(TypedDict):
    """One live worker in :attr:`Health.workers` (a ``WorkerHeartbeat`` row's fields)."""

    worker_id: str
    hostname: str
    pid: int
    started_at: datetime
    last_seen_at: datetime
    in_flight: int
    runs_finished: int
    clock_skew_seconds: float


@dataclass(frozen=True)
class Health:
    """A point-in-time health snapshot (instants aware UTC, durations seconds)."""

    healthy: bool
    problems: list[str]
    checked_at: datetime
    schedules: dict[str, int]
    due: int
    overdue: int
    degraded: int
    failing: int
    live_leases: int
    expired_leases: int
    open_attempts: int
    missed_slots: int
    live_workers: int
    workers: list[WorkerRow] = field(default_factory=list)
    degraded_schedules: list[DegradedRow] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict (datetimes as ISO 8601 strings)."""
        data = asdict(self)
        data["checked_at"] = self.checked_at.isoformat()
        for worker in data["workers"]:
            for key in ("started_at", "last_seen_at"):
                worker[key] = worker[key].isoformat() if worker[key] else None
        return data


def snapshot(
    *, now: datetime | None = None, overdue_after: float | None = None, using: str = "default"
) -> Health:
    """Build the :class:`Health` snapshot.

    Unhealthy when: schedules are due for longer than ``overdue_after`` seconds (default:
    ``max(60, 2 x POLL_MAX_SECONDS)``) - no worker is picking them up; leases are expired and
    unrecovered; schedules are degraded; a live worker's clock is skewed by more than
    ``SKEW_WARN_SECONDS``. Schedules that merely fail are counted, not fatal.
    """
    from .state import db_now

    now = now or db_now(using)
    overdue_after = (
        overdue_after if overdue_after is not None else max(60.0, 2 * app_settings.POLL_MAX_SECONDS)
    )
    schedules = Schedule.objects.using(using)
    by_status = {s: 0 for s in Status.values}
    for row in schedules.values("status").annotate(n=Count("id")):
        by_status[row["status"]] = row["n"]
    q = ScheduleQuerySet
    agg = schedules.aggregate(
        due=Count("id", filter=q.claimable_q(now)),
        overdue=Count("id", filter=q.claimable_q(now - timedelta(seconds=overdue_after))),
        degraded=Count("id", filter=q.degraded_q()),
        failing=Count("id", filter=q.failing_q()),
        live=Count("id", filter=q.lease_live_q(now)),
        expired=Count("id", filter=q.lease_expired_q(now)),
        missed=Sum("missed_count"),
    )
    degraded_rows: list[DegradedRow] = []
    if agg["degraded"]:
        degraded_rows = [
            DegradedRow(id=str(pk), name=name, degraded_reason=reason)
            for pk, name, reason in schedules.degraded()
            .order_by("name")
            .values_list("id", "name", "degraded_reason")[:DEGRADED_LISTED]
        ]
    open_attempts = RunAttempt.objects.using(using).filter(receipt__isnull=True).count()
    stale = now - timedelta(seconds=app_settings.WORKER_STALE_SECONDS)
    workers: list[WorkerRow] = list(
        WorkerHeartbeat.objects.using(using)
        .filter(stopped_at__isnull=True, last_seen_at__gte=stale)
        .values(
            "worker_id",
            "hostname",
            "pid",
            "started_at",
            "last_seen_at",
            "in_flight",
            "runs_finished",
            "clock_skew_seconds",
        )
    )
    problems = []
    if agg["overdue"]:
        problems.append(f"{agg['overdue']} schedules overdue by more than {overdue_after:.0f}s")
    if agg["expired"]:
        problems.append(f"{agg['expired']} expired leases not yet recovered")
    if agg["degraded"]:
        names = ", ".join(row["name"] for row in degraded_rows[:5])
        more = ", ..." if agg["degraded"] > 5 else ""
        problems.append(f"{agg['degraded']} schedules degraded: {names}{more}")
    for w in workers:
        if abs(w["clock_skew_seconds"]) > app_settings.SKEW_WARN_SECONDS:
            problems.append(
                f"worker {w['worker_id']} clock is {w['clock_skew_seconds']:+.1f}s off the database clock"
            )
    return Health(
        healthy=not problems,
        problems=problems,
        checked_at=now,
        schedules=by_status,
        due=agg["due"],
        overdue=agg["overdue"],
        degraded=agg["degraded"],
        failing=agg["failing"],
        live_leases=agg["live"],
        expired_leases=agg["expired"],
        open_attempts=open_attempts,
        missed_slots=agg["missed"] or 0,
        live_workers=len(workers),
        workers=workers,
        degraded_schedules=degraded_rows,
    )
