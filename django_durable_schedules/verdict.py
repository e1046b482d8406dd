"""The one health verdict: which facts about the fleet make it unhealthy, and why.

Every health surface reads :func:`verdict`: :func:`.health.snapshot` (the API's ``health/``,
the admin's health page and schedule-list banner, ``manage.py schedules health``) and
:func:`.health.probe` (``health/probe/``). A problem is either about the **fleet** (the
database does not answer; schedules are due and no worker is alive; fewer live workers than
``PROBE_MIN_WORKERS`` while schedules wait for one; a due schedule has waited longer than
``PROBE_MAX_LAG_SECONDS``) or about **schedules** (overdue, expired leases, degraded,
a skewed worker clock, a pool with due schedules that no live worker claims, a
concurrency group whose rate cannot be read). The probe fails on fleet problems; the
snapshot on any problem. So whenever the probe fails, the snapshot is unhealthy too, for the same reason in the same
words. This module judges facts; the two readers gather them, with the helpers below so
that "live" and "due" mean one thing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple

from django.db.models import Q, QuerySet
from django.utils.translation import ngettext

from .conf import app_settings
from .models import ScheduleQuerySet, WorkerHeartbeat

__all__ = [
    "DUE_GRACE_SECONDS",
    "FLEET_CODES",
    "Problem",
    "Verdict",
    "due_now_q",
    "live_heartbeats",
    "verdict",
]

#: A runnable, unleased schedule counts as due for the verdict once its ``next_run_at`` is
#: this many seconds in the past by the database clock (a worker's pass needs a moment).
DUE_GRACE_SECONDS = 5.0

#: The codes of the problems that are about the fleet (they fail the probe too).
FLEET_CODES = frozenset({"database", "no_live_worker", "too_few_workers", "claim_lag"})


class Problem(NamedTuple):
    """One reason for an unhealthy verdict: a stable ``code`` and a message for people."""

    code: str
    message: str


@dataclass(frozen=True)
class Verdict:
    """The verdict on a set of facts: ``healthy`` (no problem at all), ``fleet_ok`` (no
    problem whose code is in :data:`FLEET_CODES`: the probe's verdict) and ``problems``
    in a fixed order."""

    healthy: bool
    fleet_ok: bool
    problems: tuple[Problem, ...] = ()

    def messages(self, *, fleet_only: bool = False) -> list[str]:
        """The problems' messages (only the fleet's with ``fleet_only``)."""
        return [p.message for p in self.problems if not fleet_only or p.code in FLEET_CODES]


def live_heartbeats(now: datetime, using: str = "default") -> QuerySet[WorkerHeartbeat]:
    """Heartbeats of live workers at ``now`` (database clock): not stopped, and seen within
    ``WORKER_STALE_SECONDS``."""
    stale = now - timedelta(seconds=app_settings.WORKER_STALE_SECONDS)
    return WorkerHeartbeat.objects.using(using).filter(
        stopped_at__isnull=True, last_seen_at__gte=stale
    )


def due_now_q(now: datetime) -> Q:
    """Schedules due for the verdict at ``now`` (database clock): claimable, with a
    ``next_run_at`` more than :data:`DUE_GRACE_SECONDS` in the past. Paused (untriggered),
    cancelled, completed, failed and leased rows do not count."""
    return ScheduleQuerySet.claimable_q(now - timedelta(seconds=DUE_GRACE_SECONDS))


def verdict(
    *,
    database: str | None = None,
    live_workers: int,
    due: int,
    waiting: bool = False,
    claim_lag_seconds: float = 0.0,
    overdue: int = 0,
    overdue_after: float = 0.0,
    expired_leases: int = 0,
    degraded: int = 0,
    degraded_names: Iterable[str] = (),
    clock_skews: Iterable[tuple[str, float]] = (),
    pools_without_workers: Iterable[str] = (),
    unreadable_groups: Iterable[str] = (),
) -> Verdict:
    """Judge the facts. ``database``: None when it answered, else why not (then nothing else
    is judged). ``live_workers``: see :func:`live_heartbeats`; ``due``: rows matching
    :func:`due_now_q`; ``waiting``: any schedule waits for a worker (``waiting()``);
    ``claim_lag_seconds``: how long the oldest due row has waited. Schedule facts (counts;
    ``overdue`` past ``overdue_after`` seconds; ``degraded_names``: the first few; worker
    ``(id, clock skew seconds)`` pairs; ``pools_without_workers``: pools with a due
    schedule that no live worker claims, judged only while a worker is live, since
    ``no_live_worker`` says it otherwise; ``unreadable_groups``: concurrency groups whose
    rate cannot be read, so none of their runs starts) default to none: the probe does not gather them.
    Thresholds are read from the settings (``PROBE_MIN_WORKERS``, ``PROBE_MAX_LAG_SECONDS``,
    ``SKEW_WARN_SECONDS``). Never raises."""
    if database is not None:
        problem = Problem("database", f"the database does not answer: {database}")
        return Verdict(False, False, (problem,))
    problems = []
    if overdue:
        text = ngettext("%(n)d schedule overdue", "%(n)d schedules overdue", overdue)
        problems.append(
            Problem("overdue", text % {"n": overdue} + f" by more than {overdue_after:.0f}s")
        )
    if expired_leases:
        text = ngettext(
            "%(n)d expired lease not yet recovered",
            "%(n)d expired leases not yet recovered",
            expired_leases,
        )
        problems.append(Problem("expired_leases", text % {"n": expired_leases}))
    if degraded:
        names = list(degraded_names)
        listed = ", ".join(names[:5]) + (", ..." if degraded > 5 else "")
        text = ngettext("%(n)d schedule degraded", "%(n)d schedules degraded", degraded)
        problems.append(Problem("degraded", f"{text % {'n': degraded}}: {listed}"))
    for worker_id, skew in clock_skews:
        if abs(skew) > app_settings.SKEW_WARN_SECONDS:
            message = f"worker {worker_id} clock is {skew:+.1f}s off the database clock"
            problems.append(Problem("clock_skew", message))
    problems += _fleet_problems(live_workers, due, waiting, claim_lag_seconds)
    orphaned = list(pools_without_workers)
    if orphaned and live_workers:
        listed = ", ".join(orphaned[:5]) + (", ..." if len(orphaned) > 5 else "")
        text = ngettext(
            "no live worker claims pool %(p)s, which has due schedules",
            "no live worker claims pools %(p)s, which have due schedules",
            len(orphaned),
        )
        problems.append(Problem("pools_without_workers", text % {"p": listed}))
    broken = list(unreadable_groups)
    if broken:
        listed = ", ".join(broken[:5]) + (", ..." if len(broken) > 5 else "")
        text = ngettext(
            "the rate of concurrency group %(g)s cannot be read: none of its runs starts",
            "the rates of concurrency groups %(g)s cannot be read: none of their runs starts",
            len(broken),
        )
        problems.append(Problem("group_unreadable", text % {"g": listed}))
    fleet_ok = not any(p.code in FLEET_CODES for p in problems)
    return Verdict(not problems, fleet_ok, tuple(problems))


def _fleet_problems(live: int, due: int, waiting: bool, lag: float) -> list[Problem]:
    problems = []
    need = app_settings.PROBE_MIN_WORKERS
    if due and not live:
        text = ngettext(
            "no live worker: %(n)d schedule due", "no live worker: %(n)d schedules due", due
        )
        problems.append(Problem("no_live_worker", text % {"n": due}))
    elif live < need and (due or waiting):
        text = ngettext("%(n)d live worker", "%(n)d live workers", live) % {"n": live}
        problems.append(Problem("too_few_workers", f"{text}, at least {need} needed"))
    max_lag = app_settings.PROBE_MAX_LAG_SECONDS
    if lag > max_lag:
        problems.append(
            Problem(
                "claim_lag",
                f"a due schedule has waited {lag:.0f}s for a worker (more than "
                f"PROBE_MAX_LAG_SECONDS = {max_lag:g})",
            )
        )
    return problems
