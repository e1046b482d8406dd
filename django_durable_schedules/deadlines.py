"""A schedule's deadline, on read (issue #26): the occurrence it owes, that occurrence's
deadline, and whether it is late now, for health, the admin and the API. Computed from the
row (and the attempt that holds its lease) with the state package's pure rules
(:func:`.state.alert_rules.owed_occurrence`), by the clock the caller read (the database
clock), so a schedule shows late with no worker running. Read-only.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypedDict

from django.db.models import OuterRef, QuerySet, Subquery
from django.db.models.functions import Now

from .models import AttemptOrigin, RunAttempt, Schedule
from .state.alert_rules import deadline_of, owed_occurrence, reported

__all__ = [
    "LATE_LISTED",
    "DeadlineState",
    "LateRow",
    "deadline_state",
    "late_schedules",
    "read_now",
    "with_open_slot",
]

#: The annotations :func:`with_open_slot` adds: the slot of the attempt holding the lease,
#: and the database clock read by the same statement.
OPEN_SLOT = "open_slot"
DB_NOW = "db_now"
#: Most late schedules health lists by name (the count is always complete).
LATE_LISTED = 20


@dataclass(frozen=True)
class DeadlineState:
    """The deadline of the occurrence a schedule owes: its ``occurrence`` number, its
    ``deadline_at`` (aware UTC; None: no deadline, or nothing owed), whether it is ``late``
    at the instant asked, and whether that occurrence was ``reported`` (its
    ``deadline_missed`` event written)."""

    occurrence: int | None = None
    deadline_at: datetime | None = None
    late: bool = False
    reported: bool = False


class LateRow(TypedDict):
    """One schedule in health's ``late_schedules``."""

    id: str
    name: str
    occurrence: int | None
    deadline_at: datetime | None


def with_open_slot(qs: QuerySet[Schedule]) -> QuerySet[Schedule]:
    """``qs`` with each row's open attempt's slot (the attempt its lease token names, not
    a backfill slot's; by its unique index) and the database clock annotated, so
    :func:`deadline_state` and :func:`read_now` need no query of their own (a page of
    the API stays one query)."""
    attempt = (
        RunAttempt.objects.filter(lease_token=OuterRef("lease_token"))
        .exclude(origin__in=(AttemptOrigin.BACKFILL, AttemptOrigin.RERUN))
        .values("scheduled_for")[:1]
    )
    return qs.annotate(**{OPEN_SLOT: Subquery(attempt), DB_NOW: Now()})


def read_now(row: Schedule) -> datetime | None:
    """The database clock the read of ``row`` annotated (:func:`with_open_slot`), aware
    UTC; None when it was not read so."""
    value = row.__dict__.get(DB_NOW)
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return None


def deadline_state(row: Schedule, now: datetime, using: str | None = None) -> DeadlineState:
    """The :class:`DeadlineState` of ``row`` at ``now`` (aware UTC, the database clock).
    A leased row's open attempt is read from the :func:`with_open_slot` annotation when
    there is one, else with one query (``using``: the row's database). Never raises for a
    row's values (a value written behind ``save()`` gives no deadline)."""
    if row.deadline_seconds is None:
        return DeadlineState()
    attempt: Any = None
    if row.lease_token is not None:
        if OPEN_SLOT in row.__dict__:
            slot = row.__dict__[OPEN_SLOT]
            attempt = RunAttempt(occurrence=row.occurrence, scheduled_for=slot) if slot else None
        else:
            attempt = (
                RunAttempt.objects.using(using or row._state.db or "default")
                .filter(lease_token=row.lease_token)
                .first()
            )
    try:
        owed = owed_occurrence(row, attempt)
        deadline = deadline_of(row, owed)
    except (TypeError, ValueError, AssertionError):
        return DeadlineState()
    if owed is None or deadline is None:
        return DeadlineState()
    return DeadlineState(owed.occurrence, deadline, now > deadline, reported(row, owed.occurrence))


def late_schedules(now: datetime, using: str = "default") -> tuple[int, list[LateRow]]:
    """The schedules late at ``now`` (``ScheduleQuerySet.overdue_deadline``, reported or
    not): how many, and the first :data:`LATE_LISTED` by name with the occurrence each owes
    and its deadline."""
    late = Schedule.objects.using(using).overdue_deadline(now)
    count = late.count()
    if not count:
        return 0, []
    rows = with_open_slot(late.order_by("name"))[:LATE_LISTED]
    listed = []
    for row in rows:
        found = deadline_state(row, now, using)
        listed.append(
            LateRow(
                id=str(row.pk),
                name=row.name,
                occurrence=found.occurrence,
                deadline_at=found.deadline_at,
            )
        )
    return count, listed
