"""The database side of chaining (issue #30 item 1; the rules: :mod:`.chain_rules`, the
tables: :mod:`..models.chains`), each inside its caller's transaction:

* :func:`write_chain_slots`: when an upstream's occurrence is claimed, a waiting slot for
  its nominal instant on every schedule downstream of it (the whole closure, so that a
  slot two steps down is counted even when the step between never runs);
* :func:`note_upstream_successes`: an upstream's success for an instant noted on its direct
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

from django.db.models import Q

from ..db.locks import locked
from ..limits import CHAIN_WAIT_MAX_SECONDS
from ..models import (
    CHAIN_DECIDED,
    CHAIN_OPEN,
    SUCCESS_STATUSES,
    AttemptOrigin,
    ChainSlot,
    ChainSlotStatus,
    ExclusionPolicy,
    RunReceipt,
    Schedule,
    ScheduleLink,
    Status,
)
from .chain_rules import (
    CHAIN_ORIGINS,
    OpenSlot,
    Settled,
    closure,
    note_done,
    settle_slots,
)
from .rules import nominal_of
from .transitions import implements
from .values import Outcome

#: The statuses of a downstream schedule that still gets chain slots (a paused one counts
#: or runs them when it is enabled again).
RUNS = (Status.ACTIVE, Status.PAUSED)

#: Most open slots of one downstream a claim reads at once (the oldest first); the rest are
#: settled by the next claims.
SETTLE_MAX = 500


def _downstreams(
    starts: Iterable[uuid.UUID], using: str
) -> tuple[dict[Any, list[Any]], dict[Any, int]]:
    """The links below ``starts``, level by level: (upstream -> its direct downstreams,
    downstream -> its ``wait_seconds``, for the downstreams that still run: active or
    paused). One statement per level of the closure."""
    links: dict[Any, list[Any]] = {}
    waits: dict[Any, int] = {}
    frontier = set(starts)
    seen: set[Any] = set()
    while frontier:
        seen |= frontier
        found = (
            ScheduleLink.objects.using(using)
            .filter(upstream_id__in=frontier)
            .values_list(
                "upstream_id", "downstream_id", "downstream__wait_seconds", "downstream__status"
            )
            .order_by("upstream_id", "downstream_id")
        )
        frontier = set()
        for up, down, wait, status in found:
            links.setdefault(up, []).append(down)
            if status in RUNS:
                waits[down] = wait
            if down not in seen:
                frontier.add(down)
    return links, waits


@implements("claim.chain_slots")
def write_chain_slots(
    claimed: Sequence[tuple[uuid.UUID, datetime]],
    using: str,
    *,
    reopen_at: datetime | None = None,
) -> list[tuple[Any, datetime]]:
    """Inside a claim transaction: for each ``(upstream, nominal instant)`` claimed, a
    ``waiting`` :class:`~..models.ChainSlot` on every schedule downstream of the upstream,
    due by the instant plus that schedule's ``wait_seconds`` (a value written behind
    ``save()`` outside 1 s..31 days is clamped to it). An instant a slot already exists
    for is left as it is (a retry, a re-run or a second upstream of the same downstream).
    A downstream that no longer runs (cancelled, completed or failed) gets none; the
    schedules below it do.

    ``reopen_at`` (a backfill slot's claim with ``cascade``): each slot is due by
    ``reopen_at`` plus the downstream's ``wait_seconds`` instead (its instant is past), and
    one that was already decided (run or missed) is opened again: ``waiting``, no upstream
    done, that deadline. Returns the ``(downstream, instant)`` pairs it meant, in closure order. No statement
    when ``claimed`` is empty."""
    if not claimed:
        return []
    links, waits = _downstreams({up for up, _ in claimed}, using)
    wanted: list[tuple[Any, datetime]] = []
    for up, at in claimed:
        # A schedule that no longer runs (cancelled, completed, failed) waits for nothing:
        # it gets no slot, the ones below it do (counted missed if it never succeeds).
        wanted += [(down, at) for down in closure([up], links) if down in waits]
    wanted = list(dict.fromkeys(wanted))
    if wanted:
        ChainSlot.objects.using(using).bulk_create(
            [
                ChainSlot(
                    downstream_id=down,
                    scheduled_for=at,
                    deadline=(reopen_at or at) + timedelta(seconds=_bounded_wait(waits.get(down))),
                )
                for down, at in wanted
            ],
            ignore_conflicts=True,
        )
    if wanted and reopen_at is not None:
        for down, at in wanted:  # a backfill: one schedule's slot a claim, a short closure
            ChainSlot.objects.using(using).filter(
                downstream_id=down, scheduled_for=at, status__in=CHAIN_DECIDED
            ).update(
                status=ChainSlotStatus.WAITING,
                done=[],
                finished_at=None,
                deadline=reopen_at + timedelta(seconds=_bounded_wait(waits.get(down))),
            )
    return wanted


def _bounded_wait(value: Any) -> int:
    """A ``wait_seconds`` as the engine uses it: within 1 s..31 days (the database's own
    check keeps it there; a missing value is the default, one hour)."""
    if type(value) is not int:
        return 3600
    return min(max(value, 1), CHAIN_WAIT_MAX_SECONDS)


@implements("outcome.chain_done")
def note_upstream_successes(
    successes: Sequence[tuple[uuid.UUID, datetime]], using: str, *, create: bool = True
) -> list[Any]:
    """Inside a completion transaction: each ``(upstream, nominal instant)`` succeeded;
    its direct downstreams' slots for the instant (``create``: made when missing, a link
    added since the claim) note it, locked in one statement in ``(downstream,
    scheduled_for)`` order; one every current upstream succeeded for is ``ready`` (a slot
    run or missed stays so). Returns the downstreams made ready. No statement without
    ``successes``; one (the links) when none has a downstream."""
    if not successes:
        return []
    ups = {up for up, _ in successes}
    edges = list(
        ScheduleLink.objects.using(using)
        .filter(upstream_id__in=ups)
        .values_list("upstream_id", "downstream_id")
    )
    if not edges:
        return []
    linked = {up for up, _ in edges}
    successes = [(up, at) for up, at in successes if up in linked]
    if create:
        write_chain_slots(successes, using)
    downs = {down for _, down in edges}
    upstreams_of: dict[Any, list[str]] = {}
    for down, up in (
        ScheduleLink.objects.using(using)
        .filter(downstream_id__in=downs)
        .values_list("downstream_id", "upstream_id")
    ):
        upstreams_of.setdefault(down, []).append(str(up))
    wanted: dict[tuple[Any, datetime], list[str]] = {}
    for up, at in successes:
        for edge_up, down in edges:
            if edge_up == up:
                wanted.setdefault((down, at), []).append(str(up))
    query = Q()
    for down, at in wanted:
        query |= Q(downstream_id=down, scheduled_for=at)
    slots = locked(
        ChainSlot.objects.using(using)
        .filter(query, status__in=CHAIN_OPEN)
        .order_by("downstream_id", "scheduled_for"),
        using,
        skip_locked=False,
    )
    ready = []
    for slot in slots:
        done: Any = slot.done
        now_ready = False
        for key in wanted.get((slot.downstream_id, slot.scheduled_for), ()):
            done, now_ready = note_done(done, key, upstreams_of.get(slot.downstream_id, ()))
        slot.done = done
        fields = ["done"]
        if now_ready and slot.status == ChainSlotStatus.WAITING:
            slot.status = ChainSlotStatus.READY
            fields.append("status")
            ready.append(slot.downstream_id)
        slot.save(using=using, update_fields=fields)
    return ready


@implements("claim.chain_run", "claim.chain_missed")
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
            OpenSlot(
                r.pk,
                r.scheduled_for,
                r.deadline,
                r.status == ChainSlotStatus.READY,
                len(r.done) if isinstance(r.done, list) else 0,
            )
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


def note_chain_successes(
    outcomes: Sequence[Outcome],
    touched: dict[uuid.UUID, Schedule],
    receipts: Sequence[RunReceipt],
    using: str,
) -> None:
    """The successes among ``receipts`` of occurrences of the live grid
    (:data:`.chain_rules.CHAIN_ORIGINS`) noted on the chain slots of the schedules
    downstream (:func:`.chains.note_upstream_successes`), by nominal instant (the slot an
    exclusion policy moved: the one it was moved from). A first attempt's success creates
    a missing slot (a link added since its claim); a retry's only notes one that exists (a
    triggered occurrence's retry has no instant of the grid), as a backfill slot's does (a
    slot still waiting for that instant, or one its ``cascade`` opened again). No
    statement without one."""
    succeeded = {r.attempt_id for r in receipts if r.status in SUCCESS_STATUSES}
    first: list[tuple[uuid.UUID, datetime]] = []
    retried: list[tuple[uuid.UUID, datetime]] = []
    for outcome in outcomes:
        claim = outcome.claim
        row = touched.get(claim.schedule_id)
        if row is None or claim.attempt_id not in succeeded:
            continue
        if claim.origin not in CHAIN_ORIGINS and claim.origin != AttemptOrigin.BACKFILL:
            continue
        nominal = claim.scheduled_for
        if row.exclusion_policy != ExclusionPolicy.SKIP:
            nominal = nominal_of(row, claim.scheduled_for) or nominal
        if claim.origin == AttemptOrigin.BACKFILL:
            retried.append((claim.schedule_id, claim.scheduled_for))  # slots it opened
        else:
            (first if claim.attempt == 1 else retried).append((claim.schedule_id, nominal))
    note_upstream_successes(first, using)
    note_upstream_successes(retried, using, create=False)


@implements("control.edit")
def relink_slots(downstream: Any, upstreams: Sequence[str], using: str) -> None:
    """Inside the transaction that changed ``downstream``'s links (its row locked): its
    open chain slots follow its ``upstreams`` (keys as text). None left: they are deleted
    (the schedule waits for nothing: its kind changed, or it was unlinked); else a
    ``waiting`` slot that every remaining upstream succeeded for is ``ready``. No
    statement beyond one read when it has no open slot."""
    slots = ChainSlot.objects.using(using).filter(downstream_id=downstream, status__in=CHAIN_OPEN)
    if not upstreams:
        slots.delete()
        return
    for slot in locked(
        slots.filter(status=ChainSlotStatus.WAITING).order_by("scheduled_for"),
        using,
        skip_locked=False,
    ):
        held = slot.done if isinstance(slot.done, list) else []
        if set(upstreams) <= {d for d in held if isinstance(d, str)}:
            slot.status = ChainSlotStatus.READY
            slot.save(using=using, update_fields=["status"])
