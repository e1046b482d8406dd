"""The run a schedule has in flight, as every surface shows it (admin, API, the
``schedules`` command): :func:`running_attempt` reads the open attempt, the
``RunAttempt`` whose ``lease_token`` is the schedule's, from the annotations of
:meth:`.models.queries.ScheduleQuerySet.with_running` (no query) or, for a row read
without them, with one indexed query.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .models import RunAttempt, Schedule
from .models.queries import RUNNING_FIELDS


@dataclass(frozen=True)
class RunningAttempt:
    """The attempt in flight: its ``occurrence`` and ``attempt`` numbers, ``claimed_at``
    (aware UTC, the database clock: since when it runs) and the ``worker`` (its id,
    ``host:pid`` by default) that holds its lease."""

    occurrence: int
    attempt: int
    claimed_at: datetime
    worker: str

    def as_dict(self) -> dict[str, Any]:
        """``{"occurrence", "attempt", "claimed_at", "worker"}`` (``claimed_at`` a datetime)."""
        return {
            "occurrence": self.occurrence,
            "attempt": self.attempt,
            "claimed_at": self.claimed_at,
            "worker": self.worker,
        }


def _of(values: dict[str, Any]) -> RunningAttempt | None:
    occurrence, attempt = values.get("occurrence"), values.get("attempt")
    claimed_at, worker = values.get("claimed_at"), values.get("worker")
    if type(occurrence) is not int or type(attempt) is not int:
        return None
    if not isinstance(claimed_at, datetime) or not isinstance(worker, str):
        return None
    return RunningAttempt(occurrence, attempt, claimed_at, worker)


def annotated_running(schedule: Schedule) -> RunningAttempt | None:
    """The open attempt as :meth:`~.models.queries.ScheduleQuerySet.with_running` annotated
    it on ``schedule``; None when it is idle, was read without the annotations, or its
    lease names no attempt (a token written behind ``save()``). Never queries."""
    if schedule.lease_token is None:
        return None
    return _of({name: getattr(schedule, f"running_{name}", None) for name in RUNNING_FIELDS})


def running_attempt(schedule: Schedule) -> RunningAttempt | None:
    """The open attempt of ``schedule`` (None when idle): from its annotations
    (:func:`annotated_running`), else one query on the attempts' unique ``lease_token``."""
    if schedule.lease_token is None:
        return None
    if hasattr(schedule, "running_occurrence"):
        return annotated_running(schedule)
    row = (
        RunAttempt.objects.using(schedule._state.db or "default")
        .filter(lease_token=schedule.lease_token)
        .values(*RUNNING_FIELDS)
        .first()
    )
    return _of(row) if row is not None else None
