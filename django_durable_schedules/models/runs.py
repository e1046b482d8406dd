"""The append-only record of runs: ``RunAttempt`` (one claim of one occurrence) and
``RunReceipt`` (how it ended). Triggers installed by the migrations refuse UPDATE and
DELETE (:mod:`..db.guards`).
"""

from __future__ import annotations

import uuid
from datetime import datetime

from django.db import models
from django.db.models import Q

from ..db.fast_orm import FastLoading
from .choices import SUCCESS_STATUSES, AttemptOrigin, ReceiptStatus
from .schedule import Schedule


class RunAttempt(FastLoading, models.Model):
    """One claim of one occurrence by one worker (append-only).

    ``lease_expires_at`` is the lease as first granted; renewals extend the schedule's
    lease, not this row. ``missed_slots`` counts slots passed over before this attempt
    (downtime coalescing or overlap); ``origin`` says why it was claimed. The schedule foreign key has no database constraint
    on purpose: the audit trail outlives a deleted schedule.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # No index of its own: dds_attempt_sched_claimed_idx and the per-occurrence unique
    # constraint start with this column and serve its lookups (one entry less per claim).
    schedule = models.ForeignKey(
        Schedule,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        related_name="attempts",
    )
    schedule_name = models.CharField(max_length=128)
    occurrence = models.PositiveIntegerField()
    attempt = models.PositiveIntegerField()
    scheduled_for = models.DateTimeField()
    nominal_for = models.DateTimeField(
        null=True,
        blank=True,
        help_text="The nominal slot of a run that its schedule's exclusion_policy moved to a "
        "business day (scheduled_for is the instant it became due); blank: it did not move.",
    )
    claimed_at = models.DateTimeField()
    lease_token = models.UUIDField(unique=True)
    lease_expires_at = models.DateTimeField()
    worker = models.CharField(max_length=200)
    idempotency_key = models.CharField(max_length=200)
    missed_slots = models.PositiveBigIntegerField(default=0)
    origin = models.CharField(
        max_length=16,
        choices=AttemptOrigin.choices,
        default=AttemptOrigin.SCHEDULED,
        help_text="Why it was claimed: its slot came due (scheduled), a trigger, a slot "
        "buffered while the previous run ran (overlap_policy buffer_one), a backfill, a "
        "re-run of an earlier occurrence, or slots deferred past a blackout window.",
    )
    payload = models.JSONField(
        null=True,
        blank=True,
        help_text="The payload this attempt ran with, when it differs from the schedule's "
        "(a trigger's override); blank: the schedule's payload.",
    )

    class Meta:
        ordering = ["-claimed_at"]
        indexes = [
            models.Index(fields=["claimed_at"], name="dds_attempt_claimed_idx"),
            # A schedule's attempts, newest first (its change page, ?schedule= in the API).
            models.Index(fields=["schedule", "claimed_at"], name="dds_attempt_sched_claimed_idx"),
            # One worker's attempts, newest first (the admin's and the API's worker filter).
            models.Index(fields=["worker", "claimed_at"], name="dds_attempt_worker_idx"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["schedule", "occurrence", "attempt"],
                name="dds_attempt_unique_per_occurrence",
            ),
            models.CheckConstraint(condition=Q(attempt__gte=1), name="dds_attempt_number_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.schedule_name} #{self.occurrence}.{self.attempt}"

    @property
    def lateness(self) -> float:
        """Seconds between the slot and the claim."""
        return (self.claimed_at - self.scheduled_for).total_seconds()


class RunReceipt(FastLoading, models.Model):
    """The one outcome of one attempt (append-only).

    ``succeeded_occurrence`` equals ``occurrence`` for a success (``succeeded``, or
    ``enqueued``: handed to an execution engine) and is NULL otherwise; the
    unique constraint on ``(schedule, succeeded_occurrence)`` makes a second success of the
    same occurrence impossible on every backend.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    attempt = models.OneToOneField(RunAttempt, on_delete=models.DO_NOTHING, related_name="receipt")
    # No index of its own: dds_receipt_sched_idx and the one-success constraint start with
    # this column and serve its lookups (one entry less per completion).
    schedule = models.ForeignKey(
        Schedule,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        related_name="receipts",
    )
    occurrence = models.PositiveIntegerField()
    succeeded_occurrence = models.PositiveIntegerField(null=True, blank=True, editable=False)
    status = models.CharField(max_length=16, choices=ReceiptStatus.choices)
    finished_at = models.DateTimeField()
    result = models.JSONField(null=True, blank=True)
    error_type = models.CharField(max_length=200, blank=True, default="")
    error_message = models.TextField(blank=True, default="")
    failure_count_after = models.PositiveIntegerField(default=0)
    next_run_at = models.DateTimeField(null=True, blank=True)
    slots_skipped = models.PositiveBigIntegerField(
        default=0, help_text="Slots that came due while this attempt ran, skipped (overlap)."
    )
    started_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When the callback started (UTC; blank: it never ran, e.g. missed or "
        "released). finished_at minus started_at is the run's duration.",
    )
    traceback = models.JSONField(
        null=True,
        blank=True,
        help_text="A failed run's stack, innermost frame last: a list of {file, line, "
        "function}, bounded; never the value of a variable.",
    )
    forced = models.BooleanField(
        default=False,
        help_text="A forced re-run of an occurrence that had succeeded: its success is not "
        "the occurrence's first, so it does not take the occurrence's one success.",
    )

    class Meta:
        ordering = ["-finished_at"]
        indexes = [
            models.Index(fields=["schedule", "finished_at"], name="dds_receipt_sched_idx"),
            models.Index(fields=["finished_at"], name="dds_receipt_finished_idx"),
            # Receipts of one status, newest first (the status filters of admin and API).
            models.Index(fields=["status", "finished_at"], name="dds_receipt_status_idx"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=ReceiptStatus.values), name="dds_receipt_status_valid"
            ),
            models.UniqueConstraint(
                fields=["schedule", "succeeded_occurrence"],
                name="dds_receipt_one_success_per_occurrence",
            ),
            models.CheckConstraint(
                condition=Q(
                    status__in=SUCCESS_STATUSES,
                    succeeded_occurrence__isnull=False,  # NULL = occurrence would pass a CHECK
                    succeeded_occurrence=models.F("occurrence"),
                    forced=False,
                )
                # A forced re-run's success (issue #27) holds no one-success key.
                | Q(status__in=SUCCESS_STATUSES, succeeded_occurrence__isnull=True, forced=True)
                | (~Q(status__in=SUCCESS_STATUSES) & Q(succeeded_occurrence__isnull=True)),
                name="dds_receipt_success_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.status} #{self.occurrence}"

    @property
    def duration_seconds(self) -> float | None:
        """Seconds from ``started_at`` to ``finished_at`` (the run's duration, never
        negative: the two instants come from estimates of the same database clock); None
        when the callback never ran."""
        started, finished = self.started_at, self.finished_at
        if not isinstance(started, datetime) or not isinstance(finished, datetime):
            return None
        try:
            return max(0.0, (finished - started).total_seconds())
        except (TypeError, OverflowError):  # naive and aware mixed (a row behind save())
            return None
