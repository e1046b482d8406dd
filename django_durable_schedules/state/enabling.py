"""The operator transition ``enable`` (:func:`enable`) and its rule for a row that becomes
active again (:func:`reactivate`, which a pause that ends applies too:
:mod:`.pauses`), allowed from the statuses of :data:`.control.ALLOWED`.
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
from ..models import EventAction, Kind, Schedule, Status
from .bounds import describe_problem
from .calendars import record_excluded_to_end
from .control import ALREADY, require_allowed
from .events import json_value, record_event
from .machine import clear_trigger, complete_if_no_slot, set_by_operator
from .transitions import implements


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
        require_allowed("enable", row)
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
