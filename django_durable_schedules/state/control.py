"""Operator transitions: :func:`enable`, :func:`disable`, :func:`trigger`, :func:`cancel`,
:func:`delete_schedule`, each allowed from the source statuses of one table,
:data:`ALLOWED`, which the admin and the API read through :func:`allowed_actions`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from .. import timing
from ..db.clock import resolve_now
from ..db.locks import get_locked
from ..exceptions import StateConflict
from ..models import EventAction, Kind, RunAttempt, Schedule, Status
from .bounds import describe_problem
from .calendars import record_excluded_to_end
from .events import json_value, record_event
from .machine import clear_trigger, complete_if_no_slot, set_by_operator
from .overlap_rules import dropped_with_buffered
from .overrides import check_override, trigger_changes
from .pause_rules import apply_pause, check_pause
from .transitions import implements

#: The source statuses each operator action is allowed from; any other is refused with
#: :class:`StateConflict`. A row that is already where ``enable``/``disable`` would take it
#: is left as it is (:data:`ALREADY`). ``trigger`` and ``delete`` are also refused while the
#: schedule holds a lease, and ``delete`` while it has an attempt without a receipt.
ALLOWED: dict[str, frozenset[str]] = {
    "enable": frozenset({Status.PAUSED, Status.FAILED}),
    "disable": frozenset({Status.ACTIVE}),
    "trigger": frozenset({Status.ACTIVE, Status.PAUSED}),
    "cancel": frozenset({Status.ACTIVE, Status.PAUSED, Status.FAILED}),
    "delete": frozenset(Status),
}

#: The status an action leaves a row in when the row is already there (a no-op, no event).
ALREADY: dict[str, str] = {"enable": Status.ACTIVE, "disable": Status.PAUSED}

#: Actions refused while the schedule holds a lease (it is running).
NOT_WHILE_RUNNING = frozenset({"trigger", "delete"})

_DONE = {
    "enable": "enabled",
    "disable": "disabled",
    "trigger": "triggered",
    "cancel": "cancelled",
    "delete": "deleted",
}


def allowed_actions(schedule: Schedule) -> set[str]:
    """The actions the row's ``status`` and lease allow now (what to offer an operator);
    the transition itself decides under its lock, and may still refuse (``delete``: an
    attempt without a receipt)."""
    running = schedule.lease_token is not None
    return {
        action
        for action, sources in ALLOWED.items()
        if schedule.status in sources and not (running and action in NOT_WHILE_RUNNING)
    }


def _require(action: str, row: Schedule) -> None:
    """Raise :class:`StateConflict` unless ``action`` is allowed from the locked row's
    status, and (:data:`NOT_WHILE_RUNNING`) while it holds no lease."""
    if row.status not in ALLOWED[action]:
        raise StateConflict(f"{timing.with_article(row.status)} schedule cannot be {_DONE[action]}")
    if action in NOT_WHILE_RUNNING and row.lease_token is not None:
        raise StateConflict("the schedule is running (it holds a lease)")


@implements("control.enable")
def enable(
    schedule_id: Any,
    *,
    now: datetime | None = None,
    run_at: datetime | None = None,
    actor: Any = None,
    source: str = "code",
    using: str = "default",
) -> Schedule:
    """Make a paused (or failed) schedule active again. Clears ``degraded_reason``, the
    pause reason, the pause's end (``paused_until``) and (for a failed schedule) the
    consecutive failure count.

    Recurring: the next run is the first slot strictly after now; time spent paused
    produces no catch-up. ``once``: it is re-armed, never completed without a run:
    due at ``run_at`` if that is still ahead, else due at once (a failed one-shot runs
    again as a new occurrence); ``run_at`` (aware) moves it to a new instant first.

    The row is planned here, for its definition as it is now (one edited behind
    ``save()`` included), and saved with ``save(planned=True)``: ``save()`` stores the
    definition's fingerprint and never re-plans over this plan.

    Raises :class:`StateConflict` for a cancelled or completed schedule, and for one whose
    stored definition cannot be evaluated (written behind ``save()``: correct it first);
    ``ValidationError`` (``run_at``) for a ``run_at`` that is naive, or given to a
    schedule that is not ``once``."""
    with transaction.atomic(using=using):
        row = get_locked(schedule_id, using)
        if row.status == ALREADY["enable"] and run_at is None:
            return row
        _require("enable", row)
        instant = resolve_now(now, using)
        now = timing.truncate_to_second(instant)
        changes: dict[str, list[Any]] = {"status": [row.status, Status.ACTIVE]}
        if run_at is not None:
            _move_run_at(row, run_at, changes)
        reactivate(row, now, changes)
        row.save(update_fields=ENABLE_FIELDS, planned=True)  # planned by reactivate
        record_excluded_to_end(row, now, using)  # completed: the rest of its grid counted
        record_event(
            row,
            EventAction.ENABLED,
            now=instant,
            actor=actor,
            source=source,
            changes=changes,
            using=using,
        )
    return row


#: The columns :func:`enable` writes.
ENABLE_FIELDS = (
    "status",
    "degraded_reason",
    "degraded_kind",
    "retry_scheduled_for",
    "triggered_at",
    "trigger_payload",
    "trigger_ignores_blackout",
    "rerun_occurrence",
    "rerun_attempt",
    "buffered_for",
    "failure_count",
    "failed_occurrences",
    "pause_reason",
    "paused_until",
    "next_run_at",
    "run_at",
    "definition_hash",
    "exclusions_checked_at",
    "updated_at",
)


def _move_run_at(row: Schedule, run_at: datetime, changes: dict[str, list[Any]]) -> None:
    """:func:`enable`'s ``run_at``: move a ``once`` schedule to the aware instant ``run_at``
    (to the second), the change noted in ``changes``. Raises ``ValidationError`` for a
    schedule that is not ``once`` or a naive ``run_at``."""
    if row.kind != Kind.ONCE:
        raise ValidationError({"run_at": ["Only a once schedule takes run_at."]})
    try:
        new_run_at = timing.truncate_to_second(run_at, "run_at")
    except timing.InvalidSchedule as exc:
        raise ValidationError({"run_at": [exc.message]}) from None
    changes["run_at"] = [json_value(row.run_at), json_value(new_run_at)]
    row.run_at = new_run_at


@implements("control.enable")
def reactivate(row: Schedule, now: datetime, changes: dict[str, list[Any]]) -> None:
    """:func:`enable`'s rule on the locked ``row`` at ``now`` (UTC, to the second), which a
    worker's resume at the end of a pause applies too (:func:`.pauses.resume_paused`):
    active with no degraded or pause reason, no pause end and no failure counts,
    re-planned (a ``once`` re-armed by :func:`_rearm_once`; a recurring one from its next
    slot after ``now``, completed when none is left and no trigger waits), a pending
    trigger kept. ``changes`` notes a
    completion. Raises :class:`StateConflict` for a definition it cannot evaluate."""
    before = row.status
    if row.status == Status.FAILED:
        row.failure_count = 0
    set_by_operator(row, Status.ACTIVE)
    row.degraded_reason = row.degraded_kind = row.pause_reason = ""
    row.paused_until = None
    row.failed_occurrences = 0
    # Slots excluded while it was paused are not counted; those counted already (to the
    # end of its grid, when it completed) are not counted again.
    row.exclusions_checked_at = max(now, row.exclusions_checked_at or now)
    # A trigger requested while it was paused and not run yet survives the enable (with
    # its override).
    pending = row.triggered_at
    override = (row.trigger_payload, row.trigger_ignores_blackout)
    rerun = (row.rerun_occurrence, row.rerun_attempt)  # a pending re-run stays one
    row.retry_scheduled_for = row.buffered_for = None
    clear_trigger(row)
    if row.kind == Kind.ONCE:
        _rearm_once(row, now)
    else:
        try:
            row.next_run_at = row.plan(now)
        except Exception as exc:  # noqa: BLE001 - a definition made invalid behind save()
            raise StateConflict(
                f"the stored definition cannot be evaluated ({describe_problem(exc)}): "
                "correct it first"
            ) from None
        if complete_if_no_slot(row, pending=pending):
            changes["status"] = [before, Status.COMPLETED]
    if pending is not None and row.triggered_at is None:
        row.triggered_at = pending
        row.trigger_payload, row.trigger_ignores_blackout = override
        row.rerun_occurrence, row.rerun_attempt = rerun
        row.next_run_at = pending if row.next_run_at is None else min(pending, row.next_run_at)


@implements("control.enable")
def _rearm_once(row: Schedule, now: datetime) -> None:
    """A ``once`` being enabled: due at its ``run_at`` while that is ahead (or when it
    never ran), else at once as a manual run of a new occurrence (``triggered_at``), so a
    catch-up window (``misfire_grace_seconds``) does not turn it into a miss."""
    if row.run_at is None:
        raise StateConflict("the stored definition cannot be evaluated (run_at: missing)")
    run_at = timing.truncate_to_second(row.run_at, "run_at")
    if run_at > now or row.occurrence == 0:
        row.next_run_at = run_at
    else:
        row.triggered_at = row.next_run_at = now


@implements("control.disable")
def disable(
    schedule_id: Any,
    *,
    note: Any = None,
    until: Any = None,
    now: datetime | None = None,
    actor: Any = None,
    source: str = "code",
    using: str = "default",
) -> Schedule:
    """Pause an active schedule: no next run until :func:`enable` (a pending retry is
    dropped; a pending trigger is kept and still runs); a run in progress finishes and is
    receipted normally. A paused schedule can still be run by hand with :func:`trigger`.

    ``note`` (text, at most 500 characters) is kept in ``pause_reason``; ``until`` (aware,
    later than the database clock's now, ``now``; rounded up to the second) is the pause's
    end, ``paused_until``: then a worker resumes it as :func:`enable` does, with no
    catch-up (:func:`.pauses.resume_paused`). Given to a schedule already paused (not
    degraded), they update the pause (event ``disabled`` with the changes).

    Raises ``ValidationError`` (``note``, ``until``: a message per wrong field; see
    :func:`.pause_rules.check_pause`); :class:`StateConflict` for a cancelled, completed or
    failed schedule, and for a note or end given to a degraded one."""
    with transaction.atomic(using=using):
        instant = resolve_now(now, using) if until is not None else None
        note, until = check_pause(note, until, instant)
        row = get_locked(schedule_id, using)
        if row.status == Status.PAUSED and (note is not None or until is not None):
            from .pauses import amend_pause  # it reads this module

            return amend_pause(row, note, until, actor=actor, source=source, using=using)
        return _halt(
            row, "disable", Status.PAUSED, EventAction.DISABLED, actor, source, using, note, until
        )


@implements("control.trigger")
def trigger(
    schedule_id: Any,
    *,
    now: datetime | None = None,
    actor: Any = None,
    source: str = "code",
    using: str = "default",
    payload: dict[str, Any] | None = None,
    note: str = "",
    ignore_blackout: bool = False,
    declared_only: bool = False,
) -> Schedule:
    """Request a manual run now, as its own occurrence, without disturbing the grid: the
    next claim runs it (``scheduled_for`` = the trigger instant) and the schedule then goes
    on with its next slot after that. Works on active and paused schedules (a paused
    schedule plus triggers is a manual-only job).

    ``payload``: a JSON object merged over the payload at the top level for this run only
    (``{}``: none), kept in ``trigger_payload`` until the claim; ``note``: why;
    ``ignore_blackout``: it may start in a blackout window; ``declared_only`` (owner-scoped
    API users): only keys the callback's ``payload_schema`` declares
    (:func:`.overrides.check_override`). The ``triggered`` event records who, and in its
    ``changes`` the note and the override (:func:`.overrides.trigger_changes`).

    While a trigger is pending (``triggered_at`` set) another with the same override (or
    none) and ``ignore_blackout`` is a no-op: one run happens. Raises ``ValidationError``
    (``payload``, ``note``, ``ignore_blackout``) for an override the rules refuse;
    :class:`StateConflict` for another override while a trigger is pending, while the
    schedule is running, and for a cancelled, completed or failed schedule."""
    with transaction.atomic(using=using):
        row = get_locked(schedule_id, using)
        _require("trigger", row)
        check_override(row, payload, note, ignore_blackout, declared_only=declared_only)
        payload = payload or None  # an empty override is none
        if row.triggered_at is not None:
            # A trigger is already pending (not claimed yet): one run will happen either
            # way, so a second request for the same run changes nothing and records nothing.
            if (row.trigger_payload, row.trigger_ignores_blackout) != (payload, ignore_blackout):
                raise StateConflict("a trigger is already pending (with another override)")
            return row
        instant = resolve_now(now, using)
        row.triggered_at = row.next_run_at = timing.truncate_to_second(instant)
        row.trigger_payload, row.trigger_ignores_blackout = payload, ignore_blackout
        row.retry_scheduled_for = None
        _drop_buffered(row)  # the manual run, due now, takes its place
        # planned: the run is due now whatever the definition; an edit made behind save()
        # takes effect from the slot after it, and is not re-planned over the trigger.
        row.save(update_fields=_TRIGGER_FIELDS, planned=True)
        changes = trigger_changes(payload, note, ignore_blackout)
        audit = {"actor": actor, "source": source, "changes": changes, "using": using}
        record_event(row, EventAction.TRIGGERED, now=instant, **audit)
    return row


#: The columns :func:`trigger` writes.
_TRIGGER_FIELDS = (
    "triggered_at",
    "trigger_payload",
    "trigger_ignores_blackout",
    "retry_scheduled_for",
    "buffered_for",
    "missed_count",
    "next_run_at",
    "updated_at",
)


@implements("control.cancel")
def cancel(
    schedule_id: Any, *, actor: Any = None, source: str = "code", using: str = "default"
) -> Schedule:
    """Cancel for good: no further runs (a run in progress still gets its receipt), its
    open backfill is cancelled too, a pause's end is cleared. Raises
    :class:`StateConflict` if already cancelled or completed."""
    with transaction.atomic(using=using):
        row = get_locked(schedule_id, using)
        return _halt(row, "cancel", Status.CANCELLED, EventAction.CANCELLED, actor, source, using)


@implements("control.disable", "control.cancel")
def _halt(
    row: Schedule,
    action: str,
    status: str,
    event: str,
    actor: Any,
    source: str,
    using: str,
    note: str | None = None,
    until: datetime | None = None,
) -> Schedule:
    """The transition of ``disable`` (to paused) and ``cancel`` (to cancelled) on the
    locked ``row``, inside the caller's transaction: refuse what :data:`ALLOWED` refuses,
    leave a row already there alone (:data:`ALREADY`), else set ``status`` with no next
    run and no pending retry (disable keeps a pending trigger, which a paused row still
    runs, and writes the checked ``note`` and ``until``; cancel drops the trigger and the
    pause's end), and record ``event`` with the changes. A run in progress keeps its
    lease and is receipted normally."""
    if row.status == ALREADY.get(action):
        return row
    _require(action, row)
    before = row.status
    changes: dict[str, Any] = {"status": [before, status]}
    set_by_operator(row, status)
    row.retry_scheduled_for = None
    _drop_buffered(row)
    if action == "cancel":
        from .backfills import cancel_open_backfills

        cancel_open_backfills(row, using)  # no further runs: its backfill neither
        row.paused_until = None
    else:
        apply_pause(row, note, until, changes, fresh=True)
    if action == "disable" and row.triggered_at is not None:
        # A pending trigger survives a pause: a paused schedule runs when triggered.
        row.next_run_at = row.triggered_at
    else:
        row.next_run_at = None
        clear_trigger(row)
    row.save(
        update_fields=[
            "status",
            "next_run_at",
            "retry_scheduled_for",
            "triggered_at",
            "trigger_payload",
            "trigger_ignores_blackout",
            "rerun_occurrence",
            "rerun_attempt",
            "buffered_for",
            "missed_count",
            "pause_reason",
            "paused_until",
            "updated_at",
        ]
    )
    record_event(row, event, actor=actor, source=source, changes=changes, using=using)
    return row


@implements("control.disable", "control.cancel", "control.trigger")
def _drop_buffered(row: Schedule) -> None:
    """A slot buffered by ``overlap_policy`` ``buffer_one`` and not run yet is dropped (by
    a pause, a cancel, or a trigger that runs instead), with the slots queued behind it
    (``buffer_all``): they are counted in ``missed_count``, never silently lost."""
    if row.buffered_for is not None:
        try:
            row.missed_count += dropped_with_buffered(row)
        except timing.InvalidSchedule:
            row.missed_count += 1  # its grid cannot be read: the buffered one at least
        row.buffered_for = None


@implements("control.delete")
def delete_schedule(
    schedule_id: Any,
    *,
    now: datetime | None = None,
    actor: Any = None,
    source: str = "code",
    using: str = "default",
) -> None:
    """Delete a schedule. Refused (:class:`StateConflict`) while it holds a live lease or
    has an attempt without a receipt. Its attempts and receipts stay (the audit trail
    outlives the schedule) until retention prunes them."""
    with transaction.atomic(using=using):
        row = get_locked(schedule_id, using)
        _require("delete", row)
        if (
            RunAttempt.objects.using(using)
            .filter(schedule_id=row.id, receipt__isnull=True)
            .exists()
        ):
            raise StateConflict("the schedule has an open attempt without a receipt")
        record_event(row, EventAction.DELETED, now=now, actor=actor, source=source, using=using)
        row.delete(using=using)
