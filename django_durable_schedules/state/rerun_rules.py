"""Row arithmetic of a re-run: a new attempt of an earlier occurrence ``N``, under the
occurrence's own idempotency key (``"<uuid>:<N>"``), that never moves the grid.

The rule (issue #27), :func:`.reruns.rerun` the request:

* **request** (:func:`plan_rerun`): allowed on an active or paused schedule (as a trigger)
  that holds no lease and has nothing pending (no trigger or re-run, no retry); refused for
  an occurrence that never had an attempt, one with an attempt still open, one an open
  backfill holds as its current slot, and one that succeeded unless ``force``. It is
  stored as a pending trigger (``triggered_at`` = now, due now) with ``rerun_occurrence``
  = ``N`` and ``rerun_attempt`` = the highest attempt number of ``N`` + 1;
* **claim** (:func:`rerun_numbers`, :func:`grid_next_after_rerun`): the attempt is
  occurrence ``N``, attempt ``rerun_attempt``, ``scheduled_for`` = the request's
  instant, origin ``rerun``; the row's ``occurrence``/``attempt`` counters, its buffered
  slot and ``missed_count`` stay as they are: they describe the grid;
* **outcome** (:func:`rerun_receipt`): a re-run has exactly one attempt. Whatever its
  outcome (succeeded, failed, ``FailRun``, released, degraded, its lease expired), it is
  receipted with that status and the row is left as it is but for its lease: no retry,
  no backoff, ``failure_count`` and ``failed_occurrences`` kept, no pause after failures,
  no failed schedule, no alert. To run it again, re-run it again;
* a **forced** re-run (of an occurrence that had succeeded): its receipt carries
  ``forced`` and no ``succeeded_occurrence`` (the occurrence keeps its first success as its
  one success key); a re-run of an occurrence that never succeeded takes the
  occurrence's one success when it succeeds.

Pure: no database access; :mod:`.reruns`, :mod:`.rules`, :mod:`.completion` and
:mod:`.leases` read and write the rows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from django.core.exceptions import ValidationError

from .. import timing
from ..exceptions import StateConflict
from ..models import Kind, ReceiptStatus, RunAttempt, RunReceipt, Schedule, Status
from .bounds import COUNT_MAX, read_count
from .previous_rules import note_success
from .records import Receipt, build_receipt
from .transitions import implements
from .values import Outcome

#: The statuses a re-run is allowed from (a claim reads only these).
RERUN_STATUSES = frozenset({Status.ACTIVE, Status.PAUSED})


@dataclass(frozen=True)
class History:
    """What the attempts of one occurrence say, read by :func:`.reruns.rerun` under the
    schedule's lock: the highest attempt number (0: none), whether one of them has no
    receipt, whether one of its receipts is a success, its last receipt's status ("": none)
    and whether an open backfill holds it as its current slot."""

    last_attempt: int = 0
    open: bool = False
    succeeded: bool = False
    last_status: str = ""
    backfill: bool = False


def check_occurrence(value: object) -> int:
    """``value`` as an occurrence number (an ``int`` in ``[1, COUNT_MAX]``, not a
    ``bool``). Raises ``ValidationError`` (``occurrence``) otherwise."""
    if type(value) is not int or not 1 <= value <= COUNT_MAX:
        raise ValidationError({"occurrence": [f"An occurrence number (1 to {COUNT_MAX})."]})
    return value


@implements("control.rerun")
def plan_rerun(row: Schedule, occurrence: int, history: History, now: datetime, force: bool) -> int:
    """The request of a re-run of ``occurrence`` on the locked ``row`` at ``now`` (UTC,
    whole seconds), given the occurrence's ``history``: the row's pending trigger becomes
    the re-run (``triggered_at`` = ``now``, ``rerun_occurrence``, ``rerun_attempt``), due
    now (``next_run_at`` = ``now``, or kept when a grid slot is already due earlier).
    Returns the attempt number the re-run will take.

    Raises :class:`StateConflict` for a status other than active or paused, a lease (the
    schedule is running), a pending trigger or re-run, a pending retry (of any
    occurrence: the claim takes a retry first), an open attempt of the occurrence, an
    open backfill's current slot, and an occurrence that succeeded without ``force``;
    ``ValidationError`` (``occurrence``) for an occurrence that never had an attempt."""
    if row.status not in RERUN_STATUSES:
        raise StateConflict(
            f"{timing.with_article(row.status)} schedule cannot be re-run "
            "(only an active or paused one)"
        )
    if row.lease_token is not None:
        raise StateConflict("the schedule is running (it holds a lease)")
    if history.last_attempt == 0:
        raise ValidationError(
            {"occurrence": [f"Occurrence {occurrence} of {row.name} never had an attempt."]}
        )
    if row.rerun_occurrence is not None:
        raise StateConflict(f"a re-run of occurrence {row.rerun_occurrence} is already pending")
    if row.triggered_at is not None:
        raise StateConflict("a trigger is already pending")
    if row.retry_scheduled_for is not None:
        raise StateConflict(f"occurrence {row.occurrence} awaits its retry")
    if history.open:
        raise StateConflict(f"occurrence {occurrence} has an attempt without a receipt")
    if history.backfill:
        raise StateConflict(f"occurrence {occurrence} is the current slot of an open backfill")
    if history.succeeded and not force:
        raise StateConflict(f"occurrence {occurrence} succeeded: force a re-run to run it again")
    number = history.last_attempt + 1
    row.triggered_at = now
    row.rerun_occurrence, row.rerun_attempt = occurrence, number
    # The re-run carries no override (a finished occurrence's kept one is dropped).
    row.trigger_payload, row.trigger_ignores_blackout = None, False
    if row.next_run_at is None or row.next_run_at > now:
        row.next_run_at = now
    return number


@implements("claim.rerun")
def rerun_numbers(row: Schedule) -> tuple[int, int, datetime]:
    """The occurrence, attempt number and slot (the request's instant) of the pending
    re-run of ``row``. Raises :class:`.timing.InvalidSchedule` for a value written behind
    ``save()`` that is no count (the claim quarantines the row)."""
    assert row.triggered_at is not None
    occurrence = read_count(row.rerun_occurrence, "rerun_occurrence")
    number = read_count(row.rerun_attempt, "rerun_attempt")
    return max(occurrence, 1), max(number, 1), row.triggered_at


@implements("claim.rerun")
def grid_next_after_rerun(row: Schedule, spec: timing.Spec) -> datetime | None:
    """The grid's next run once the pending re-run of ``row`` is claimed: what it was
    before the request. A paused row: none. A grid slot already due before the request
    (``next_run_at`` earlier than ``triggered_at``): kept, claimed once the re-run is
    done. Else (the request made it due now): a ``once`` schedule's ``run_at``, a
    recurring one's first slot after the request's instant (at it, unless a claim was
    made in that second: ``last_run_at``)."""
    requested = row.triggered_at
    assert requested is not None
    if row.status != Status.ACTIVE:
        return None
    if row.next_run_at is not None and row.next_run_at < requested:
        return row.next_run_at
    if row.kind == Kind.ONCE:
        return None if row.run_at is None else timing.truncate_to_second(row.run_at)
    claimed_then = row.last_run_at is not None and row.last_run_at >= requested
    return row.due_at(timing.next_slot_after(spec, requested, inclusive=not claimed_then))


@implements("claim.rerun")
def rerun_unregistered(
    row: Schedule, attempt: RunAttempt, next_run_at: datetime | None, now: datetime
) -> RunReceipt:
    """A re-run whose callback is no longer registered: its attempt receipted
    ``degraded`` at once (no lease), the grid's next run restored; the schedule is left to
    its own claim to pause."""
    attempt.lease_expires_at = now
    row.next_run_at = next_run_at
    return build_receipt(
        attempt,
        ReceiptStatus.DEGRADED,
        now,
        row=row,
        error_type="NotRegistered",
        error_message=f"callback {row.callback!r} is not registered",
    ).model()


@implements("outcome.rerun")
def rerun_receipt(
    row: Schedule,
    outcome: Outcome,
    now: datetime,
    *,
    forced: bool,
    status: str | None = None,
    nominal: datetime | None = None,
) -> Receipt:
    """The receipt of a re-run's ``outcome`` finished at ``now``: its own status (or
    ``status``: ``lease_expired`` for a run that outlived its lease), ``forced`` when the
    occurrence had succeeded before (its success then takes no one-success key). The row is
    left as it is (its lease is cleared by the caller): one attempt, no retry, no
    failure counted. A success becomes the row's previous run unless the row holds a
    success of a later slot (:func:`.previous_rules.note_success`; ``nominal``: the
    occurrence's nominal instant, its first attempt's slot; None: not known)."""
    status = status or ReceiptStatus(outcome.status)
    receipt = replace(
        build_receipt(outcome.claim, status, now, row=row, ran=outcome), forced=forced
    )
    note_success(row, receipt, nominal)  # unless a later slot's success is held
    return receipt
