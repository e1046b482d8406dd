"""Concurrency groups defined through the state package (issue #28, item 1): a group saved
by name (:func:`save_group`) or deleted while no schedule names it (:func:`delete_group`),
and what a group holds now (:func:`with_usage`: its live leases and its due, unleased
rows). What a group means at a claim is :mod:`.group_rules` (the arithmetic) and
:mod:`.groups` (the locked reads); a claim counts the live leases under the group's lock,
so an edit applies at the next claim. An edit clears the group's ``full_until`` and
``rate_until`` so that the next claim reads the new limits at once.

The audit trail: an edit that changes a group's description, ``max_running`` or ``rate``
writes one ``group`` event on each schedule that names it (:func:`group_events`: who,
from where, ``{"group": name, field: [before, after]}``), in one insert however many
schedules name it. An edit that changes nothing writes nothing (not even the row); a group
created is named by no schedule yet, and a delete is refused while one names it, so
neither writes an event.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Count, IntegerField, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.deletion import ProtectedError
from django.db.models.functions import Coalesce

from ..db.clock import resolve_now
from ..db.locks import lock_for_write, locked
from ..models import ConcurrencyGroup, EventAction, Schedule, ScheduleEvent, ScheduleQuerySet
from ..uuids import uuid4
from .events import as_changes, write_events

#: How many of the schedules that still name a group a refused delete lists.
NAMED_IN_ERROR = 5


#: The fields of a group an edit writes, in the order a ``group`` event lists them.
LIMIT_FIELDS = ("description", "max_running", "rate")


def save_group(
    name: str,
    *,
    max_running: int | None = None,
    rate: str = "",
    description: str = "",
    actor: Any = None,
    source: str = "code",
    using: str = "default",
) -> ConcurrencyGroup:
    """Create the group ``name`` or update the one of that name: ``max_running`` runs at
    once (None: no cap), ``rate`` starts per window (``"10/m"``; blank: none; stored
    without spaces), at least one of the two. Validated with ``full_clean``; an edit
    clears ``full_until`` and ``rate_until`` (the next claim reads the new limits; a lower
    ``max_running`` lets no new run start until the live leases fall under it, and stops
    none) and writes a ``group`` event on each schedule that names the group
    (:func:`group_events`; ``actor``: the user or None, ``source``: ``admin``, ``api``,
    ``command``, ``code``), in the same transaction. An edit that changes none of
    :data:`LIMIT_FIELDS` writes nothing. Raises ``ValidationError`` with field messages
    (nothing written then)."""
    try:
        with transaction.atomic(using=using):
            group = _locked_group(name, using)
            created = group is None
            if group is None:
                group = ConcurrencyGroup(name=name)
            before = {f: getattr(group, f) for f in LIMIT_FIELDS}
            group.max_running = max_running
            group.rate = "" if rate is None else rate
            group.description = "" if description is None else description
            group.full_clean()
            changes = as_changes(before, {f: getattr(group, f) for f in LIMIT_FIELDS})
            if not created and not changes:
                return group
            group.full_until = None
            group.rate_until = None
            # An edit leaves ``starts`` as the claims wrote it (the rate's history).
            group.save(using=using, update_fields=None if created else _EDITED)
            if not created:
                named = Schedule.objects.using(using).filter(concurrency_group=group)
                rows = list(named.order_by("name").only("id", "name"))
                now = resolve_now(None, using)
                write_events(group_events(group, changes, rows, now, actor, source), using)
    except IntegrityError:  # the same name created at the same time
        raise ValidationError({"name": [f"A group named {name!r} was just created."]}) from None
    return group


_EDITED = ["description", "max_running", "rate", "full_until", "rate_until", "updated_at"]


def group_events(
    group: ConcurrencyGroup,
    changes: dict[str, list[Any]],
    rows: Iterable[Schedule],
    now: datetime,
    actor: Any = None,
    source: str = "code",
) -> list[ScheduleEvent]:
    """One unsaved ``group`` event per schedule of ``rows`` (those that name ``group``):
    at ``now``, by ``actor`` (a user, kept as ``actor`` when it has a key, and as text),
    from ``source``, with ``changes`` = ``{"group": name, field: [before, after], ...}``
    (``changes``: the edited fields, :func:`.events.as_changes`). Empty without rows."""
    payload = {"group": group.name, **changes}
    return [
        ScheduleEvent(
            id=uuid4(),
            schedule_id=row.pk,
            schedule_name=row.name,
            action=EventAction.GROUP,
            at=now,
            actor=actor if getattr(actor, "pk", None) else None,
            actor_repr=str(actor)[:200] if actor is not None else "",
            source=source[:32],
            changes=payload,
        )
        for row in rows
    ]


def _locked_group(name: str, using: str) -> ConcurrencyGroup | None:
    """The group named ``name`` locked for this transaction (waits for a claim holding it),
    None when there is none."""
    lock_for_write(using)
    rows = ConcurrencyGroup.objects.using(using).filter(name=name)
    return locked(rows, using, skip_locked=False).first()


def delete_group(
    name: str, *, actor: Any = None, source: str = "code", using: str = "default"
) -> None:
    """Delete the group named ``name``. Refused while schedules name it: a
    ``ValidationError`` (code ``protected``) naming the first :data:`NAMED_IN_ERROR` of
    them (move or delete them first); one too for a name no group has (code
    ``missing``). ``actor`` and ``source`` are taken as :func:`save_group` takes them, but
    a group deleted is named by no schedule, so no schedule's trail records the delete
    (no event is written)."""
    with transaction.atomic(using=using):
        group = _locked_group(name, using)
        if group is None:
            raise ValidationError(f"No concurrency group named {name!r}.", code="missing")
        users = Schedule.objects.using(using).filter(concurrency_group=group)
        named = list(users.order_by("name").values_list("name", flat=True)[:NAMED_IN_ERROR])
        if named:
            raise in_use(group, named, users.count())
        try:
            group.delete(using=using)
        except ProtectedError:  # a schedule named it since
            raise in_use(group, [], 1) from None


def in_use(group: ConcurrencyGroup, named: list[str], count: int) -> ValidationError:
    """The error of a delete refused because ``count`` schedules name ``group`` (the first
    of them in ``named``)."""
    listed = ", ".join(named) + (f" and {count - len(named)} more" if count > len(named) else "")
    return ValidationError(
        f"The concurrency group {group.name!r} is still named by {count} schedule(s)"
        + (f": {listed}" if named else "")
        + ". Move them to another group (or none) first.",
        code="protected",
    )


def _count(condition: Q) -> Coalesce:
    rows = (
        Schedule.objects.filter(condition, concurrency_group=OuterRef("pk"))
        .order_by()
        .values("concurrency_group")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(rows, output_field=IntegerField()), Value(0))


def with_usage(groups: QuerySet[ConcurrencyGroup], now: datetime) -> QuerySet[ConcurrencyGroup]:
    """``groups`` annotated, in the same statement, with ``running`` (the live leases of
    their schedules at ``now``: a lease token and an expiry after ``now``) and ``waiting``
    (their schedules due at ``now`` and unleased: held back, or not claimed yet)."""
    live = Q(lease_token__isnull=False) & ScheduleQuerySet.lease_live_q(now)
    return groups.annotate(running=_count(live), waiting=_count(ScheduleQuerySet.claimable_q(now)))


class UnknownGroup(ImproperlyConfigured):
    """A schedule declared in code names a concurrency group no row has (raised by
    :func:`declared_group`; the sync logs it and skips that declaration)."""


def unknown_group_text(schedule: str, group: str) -> str:
    """What is wrong, and how to fix it, when the schedule ``schedule`` declared in code
    names the group ``group`` that does not exist (the sync's log, check W005)."""
    return (
        f"The schedule declared in code for {schedule!r} names the concurrency group "
        f"{group!r}, which does not exist."
    )


#: How to fix :func:`unknown_group_text`'s problem.
UNKNOWN_GROUP_HINT = (
    "Create the group (admin, API, or manage.py schedules groups add) or fix the "
    "register(...) call; the schedule is synced (created or changed) at the next worker "
    "start or migrate after that."
)


def declared_group(schedule: str, group: str, using: str = "default") -> ConcurrencyGroup:
    """The group named ``group`` for the schedule ``schedule`` declared in code
    (``register(..., concurrency_group=)``). Raises :class:`UnknownGroup` (an
    ``ImproperlyConfigured``) naming both when no group has that name."""
    found = ConcurrencyGroup.objects.using(using).filter(name=group).first()
    if found is None:
        raise UnknownGroup(f"{unknown_group_text(schedule, group)} {UNKNOWN_GROUP_HINT}")
    return found


def unknown_declared_groups(
    declared: Iterable[Any], using: str = "default"
) -> list[tuple[str, str]]:
    """The ``(schedule, group)`` pairs of the registrations ``declared`` (``registry.declared()``)
    whose declaration names a concurrency group that no row has, in one query. Raises
    ``DatabaseError`` when the groups cannot be read (not migrated yet)."""
    named = [
        (reg.name, reg.declaration.flow.concurrency_group)
        for reg in declared
        if reg.declaration is not None and reg.declaration.flow.concurrency_group is not None
    ]
    if not named:
        return []
    rows = ConcurrencyGroup.objects.using(using).filter(name__in={g for _, g in named})
    found = set(rows.values_list("name", flat=True))
    return [(schedule, group) for schedule, group in named if group not in found]
