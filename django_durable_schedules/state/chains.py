"""The database side of chaining (issue #30 item 1; the rules: :mod:`.chain_rules`, the
tables: :mod:`..models.chains`), each inside its caller's transaction:

* :func:`write_chain_slots`: when an upstream's occurrence is claimed, a waiting slot for
  its nominal instant on every schedule downstream of it (the whole closure, so that a
  slot two steps down is counted even when the step between never runs);
* :func:`note_upstream_success`: an upstream's success for an instant noted on its direct
  downstreams' slots, which become ``ready`` once every upstream is in;
* :func:`settle_chain_slots`: a downstream's claim of its open slots: the expired waiting
  ones marked ``missed``, the oldest ready one marked ``run``.

Bounded: one statement per level of the closure to read the links, one insert; one locking
read and at most one update per status for the slots. Lock order: a downstream's slots are
locked in ``(downstream, scheduled_for)`` order, after the rows of the schedules the caller
holds, so two transactions never wait for each other in a circle over them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from ..db.locks import locked
from ..limits import CHAIN_WAIT_MAX_SECONDS
from ..models import CHAIN_OPEN, ChainSlot, ChainSlotStatus, ScheduleLink
from .chain_rules import OpenSlot, Settled, closure, note_done, settle_slots

#: Most open slots of one downstream a claim reads at once (the oldest first); the rest are
#: settled by the next claims.
SETTLE_MAX = 500


def _downstreams(
    starts: Iterable[uuid.UUID], using: str
) -> tuple[dict[Any, list[Any]], dict[Any, int]]:
    """The links below ``starts``, level by level: (upstream -> its direct downstreams,
    downstream -> its ``wait_seconds``). One statement per level of the closure."""
    links: dict[Any, list[Any]] = {}
    waits: dict[Any, int] = {}
    frontier = set(starts)
    seen: set[Any] = set()
    while frontier:
        seen |= frontier
        found = (
            ScheduleLink.objects.using(using)
            .filter(upstream_id__in=frontier)
            .values_list("upstream_id", "downstream_id", "downstream__wait_seconds")
            .order_by("upstream_id", "downstream_id")
        )
        frontier = set()
        for up, down, wait in found:
            links.setdefault(up, []).append(down)
            waits[down] = wait
            if down not in seen:
                frontier.add(down)
    return links, waits


def write_chain_slots(
    claimed: Sequence[tuple[uuid.UUID, datetime]], using: str
) -> list[tuple[Any, datetime]]:
    """Inside a claim transaction: for each ``(upstream, nominal instant)`` claimed, a
    ``waiting`` :class:`~..models.ChainSlot` on every schedule downstream of the upstream,
    due by the instant plus that schedule's ``wait_seconds`` (a value written behind
    ``save()`` outside 1 s..31 days is clamped to it). An instant a slot already exists
    for is left as it is (a retry, a re-run or a second upstream of the same downstream).
    Returns the ``(downstream, instant)`` pairs it meant, in closure order. No statement
    when ``claimed`` is empty."""
    if not claimed:
        return []
    links, waits = _downstreams({up for up, _ in claimed}, using)
    wanted: list[tuple[Any, datetime]] = []
    for up, at in claimed:
        wanted += [(down, at) for down in closure([up], links)]
    wanted = list(dict.fromkeys(wanted))
    if wanted:
        ChainSlot.objects.using(using).bulk_create(
            [
                ChainSlot(
                    downstream_id=down,
                    scheduled_for=at,
                    deadline=at + timedelta(seconds=_bounded_wait(waits.get(down))),
                )
                for down, at in wanted
            ],
            ignore_conflicts=True,
        )
    return wanted


def _bounded_wait(value: Any) -> int:
    """A ``wait_seconds`` as the engine uses it: within 1 s..31 days (the database's own
    check keeps it there; a missing value is the default, one hour)."""
    if type(value) is not int:
        return 3600
    return min(max(value, 1), CHAIN_WAIT_MAX_SECONDS)


def note_upstream_success(
    upstream: uuid.UUID, scheduled_for: datetime, now: datetime, using: str
) -> list[Any]:
    """Inside a completion transaction: ``upstream`` succeeded for the nominal instant
    ``scheduled_for``. Its direct downstreams' slots for that instant (created here when
    missing: a link added after the upstream's claim) note it, locked in order; a slot
    every current upstream of its downstream succeeded for becomes ``ready``. Returns the
    downstreams whose slot became ready. A slot no longer open (run or missed) is left as
    it is: the instant was decided."""
    downs = list(
        ScheduleLink.objects.using(using)
        .filter(upstream_id=upstream)
        .order_by("downstream_id")
        .values_list("downstream_id", flat=True)
    )
    if not downs:
        return []
    write_chain_slots([(upstream, scheduled_for)], using)
    ups: dict[Any, list[str]] = {}
    for down, up in (
        ScheduleLink.objects.using(using)
        .filter(downstream_id__in=downs)
        .values_list("downstream_id", "upstream_id")
    ):
        ups.setdefault(down, []).append(str(up))
    slots = locked(
        ChainSlot.objects.using(using)
        .filter(downstream_id__in=downs, scheduled_for=scheduled_for, status__in=CHAIN_OPEN)
        .order_by("downstream_id", "scheduled_for"),
        using,
        skip_locked=False,
    )
    ready = []
    for slot in slots:
        done, now_ready = note_done(slot.done, str(upstream), ups.get(slot.downstream_id, ()))
        slot.done = done
        fields = ["done"]
        if now_ready and slot.status == ChainSlotStatus.WAITING:
            slot.status = ChainSlotStatus.READY
            fields.append("status")
            ready.append(slot.downstream_id)
        slot.save(using=using, update_fields=fields)
    return ready


def settle_chain_slots(downstream: uuid.UUID, now: datetime, using: str) -> Settled:
    """Inside a claim transaction that holds ``downstream``'s row lock: its open slots (the
    oldest :data:`SETTLE_MAX`), locked in order, settled at ``now``
    (:func:`.chain_rules.settle_slots`): the expired waiting ones marked ``missed``, the
    oldest ready one marked ``run``, each with ``finished_at`` = ``now``. Returns what was
    settled; the caller receipts the missed instants and runs the ready one."""
    rows = list(
        locked(
            ChainSlot.objects.using(using)
            .filter(downstream_id=downstream, status__in=CHAIN_OPEN)
            .order_by("scheduled_for"),
            using,
            skip_locked=False,
        )[:SETTLE_MAX]
    )
    settled = settle_slots(
        [
            OpenSlot(r.pk, r.scheduled_for, r.deadline, r.status == ChainSlotStatus.READY)
            for r in rows
        ],
        now,
    )
    if settled.missed:
        ChainSlot.objects.using(using).filter(pk__in=[s.key for s in settled.missed]).update(
            status=ChainSlotStatus.MISSED, finished_at=now
        )
    if settled.run is not None:
        ChainSlot.objects.using(using).filter(pk=settled.run.key).update(
            status=ChainSlotStatus.RUN, finished_at=now
        )
    return settled
