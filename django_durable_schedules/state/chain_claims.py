"""Chaining inside the claim transaction of :func:`.runs.claim_due` (the tables:
:mod:`..models.chains`; the rules: :mod:`.chain_rules`; the slot writes: :mod:`.chains`):

* :func:`claim_chains`: the kind ``after`` schedules with a chain slot ready or past its
  deadline, locked ``SKIP LOCKED``, each settled and claimed;
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import F

from ..db.locks import locked
from ..models import (
    ChainSlot,
    ChainSlotStatus,
    RunAttempt,
    RunReceipt,
    Schedule,
    load_blackouts,
)
from .blackout_rules import blacked_out_now
from .bounds import UNEVALUABLE_PREFIX, describe_problem
from .chain_rules import plan_chain
from .chains import settle_chain_slots
from .machine import pause_degraded
from .transitions import implements
from .values import Claim

#: How many more downstream schedules than the batch has places :func:`due_downstreams`
#: reads (some are leased, paused, of another pool or held by their group).
CANDIDATES_FACTOR = 4


def due_downstreams(due_before: Any, limit: int, taken: Sequence[Schedule], using: str) -> set[Any]:
    """The schedules with a chain slot ``ready`` or ``waiting`` past its deadline at
    ``due_before``: at most ``limit`` x :data:`CANDIDATES_FACTOR` of each kind, other than
    ``taken``. Two range reads of ``dds_chain_slot_deadline_idx`` (status, deadline), so the
    claim's locking read that follows names its rows by primary key: bounded by the slots
    due, whatever the number of schedules."""
    n = limit * CANDIDATES_FACTOR
    slots = ChainSlot.objects.using(using)
    ready = slots.filter(status=ChainSlotStatus.READY).order_by("deadline")
    late = slots.filter(status=ChainSlotStatus.WAITING, deadline__lte=due_before).order_by(
        "deadline"
    )
    skip = {r.pk for r in taken}
    found: set[Any] = set()
    for qs in (ready, late):
        found |= set(qs.values_list("downstream_id", flat=True)[:n]) - skip
    return found


#: The share of a full claim batch kept for chain slots while some wait (at least one
#: place): chain slots are never starved by a fleet whose live rows fill every batch.
CHAIN_SHARE = 0.25


def chain_reserve(
    read: Sequence[Schedule], limit: int, due_before: Any, using: str
) -> tuple[set[Any] | None, int]:
    """The places of a claim batch of ``limit`` kept for chain slots: none while the live
    ``read`` leaves places free (the chains take those; no statement), else as many as
    downstream schedules wait (:func:`due_downstreams`, two statements), at most
    :data:`CHAIN_SHARE` of the batch and at least one. Returns the downstreams found
    (None: not read) and the places kept."""
    if len(read) < limit:
        return None, 0
    found = due_downstreams(due_before, limit, read, using)
    return found, min(len(found), max(1, int(limit * CHAIN_SHARE)))


def _lock_free(
    found: set[Any], due_before: Any, limit: int, using: str, pools: Sequence[str]
) -> list[Schedule]:
    """The schedules ``found`` (their slots due) free under the lock, of ``pools``, their
    group with room, the least recently run first, at most ``limit``, locked ``SKIP
    LOCKED`` by key, their blackout windows attached (their slots are read again, locked,
    by :func:`.chains.settle_chain_slots`: one that changed meanwhile settles nothing)."""
    if not found:
        return []
    qs = (
        Schedule.objects.using(using)
        .filter(Schedule.objects.chain_free_q(), pk__in=found)
        .filter(Schedule.objects.group_room_q(due_before), pool__in=pools)
        .order_by(F("last_run_at").asc(nulls_first=True), "pk")
    )
    rows = list(locked(qs, using, skip_locked=True)[:limit])
    load_blackouts(rows, using)
    return rows


@implements("claim.chain_run", "claim.chain_missed")
def claim_chains(
    due_before: Any,
    limit: int,
    taken: Sequence[Schedule],
    now_of: Any,
    lease: timedelta,
    worker: str,
    attempts: list[RunAttempt],
    receipts: list[RunReceipt],
    claims: list[Claim],
    using: str,
    pools: Sequence[str],
    admit: Any = None,
    found: set[Any] | None = None,
) -> list[Schedule]:
    """Inside the claim transaction: lock (``SKIP LOCKED``) up to ``limit`` free kind
    ``after`` schedules of ``pools`` with a chain slot ready or past its deadline
    (:func:`due_downstreams`, or ``found`` by :func:`chain_reserve`), not ``taken``, the
    least recently run first; at ``now_of()`` settle each one's slots and claim what that
    leaves (:func:`.chain_rules.plan_chain`). None starts inside a blackout window or when
    ``admit(rows, now)`` holds it back (groups): its slots wait. Returns the rows to write."""
    if limit <= 0:
        return []
    if found is None:
        found = due_downstreams(due_before, limit, taken, using)
    found = found - {r.pk for r in taken}
    rows = _lock_free(found, due_before, limit, using, pools)
    if not rows:
        return []
    now = now_of()
    rows = admit(rows, now) if admit is not None else rows
    written = []
    for row in rows:
        if blacked_out_now(row, now):
            continue  # no run starts inside its blackout window: its slots wait
        marks = len(attempts), len(receipts), len(claims)
        try:
            # A savepoint: a value of this row no rule can use rolls its slots back too.
            with transaction.atomic(using=using):
                settled = settle_chain_slots(row.pk, now, using)
                plan_chain(row, settled, now, lease, worker, attempts, receipts, claims)
        except Exception as exc:  # noqa: BLE001 - this row's own value: pause it, go on
            del attempts[marks[0] :], receipts[marks[1] :], claims[marks[2] :]
            pause_degraded(row, f"{UNEVALUABLE_PREFIX}{describe_problem(exc)}")
            written.append(row)
            continue
        if settled.missed or settled.run is not None:
            written.append(row)
    return written
