"""``OccurrenceLease``: the lease of one running occurrence of an ``overlap_policy="allow"``
schedule (issue #28 item 4).

Every other schedule holds the lease of its one running occurrence on its own row
(``Schedule.lease_token``, ``lease_expires_at``): a leased row is not claimable, so a slot
that comes due while it runs waits for the overlap rule. An ``allow`` schedule runs up to
``max_parallel`` occurrences at once, so each occurrence's lease is a row of this table and
the schedule row itself stays unleased and claimable while they run: the claim counts the
live rows here (:mod:`..state.parallel`). Written only by :mod:`..state`, under the row
lock of the schedule (a claim inserts, a renewal extends, a completion or a lease recovery
deletes); deleting the schedule deletes its leases (a run then finishes as an orphan).
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import models
from django.db.models import Q

from .instants import LEASE_CEILING
from .schedule import Schedule


class OccurrenceLeaseQuerySet(models.QuerySet["OccurrenceLease"]):
    """The named predicates on occurrence leases."""

    @staticmethod
    def live_q(now: Any) -> Q:
        """A lease that has not expired at ``now``."""
        return Q(lease_expires_at__gt=now)

    def live(self, now: Any) -> OccurrenceLeaseQuerySet:
        """See :meth:`live_q`."""
        return self.filter(self.live_q(now))

    @staticmethod
    def expired_q(now: Any) -> Q:
        """A lease that expired at or before ``now`` and was not recovered yet, or one no
        lease the engine grants could hold (after ``LEASE_CEILING``)."""
        return Q(lease_expires_at__lte=now) | Q(lease_expires_at__gt=LEASE_CEILING)

    def expired(self, now: Any) -> OccurrenceLeaseQuerySet:
        """See :meth:`expired_q`."""
        return self.filter(self.expired_q(now))


class OccurrenceLease(models.Model):
    """One running occurrence of an ``allow`` schedule: its attempt's ``lease_token`` and
    when the lease lapses (extended by the worker's renewals, as a row lease is)."""

    id = models.BigAutoField(primary_key=True)
    schedule = models.ForeignKey(
        Schedule, on_delete=models.CASCADE, related_name="occurrence_leases"
    )
    lease_token = models.UUIDField(unique=True, default=uuid.uuid4)
    lease_expires_at = models.DateTimeField()
    occurrence = models.PositiveIntegerField()
    claimed_at = models.DateTimeField()

    objects = OccurrenceLeaseQuerySet.as_manager()

    class Meta:
        ordering = ["lease_expires_at"]
        indexes = [
            # Lease recovery: lease_expires_at <= now, oldest first.
            models.Index(fields=["lease_expires_at"], name="dds_occlease_expiry_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.schedule_id} occurrence {self.occurrence}"
