"""The health snapshot: counts over schedules, leases, attempts and workers, and a verdict.

Used by the API's ``health/`` endpoint (200 when healthy, 503 when not), the admin page and
``manage.py schedules health``; :func:`probe` is the fleet's part, for machines (and the
admin schedule list's banner: :mod:`.fleet_probe`, re-exported here). Both take their verdict from :func:`.verdict.verdict`
(re-exported here). Read-only; a fixed handful of queries (the counts over the schedules
in one, each read by an index: :mod:`.health_counts`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, TypedDict

from django.db.models import F

from .attempt_health import RECENT_CLAIMS_CHECKED, open_attempts
from .backfill_health import (
    BACKFILLS_LISTED,
    CancelledBackfillRow,
    StalledBackfillRow,
    cancelled_backfills,
    stalled_backfills,
)
from .conf import app_settings
from .deadlines import LATE_LISTED, LateRow, late_schedules
from .fleet_probe import Probe, probe, utc_text
from .group_health import GroupRow, groups_at_limit, unreadable_groups
from .health_counts import schedule_counts
from .models import Schedule, Status
from .pool_health import live_pools, pools_without_workers
from .state.snapshot_reads import read_without_jit
from .verdict import (
    DUE_GRACE_SECONDS,
    FLEET_CODES,
    Problem,
    Verdict,
    live_heartbeats,
    verdict,
)

__all__ = [
    "BACKFILLS_LISTED",
    "DEGRADED_LISTED",
    "DUE_GRACE_SECONDS",
    "FLEET_CODES",
    "CancelledBackfillRow",
    "DegradedRow",
    "Health",
    "LATE_LISTED",
    "LateRow",
    "Probe",
    "RECENT_CLAIMS_CHECKED",
    "Problem",
    "StalledBackfillRow",
    "Verdict",
    "WorkerRow",
    "cancelled_backfills",
    "probe",
    "snapshot",
    "stalled_backfills",
    "verdict",
]


class DegradedRow(TypedDict):
    """One schedule in :attr:`Health.degraded_schedules`: paused because the engine could
    not run or evaluate it."""

    id: str
    name: str
    degraded_reason: str


#: Most degraded schedules a snapshot lists by name (the count is always complete).
DEGRADED_LISTED = 20


class PausedRow(TypedDict):
    """One schedule in :attr:`Health.paused_schedules`: paused by an operator (or after
    failures), not degraded, with its note and the end of its pause (None: none)."""

    id: str
    name: str
    pause_reason: str
    paused_until: datetime | None


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
    tzdata_version: str
    #: The pools it claims, comma-separated (``run_scheduler --pool``).
    pools: str


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
    #: What deserves a look but does not make the fleet unhealthy (no 503, exit 0).
    warnings: list[str] = field(default_factory=list)
    stalled_backfills: list[StalledBackfillRow] = field(default_factory=list)
    cancelled_backfills: list[CancelledBackfillRow] = field(default_factory=list)
    #: Schedules past the deadline of the occurrence they owe (computed on read, reported
    #: by a worker or not): a warning, separate from failing and degraded.
    late: int = 0
    late_schedules: list[LateRow] = field(default_factory=list)
    #: Up to :data:`DEGRADED_LISTED` schedules paused but not degraded, soonest end first.
    paused_schedules: list[PausedRow] = field(default_factory=list)
    #: Pools with a schedule due now that no live worker claims (``run_scheduler --pool``),
    #: by name; up to the first :data:`.pool_health.POOLS_SCANNED` pools are looked at.
    pools_without_workers: list[str] = field(default_factory=list)
    #: Concurrency groups at their limit (information: a full group is normal operation)
    #: and the ones whose rate cannot be read (a problem: none of their runs starts).
    groups_at_limit: list[GroupRow] = field(default_factory=list)
    unreadable_groups: list[str] = field(default_factory=list)
    #: ``open_attempts`` split: the runs in flight (holding their schedule's lease) and the
    #: attempts without a receipt that hold no lease (left by an edit behind the engine; a
    #: warning), the latter among the newest ``open_attempts_checked`` claims, or over the
    #: whole table when ``open_attempts_exact`` (:mod:`.attempt_health`).
    open_attempts_in_flight: int = 0
    stray_attempts: int = 0
    open_attempts_exact: bool = True
    open_attempts_checked: int | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict; datetimes as ISO 8601 in UTC ending in ``Z``
        (``2027-06-01T10:00:00.123456Z``), as every datetime the API answers."""
        data = asdict(self)
        data["checked_at"] = utc_text(self.checked_at)
        for worker in data["workers"]:
            for key in ("started_at", "last_seen_at"):
                worker[key] = utc_text(worker[key]) if worker[key] else None
        for row in data["stalled_backfills"]:
            row["since"] = utc_text(row["since"])
        for row in data["cancelled_backfills"]:
            row["cancelled_at"] = utc_text(row["cancelled_at"])
        for row in data["late_schedules"]:
            row["deadline_at"] = utc_text(row["deadline_at"]) if row["deadline_at"] else None
        for row in data["paused_schedules"]:
            row["paused_until"] = utc_text(row["paused_until"]) if row["paused_until"] else None
        for row in data["groups_at_limit"]:
            row["rate_until"] = utc_text(row["rate_until"]) if row["rate_until"] else None
        return data


