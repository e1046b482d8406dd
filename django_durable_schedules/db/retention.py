"""Retention: the one deliberate path that deletes finished attempt/receipt pairs.

The append-only triggers (:mod:`.guards`) refuse every DELETE unless the session has opened
the retention gate, which only :func:`retention_gate` does, inside a transaction, and only
for the statements of :func:`prune_finished`. An attempt without a receipt (a run in
flight or awaiting lease recovery) is never pruned.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connections, transaction
from django.db.models import Count, Max, Min

from ..conf import app_settings
from ..models import CHAIN_DECIDED, ChainSlot, RunAttempt, RunReceipt, Schedule
from .clock import db_now
from .guards import MYSQL_GATE_VARIABLE, PG_GATE_SETTING


@dataclass(frozen=True)
class PruneResult:
    """Rows removed by :func:`prune_finished` and the cutoff used (aware UTC)."""

    receipts: int
    attempts: int
    cutoff: datetime
    #: Chain slots decided (run or missed) before the cutoff (kind ``after``).
    chain_slots: int = 0


@dataclass(frozen=True)
class PrunableGroup:
    """Finished pairs of one receipt status that a prune would delete."""

    status: str
    count: int
    oldest: datetime
    newest: datetime


def prunable(cutoff: datetime, *, using: str = "default") -> list[PrunableGroup]:
    """What :func:`prune_finished` would delete at ``cutoff`` (aware UTC): the receipts
    finished before it, per status, with the oldest and newest ``finished_at``. Read-only
    (one grouped query over the ``finished_at`` range)."""
    rows = (
        RunReceipt.objects.using(using)
        .filter(finished_at__lt=cutoff)
        .values("status")
        .annotate(count=Count("id"), oldest=Min("finished_at"), newest=Max("finished_at"))
        .order_by("status")
    )
    return [PrunableGroup(r["status"], r["count"], r["oldest"], r["newest"]) for r in rows]


def shortest_window(*, now: datetime | None = None, using: str = "default") -> timedelta:
    """The shortest retention window :func:`prune_finished` accepts: the longest lease, that
    is ``LEASE_SECONDS`` or the longest time a live lease still has to run (a worker started
    with a longer ``--lease-seconds``), whichever is longer. A shorter window could delete
    the attempt of a run whose worker stalled past its lease and then reports: its outcome
    would be dropped (docs/operations.md, "What a deployment must not do")."""
    now = now or db_now(using)
    longest = timedelta(seconds=app_settings.LEASE_SECONDS)
    latest = Schedule.objects.using(using).aggregate(latest=Max("lease_expires_at"))["latest"]
    if latest is not None:
        longest = max(longest, latest - now)
    return longest


@contextmanager
def retention_gate(using: str = "default") -> Iterator[None]:
    """Open the retention gate for the current connection for the duration of the block.

    Must be used inside ``transaction.atomic`` (PostgreSQL scopes it to the transaction).
    """
    conn = connections[using]
    conn.ensure_connection()
    vendor = conn.vendor
    with conn.cursor() as cursor:
        if vendor == "postgresql":
            cursor.execute(f"SET LOCAL {PG_GATE_SETTING} = 'open'")
        elif vendor == "mysql":
            cursor.execute(f"SET {MYSQL_GATE_VARIABLE} = 'open'")
    # A flag of our own on the connection, read by the SQLite gate (guards.py).
    conn._durable_schedules_retention_open = True  # type: ignore[attr-defined]
    try:
        yield
    finally:
        conn._durable_schedules_retention_open = False  # type: ignore[attr-defined]
        if vendor == "mysql":
            with conn.cursor() as cursor:
                cursor.execute(f"SET {MYSQL_GATE_VARIABLE} = NULL")
        elif vendor == "postgresql" and not conn.needs_rollback:
            with conn.cursor() as cursor:
                cursor.execute(f"SET LOCAL {PG_GATE_SETTING} = ''")


def prune_finished(
    older_than: timedelta,
    *,
    now: datetime | None = None,
    batch_size: int = 5000,
    using: str = "default",
) -> PruneResult:
    """Delete receipts finished before ``now - older_than`` and their attempts, in batches
    of ``batch_size`` pairs, each batch its own short transaction. Returns the counts.

    ``now`` defaults to the database clock. Raises ``ValueError`` for a negative age.
    """
    if older_than < timedelta(0):
        raise ValueError("older_than must not be negative")
    cutoff = (now or db_now(using)) - older_than
    receipts = attempts = 0
    pg = connections[using].vendor == "postgresql"
    while True:
        with transaction.atomic(using=using):
            if pg:
                with retention_gate(using):
                    pruned, pruned_attempts = _prune_batch_postgresql(cutoff, batch_size, using)
                receipts += pruned
                attempts += pruned_attempts
            else:
                batch = list(
                    RunReceipt.objects.using(using)
                    .filter(finished_at__lt=cutoff)
                    .order_by("finished_at")
                    .values_list("id", "attempt_id")[:batch_size]
                )
                pruned = len(batch)
                if batch:
                    with retention_gate(using):
                        receipts += (
                            RunReceipt.objects.using(using)
                            .filter(id__in=[r[0] for r in batch])
                            ._raw_delete(using)
                        )
                        attempts += (
                            RunAttempt.objects.using(using)
                            .filter(id__in=[r[1] for r in batch])
                            ._raw_delete(using)
                        )
        if pruned < batch_size:
            break
    chain_slots = _prune_chain_slots(cutoff, batch_size, using)
    return PruneResult(receipts=receipts, attempts=attempts, cutoff=cutoff, chain_slots=chain_slots)


def _prune_chain_slots(cutoff: datetime, batch_size: int, using: str) -> int:
    """Delete the chain slots decided (``run`` or ``missed``) before ``cutoff``, in batches
    of ``batch_size``: the instants their downstream schedules no longer wait for (their
    runs and misses are receipted). Open slots are kept whatever their age."""
    deleted = 0
    while True:
        with transaction.atomic(using=using):
            batch = list(
                ChainSlot.objects.using(using)
                .filter(status__in=CHAIN_DECIDED, finished_at__lt=cutoff)
                .order_by("finished_at")
                .values_list("id", flat=True)[:batch_size]
            )
            if batch:
                deleted += ChainSlot.objects.using(using).filter(id__in=batch)._raw_delete(using)
        if len(batch) < batch_size:
            return deleted


def _prune_batch_postgresql(cutoff: datetime, batch_size: int, using: str) -> tuple[int, int]:
    """One batch as one statement: the oldest ``batch_size`` receipts finished before
    ``cutoff`` and their attempts (no id lists travel between client and server).
    Returns (receipts, attempts) deleted."""
    receipt = connections[using].ops.quote_name(RunReceipt._meta.db_table)
    attempt = connections[using].ops.quote_name(RunAttempt._meta.db_table)
    with connections[using].cursor() as cursor:
        cursor.execute(
            # = ANY(ARRAY(...)), not IN (...): IN became a hash semi-join over a scan of
            # the whole receipt table per batch (quadratic over a large backlog).
            f"WITH r AS (DELETE FROM {receipt} WHERE id = ANY(ARRAY(SELECT id FROM {receipt} "
            f"WHERE finished_at < %s ORDER BY finished_at LIMIT %s)) RETURNING attempt_id), "
            f"a AS (DELETE FROM {attempt} WHERE id IN (SELECT attempt_id FROM r) RETURNING 1) "
            "SELECT (SELECT count(*) FROM r), (SELECT count(*) FROM a)",
            [cutoff, batch_size],
        )
        receipts, attempts = cursor.fetchone()
    return int(receipts), int(attempts)
