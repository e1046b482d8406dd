"""The status kernel: the functions that move a schedule's ``status``, and the only ones.

Every rule of the state package (and ``Schedule.save()``, through a local import) calls
one of these instead of assigning ``row.status`` itself, so the status a schedule can move
to, and under which guard, is read in one place (issue #25, figures a and b). The plan of
a new definition is here too (:func:`plan_definition`), for the same reason: ``save()``
and the claim of a row edited behind it plan with one function. A rule that may raise for
a row's own bad value runs on a copy of the row (:func:`changes_of`); its caller applies
the changes (:func:`apply_changes`) once it returned, so no rule is ever undone. Pure:
each function reads and writes a row's attributes (an unsaved or locked
:class:`~..models.Schedule`), or returns the columns an ``update()`` writes; no database
access. The guards differ from rule to rule on purpose; they are parameters, never
folded into one, so that no caller's behaviour changed when the writes moved here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from ..models.choices import NO_GRID, DegradedKind, Status
from .transitions import implements

if TYPE_CHECKING:
    from ..models import Schedule

logger = logging.getLogger(__name__)

T = TypeVar("T")
#: No such attribute on the row (:func:`changes_of`).
_UNSET = object()

#: The statuses a quarantined lease pauses; any other (cancelled, completed, failed) is
#: kept: a worker never undoes an operator's cancel.
RUNNABLE_STATUSES = (Status.ACTIVE, Status.PAUSED)


@implements(
    "claim.missed",
    "claim.skip_missed",
    "claim.excluded_now",
    "claim.regrid",
    "claim.edited",
    "outcome.succeeded",
    "outcome.skipped",
    "outcome.given_up",
    "outcome.backfill",
    "control.enable",
    "control.edit",
    "control.calendars",
    "outcome.manual_no_slot",
)
def complete_if_no_slot(
    row: Schedule, *, require_active: bool = False, pending: object | None = None
) -> bool:
    """The one writer of "no slot left -> completed": when ``row.next_run_at`` is None
    (its grid planned nothing more: an ``end_at`` past, ``max_runs`` reached, a once
    schedule run), ``row.status`` becomes ``completed``. Returns whether it did.

    The guards of the callers, as they were before this function existed:

    * ``require_active``: only an ``active`` row completes (the claim's missed slot and
      re-plan under other zone rules; a paused or cancelled row keeps its status);
    * ``pending``: something that still awaits its run (a kept retry for ``save()``, a
      trigger for :func:`.enabling.enable`): not None means the row does not complete.

    Callers that cleared ``next_run_at`` themselves (the last of ``max_runs``) have
    checked their own status guard first.

    A ``manual`` schedule never completes here: it has no slot and needs none (it runs
    only when triggered), so "no slot left" is its normal state, not its end."""
    if row.next_run_at is not None or pending is not None or row.kind in NO_GRID:
        return False
    if require_active and row.status != Status.ACTIVE:
        return False
    row.status = Status.COMPLETED
    return True


@implements("claim.edited", "claim.edited_paused", "control.create", "control.edit")
def plan_definition(
    row: Schedule, now: datetime, fingerprint: str, *, first: bool = False, keep: bool = True
) -> None:
    """The one plan of a definition that is new at ``now`` (aware UTC, whole seconds: a
    row created, or its definition edited): an active ``row`` gets ``row.plan(now,
    first=first)`` as its next run (``first``: a new row that never ran, whose first slot
    may be now), and is ``completed`` when no slot is left and no retry is pending
    (:func:`complete_if_no_slot`); a slot buffered under the old definition is dropped,
    never run after it; ``definition_hash`` becomes ``fingerprint``
    (:meth:`~..models.definition.DefinitionMixin.compute_definition_hash`). Raises what
    ``row.plan`` raises for a definition it cannot evaluate, before writing anything.

    Its callers, whose guards differ on purpose (parameters, as in
    :func:`complete_if_no_slot`):

    * ``Schedule.save()`` (an edit or a create through the ORM): a pending retry or
      trigger is kept (``keep``), and a row that is not active keeps its next run;
    * the claim of a row edited behind ``save()`` (:func:`.rules.replan_edited`,
      ``keep=False``): nothing pending is kept and a paused row (claimed for its trigger)
      gets no next run; a claim reads only active and paused rows.
    """
    active = row.status == Status.ACTIVE
    planned = row.plan(now, first=first) if active else None
    if not keep:
        row.retry_scheduled_for = None
        clear_trigger(row)
    if active:
        row.next_run_at = planned
        complete_if_no_slot(row, pending=row.retry_scheduled_for)
    elif not keep and row.status == Status.PAUSED:
        row.next_run_at = None
    row.buffered_for = None
    row.definition_hash = fingerprint


@implements("claim.unregistered", "claim.unevaluable", "outcome.degraded", "outcome.unappliable")
def mark_degraded(row: Schedule, reason: str, kind: str) -> None:
    """Pause ``row`` as degraded: ``status`` paused, ``degraded_reason`` ``reason`` (the
    caller bounds it to the column's 500 characters) and ``degraded_kind`` ``kind``
    (:class:`~..models.DegradedKind`); a ``degraded`` alert opens, unless one is open
    (:func:`.alert_rules.note_degraded`). The caller clears or keeps the slot fields as its
    rule says (a kept retry is how a callback registered again gets its run)."""
    from .alert_rules import note_degraded  # it reads this module

    row.status = Status.PAUSED
    row.degraded_reason = reason
    row.degraded_kind = kind
    note_degraded(row, row.occurrence or None)  # the alert, once per episode


@implements("claim.unevaluable", "outcome.unappliable")
def pause_degraded(row: Schedule, reason: str, kind: str = DegradedKind.DEFINITION) -> None:
    """Pause ``row`` as degraded (health counts it) with ``reason`` and ``kind``
    (:class:`~..models.DegradedKind`; default: the engine cannot evaluate it, so a valid
    edit and :func:`.enabling.enable` bring it back), with nothing pending: no next run,
    retry, trigger, buffered slot or lease."""
    mark_degraded(row, reason[:500], kind)
    row.next_run_at = row.retry_scheduled_for = row.buffered_for = None
    clear_trigger(row)
    row.lease_token = row.lease_expires_at = None
    logger.warning(
        "schedule %s degraded: %s", row.name, row.degraded_reason, extra={"schedule": row.name}
    )


@implements("recovery.degraded")
def recover_callback(row: Schedule) -> None:
    """``row``, paused as degraded because its callback was missing, active again now that
    the callback is registered (:func:`.callback_recovery.recover_degraded`): ``status``
    active, no degraded or pause reason, no trigger pending. The caller sets its next run
    (the kept occurrence, at once)."""
    row.status = Status.ACTIVE
    row.degraded_reason = row.degraded_kind = row.pause_reason = ""
    clear_trigger(row)


def clear_trigger(row: Schedule) -> None:
    """No trigger pending on ``row``: ``triggered_at`` cleared with what goes with it, the
    trigger's payload override, its blackout flag and the re-run it stands for (issue #27). Every rule that drops a
    pending trigger calls this, so no override outlives its trigger."""
    row.triggered_at = None
    row.trigger_payload = None
    row.trigger_ignores_blackout = False
    row.rerun_occurrence = row.rerun_attempt = None  # a re-run is a pending trigger


@implements("outcome.terminal", "outcome.given_up", "outcome.lease_expired")
def fail_schedule(row: Schedule) -> None:
    """``row`` failed (a terminal failure, or a once schedule's occurrence given up):
    ``status`` failed. The caller clears its next run."""
    row.status = Status.FAILED


@implements("outcome.given_up", "outcome.lease_expired")
def pause_after_failures(row: Schedule) -> None:
    """``row`` reached ``pause_after_failures`` failed occurrences in a row: ``status``
    paused (not degraded: the operator's ``enable`` resumes it). The caller sets
    ``pause_reason`` and clears its next run."""
    row.status = Status.PAUSED


@implements("control.enable", "control.disable", "control.cancel")
def set_by_operator(row: Schedule, status: str) -> None:
    """An operator action's new ``status`` (enable: active; disable: paused; cancel:
    cancelled), once :mod:`.control` checked that :data:`.control.ALLOWED` allows it."""
    row.status = status


@implements("claim.refused", "recovery.lease_unrecoverable")
def degraded_columns(reason: str, kind: str, *, status: Any = Status.PAUSED) -> dict[str, Any]:
    """The columns an ``update()`` writes to quarantine a row as degraded: paused with
    ``reason`` and ``kind``, nothing pending (no next run, retry, trigger or buffered
    slot). ``status``: the status column's value, ``paused``, or the SQL form of a guard
    the caller builds where this module cannot (no database here): for a lease, a
    ``CASE`` that pauses only :data:`RUNNABLE_STATUSES` and keeps any other status
    (:func:`.quarantine.quarantine_lease`)."""
    return {
        "status": status,
        "degraded_reason": reason,
        "degraded_kind": kind,
        "next_run_at": None,
        "retry_scheduled_for": None,
        "triggered_at": None,
        "trigger_payload": None,
        "trigger_ignores_blackout": False,
        "rerun_occurrence": None,
        "rerun_attempt": None,
        "buffered_for": None,
    }


#: What a due row has pending, in the order a claim takes them (:func:`pending`).
RETRY, TRIGGER, BUFFERED, GRID = "retry", "trigger", "buffered", "grid"


def pending(row: Schedule) -> str:
    """What the due ``row`` runs first, in priority order: a pending retry of its
    occurrence (:data:`RETRY`), a manual run (:data:`TRIGGER`), the slot buffered by
    ``overlap_policy`` buffer_one while the row is active (:data:`BUFFERED`), else its
    grid's slot (:data:`GRID`, at ``next_run_at``). A backfill slot comes after all of
    them: the claim's batch takes one only on an unleased schedule with none of these
    pending and no grid slot due (``ScheduleQuerySet.backfill_ready``,
    :func:`.backfill_claims.claim_backfills`). Pure: reads the row's attributes."""
    if row.retry_scheduled_for is not None:
        return RETRY
    if row.triggered_at is not None:  # a re-run too (``rerun_occurrence`` set)
        return TRIGGER
    if row.buffered_for is not None and row.status == Status.ACTIVE:
        return BUFFERED
    return GRID


def changes_of(row: Schedule, rule: Callable[..., T], *args: Any) -> tuple[T, dict[str, Any]]:
    """Run ``rule(draft, *args)`` on a shallow copy of ``row`` (the same attribute values,
    the exclusions loaded for it and its ``_state`` included) and return what it returned with what it
    changed on the row: ``{attribute: value}`` for each attribute it set (its columns,
    and what it loaded onto the row, such as its exclusions). ``row`` itself is not
    touched: when ``rule`` raises (a value written behind ``save()`` it cannot evaluate),
    the exception propagates and the row is as it was read, for the caller to
    quarantine, with nothing to undo. Pure; a few microseconds (a dictionary copy and
    one pass over it, no ``copy.copy`` of the model)."""
    draft = object.__new__(type(row))
    draft.__dict__.update(row.__dict__)
    result = rule(draft, *args)
    before = row.__dict__
    changes = {k: v for k, v in draft.__dict__.items() if before.get(k, _UNSET) is not v}
    return result, changes


def apply_changes(row: Schedule, changes: dict[str, Any]) -> None:
    """Set on ``row`` the ``{attribute: value}`` changes :func:`changes_of` returned."""
    row.__dict__.update(changes)