def snapshot(
    *,
    now: datetime | None = None,
    overdue_after: float | None = None,
    exact: bool = False,
    using: str = "default",
) -> Health:
    """Build the :class:`Health` snapshot; ``healthy`` and ``problems`` are :func:`verdict`'s.

    Unhealthy when any fleet problem fails the probe (:func:`probe`: a schedule due for more
    than ``DUE_GRACE_SECONDS`` and no live worker, at once; fewer than ``PROBE_MIN_WORKERS``
    live workers while a schedule waits; a claim waiting longer than
    ``PROBE_MAX_LAG_SECONDS``), and when: schedules are due for longer than ``overdue_after``
    seconds (default: ``max(60, 2 x POLL_MAX_SECONDS)``); leases are expired and
    unrecovered; schedules are degraded; a live worker's clock is skewed by more than
    ``SKEW_WARN_SECONDS``; while a worker is live, a pool has a schedule due now and no
    live worker claims it (``pools_without_workers``, :mod:`.pool_health`); a concurrency
    group's rate cannot be read (``unreadable_groups``: its runs never start). Schedules
    that merely fail, and groups at their limit (``groups_at_limit``, :mod:`.group_health`),
    are listed, not fatal.

    Warnings (listed, never unhealthy): schedules late, past the deadline
    (``deadline_seconds``) of the occurrence they owe, by the database clock, whether a
    worker reported it or none runs (:func:`.deadlines.late_schedules`; ``late``,
    ``late_schedules``); a backfill that makes no progress - open, with
    slots left, none running, and no slot claimed or finished for longer than
    ``BACKFILL_STALL_SECONDS`` (:func:`stalled_backfills`); a backfill a worker cancelled
    in the last 24 hours, with its reason (:func:`cancelled_backfills`); live workers that
    read different tzdata releases (:func:`tzdata_problem`: a rolling upgrade passes
    through it; left so, two hosts may place a zoned slot an hour apart); attempts without
    a receipt that hold no lease (``stray_attempts``: left by an edit behind the engine).

    ``open_attempts`` is the runs in flight plus those strays, with reads bounded by indexes
    at any size of the history (:mod:`.attempt_health`): the strays are looked for among
    the newest :data:`RECENT_CLAIMS_CHECKED` claims only, unless ``exact`` (an anti-join
    of the whole attempts table with the receipts: seconds at ten million attempts).
    """
    # Without PostgreSQL's JIT: the aggregates' plans cost enough to compile
    # their expressions, which took longer than the queries themselves (docs/benchmarks.md).
    return read_without_jit(lambda: _snapshot(now, overdue_after, exact, using), using)


