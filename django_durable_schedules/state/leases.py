"""Leases: :func:`renew_leases` extends the live ones, :func:`expire_leases` recovers the
ones whose worker died or hung.

A lease token no attempt holds was written behind ``save()`` (a claim writes the row's
token and its attempt in one transaction). When such a token replaced the token of a run
that was out, the run's attempt is *displaced* (:func:`displaced_attempt`): its outcome
is fenced (``lease_lost``), and the recovery of the foreign lease retries the occurrence
as it would after a lease expiry, so a foreign write never loses an occurrence.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from django.db import connections, transaction

from .. import timing
from ..conf import app_settings
from ..db.batch import ROW_PROBLEMS, insert_rows, update_rows
from ..db.clock import resolve_now
from ..db.locks import lock_for_write, locked
from ..models import (
    ReceiptStatus,
    RunAttempt,
    RunReceipt,
    Schedule,
    ScheduleEvent,
    load_exclusions,
)
from .alerts import write_alerts
from .attempt_rules import claim_of
from .backfill_claims import settle_backfills
from .backfill_rules import backfill_receipt
from .bounds import check_counters
from .columns import FINISH_FIELDS
from .completion import fail_contained
from .events import write_events
from .groups import release_groups
from .parallel import recover_parallel, renew_parallel
from .quarantine import displaced_attempt, quarantine_lease
from .rerun_rules import rerun_receipt
from .reruns import occurrence_succeeded
from .transitions import implements
from .values import Failure, Outcome

logger = logging.getLogger(__name__)


@implements("recovery.renew")
def renew_leases(
    tokens: Iterable[uuid.UUID],
    *,
    lease_seconds: float | None = None,
    now: datetime | None = None,
    using: str = "default",
) -> set[uuid.UUID]:
    """Extend the leases named by ``tokens`` to ``now + lease_seconds`` while they are
    still live (a row's own, or an ``allow`` occurrence's: :mod:`.parallel`), and return the tokens that are still owned (the others were lost: expired
    and recovered, or the schedule was deleted). A row locked by another transaction is
    skipped, not waited for (where the database has ``SKIP LOCKED``); its lease stays
    owned while it has not expired."""
    tokens = list(tokens)
    if not tokens:
        return set()
    lease = timedelta(seconds=lease_seconds or app_settings.LEASE_SECONDS)
    with transaction.atomic(using=using):
        now = resolve_now(now, using)
        live = Schedule.objects.using(using).filter(
            lease_token__in=tokens, lease_expires_at__gt=now
        )
        if connections[using].features.has_select_for_update_skip_locked:
            # Never wait for a row someone else locked (a callback may lock its own
            # schedule): renew the others now, that one at the next renewal.
            live = Schedule.objects.using(using).filter(
                pk__in=list(locked(live, using, skip_locked=True).values_list("pk", flat=True))
            )
        live.update(lease_expires_at=now + lease)
        owned = {
            token
            for token in Schedule.objects.using(using)
            .filter(lease_token__in=tokens, lease_expires_at__gt=now)
            .values_list("lease_token", flat=True)
            if token is not None  # the filter on lease_token already rules None out
        }
        if len(owned) < len(tokens):  # overlap_policy allow: occurrence leases
            owned |= renew_parallel(set(tokens) - owned, now, lease, using)
    return owned


@implements("recovery.lease_unrecoverable")
def expire_leases(
    *, limit: int | None = None, now: datetime | None = None, using: str = "default"
) -> int:
    """Recover up to ``limit`` claims whose lease expired (their worker died or hung).

    Each gets a ``lease_expired`` receipt; its occurrence is retried at once as the next
    attempt, or given up after ``max_attempts`` (at-least-once execution); an occurrence
    of an ``overlap_policy="allow"`` schedule (its own lease) is counted as a failed
    occurrence, never retried (:func:`.parallel.recover_parallel`). Returns the number
    recovered.

    A lease expiry no lease the engine grants could hold (``ScheduleQuerySet.lease_expired``:
    after year 9000, PostgreSQL ``infinity`` and ``-infinity``) counts as expired; the
    expiry itself is never read. A lease token no attempt holds (written behind ``save()``)
    recovers the run it displaced (:func:`.quarantine.displaced_attempt`). If the batch
    cannot be recovered (a value the engine cannot read: a counter that is no number, a
    calendar date beyond 9999; or the database refuses the write:
    :data:`.db.batch.ROW_PROBLEMS`), the rows are recovered one transaction
    each, and a row that fails on its own is quarantined
    (:func:`.quarantine.quarantine_lease`: lease cleared, paused as degraded with the
    reason, its attempt receipted ``lease_expired`` noting the pause, not retried), so one
    row never stops the recovery of the others. Other database errors propagate and nothing is recovered.
    """
    limit = limit or app_settings.BATCH_SIZE
    if now is not None:
        now = timing.require_aware(now, "now")
    try:
        return _expire_batch(limit, now, using, only=None)
    except ROW_PROBLEMS as exc:
        if connections[using].in_atomic_block:
            raise  # inside the caller's transaction nothing can be retried here
        logger.warning("a lease recovery batch failed (%s); recovering row by row", exc)
    instant = resolve_now(now, using)
    recovered = 0
    expired = Schedule.objects.using(using).lease_expired(instant).order_by("lease_expires_at")
    for pk in list(expired.values_list("pk", flat=True)[:limit]):
        try:
            recovered += _expire_batch(limit, instant, using, only=pk)
        except ROW_PROBLEMS as exc:
            recovered += quarantine_lease(pk, exc, instant, using)
    return recovered


def _log_displaced(row: Schedule, attempt: RunAttempt) -> None:
    """Log that a lease token written behind ``save()`` displaced ``attempt`` of ``row``,
    recovered as expired."""
    logger.warning(
        "%s: a lease token written behind save() displaced occurrence %s "
        "attempt %s; recovering it as expired",
        row.name,
        attempt.occurrence,
        attempt.attempt,
        extra={"schedule": row.name, "occurrence": attempt.occurrence},
    )


def _lease_expired(attempt: RunAttempt) -> Failure:
    """The failure of ``attempt`` whose lease expired before its run reported an outcome:
    retried at once (``retry_after`` 0) while attempts are left."""
    return Failure.of(
        attempt,
        ReceiptStatus.LEASE_EXPIRED,
        error_type="LeaseExpired",
        error_message="the lease expired before the run reported an outcome",
        retry_after=0.0,
    )


@implements(
    "outcome.lease_expired",
    "outcome.failed_halted",
    "recovery.foreign_lease",
    "recovery.foreign_lease_idle",
)
def _expire_batch(limit: int, now: datetime | None, using: str, *, only: uuid.UUID | None) -> int:
    """One lease recovery transaction (see :func:`expire_leases`); ``only``: that row."""
    with transaction.atomic(using=using):
        lock_for_write(using)
        now = resolve_now(now, using)
        qs = Schedule.objects.using(using).lease_expired(now).order_by("lease_expires_at")
        if only is not None:
            qs = qs.filter(pk=only)
        # The expiry is never read: one no datetime holds (-infinity) is recovered too.
        rows = list(locked(qs.defer("lease_expires_at"), using, skip_locked=True)[:limit])
        if not rows:  # overlap_policy allow: the occurrences' own leases (:mod:`.parallel`)
            return _occurrences(limit, now, using, only)
        load_exclusions(rows, using)
        attempts: dict[uuid.UUID | None, RunAttempt] = {
            a.lease_token: a
            for a in RunAttempt.objects.using(using).filter(
                lease_token__in=[r.lease_token for r in rows]
            )
        }
        receipts = []
        backfilled = []
        events: list[ScheduleEvent] = []
        for row in rows:
            check_counters(row)  # a counter that is no number: this row is quarantined
            attempt = attempts.get(row.lease_token)
            receipted = False
            if attempt is None:
                # A lease no attempt holds: written behind save() (a claim writes both in
                # one transaction). The run it displaced, if any, is recovered as expired.
                found = displaced_attempt(row, using)
                if found is None:
                    row.lease_token = row.lease_expires_at = None
                    continue
                attempt, receipted = found
                _log_displaced(row, attempt)
            row.lease_token = row.lease_expires_at = None
            if attempt.origin in ("backfill", "rerun"):  # never the grid, never retried here
                if not receipted:
                    receipts.append(_expired_aside(row, attempt, now, using))
                if attempt.origin == "backfill":  # its backfill moves on
                    backfilled.append((row, attempt.attempt, ReceiptStatus.LEASE_EXPIRED))
                continue
            # A row that cannot move on is paused, not the batch.
            receipt = fail_contained(row, _lease_expired(attempt), now, events)
            if not receipted:  # a lease_lost attempt keeps its one receipt
                receipts.append(receipt)
            logger.warning(
                "lease expired: %s occurrence %s attempt %s",
                row.name,
                attempt.occurrence,
                attempt.attempt,
                extra={"schedule": row.name, "occurrence": attempt.occurrence},
            )
        insert_rows(RunReceipt, [r.model() for r in receipts], using)
        write_events(events, using)  # with their notifications and signals
        update_rows(rows, FINISH_FIELDS, using)
        release_groups(rows, using)  # a group's place freed (no statement without one)
        write_alerts(rows, now, using)  # failing, paused, degraded (no statement otherwise)
        settle_backfills(backfilled, now, using)
        return len(rows) + _occurrences(limit, now, using, only)  # reads its rows again


def _occurrences(limit: int, now: datetime, using: str, only: uuid.UUID | None) -> int:
    """Inside a recovery batch (not a row's own, ``only``): the expired leases of
    ``overlap_policy="allow"`` occurrences recovered (:func:`.parallel.recover_parallel`)."""
    return 0 if only is not None else recover_parallel(limit=limit, now=now, using=using)


def _expired_outcome(row: Schedule, attempt: RunAttempt) -> Outcome:
    """The outcome of ``attempt`` whose worker died or hung before it reported one."""
    return Outcome(
        claim_of(row, attempt),
        "failed",
        error_type="LeaseExpired",
        error_message="the lease expired before the run reported an outcome",
    )


@implements("outcome.backfill", "outcome.rerun")
def _expired_aside(row: Schedule, attempt: RunAttempt, now: datetime, using: str) -> Any:
    """The ``lease_expired`` receipt of a backfill slot's or a re-run's attempt whose
    worker died or hung; the row is left as it is (a re-run has one attempt: not retried)."""
    outcome = _expired_outcome(row, attempt)
    if attempt.origin == "rerun":
        forced = occurrence_succeeded(row.id, attempt.occurrence, using)
        return rerun_receipt(row, outcome, now, forced=forced, status=ReceiptStatus.LEASE_EXPIRED)
    return backfill_receipt(row, outcome, now, status=ReceiptStatus.LEASE_EXPIRED)
