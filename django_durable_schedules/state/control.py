"""Operator transitions: :func:`disable`, :func:`trigger`, :func:`cancel`,
:func:`delete_schedule` (and :func:`.enabling.enable`), each allowed from the source statuses of one table,
:data:`ALLOWED`, which the admin and the API read through :func:`allowed_actions`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction

from .. import timing
from ..db.clock import resolve_now
from ..db.locks import get_locked
from ..exceptions import StateConflict
from ..models import EventAction, RunAttempt, Schedule, ScheduleLink, Status
from .events import record_event
from .machine import clear_trigger, set_by_operator
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


def require_allowed(action: str, row: Schedule) -> None:
    """Raise :class:`StateConflict` unless ``action`` is allowed from the locked row's
    status, and (:data:`NOT_WHILE_RUNNING`) while it holds no lease."""
    if row.status not in ALLOWED[action]:
        raise StateConflict(f"{timing.with_article(row.status)} schedule cannot be {_DONE[action]}")
    if action in NOT_WHILE_RUNNING and row.lease_token is not None:
        raise StateConflict("the schedule is running (it holds a lease)")


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
        require_allowed("trigger", row)
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
    require_allowed(action, row)
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
    """Delete a schedule. Refused (:class:`StateConflict`) while it holds a live lease,
    has an attempt without a receipt, or other schedules run after it (chaining). Its attempts and receipts stay (the audit trail
    outlives the schedule) until retention prunes them."""
    with transaction.atomic(using=using):
        row = get_locked(schedule_id, using)
        require_allowed("delete", row)
        if (
            RunAttempt.objects.using(using)
            .filter(schedule_id=row.id, receipt__isnull=True)
            .exists()
        ):
            raise StateConflict("the schedule has an open attempt without a receipt")
        downstream = sorted(  # ScheduleLink.upstream is PROTECT: say which, and why
            ScheduleLink.objects.using(using)
            .filter(upstream_id=row.id)
            .values_list("downstream__name", flat=True)
        )
        if downstream:
            raise StateConflict(
                f"{', '.join(downstream)} run{'s' if len(downstream) == 1 else ''} after "
                "it: remove it from their upstream first"
            )
        record_event(row, EventAction.DELETED, now=now, actor=actor, source=source, using=using)
        row.delete(using=using, audit=False)  # its own event, with who
