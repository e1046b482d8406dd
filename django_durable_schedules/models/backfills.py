"""``Backfill``: a request to run every slot of a past range of one schedule, in order, one
at a time (issue #15 item 3). Written only by :mod:`..state.backfills`, always under the
row lock of its schedule (which is what keeps one open backfill per schedule).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q

from .choices import BackfillStatus
from .schedule import Schedule


class BackfillQuerySet(models.QuerySet["Backfill"]):
    """The named predicates on backfills."""

    @staticmethod
    def open_q() -> Q:
        """Not finished: slots are left to run (or the last one is running)."""
        return Q(status=BackfillStatus.ACTIVE)

    def open(self) -> BackfillQuerySet:
        """See :meth:`open_q`."""
        return self.filter(self.open_q())

    def open_of(self, schedules: Sequence[Any]) -> BackfillQuerySet:
        """The open backfills (:meth:`open_q`) of ``schedules`` (rows)."""
        return self.open().filter(schedule_id__in=[s.pk for s in schedules])


#: The attribute :func:`with_backfill_flag` sets on each row it reads.
BACKFILLS_OPEN = "_dds_backfills_open"


def with_backfill_flag(qs: Any) -> Any:
    """``qs`` (schedules) annotated with whether any backfill is open at all (one
    uncorrelated ``EXISTS`` on ``dds_backfill_open_idx``, evaluated once per statement), so
    that a claim whose live rows fill its batch knows without another query whether to keep
    a share for backfill slots (:func:`backfills_open`)."""
    return qs.annotate(**{BACKFILLS_OPEN: models.Exists(Backfill.objects.open())})


def backfills_open(rows: Sequence[Any]) -> bool | None:
    """Whether the read of ``rows`` (through :func:`with_backfill_flag`) saw an open
    backfill: ``None`` when it cannot say (no row, or rows read without the flag)."""
    if not rows or BACKFILLS_OPEN not in rows[0].__dict__:
        return None
    return bool(rows[0].__dict__[BACKFILLS_OPEN])


class Backfill(models.Model):
    """Every slot of ``[start, end)`` of ``schedule``, run in order as its own occurrences.

    ``slots`` (ISO 8601 UTC instants, whole seconds) is fixed when the backfill is
    requested: the range's slots, less those that already had a successful receipt unless
    ``include_succeeded``. ``position`` is the index of the slot to run next (or running);
    ``occurrence`` and ``attempt`` are those of that slot once claimed (``None`` and 0
    before), so a slot whose run was released or whose lease expired runs again as the
    next attempt of the same occurrence.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    schedule = models.ForeignKey(Schedule, on_delete=models.CASCADE, related_name="backfills")
    schedule_name = models.CharField(max_length=128)
    start = models.DateTimeField(help_text="First instant of the range (included).")
    end = models.DateTimeField(help_text="End of the range (excluded).")
    include_succeeded = models.BooleanField(
        default=False, help_text="Run slots that already have a successful receipt too."
    )
    cascade = models.BooleanField(
        default=False,
        help_text="Run the schedules downstream of it (kind 'after') again for each slot "
        "that succeeds: each one's instant is opened again, due by the slot's claim plus "
        "its wait_seconds.",
    )
    slots = models.JSONField(default=list, help_text="The slots to run, in order (UTC).")
    skipped_succeeded = models.PositiveIntegerField(
        default=0, help_text="Slots of the range left out: they already succeeded."
    )
    position = models.PositiveIntegerField(default=0, help_text="Index of the next slot.")
    occurrence = models.PositiveIntegerField(null=True, blank=True)
    attempt = models.PositiveIntegerField(default=0)
    status = models.CharField(
        max_length=16, choices=BackfillStatus.choices, default=BackfillStatus.ACTIVE
    )
    created_at = models.DateTimeField(help_text="When it was requested (database clock).")
    finished_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    created_by_repr = models.CharField(max_length=200, blank=True, default="")
    source = models.CharField(max_length=32, help_text="api, admin, command or code.")

    objects = BackfillQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["status", "schedule"], name="dds_backfill_open_idx")]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=BackfillStatus.values), name="dds_backfill_status_valid"
            ),
            models.CheckConstraint(
                condition=Q(end__gt=models.F("start")), name="dds_backfill_range_ordered"
            ),
        ]

    def __str__(self) -> str:
        return f"backfill of {self.schedule_name} [{self.start:%Y-%m-%dT%H:%M:%SZ}, {self.end:%Y-%m-%dT%H:%M:%SZ})"

    @property
    def slot_instants(self) -> list[datetime]:
        """``slots`` as aware UTC datetimes."""
        return [datetime.fromisoformat(s) for s in self.slots]

    @property
    def remaining(self) -> int:
        """Slots not yet finished (the running one included)."""
        return max(0, len(self.slots) - self.position) if self.status == "active" else 0
