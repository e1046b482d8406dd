"""Concurrency groups inside the claim and completion transactions (issue #28, item 1):
:class:`Admission` locks the groups of a claim's rows, counts their live leases and lets
:func:`.group_rules.admit` decide which rows start; :func:`release_groups` lets a
finished run's group be read again by the next claim.

The discipline is the one of leases: a claim that may grant a lease in a group holds the
group's row lock (``SELECT ... FOR UPDATE``, groups in primary key order, never skipped)
from its count to its commit, so two claims never both see the last free place. A
completion or a lease recovery does not take it: a lease released only makes room.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import Count

from ..db.locks import locked
from ..limits import RATE_HOLD_MAX_SECONDS
from ..models import (
    RATE_MAX_COUNT,
    ConcurrencyGroup,
    OccurrenceLease,
    Schedule,
    ScheduleQuerySet,
)
from .group_rules import GroupRoom, admit, give_back, group_columns, rate_margin
from .values import Claim


class Admission:
    """The concurrency groups of one claim transaction: :meth:`admit` may be called for
    the live rows and again for the backfill slots (the rooms are shared, so a group's
    ``max_running`` holds across both); :meth:`write` stores what the claim changed on the
    groups. No statement for rows of no group."""

    def __init__(self, using: str) -> None:
        self.using = using
        self.rooms: dict[Any, GroupRoom] = {}
        self.changes: dict[Any, dict[str, Any]] = {}
        #: The groups that held back a row of this claim (no room left in it).
        self.held: set[Any] = set()
        #: The rows of a group this claim admitted, with the instant of each admission.
        self.admitted: list[tuple[Schedule, datetime]] = []
        #: The run-state columns of each group as read: a group left as it was is not
        #: written (a group that is never full costs its lock and count, no write).
        self.read: dict[Any, dict[str, Any]] = {}

    def admit(self, rows: list[Schedule], now: datetime) -> list[Schedule]:
        """The rows of ``rows`` that may start at ``now`` (the claim's instant), in their
        order; the others are held back, left unwritten. Locks and counts the groups not
        seen yet in this transaction: two statements when any row names a new group."""
        new = sorted({row.concurrency_group_id for row in rows} - {None} - set(self.rooms), key=str)
        if new:
            self.rooms.update(self._rooms(new, now))
        if not self.rooms:
            return rows
        admitted, held, changes = admit(rows, lambda row: row.concurrency_group_id, self.rooms, now)
        self.changes.update(changes)
        self.held.update(row.concurrency_group_id for row in held)
        self.admitted += [(row, now) for row in admitted if row.concurrency_group_id in self.rooms]
        return admitted

    def start_deadlines(self, claims: list[Claim], rows: Sequence[Schedule]) -> list[Claim]:
        """``claims`` (of ``rows``, this claim's) with ``start_by`` set on each one whose
        schedule is in a group with a rate: its claim instant plus the rate's margin
        (:func:`.group_rules.rate_margin`). The others as they were; no statement."""
        rated = {
            pk: timedelta(seconds=rate_margin(room.rate_seconds))
            for pk, room in self.rooms.items()
            if room.rate_seconds is not None and room.rate_count is not None
        }
        if not rated:
            return claims
        group_of = {row.pk: row.concurrency_group_id for row in rows}
        return [
            dataclasses.replace(claim, start_by=claim.claimed_at + rated[group])
            if (group := group_of.get(claim.schedule_id)) in rated
            else claim
            for claim in claims
        ]

    def _rooms(self, ids: list[Any], now: datetime) -> dict[Any, GroupRoom]:
        groups = ConcurrencyGroup.objects.using(self.using).filter(pk__in=ids).order_by("pk")
        found = list(locked(groups, self.using, skip_locked=False))
        live = (
            Schedule.objects.using(self.using)
            .filter(concurrency_group_id__in=ids, lease_token__isnull=False)
            .filter(ScheduleQuerySet.lease_live_q(now))
            .values_list("concurrency_group_id")
            .annotate(n=Count("pk"))
        )
        running = dict(live.values_list("concurrency_group_id", "n"))
        # The occurrences of overlap_policy allow schedules hold their own leases.
        occurrences = (
            OccurrenceLease.objects.using(self.using)
            .live(now)
            .filter(schedule__concurrency_group_id__in=ids)
            .values_list("schedule__concurrency_group_id")
            .annotate(n=Count("pk"))
        )
        for group, n in occurrences:
            running[group] = running.get(group, 0) + n
        self.read.update(
            {
                g.pk: {"full_until": g.full_until, "rate_until": g.rate_until, "starts": g.starts}
                for g in found
            }
        )
        return {group.pk: room_of(group, running.get(group.pk, 0), now) for group in found}

    def write(self) -> None:
        """Store the groups' ``full_until``, ``rate_until`` and ``starts`` as the claim
        left them, once its rows were planned: a row admitted that took no lease (its slot
        missed or skipped, ...) gives its place back (:func:`.group_rules.give_back`). One
        statement per group the claim admitted into or held back from."""
        for row, at in self.admitted:
            if row.lease_token is None:
                room = self.rooms[row.concurrency_group_id]
                give_back(room, at)
                self.changes[row.concurrency_group_id] = group_columns(room, at)
        for pk, columns in self.changes.items():
            if columns == self.read.get(pk):
                continue
            ConcurrencyGroup.objects.using(self.using).filter(pk=pk).update(**columns)


def room_of(group: ConcurrencyGroup, running: int, now: datetime) -> GroupRoom:
    """The :class:`.group_rules.GroupRoom` of ``group`` read under its lock at ``now``,
    with ``running`` live leases. A rate that does not parse (written behind ``save()``)
    makes it ``unreadable``: nothing of it starts, and health names the group. Its
    ``starts`` are JSON any writer can fill: only numbers count, up to ``now`` plus
    ``RATE_HOLD_MAX_SECONDS`` (a concurrent claim's starts lie after this claim's ``now``,
    read before its lock; a later one was never written by a claim), the last
    ``RATE_MAX_COUNT`` of them; anything else is dropped, and the claim writes the
    cleaned list back."""
    unreadable = ""
    rate = None
    try:
        rate = group.parsed_rate()
    except ValidationError:
        unreadable = f"the rate {group.rate[:20]!r} cannot be read"
    starts = group.starts if isinstance(group.starts, list) else []
    at = now.timestamp()
    # A claim reads ``now`` before it waits for the group's lock: a concurrent claim's
    # starts may lie after it (as far as that wait lasted). Only a start later than any
    # hold a claim writes was written behind ``save()``.
    ahead = RATE_HOLD_MAX_SECONDS
    numbers = [
        t
        for t in starts
        if isinstance(t, int | float) and not isinstance(t, bool) and -at <= t <= at + ahead
    ]
    return GroupRoom(
        max_running=group.max_running,
        rate_count=rate.count if rate else None,
        rate_seconds=rate.seconds if rate else None,
        running=running,
        starts=sorted(float(t) for t in numbers)[-RATE_MAX_COUNT:],
        unreadable=unreadable,
    )


def release_groups(rows: Iterable[Schedule], using: str) -> None:
    """After runs of ``rows`` released their leases (completion, lease recovery): clear
    ``full_until`` on their groups so the next claim counts them again. No statement when
    no row names a group; one otherwise."""
    ids: set[Any] = {row.concurrency_group_id for row in rows} - {None}
    if ids:
        ConcurrencyGroup.objects.using(using).filter(pk__in=ids, full_until__isnull=False).update(
            full_until=None
        )


def unstart_groups(unrun: Iterable[tuple[Any, datetime]], using: str) -> None:
    """Inside a completion: give back the rate's place of runs handed back unrun
    (``released``) that a rate admitted: ``unrun`` holds ``(group id, claim instant)``
    pairs; each instant is removed from its group's ``starts`` under the group's row lock
    (groups in primary key order, as a claim locks them), so the rate's budget counts only
    runs that may have started. No statement for no pair; two per group otherwise."""
    by_group: dict[Any, list[float]] = {}
    for group, at in unrun:
        if group is not None:
            by_group.setdefault(group, []).append(at.timestamp())
    if not by_group:
        return
    groups = ConcurrencyGroup.objects.using(using).filter(pk__in=list(by_group)).order_by("pk")
    for group in locked(groups, using, skip_locked=False):
        starts = group.starts if isinstance(group.starts, list) else []
        kept = list(starts)
        for instant in by_group[group.pk]:
            if instant in kept:
                kept.remove(instant)
        if kept != starts:
            ConcurrencyGroup.objects.using(using).filter(pk=group.pk).update(
                starts=kept, rate_until=None
            )
