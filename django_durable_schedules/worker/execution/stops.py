"""The outcomes of a run in a child process that did not report one itself
(:meth:`.isolation.IsolationPool.run`): its child died, was killed at the time limit, was
stopped because its schedule's next slot came due (``overlap_policy`` replace), was
stopped because the worker found its lease lost (another worker recovered it), or refused
a claim whose lease had lapsed. Each logs one WARNING line. No database writes here.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .isolation_child import describe_exit

if TYPE_CHECKING:  # not at import: .state needs the app registry, which a module may not
    from ...state import Claim, Outcome

# The isolation pool's logger: these lines are its.
logger = logging.getLogger("django_durable_schedules.isolation")


def _outcome(claim: Claim, status: str, **fields: Any) -> Outcome:
    from ...state import Outcome

    return Outcome(claim, status, **fields)


def _extra(claim: Claim) -> dict[str, Any]:
    return {"schedule": claim.schedule_name, "occurrence": claim.occurrence}


def died(claim: Claim, pid: int | None, exitcode: int | None, started_at: datetime) -> Outcome:
    """``failed`` / ``WorkerProcessDied``: the child ``pid`` running ``claim`` ended (exit
    code or signal ``exitcode``, as ``Process.exitcode`` gives it) before it returned;
    ``started_at``: when the claim was handed to it (aware UTC)."""
    what = describe_exit(exitcode)
    logger.warning(
        "run %s #%s.%s failed: its process %s died (%s) before it returned",
        claim.schedule_name,
        claim.occurrence,
        claim.attempt,
        pid,
        what,
        extra=_extra(claim),
    )
    return _outcome(
        claim,
        "failed",
        error_type="WorkerProcessDied",
        error_message=f"the run's process died ({what}) before it returned",
        started_at=started_at,
    )


def timed_out(claim: Claim, pid: int | None, started_at: datetime) -> Outcome:
    """``failed`` / ``Timeout``: ``claim`` passed its ``timeout_seconds`` and its child
    ``pid`` (with its process group) was killed."""
    logger.warning(
        "run %s #%s.%s failed: it passed timeout_seconds=%g and its process %s is killed",
        claim.schedule_name,
        claim.occurrence,
        claim.attempt,
        claim.timeout_seconds,
        pid,
        extra=_extra(claim),
    )
    return _outcome(
        claim,
        "failed",
        error_type="Timeout",
        error_message=f"stopped after timeout_seconds={claim.timeout_seconds:g}: "
        "its process was killed",
        started_at=started_at,
    )


def replaced(claim: Claim, pid: int | None, started_at: datetime) -> Outcome:
    """``replaced``: ``claim`` was still running when its schedule's next slot came due
    (:attr:`~.state.Claim.replace_at`, ``overlap_policy`` replace), so its child ``pid``
    (with its process group) was killed, as at a timeout. Not a failure: the state
    machine runs the newest due slot next (:func:`.state.replace_rules.newest_passed_slot`)."""
    due = claim.replace_at.isoformat() if claim.replace_at is not None else "?"
    logger.warning(
        "run %s #%s.%s replaced: the next slot came due (%s) while it ran; its process %s "
        "is killed",
        claim.schedule_name,
        claim.occurrence,
        claim.attempt,
        due,
        pid,
        extra=_extra(claim),
    )
    return _outcome(
        claim,
        "replaced",
        error_type="Replaced",
        error_message=f"stopped when the next slot came due at {due} (overlap_policy "
        "replace): its process was killed",
        started_at=started_at,
    )


def stale(claim: Claim, late: float) -> Outcome:
    """``released``: the child refused ``claim``, whose lease had lapsed ``late`` seconds
    before it could start it (the worker was stalled); nothing ran."""
    logger.warning(
        "run %s #%s.%s not started: its lease lapsed %.1fs before its process could "
        "start it (the worker was stalled)",
        claim.schedule_name,
        claim.occurrence,
        claim.attempt,
        late,
        extra=_extra(claim),
    )
    return _outcome(
        claim,
        "released",
        error_message=f"not started: its lease had lapsed {late:.1f}s before its "
        "process could start it (the worker was stalled)",
    )


def lease_lost(claim: Claim, pid: int | None, started_at: datetime, reason: str) -> Outcome:
    """``failed`` / ``LeaseLost``: the worker found the lease of ``claim`` lost (it was
    stalled past it and another worker recovered it), so its child ``pid`` (with its
    process group) was killed (:meth:`.isolation.IsolationPool.stop`); ``reason`` says
    why, e.g. "the lease was lost (the worker was stalled 12.3 s)". The completion fences
    this outcome: the row is another attempt's now."""
    logger.warning(
        "run %s #%s.%s stopped: %s; its process %s is killed",
        claim.schedule_name,
        claim.occurrence,
        claim.attempt,
        reason,
        pid,
        extra=_extra(claim),
    )
    return _outcome(
        claim,
        "failed",
        error_type="LeaseLost",
        error_message=f"stopped: {reason}"[:1000],
        started_at=started_at,
    )
