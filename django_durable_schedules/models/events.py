"""``ScheduleEvent``: the audit trail of control actions (append-only, guarded like
receipts) and ``WorkerHeartbeat``: one row per ``run_scheduler`` process, for health.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from ..db.fast_orm import FastLoading
from .choices import EventAction
from .schedule import Schedule


class ScheduleEvent(FastLoading, models.Model):
    """One control action on a schedule (append-only, guarded like receipts): who did what,
    when (database clock), from where, and which fields changed (``{field: [old, new]}``).

    Foreign keys carry no database constraint: the trail outlives deleted schedules and
    users (``actor_repr`` keeps who it was).
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    schedule = models.ForeignKey(
        Schedule, on_delete=models.DO_NOTHING, db_constraint=False, related_name="events"
    )
    schedule_name = models.CharField(max_length=128)
    action = models.CharField(max_length=16, choices=EventAction.choices)
    at = models.DateTimeField()
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    actor_repr = models.CharField(max_length=200, blank=True, default="")
    source = models.CharField(max_length=32, help_text="api, admin, command, code or worker.")
    changes = models.JSONField(default=dict, blank=True)
    occurrence = models.PositiveIntegerField(
        null=True, blank=True, help_text="The occurrence an engine event is about."
    )

    class Meta:
        ordering = ["-at"]
        indexes = [models.Index(fields=["schedule", "at"], name="dds_event_sched_idx")]
        constraints = [
            models.CheckConstraint(
                condition=Q(action__in=EventAction.values), name="dds_event_action_valid"
            )
        ]

    def __str__(self) -> str:
        return f"{self.schedule_name} {self.action} by {self.actor_repr or self.source}"


class WorkerHeartbeat(models.Model):
    """One row per ``run_scheduler`` process, refreshed while it runs (for health)."""

    worker_id = models.CharField(max_length=200, primary_key=True)
    hostname = models.CharField(max_length=200, blank=True, default="")
    pid = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    stopped_at = models.DateTimeField(null=True, blank=True)
    in_flight = models.PositiveIntegerField(default=0)
    runs_finished = models.PositiveBigIntegerField(default=0)
    clock_skew_seconds = models.FloatField(
        default=0.0, help_text="Host clock minus database clock."
    )
    tzdata_version = models.CharField(
        max_length=40,
        blank=True,
        default="",
        help_text="The tzdata release the worker's time zones come from.",
    )
    pools = models.CharField(
        max_length=1000,
        blank=True,
        default="default",
        help_text="The pools it claims (run_scheduler --pool), comma-separated.",
    )

    class Meta:
        ordering = ["-last_seen_at"]

    def __str__(self) -> str:
        return self.worker_id
