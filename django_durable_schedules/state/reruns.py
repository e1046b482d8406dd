"""Re-run an occurrence (issue #27): :func:`rerun` requests a new attempt of an earlier
occurrence under its own idempotency key; :func:`rerun_history` reads what its attempts
say, :func:`occurrence_succeeded` whether it already holds its one success and
:func:`rerun_facts` that with its nominal instant (a re-run's completion). The rule is
:mod:`.rerun_rules`."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Exists, Subquery

from .. import timing
from ..db.clock import resolve_now
from ..db.locks import get_locked
from ..models import (
    SUCCESS_STATUSES,
    AttemptOrigin,
    Backfill,
    BackfillStatus,
    EventAction,
    RunAttempt,
    RunReceipt,
    Schedule,
)
from .attempt_rules import idempotency_key
from .events import record_event
from .rerun_rules import History, check_occurrence, plan_rerun
from .transitions import implements

#: The longest note a re-run's event keeps.
NOTE_MAX_CHARS = 500


def rerun_history(schedule_id: Any, occurrence: int, using: str = "default") -> History:
    """What the attempts of ``occurrence`` of the schedule ``schedule_id`` say
    (:class:`.rerun_rules.History`): two small reads by the attempts' and receipts'
    indexes."""
    rows = list(
        RunAttempt.objects.using(using)
        .filter(schedule_id=schedule_id, occurrence=occurrence)
        .order_by("-attempt")
        .values_list("attempt", "receipt__status")
    )
    backfill = (
        Backfill.objects.using(using)
        .filter(schedule_id=schedule_id, status=BackfillStatus.ACTIVE, occurrence=occurrence)
        .exists()
    )
    if not rows:
        return History(backfill=backfill)
    statuses = [status for _, status in rows]
    return History(
        last_attempt=rows[0][0],
        open=any(status is None for status in statuses),
        succeeded=any(status in SUCCESS_STATUSES for status in statuses),
        last_status=next((s for s in statuses if s is not None), ""),
        backfill=backfill,
    )


def occurrence_succeeded(schedule_id: Any, occurrence: int, using: str = "default") -> bool:
    """Whether ``occurrence`` of the schedule already holds its one success (a receipt
    with ``succeeded_occurrence`` = it): a re-run's success is then ``forced``."""
    return (
        RunReceipt.objects.using(using)
        .filter(schedule_id=schedule_id, succeeded_occurrence=occurrence)
        .exists()
    )


def rerun_facts(
    schedule_id: Any, occurrence: int, using: str = "default"
) -> tuple[bool, datetime | None]:
    """What a re-run's completion needs, in one statement: whether ``occurrence`` already
    holds its one success (:func:`occurrence_succeeded`: the re-run's success is then
    ``forced``) and its nominal instant, the ``scheduled_for`` of its first attempt that is
    no re-run (None when retention pruned them: :func:`.previous_rules.note_success`)."""
    succeeded = RunReceipt.objects.using(using).filter(
        schedule_id=schedule_id, succeeded_occurrence=occurrence
    )
    first = (
        RunAttempt.objects.using(using)
        .filter(schedule_id=schedule_id, occurrence=occurrence)
        .exclude(origin=AttemptOrigin.RERUN)
        .order_by("attempt")
        .values("scheduled_for")[:1]
    )
    found = list(
        Schedule.objects.using(using)
        .filter(pk=schedule_id)
        .annotate(done=Exists(succeeded), nominal=Subquery(first))
        .values_list("done", "nominal")
    )
    if not found:
        return False, None
    done, nominal = found[0]
    return bool(done), nominal


def check_note(note: Any) -> str:
    """``note`` stripped and cut to :data:`NOTE_MAX_CHARS`; ``ValidationError`` (``note``)
    for a value that is not text."""
    if not isinstance(note, str):
        raise ValidationError({"note": ["Text."]})
    return note.strip()[:NOTE_MAX_CHARS]


#: The columns :func:`rerun` writes.
_RERUN_FIELDS = (
    "triggered_at",
    "trigger_payload",
    "trigger_ignores_blackout",
    "rerun_occurrence",
    "rerun_attempt",
    "next_run_at",
    "updated_at",
)


@implements("control.rerun")
def rerun(
    schedule_id: Any,
    occurrence: Any,
    *,
    force: bool = False,
    note: str = "",
    now: datetime | None = None,
    actor: Any = None,
    source: str = "code",
    using: str = "default",
) -> Schedule:
    """Request a re-run of ``occurrence`` (an int >= 1) of the schedule ``schedule_id``: the
    next claim runs it as a new attempt of that occurrence (origin ``rerun``, attempt =
    its highest attempt number + 1, ``scheduled_for`` = the request's instant) with the
    occurrence's own idempotency key ``"<uuid>:<occurrence>"``. It never moves the grid:
    the schedule's ``occurrence``/``attempt`` counters, its next slot, failure counts and
    status are left as they are, and a re-run has exactly one attempt (no retry; a
    failure is not counted in ``failure_count``). See :mod:`.rerun_rules` for the rule.

    ``force``: re-run an occurrence that already succeeded (its receipt then carries
    ``forced`` and takes no one-success key). ``note`` (up to 500 characters) is kept in
    the ``rerun`` event with the occurrence, the attempt number, ``force`` and the
    idempotency key; ``actor`` and ``source`` say who.

    Allowed on active and paused schedules (as :func:`.control.trigger`). Raises
    :class:`StateConflict` for a cancelled, completed or failed schedule, while the
    schedule holds a lease, while a trigger, a re-run or a retry is pending, while the
    occurrence has an attempt without a receipt or is an open backfill's current slot, and
    for an occurrence that succeeded without ``force``; ``ValidationError``
    (``occurrence``) for a value that is no occurrence number or an occurrence that never
    had an attempt, (``note``) for a note that is not text."""
    occurrence, note, force = check_occurrence(occurrence), check_note(note), bool(force)
    with transaction.atomic(using=using):
        row = get_locked(schedule_id, using)
        history = rerun_history(row.id, occurrence, using)
        instant = resolve_now(now, using)
        number = plan_rerun(row, occurrence, history, timing.truncate_to_second(instant), force)
        row.save(update_fields=_RERUN_FIELDS, planned=True)
        changes = {
            "occurrence": occurrence,
            "attempt": number,
            "force": force,
            "idempotency_key": idempotency_key(row.id, occurrence),
            "last_status": history.last_status,
        } | ({"note": note} if note else {})
        record_event(
            row, EventAction.RERUN, now=instant, actor=actor, source=source,
            changes=changes, occurrence=occurrence, using=using,
        )  # fmt: skip
    return row
