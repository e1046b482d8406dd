"""Concurrency groups as health and the admin see them (issue #28, item 1): which groups
are at their limit, how many runs each holds and how many due schedules wait in it.

* :func:`groups_at_limit`: the groups at ``max_running`` live leases or out of their
  ``rate`` (``rate_until`` in the future), for :func:`.health.snapshot`: information, not a
  problem (a full group is normal operation). One query, whatever the table sizes: each
  group's live leases and waiting schedules are scalar subqueries on the group's indexes.
* :func:`unreadable_groups`: the groups whose stored rate does not parse (written behind
  ``save()``): their schedules never start, so health reports the problem
  ``group_unreadable``. One query (the rates that are not in the form ``clean()`` writes,
  then :func:`..models.parse_rate` on those).
* :func:`group_rooms` and :func:`group_wait`: for the admin's schedule list, the groups of a
  page's schedules read once (one query per page), and the words "waiting for group
  reports (2 of 2 running)" for a due schedule its group holds back.

Read-only. "Live" is the claim's: a lease token and ``lease_expires_at`` after now.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypedDict

from django.core.exceptions import ValidationError
from django.db.models import Count, F, IntegerField, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce, Now

from .limits import RATE_HOLD_MAX_SECONDS
from .models import ConcurrencyGroup, Schedule, ScheduleQuerySet, parse_rate

#: Most groups health lists (at their limit; unreadable), by name.
GROUPS_LISTED = 50
#: A rate in the form ``ConcurrencyGroup.clean()`` writes, always readable; a stored rate
#: that is not is read by :func:`..models.parse_rate` to tell (a regex every backend has).
_CLEAN_RATE = r"^([1-9][0-9]{0,2}|1000)/[smh]$"


class GroupRow(TypedDict):
    """One group in health's ``groups_at_limit``: its limits, its ``running`` live leases
    and ``waiting`` (its schedules due now, held back), and ``rate_until`` (aware UTC: when
    its rate lets the next run start; None when its rate does not hold it)."""

    name: str
    running: int
    max_running: int | None
    rate: str
    waiting: int
    rate_until: datetime | None


def rate_holds(until: datetime | None, now: datetime) -> bool:
    """Whether a group's ``rate_until`` holds it at ``now``, as
    :meth:`..models.ConcurrencyGroup.rate_holding_q` says in SQL."""
    if until is None:
        return False
    return now < until <= now + timedelta(seconds=RATE_HOLD_MAX_SECONDS)


def schedules_of(rows: QuerySet[Schedule]) -> Coalesce:
    """How many of ``rows`` name the outer group (``OuterRef("pk")``), as a scalar
    subquery annotation (0 for none)."""
    counted = (
        rows.filter(concurrency_group=OuterRef("pk"))
        .order_by()
        .values("concurrency_group")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(counted, output_field=IntegerField()), Value(0))


def live_leases(now: Any) -> Coalesce:
    """A group's live leases at ``now`` (an instant or ``Now()``), as an annotation."""
    leased = Schedule.objects.filter(lease_token__isnull=False)
    return schedules_of(leased.filter(ScheduleQuerySet.lease_live_q(now)))


def groups_at_limit(
    now: datetime, using: str = "default", limit: int = GROUPS_LISTED
) -> list[GroupRow]:
    """The groups (by name, at most ``limit``) at their limit at ``now`` (database clock):
    ``running >= max_running``, or ``rate_until`` after ``now``. One query."""
    rows = (
        ConcurrencyGroup.objects.using(using)
        .annotate(
            running=live_leases(now),
            waiting=schedules_of(Schedule.objects.claimable(now)),
        )
        .filter(
            ConcurrencyGroup.rate_holding_q(now)
            | Q(max_running__isnull=False, running__gte=F("max_running"))
        )
        .order_by("name")
        .values_list("name", "running", "max_running", "rate", "waiting", "rate_until")[:limit]
    )
    return [
        GroupRow(
            name=name,
            running=running,
            max_running=cap,
            rate=rate,
            waiting=waiting,
            rate_until=until if rate_holds(until, now) else None,
        )
        for name, running, cap, rate, waiting, until in rows
    ]


def unreadable_groups(using: str = "default", limit: int = GROUPS_LISTED) -> list[str]:
    """The names of the groups (by name, at most ``limit``) whose stored rate
    :func:`..models.parse_rate` refuses: none of their schedules starts. One query."""
    rows = (
        ConcurrencyGroup.objects.using(using)
        .exclude(rate="")
        .exclude(rate__regex=_CLEAN_RATE)
        .order_by("name")
        .values_list("name", "rate")
    )
    found = []
    for name, rate in rows.iterator():
        try:
            parse_rate(rate)
        except ValidationError:
            found.append(name)
            if len(found) >= limit:
                break
    return found


@dataclass(frozen=True)
class GroupRoom:
    """A group as the admin shows it: ``running`` live leases by the database clock
    ``now``, whether it ``has_room`` for one more run, and :meth:`words`."""

    name: str
    running: int
    max_running: int | None
    rate: str
    rate_until: datetime | None
    unreadable: bool
    now: datetime

    @property
    def full(self) -> bool:
        """At ``max_running`` live leases."""
        return self.max_running is not None and self.running >= self.max_running

    @property
    def rate_held(self) -> bool:
        """Out of its rate until ``rate_until``."""
        return rate_holds(self.rate_until, self.now)

    @property
    def has_room(self) -> bool:
        """Whether a claim now would start one more of its runs."""
        return not (self.unreadable or self.full or self.rate_held)

    def words(self) -> str:
        """``"2 of 2 running"``, ``"rate 2/s"``, ``"its rate cannot be read"`` (joined)."""
        parts = []
        if self.unreadable:
            parts.append("its rate cannot be read")
        if self.full:
            parts.append(f"{self.running} of {self.max_running} running")
        if self.rate_held:
            parts.append(f"rate {self.rate}")
        return ", ".join(parts)


def _readable(rate: str) -> bool:
    try:
        parse_rate(rate)
    except ValidationError:
        return False
    return True


def group_rooms(ids: Iterable[Any], using: str = "default") -> dict[Any, GroupRoom]:
    """The :class:`GroupRoom` of each group of ``ids``, by primary key: one query (none for
    no id), the live leases counted by the database clock of the same statement."""
    wanted = {pk for pk in ids if pk is not None}
    if not wanted:
        return {}
    rows = (
        ConcurrencyGroup.objects.using(using)
        .filter(pk__in=wanted)
        .annotate(running=live_leases(Now()), db_now=Now())
        .values_list("pk", "name", "running", "max_running", "rate", "rate_until", "db_now")
    )
    return {
        pk: GroupRoom(name, running, cap, rate, _aware(until), not _readable(rate), _aware(at))
        for pk, name, running, cap, rate, until, at in rows
    }


def _aware(value: Any) -> Any:
    """An instant read back naive (``Now()`` on some backends) as aware UTC."""
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def group_wait(row: Schedule, rooms: dict[Any, GroupRoom]) -> str:
    """``"waiting for group reports (2 of 2 running)"`` when ``row`` is due (claimable by
    the clock its group was read with) and its group has no room; ``""`` otherwise."""
    room = rooms.get(row.concurrency_group_id)
    if room is None or room.has_room or row.lease_token is not None:
        return ""
    runnable = row.status == "active" or (row.status == "paused" and row.triggered_at)
    due = isinstance(row.next_run_at, datetime) and row.next_run_at <= room.now
    if not (runnable and due):
        return ""
    return f"waiting for group {room.name} ({room.words()})"
