"""The fleet probe (:func:`probe`, ``health/probe/``): is the scheduler fleet doing its job?
The fleet part of the one :func:`.verdict.verdict`, for a load balancer, Kubernetes, an
uptime monitor and the admin schedule list's banner; the whole snapshot, for people, is
:func:`.health.snapshot` (which re-exports :func:`probe` and :class:`Probe`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.db.models import Count, Min

from .conf import app_settings
from .models import Schedule
from .verdict import due_now_q, live_heartbeats, verdict


def utc_text(value: datetime) -> str:
    """``value`` (an aware datetime) as the health answers' JSON text: ISO 8601 in UTC,
    ending in ``Z`` (``"2026-12-06T13:00:00Z"``)."""
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True)
class Probe:
    """The fleet's verdict for a load balancer, Kubernetes or an uptime monitor: is the
    scheduler doing its job? Names no schedule (safe to expose)."""

    ok: bool
    checked_at: datetime
    database: bool
    live_workers: int
    #: How long the longest-waiting due schedule has waited for a claim (seconds; 0 when
    #: none is due), by the database clock.
    claim_lag_seconds: float
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict (``checked_at`` in UTC, ending in ``Z``)."""
        data = asdict(self)
        data["checked_at"] = utc_text(self.checked_at)
        return data


def probe(*, now: datetime | None = None, using: str = "default") -> Probe:
    """The fleet probe (:class:`Probe`): the fleet part of the one :func:`verdict`. It
    passes when the database answers, a live worker (heartbeat within
    ``WORKER_STALE_SECONDS``) is there for any schedule due for more than
    ``DUE_GRACE_SECONDS``, at least ``PROBE_MIN_WORKERS`` workers are live while a schedule
    waits for one, and no due schedule has waited longer than ``PROBE_MAX_LAG_SECONDS`` for
    a claim. A degraded or failing schedule does not fail it (that is one schedule's
    problem: see :func:`snapshot`, which fails whenever this does). Two indexed queries (a
    third, ``exists()``, when workers are short); never raises for a database error (it is
    the verdict ``database: false``)."""
    from django.db import DatabaseError

    from .state import db_now

    checked = datetime.now(UTC)
    waiting = False
    try:
        now = now or db_now(using)
        checked = now
        live = live_heartbeats(now, using).count()
        agg = (
            Schedule.objects.using(using)
            .claimable(now)
            .aggregate(oldest=Min("next_run_at"), due=Count("id", filter=due_now_q(now)))
        )
        if live < app_settings.PROBE_MIN_WORKERS and not agg["due"]:
            waiting = Schedule.objects.using(using).waiting().exists()
    except DatabaseError as exc:
        reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        judged = verdict(database=reason, live_workers=0, due=0)
        return Probe(False, checked, False, 0, 0.0, judged.messages())
    oldest = agg["oldest"]
    lag = max(0.0, (now - oldest).total_seconds()) if oldest is not None else 0.0
    judged = verdict(live_workers=live, due=agg["due"], waiting=waiting, claim_lag_seconds=lag)
    return Probe(judged.fleet_ok, now, True, live, round(lag, 3), judged.messages(fleet_only=True))
