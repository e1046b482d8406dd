"""``NotificationDelivery``: the outbox of alert notifications (issue #26).

One row per (alert event, configured notifier), inserted in the transaction that appends the
:class:`~.events.ScheduleEvent` (so a delivery is never lost when a worker dies between the
fact and its delivery), then claimed with a lease, sent and marked by a worker's delivery
threads (:mod:`..worker.deliveries`). Unlike events, rows change: a delivery is retried with
backoff until it is ``delivered`` or ``abandoned``.
"""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models import Q

from .events import ScheduleEvent

#: Longest ``last_error`` kept (characters).
LAST_ERROR_MAX_CHARS = 1000


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "pending"
    DELIVERED = "delivered", "delivered"
    ABANDONED = "abandoned", "abandoned (gave up after NOTIFY_MAX_TRIES)"


class NotificationDeliveryQuerySet(models.QuerySet["NotificationDelivery"]):
    """The named predicates on deliveries; ``now`` is an aware UTC datetime (the database
    clock's reading)."""

    @staticmethod
    def due_q(now: Any) -> Q:
        """Pending, its next try has come, and nobody holds a live lease on it (never
        leased, released, or its lease expired: a worker died mid-delivery)."""
        return Q(status=DeliveryStatus.PENDING, next_try_at__lte=now) & (
            Q(lease_until__isnull=True) | Q(lease_until__lte=now)
        )

    def due(self, now: Any) -> NotificationDeliveryQuerySet:
        """Deliveries a worker may claim at ``now`` (:meth:`due_q`)."""
        return self.filter(self.due_q(now))


class NotificationDelivery(models.Model):
    """One notification of one alert event to one configured notifier (``NOTIFIERS``).

    ``tries`` counts the sends that were attempted; a failed one sets ``next_try_at`` by
    exponential backoff (``NOTIFY_BACKOFF_BASE_SECONDS`` doubling up to
    ``NOTIFY_BACKOFF_CAP_SECONDS``); after ``NOTIFY_MAX_TRIES`` it is ``abandoned``. A
    worker holds a claimed delivery until ``lease_until`` (database clock); after that
    another worker may take it over. Instants are aware UTC."""

    id = models.BigAutoField(primary_key=True)
    event = models.ForeignKey(
        ScheduleEvent, on_delete=models.DO_NOTHING, db_constraint=False, related_name="deliveries"
    )
    notifier = models.CharField(max_length=100, help_text="The NOTIFIERS entry's name.")
    schedule_name = models.CharField(max_length=128)
    action = models.CharField(max_length=16)
    occurrence = models.PositiveIntegerField(null=True, blank=True)
    status = models.CharField(
        max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    tries = models.PositiveIntegerField(default=0, help_text="Sends attempted so far.")
    next_try_at = models.DateTimeField(help_text="When it may be sent (again), UTC.")
    lease_until = models.DateTimeField(
        null=True, blank=True, help_text="A worker is sending it until then (UTC)."
    )
    leased_by = models.CharField(max_length=250, blank=True, default="")
    last_error = models.CharField(max_length=LAST_ERROR_MAX_CHARS, blank=True, default="")
    delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()

    objects = NotificationDeliveryQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "notification delivery"
        verbose_name_plural = "notification deliveries"
        indexes = [
            models.Index(fields=["notifier", "status", "next_try_at"], name="dds_delivery_due_idx"),
            models.Index(fields=["created_at"], name="dds_delivery_created_idx"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["event", "notifier"], name="dds_delivery_once"),
            models.CheckConstraint(
                condition=Q(status__in=DeliveryStatus.values), name="dds_delivery_status_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.action} of {self.schedule_name} to {self.notifier}: {self.status}"
