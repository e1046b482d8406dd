"""The deadline predicates of :class:`.queries.ScheduleQuerySet` (issue #26): which
schedules owe an occurrence past its ``deadline_seconds``, waiting or running, as named
``Q`` objects and the index-served reads of a sweep. A mixin: the queryset inherits them.
"""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models import Case, Exists, F, OuterRef, Q, Value, When
from django.db.models.functions import Coalesce
from django.db.models.lookups import LessThan

from .choices import NO_GRID, AttemptOrigin, Status
from .instants import SLOT_CEILING, deadline_after


class DeadlineQueries:
    """The deadline predicates; mixed into :class:`.queries.ScheduleQuerySet`."""

    @staticmethod
    def owed_slot() -> Coalesce:
        """The nominal slot of the occurrence an unleased active row owes, as SQL (the twin
        of ``state.alert_rules.owed_occurrence``): its pending retry's slot, else its
        trigger's instant, else its buffered slot, else ``next_run_at`` (not a ``manual``
        row's: it owes only a triggered occurrence)."""
        grid = Case(
            When(kind__in=NO_GRID, then=Value(None, output_field=models.DateTimeField())),
            default=F("next_run_at"),
        )
        return Coalesce("retry_scheduled_for", "triggered_at", "buffered_for", grid)

    @staticmethod
    def owed_number() -> Any:
        """The occurrence an unleased active row owes, as SQL: ``occurrence`` while a retry
        of it is pending, else ``occurrence + 1``."""
        return F("occurrence") + Case(
            When(retry_scheduled_for__isnull=False, then=Value(0)), default=Value(1)
        )

    @classmethod
    def late_waiting_q(cls, now: Any, active: Q | None = None) -> Q:
        """Active, unleased rows with a deadline whose owed occurrence (:meth:`owed_slot`,
        :meth:`owed_number`) is past ``slot + deadline_seconds`` at ``now`` and not yet
        reported (``deadline_missed_occurrence`` below it)."""
        return (
            cls.deadline_waiting_q(active)
            & Q(LessThan(deadline_after(cls.owed_slot(), F("deadline_seconds")), now))
            & (
                Q(deadline_missed_occurrence__isnull=True)
                | Q(deadline_missed_occurrence__lt=cls.owed_number())
            )
        )

    @staticmethod
    def deadline_waiting_q(active: Q | None = None) -> Q:
        """Active (``active``: how the caller says it; default ``status = active``),
        unleased rows with a deadline whose owed slot is a value the deadline arithmetic
        holds (before :data:`SLOT_CEILING`)."""
        return (
            (Q(status=Status.ACTIVE) if active is None else active)
            & Q(lease_expires_at__isnull=True, deadline_seconds__isnull=False)
            & Q(LessThan(DeadlineQueries.owed_slot(), Value(SLOT_CEILING)))
        )

    @staticmethod
    def open_attempt_late(now: Any) -> Any:
        """The open attempt (the one the outer row's lease token names, not a backfill
        slot's) past ``scheduled_for + deadline_seconds`` at ``now``, for ``Exists``."""
        from .runs import RunAttempt

        deadline = deadline_after(F("scheduled_for"), OuterRef("deadline_seconds"))
        return (
            RunAttempt.objects.filter(
                lease_token=OuterRef("lease_token"), scheduled_for__lt=SLOT_CEILING
            )
            .exclude(origin__in=(AttemptOrigin.BACKFILL, AttemptOrigin.RERUN))
            .filter(LessThan(deadline, now))
        )

    @classmethod
    def late_running_q(cls, now: Any, active: Q | None = None) -> Q:
        """Active rows with a deadline whose run holds the lease: the open attempt (a live
        slot's, not a backfill's) is past ``scheduled_for + deadline_seconds`` at ``now``
        and its occurrence (the row's ``occurrence``) not yet reported. The attempt is
        found by its unique lease token."""
        return (
            (Q(status=Status.ACTIVE) if active is None else active)
            & Q(lease_expires_at__isnull=False, deadline_seconds__isnull=False)
            & (
                Q(deadline_missed_occurrence__isnull=True)
                | Q(deadline_missed_occurrence__lt=F("occurrence"))
            )
            & Q(Exists(cls.open_attempt_late(now)))
        )

    @classmethod
    def late_q(cls, now: Any) -> Q:
        """Late at ``now`` and not yet reported: :meth:`late_waiting_q` or
        :meth:`late_running_q` (for a count or a list; the sweep reads
        :meth:`late_scans`)."""
        return cls.late_waiting_q(now) | cls.late_running_q(now)

    @classmethod
    def overdue_deadline_q(cls, now: Any) -> Q:
        """Past the deadline of the occurrence it owes at ``now``, reported or not: what
        health and the API call "late" (computed on read, so it shows with no worker
        running). Unleased rows by :meth:`owed_slot`; leased ones by their open attempt."""
        waiting = cls.deadline_waiting_q() & Q(
            LessThan(deadline_after(cls.owed_slot(), F("deadline_seconds")), now)
        )
        running = Q(
            status=Status.ACTIVE, lease_expires_at__isnull=False, deadline_seconds__isnull=False
        ) & Q(Exists(cls.open_attempt_late(now)))
        return waiting | running

    @staticmethod
    def active_by_exclusion_q() -> Q:
        """``status = active`` written as "none of the other statuses" (the same rows: a
        CHECK constraint holds the column to :class:`.Status`), a filter no index serves."""
        return ~Q(status__in=[s for s in Status.values if s != Status.ACTIVE])
