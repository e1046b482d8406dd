"""Chaining (issue #30 item 1): ``ScheduleLink``, the edge "``downstream`` runs after
``upstream``", and ``ChainSlot``, one nominal instant a downstream schedule waits for.

A schedule of kind ``after`` has no spec of its own: its grid is its upstreams' grid (they
all share one, :mod:`..state.chain_rules` refuses links that would mix grids or close a
cycle). When an upstream's occurrence is claimed, every schedule downstream of it (the
whole closure) gets a ``ChainSlot`` for that occurrence's nominal instant, due by
``deadline`` (the instant plus the downstream's ``wait_seconds``); each upstream success for
the instant is noted in ``done``; once every upstream of the downstream is done the slot is
``ready`` and runs as the downstream's occurrence with that ``scheduled_for``; a slot still
``waiting`` at its deadline is counted ``missed`` with the reason. Written only by
:mod:`..state`, under the row lock of the downstream schedule.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from django.db import models
from django.db.models import F, Q

from .schedule import Schedule


class ChainSlotStatus(models.TextChoices):
    """Where one nominal instant of a downstream schedule stands."""

    WAITING = "waiting", "waiting for its upstreams"
    READY = "ready", "ready: every upstream succeeded for it"
    RUN = "run", "run (claimed as an occurrence)"
    MISSED = "missed", "missed: wait_seconds passed first"


#: Statuses of a slot the engine still has to run or count.
CHAIN_OPEN = (ChainSlotStatus.WAITING, ChainSlotStatus.READY)
#: Statuses of a slot whose instant was decided: a cascading backfill opens it again, a
#: prune (``prune_runs``) deletes it once older than the retention window.
CHAIN_DECIDED = (ChainSlotStatus.RUN, ChainSlotStatus.MISSED)


class ScheduleLink(models.Model):
    """``downstream`` runs after ``upstream`` (``Schedule.upstream``). An upstream cannot be
    deleted while a schedule waits for it (``PROTECT``: remove the link first); deleting a
    downstream deletes its links."""

    id = models.BigAutoField(primary_key=True)
    downstream = models.ForeignKey(
        Schedule, on_delete=models.CASCADE, related_name="upstream_links"
    )
    upstream = models.ForeignKey(
        Schedule, on_delete=models.PROTECT, related_name="downstream_links"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["downstream", "upstream"]
        indexes = [models.Index(fields=["upstream", "downstream"], name="dds_link_upstream_idx")]
        constraints = [
            models.UniqueConstraint(fields=["downstream", "upstream"], name="dds_link_unique"),
            models.CheckConstraint(
                condition=~Q(downstream=F("upstream")), name="dds_link_not_self"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.downstream_id} after {self.upstream_id}"


class ChainSlotQuerySet(models.QuerySet["ChainSlot"]):
    """The named predicates on chain slots."""

    @staticmethod
    def open_q() -> Q:
        """Still to be run or counted: ``waiting`` or ``ready``."""
        return Q(status__in=CHAIN_OPEN)

    def open(self) -> ChainSlotQuerySet:
        """See :meth:`open_q`."""
        return self.filter(self.open_q())


class ChainSlot(models.Model):
    """One nominal instant (``scheduled_for``, aware UTC, whole seconds) that the kind
    ``after`` schedule ``downstream`` runs once every upstream succeeded for it, or counts
    missed at ``deadline``. ``done``: the upstreams (primary keys as text) that succeeded
    for it so far."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    downstream = models.ForeignKey(Schedule, on_delete=models.CASCADE, related_name="chain_slots")
    scheduled_for = models.DateTimeField()
    deadline = models.DateTimeField()
    done = models.JSONField(default=list, blank=True)
    status = models.CharField(
        max_length=16, choices=ChainSlotStatus.choices, default=ChainSlotStatus.WAITING
    )
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = ChainSlotQuerySet.as_manager()

    class Meta:
        ordering = ["downstream", "scheduled_for"]
        indexes = [
            models.Index(
                fields=["downstream", "status", "scheduled_for"], name="dds_chain_slot_open_idx"
            ),
            models.Index(fields=["status", "deadline"], name="dds_chain_slot_deadline_idx"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["downstream", "scheduled_for"], name="dds_chain_slot_unique"
            ),
            models.CheckConstraint(
                condition=Q(status__in=ChainSlotStatus.values), name="dds_chain_slot_status_valid"
            ),
            models.CheckConstraint(
                condition=Q(deadline__gte=F("scheduled_for")), name="dds_chain_slot_deadline_after"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.downstream_id} @ {self.scheduled_for.isoformat()} ({self.status})"


#: The attribute :func:`with_links_flag` sets on each row it reads.
LINKS_EXIST = "_dds_links_exist"


def with_links_flag(qs: Any) -> Any:
    """``qs`` (schedules) annotated with whether any schedule runs after another at all (one
    uncorrelated ``EXISTS`` on the links, evaluated once per statement), so that a claim or
    a completion pays no statement for chains when there are none (:func:`links_exist`)."""
    return qs.annotate(**{LINKS_EXIST: models.Exists(ScheduleLink.objects.all())})


def links_exist(rows: Sequence[Any]) -> bool | None:
    """Whether the read of ``rows`` (through :func:`with_links_flag`) saw a link: ``None``
    when it cannot say (no row, or rows read without the flag)."""
    if not rows or LINKS_EXIST not in rows[0].__dict__:
        return None
    return bool(rows[0].__dict__[LINKS_EXIST])


def chain_due_q(now: Any) -> Q:
    """Chain slots a claim at ``now`` settles: ``ready`` ones, and ``waiting`` ones whose
    deadline passed (both read by ``dds_chain_slot_deadline_idx``)."""
    return Q(status=ChainSlotStatus.READY) | Q(status=ChainSlotStatus.WAITING, deadline__lte=now)
