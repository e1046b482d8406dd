"""The engine's alerts, written: :func:`write_alerts` (the events the rules of a claim, a
completion or a lease recovery noted) and :func:`sweep_deadlines` (a worker's duty: the
occurrences past their deadline). The rules are :mod:`.alert_rules`.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable
from datetime import datetime

from django.db import connections, transaction
from django.db.models import Case, F, Value, When
from django.db.models.functions import Concat

from .. import timing
from ..db.batch import ROW_PROBLEMS
from ..db.clock import resolve_now
from ..db.locks import lock_for_write, locked
from ..models import Alert, EventAction, RunAttempt, Schedule, ScheduleEvent
from .alert_rules import miss_deadline, owed_occurrence, take_events
from .events import record_event
from .transitions import implements

logger = logging.getLogger(__name__)

#: Most late schedules one sweep reports (the next pass takes the rest).
SWEEP_LIMIT = 100
#: Where no partial index serves the rows waiting for a retry (MariaDB/MySQL), a worker's
#: sweep reads them at most this often (seconds): that read scans the table.
RETRY_SCAN_SECONDS = 60.0


class DeadlineSweep:
    """A worker's :func:`sweep_deadlines`, with the rows waiting for a retry read at every
    sweep where a partial index serves them (PostgreSQL, SQLite) and at most every
    :data:`RETRY_SCAN_SECONDS` elsewhere, so that a sweep every few seconds never scans a
    big table each time."""

    def __init__(self, using: str = "default"):
        self.using = using
        self.last_retry_scan: float | None = None

    def run(self, now: datetime | None = None, limit: int = SWEEP_LIMIT) -> list[ScheduleEvent]:
        """Sweep once: the late schedules found by ``now`` (a worker's estimate of the
        database clock; None: read it), each judged by the database clock read in its own
        transaction (``judge_by_clock``). Returns the events written."""
        mono = time.monotonic()
        retries = (
            connections[self.using].features.supports_partial_indexes
            or self.last_retry_scan is None
            or mono - self.last_retry_scan >= RETRY_SCAN_SECONDS
        )
        written = sweep_deadlines(
            now=now, limit=limit, retries=retries, judge_by_clock=True, using=self.using
        )
        if retries:
            self.last_retry_scan = mono
        return written


def write_alerts(rows: Iterable[Schedule], now: datetime | None, using: str) -> list[ScheduleEvent]:
    """Inside the transaction that holds the locks of ``rows``: for each row on which a
    rule noted events (:func:`.alert_rules.note_event`), write its ``open_alerts`` and each
    event through :func:`.events.record_event` (source ``worker``, at ``now``; None: the
    database clock). Rows with
    nothing noted (the common case) cost no statement. Returns the events written."""
    written: list[ScheduleEvent] = []
    for row in rows:
        noted = take_events(row)
        if not noted:
            continue
        Schedule.objects.using(using).filter(pk=row.pk).update(open_alerts=row.open_alerts)
        for event in noted:
            written.append(
                record_event(
                    row,
                    event.action,
                    now=now,
                    source="worker",
                    changes=event.changes,
                    occurrence=event.occurrence,
                    using=using,
                )
            )
            logger.log(
                logging.INFO if event.action == EventAction.RECOVERED else logging.WARNING,
                "schedule %s: %s (occurrence %s)",
                row.name,
                event.action,
                event.occurrence,
                extra={"schedule": row.name, "occurrence": event.occurrence},
            )
    return written


def sweep_deadlines(
    *,
    now: datetime | None = None,
    limit: int = SWEEP_LIMIT,
    retries: bool = True,
    judge_by_clock: bool = False,
    using: str = "default",
) -> list[ScheduleEvent]:
    """Report the occurrences whose deadline passed, for up to ``limit`` schedules that
    ``ScheduleQuerySet.late_scans`` finds late at ``now`` (default: the database clock).
    Each in its own transaction: lock the row (``SKIP LOCKED`` where the database has it:
    a row another worker holds is left for the next pass), judge it again on the locked
    row (:func:`.alert_rules.miss_deadline`: the occurrence it owes,
    :func:`.alert_rules.owed_occurrence`, is past its deadline and not reported yet), then
    write ``deadline_missed_occurrence``, ``open_alerts`` and one ``deadline_missed`` event
    (source ``worker``). An occurrence is reported once, whatever the number of workers.

    ``retries``: also read the rows waiting for a retry after a failure (the second scan;
    :class:`DeadlineSweep` reads it less often where no partial index serves it).
    ``judge_by_clock``: judge each locked row at the database clock read in its
    transaction, not at ``now`` (a worker finds candidates by its estimate of the clock and
    judges by the clock itself). A row whose values cannot be read
    (:data:`.db.batch.ROW_PROBLEMS`) is skipped with a log line; other database errors (the
    connection's) propagate. Returns the events written."""
    if now is not None:
        now = timing.require_aware(now, "now")
    at = resolve_now(now, using)
    found: list[uuid.UUID] = []
    due, waiting_retry, running = Schedule.objects.using(using).late_scans(at)
    for scan in (due, waiting_retry, running) if retries else (due, running):
        if len(found) >= limit:
            break
        found += [pk for pk in scan.values_list("pk", flat=True)[: limit - len(found)]]
    written: list[ScheduleEvent] = []
    for pk in dict.fromkeys(found):
        try:
            written += _sweep_one(pk, None if judge_by_clock else now, using)
        except ROW_PROBLEMS as exc:  # a value no rule can read: this row is left alone
            logger.warning("deadline sweep skipped schedule %s: %s", pk, exc)
    return written


def _sweep_one(pk: uuid.UUID, now: datetime | None, using: str) -> list[ScheduleEvent]:
    """One candidate of :func:`sweep_deadlines`, in its own transaction."""
    with transaction.atomic(using=using):
        lock_for_write(using)
        rows = list(locked(Schedule.objects.using(using).filter(pk=pk), using, skip_locked=True))
        if not rows:
            return []
        row = rows[0]
        at = resolve_now(now, using)
        attempt = None
        if row.lease_token is not None:
            attempt = RunAttempt.objects.using(using).filter(lease_token=row.lease_token).first()
        if not miss_deadline(row, owed_occurrence(row, attempt), at):
            return []
        Schedule.objects.using(using).filter(pk=pk).update(
            deadline_missed_occurrence=row.deadline_missed_occurrence
        )
        return write_alerts([row], at, using)


@implements("alert.degraded")
def degraded_by_update(
    row: Schedule, reason: str, kind: str, now: datetime | None, using: str
) -> ScheduleEvent | None:
    """Inside the transaction that quarantined ``row`` with an ``update()`` (a claim the
    database refused, a lease that cannot be recovered: :mod:`.quarantine`, which reads
    none of the row's values): open its ``degraded`` alert in SQL, unless one is open,
    and then write one ``degraded`` event (source ``worker``; changes: ``reason``,
    ``kind``). Returns the event, or None when the episode was open already."""
    opened = (
        Schedule.objects.using(using)
        .filter(pk=row.pk)
        .exclude(open_alerts__contains=Alert.DEGRADED)
        .update(
            open_alerts=Case(
                When(open_alerts="", then=Value(Alert.DEGRADED.value)),
                default=Concat(F("open_alerts"), Value(f" {Alert.DEGRADED.value}")),
            )
        )
    )
    if not opened:
        return None
    return record_event(
        row,
        EventAction.DEGRADED,
        now=now,
        source="worker",
        changes={"reason": reason, "kind": kind},
        using=using,
    )
