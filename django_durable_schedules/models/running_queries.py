"""The run a schedule has in flight, annotated in the statement that reads the schedules
(:meth:`.queries.ScheduleQuerySet.with_running`): what every surface shows as "running"
(admin, API, the ``schedules`` command) without a query per row.

A schedule runs an occurrence under its own row's lease (``Schedule.lease_token``), or,
with ``overlap_policy="allow"``, up to ``max_parallel`` occurrences each under a lease of
its own (:class:`.parallel.OccurrenceLease`) while the row stays unleased.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from django.db import models
from django.db.models import Exists, Func, OuterRef, Q, Subquery
from django.db.models.expressions import Star
from django.db.models.functions import Coalesce

if TYPE_CHECKING:
    from .queries import ScheduleQuerySet

#: The open attempt's fields :func:`annotate_running` annotates (as ``running_<field>``).
RUNNING_FIELDS = ("occurrence", "attempt", "claimed_at", "worker")


def annotate_running(rows: ScheduleQuerySet) -> ScheduleQuerySet:
    """``rows`` annotated with the open attempt (the run in flight) as ``running_<field>``
    for each of :data:`RUNNING_FIELDS` (all None when nothing runs), and with
    ``running_occurrences``, how many occurrence leases each schedule holds (0 for a
    schedule that is not ``allow``; recovered leases are gone, expired ones not yet
    recovered count, as a row's own lease does until its recovery).

    The open attempt is the one whose ``lease_token`` is the row's, else, while only
    occurrences run, the oldest occurrence's (earliest ``claimed_at``). Scalar subqueries
    on the attempts' unique ``lease_token`` index and the occurrence leases'
    ``schedule_id`` index, in the same statement (:func:`..running.running_attempt` and
    :func:`..running.running_count` read them)."""
    from .parallel import OccurrenceLease
    from .runs import RunAttempt

    occurrences = OccurrenceLease.objects.filter(schedule_id=OuterRef("pk")).order_by()
    oldest = occurrences.order_by("claimed_at", "pk").values("lease_token")[:1]
    counted = occurrences.values(
        n=Func(Star(), function="COUNT", output_field=models.BigIntegerField())
    )
    open_attempt = RunAttempt.objects.filter(lease_token=OuterRef("running_lease_token"))
    annotated = rows.annotate(
        running_lease_token=Coalesce(
            "lease_token", Subquery(oldest), output_field=models.UUIDField()
        ),
        running_occurrences=Subquery(counted, output_field=models.BigIntegerField()),
    ).annotate(
        **{f"running_{name}": Subquery(open_attempt.values(name)[:1]) for name in RUNNING_FIELDS}
    )
    return cast("ScheduleQuerySet", annotated)


def running_q() -> Q:
    """A schedule with a run in flight: its row's lease held
    (:meth:`.queries.ScheduleQuerySet.leased_q`, until its recovery) or an occurrence lease
    of its own (``overlap_policy="allow"``, likewise until its recovery). An ``EXISTS`` on
    the occurrence leases' ``schedule_id`` index: a filter of the same statement."""
    from .parallel import OccurrenceLease
    from .queries import ScheduleQuerySet

    occurrences = OccurrenceLease.objects.filter(schedule_id=OuterRef("pk"))
    return ScheduleQuerySet.leased_q() | Q(Exists(occurrences))


def live_occurrences(now: Any) -> Subquery:
    """``(SELECT COUNT(*) ...)``: the occurrence leases of the outer schedule that have not
    expired at ``now`` (an aware datetime or a database expression): an annotation of the
    same statement, on the occurrence leases' ``schedule_id`` index."""
    from .parallel import OccurrenceLease

    live = OccurrenceLease.objects.live(now).filter(schedule_id=OuterRef("pk")).order_by()
    counted = live.values(n=Func(Star(), function="COUNT", output_field=models.BigIntegerField()))
    return Subquery(counted, output_field=models.BigIntegerField())
