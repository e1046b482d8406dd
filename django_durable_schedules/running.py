"""The run a schedule has in flight, as every surface shows it (admin, API, the
``schedules`` command): :func:`running_attempt` reads the open attempt, the
``RunAttempt`` whose ``lease_token`` is the schedule's (or, for an ``allow`` schedule
running occurrences, the oldest occurrence's), and :func:`running_count` how many run,
from the annotations of
:meth:`.models.queries.ScheduleQuerySet.with_running` (no query) or, for a row read
without them, with one indexed query.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .models import OccurrenceLease, RunAttempt, Schedule
from .models.running_queries import RUNNING_FIELDS


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
    it on ``schedule`` (the row's own lease's, else the oldest running occurrence's); None
    when nothing runs, it was read without the annotations, or the lease names no attempt
    (a token written behind ``save()``). Never queries."""
    if schedule.lease_token is None and not getattr(schedule, "running_occurrences", 0):
        return None
    return _of({name: getattr(schedule, f"running_{name}", None) for name in RUNNING_FIELDS})


def running_attempt(schedule: Schedule) -> RunningAttempt | None:
    """The open attempt of ``schedule`` (None when idle): from its annotations
    (:func:`annotated_running`), else one query on the attempts' unique ``lease_token``
    (two for an ``allow`` schedule whose row holds no lease: its oldest occurrence lease
    first)."""
    if hasattr(schedule, "running_occurrence"):
        return annotated_running(schedule)
    using = schedule._state.db or "default"
    token = schedule.lease_token
    if token is None and schedule.overlap_policy == "allow":
        token = (
            OccurrenceLease.objects.using(using)
            .filter(schedule_id=schedule.pk)
            .order_by("claimed_at", "pk")
            .values_list("lease_token", flat=True)
            .first()
        )
    if token is None:
        return None
    row = RunAttempt.objects.using(using).filter(lease_token=token).values(*RUNNING_FIELDS).first()
    return _of(row) if row is not None else None


def running_count(schedule: Schedule) -> int:
    """How many runs of ``schedule`` are in flight: its row's lease (0 or 1) plus its
    occurrence leases (``overlap_policy="allow"``, expired ones until their recovery).
    From the ``running_occurrences`` annotation of
    :meth:`~.models.queries.ScheduleQuerySet.with_running` (no query), else one count for
    an ``allow`` schedule (none for another)."""
    own = 0 if schedule.lease_token is None else 1
    annotated = getattr(schedule, "running_occurrences", None)
    if annotated is not None:
        return own + int(annotated)
    if schedule.overlap_policy != "allow" or schedule.pk is None:
        return own
    using = schedule._state.db or "default"
    return own + OccurrenceLease.objects.using(using).filter(schedule_id=schedule.pk).count()