def _snapshot(now: datetime | None, overdue_after: float | None, exact: bool, using: str) -> Health:
    from .state import db_now

    now = now or db_now(using)
    overdue_after = (
        overdue_after if overdue_after is not None else max(60.0, 2 * app_settings.POLL_MAX_SECONDS)
    )
    schedules = Schedule.objects.using(using)
    # The counts, each by an index (:mod:`.health_counts`): none reads the whole table.
    agg = schedule_counts(now, overdue_after, using)
    by_status = {s: agg[f"status_{s}"] for s in Status.values}
    degraded_rows: list[DegradedRow] = []
    if agg["degraded"]:
        degraded_rows = [
            DegradedRow(id=str(pk), name=name, degraded_reason=reason)
            for pk, name, reason in schedules.degraded()
            .order_by("name")
            .values_list("id", "name", "degraded_reason")[:DEGRADED_LISTED]
        ]
    paused_rows = _paused_rows(schedules) if by_status[Status.PAUSED] > agg["degraded"] else []
    opened = open_attempts(exact=exact, using=using)
    workers: list[WorkerRow] = list(
        live_heartbeats(now, using).values(
            "worker_id",
            "hostname",
            "pid",
            "started_at",
            "last_seen_at",
            "in_flight",
            "runs_finished",
            "clock_skew_seconds",
            "tzdata_version",
            "pools",
        )
    )
    orphaned = (
        pools_without_workers(now, live_pools(w["pools"] for w in workers), using)
        if agg["due"]
        else []
    )
    oldest = agg["oldest"]
    unreadable = unreadable_groups(using)
    judged = verdict(
        live_workers=len(workers),
        due=agg["due_past_grace"],
        waiting=agg["waiting"],
        claim_lag_seconds=max(0.0, (now - oldest).total_seconds()) if oldest else 0.0,
        overdue=agg["overdue"],
        overdue_after=overdue_after,
        expired_leases=agg["expired"],
        degraded=agg["degraded"],
        degraded_names=[row["name"] for row in degraded_rows[:5]],
        clock_skews=[(w["worker_id"], w["clock_skew_seconds"]) for w in workers],
        pools_without_workers=orphaned,
        unreadable_groups=unreadable,
    )
    stalled = stalled_backfills(now, using=using)
    cancelled = cancelled_backfills(now, using=using)
    warnings = [
        f"stalled backfill of {row['schedule']}: {row['done']}/{row['total']} slots done, "
        f"no slot claimed or finished since {utc_text(row['since'])}"
        for row in stalled
    ] + [
        f"backfill of {row['schedule']} cancelled by a worker at "
        f"{utc_text(row['cancelled_at'])} ({row['done']}/{row['total']} slots done): "
        f"{row['reason']}"
        for row in cancelled
    ]
    if opened.stray:
        warnings.append(stray_warning(opened.stray, opened.checked))
    mixed = tzdata_problem(workers)
    if mixed:
        warnings.append(mixed)
    late, late_rows = late_schedules(now, using)
    if late:
        names = ", ".join(row["name"] for row in late_rows[:5]) + (", ..." if late > 5 else "")
        what = "schedule" if late == 1 else "schedules"
        warnings.insert(0, f"{late} {what} late (past the deadline of their occurrence): {names}")
    return Health(
        healthy=judged.healthy,
        problems=judged.messages(),
        checked_at=now,
        schedules=by_status,
        due=agg["due"],
        overdue=agg["overdue"],
        degraded=agg["degraded"],
        failing=agg["failing"],
        live_leases=agg["live"],
        expired_leases=agg["expired"],
        open_attempts=opened.total,
        missed_slots=agg["missed"],
        live_workers=len(workers),
        workers=workers,
        degraded_schedules=degraded_rows,
        warnings=warnings,
        stalled_backfills=stalled,
        cancelled_backfills=cancelled,
        late=late,
        late_schedules=late_rows,
        paused_schedules=paused_rows,
        pools_without_workers=orphaned,
        groups_at_limit=groups_at_limit(now, using),
        unreadable_groups=unreadable,
        open_attempts_in_flight=opened.in_flight,
        stray_attempts=opened.stray,
        open_attempts_exact=opened.exact,
        open_attempts_checked=opened.checked,
    )


def stray_warning(stray: int, checked: int | None) -> str:
    """The warning of ``stray`` attempts without a receipt that hold no lease, found among
    the newest ``checked`` claims (None: every attempt)."""
    what = "attempt has no receipt and holds" if stray == 1 else "attempts have no receipt and hold"
    where = "" if checked is None else f" (among the newest {checked:,} claims)"
    return (
        f"{stray} {what} no lease{where}: left by an edit behind the "
        "engine, no worker will ever finish them"
    )


def _paused_rows(schedules: Any) -> list[PausedRow]:
    """The paused, not degraded schedules (:class:`PausedRow`), those with an end first."""
    rows = (
        schedules.filter(status=Status.PAUSED, degraded_reason="")
        .order_by(F("paused_until").asc(nulls_last=True), "name")
        .values_list("id", "name", "pause_reason", "paused_until")[:DEGRADED_LISTED]
    )
    return [
        PausedRow(id=str(pk), name=name, pause_reason=reason, paused_until=until)
        for pk, name, reason, until in rows
    ]


def tzdata_problem(workers: list[WorkerRow]) -> str | None:
    """The problem of live ``workers`` that read different tzdata releases (a zone's
    rules differ between them, so they plan some of its schedules at other instants), or
    None. Workers that record no release (older versions; "unknown") are left out."""
    by_version: dict[str, list[str]] = {}
    for w in workers:
        version = w.get("tzdata_version") or ""
        if version and version != "unknown":
            by_version.setdefault(version, []).append(w["worker_id"])
    if len(by_version) < 2:
        return None
    parts = []
    for version, ids in sorted(by_version.items()):
        names = ", ".join(sorted(ids)[:3]) + (", ..." if len(ids) > 3 else "")
        parts.append(f"{version} ({names})")
    return "live workers read different tzdata releases: " + "; ".join(parts)
