"""The planning and the writes of one claim transaction (:mod:`.runs` reads and locks the
rows): :func:`plan_rows` applies the claim rule to each row read (a row no rule can read
quarantined alone), :func:`write_claim` writes what the plan made in a bounded number of
statements."""

from __future__ import annotations

from datetime import datetime, timedelta

from ..db.batch import insert_rows, update_rows
from ..models import RunAttempt, RunReceipt, Schedule, ScheduleEvent
from .alerts import write_alerts
from .columns import CLAIM_FIELDS
from .events import write_events
from .groups import Admission
from .machine import apply_changes, changes_of
from .parallel import ParallelAdmission, write_leases
from .quarantine import repair_counters
from .rules import plan_claim, quarantine_claim
from .transitions import implements
from .values import Claim


def write_claim(
    rows: list[Schedule],
    attempts: list[RunAttempt],
    receipts: list[RunReceipt],
    claims: list[Claim],
    events: list[ScheduleEvent],
    using: str,
    admissions: tuple[ParallelAdmission, Admission],
    now: datetime | None,
) -> None:
    """Write one claim transaction's work: its attempts, receipts and events inserted (no
    statement for an empty list), its concurrency groups' run state
    (:meth:`.groups.Admission.write`; a row admitted that took no lease gives its place
    back), the leases of its ``allow`` rows' occurrences moved off the rows
    (:meth:`.parallel.ParallelAdmission.detach`) and the rows held at ``max_parallel`` marked
    (:meth:`.parallel.ParallelAdmission.write`), its rows' claim columns updated, and a
    degraded row's alert."""
    parallel, groups = admissions
    if attempts:
        insert_rows(RunAttempt, attempts, using)
    if receipts:
        insert_rows(RunReceipt, receipts, using)
    write_events(events, using)  # with their notifications and signals
    groups.write()  # before the leases move: a leased row kept its group's place
    leases = parallel.detach(rows, claims)
    update_rows(rows, CLAIM_FIELDS, using)
    write_leases(leases, using)
    parallel.write()
    write_alerts(rows, now, using)  # a row degraded: its alert (no statement otherwise)


@implements("claim.unevaluable")
def plan_rows(
    rows: list[Schedule],
    now: datetime | None,
    lease: timedelta,
    worker: str,
    attempts: list[RunAttempt],
    receipts: list[RunReceipt],
    claims: list[Claim],
    events: list[ScheduleEvent],
    using: str,
) -> None:
    """Plan the claim of each live row read (:func:`.rules.plan_claim`, on a copy of the
    row: :func:`.machine.changes_of`), appending to the lists and applying the row's
    changes once it returned; a row whose values no rule can read is quarantined alone,
    as it was read."""
    for row in rows:
        assert now is not None
        # One row's bad value (behind save(): an unknown zone, a cron that never fires,
        # an overflowing interval, a holiday country unknown) must not abort the batch:
        # quarantine that row only.
        made: tuple[list[RunAttempt], list[RunReceipt], list[Claim], list[ScheduleEvent]]
        made = ([], [], [], [])
        try:
            _, changes = changes_of(row, plan_claim, now, lease, worker, *made)
        except Exception as exc:  # noqa: BLE001 - any evaluation error is that row's
            repair_counters(row, using)  # a counter that is no number: from the ledger
            quarantine_claim(row, exc, now, worker, attempts, receipts)
            continue
        apply_changes(row, changes)
        attempts.extend(made[0])
        receipts.extend(made[1])
        claims.extend(made[2])
        events.extend(made[3])
