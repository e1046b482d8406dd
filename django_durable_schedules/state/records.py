"""The receipt a state rule builds (unsaved): :class:`Receipt`, built by
:func:`build_receipt` only (the one place a receipt's fields are set) and turned into a
:class:`~..models.RunReceipt` row by :meth:`Receipt.model`."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..frozen import quick_init
from ..models import SUCCESS_STATUSES, RunAttempt, RunReceipt
from ..projection import bound_text
from ..uuids import uuid4

if TYPE_CHECKING:
    from ..models import Schedule
    from .values import Claim, Failure, Outcome

#: The longest ``error_type`` a receipt stores (the column's length).
ERROR_TYPE_MAX_CHARS = 200
#: The longest ``error_message`` of a receipt that carries a state's ``note``.
NOTED_MESSAGE_MAX_CHARS = 1000
#: How the note of a run whose schedule its completion or lease recovery paused as degraded
#: begins (then the reason): the receipt keeps the run's own status, and its occurrence is
#: not retried (the pause left nothing pending).
PAUSE_NOTE = "the schedule was paused: "


@quick_init
@dataclass(frozen=True)
class Receipt:
    """One run's receipt as a rule builds it (unsaved; times UTC), made by
    :func:`build_receipt`: :meth:`model` makes the :class:`~..models.RunReceipt` row that
    :mod:`.runs`, :mod:`.completion`, :mod:`.leases` and :mod:`.quarantine` insert."""

    attempt_id: uuid.UUID
    schedule_id: uuid.UUID
    occurrence: int
    status: str
    finished_at: datetime
    result: Any = None
    error_type: str = ""
    error_message: str = ""
    failure_count_after: int = 0
    next_run_at: datetime | None = None
    slots_skipped: int = 0
    started_at: datetime | None = None
    traceback: list[dict[str, Any]] | None = None
    #: A forced re-run of an occurrence that had succeeded: a success takes no one-success key.
    forced: bool = False

    def model(self) -> RunReceipt:
        """The row (unsaved, a new id): the receipt's fields as they are, and
        ``succeeded_occurrence`` (the occurrence for a success that is not ``forced``, else
        None)."""
        return RunReceipt.build(
            id=uuid4(),
            attempt_id=self.attempt_id,
            schedule_id=self.schedule_id,
            occurrence=self.occurrence,
            succeeded_occurrence=self.occurrence
            if self.status in SUCCESS_STATUSES and not self.forced
            else None,
            forced=self.forced,
            status=self.status,
            finished_at=self.finished_at,
            result=self.result,
            error_type=self.error_type,
            error_message=self.error_message,
            failure_count_after=self.failure_count_after,
            next_run_at=self.next_run_at,
            slots_skipped=self.slots_skipped,
            started_at=self.started_at,
            traceback=self.traceback,
        )


def build_receipt(
    attempt: Claim | Failure | RunAttempt,
    status: str,
    finished_at: datetime,
    *,
    row: Schedule | None = None,
    schedule_id: uuid.UUID | None = None,
    failure_count_after: int = 0,
    ran: Outcome | Failure | None = None,
    result: Any = None,
    error_type: str = "",
    error_message: str = "",
    note: str = "",
    slots_skipped: int = 0,
) -> Receipt:
    """The receipt (unsaved; every receipt is built here) of ``attempt`` (a ``Claim``, a
    ``Failure`` or a ``RunAttempt`` row: its id and occurrence, :mod:`.values`) that ended
    with ``status`` (a ``ReceiptStatus`` value) at ``finished_at`` (aware UTC).

    The schedule's part: ``row``, the locked row as the rule left it (its id,
    ``failure_count``, ``next_run_at``); without it (a row the rule did not move: a lost
    lease, a quarantine), ``schedule_id`` and ``failure_count_after``, and no next run.

    What the run left: ``ran`` (the reported :class:`.values.Outcome`, or the
    :class:`.values.Failure` the failure path takes) gives the ``result`` (bounded JSON,
    :mod:`..projection`), ``error_type``, ``error_message``, ``started_at`` (the callback's
    start; None: it never ran, as a ``released`` run) and ``traceback`` (bounded); without
    it, the keywords of the first three (given both: ``TypeError``), and no start or stack.
    ``error_type`` is cut to :data:`ERROR_TYPE_MAX_CHARS`. ``note``: what the state adds to
    the message (``"<message>; <note>"`` or the note alone), bounded to
    :data:`NOTED_MESSAGE_MAX_CHARS`. ``slots_skipped``: the slots the move on skipped."""
    started_at, traceback = None, None
    if ran is not None:
        if result is not None or error_type or error_message:
            raise TypeError("build_receipt() takes ran or its fields, not both")
        result, error_type, error_message = ran.result, ran.error_type, ran.error_message
        if status != "released":  # a released run was handed back unrun
            started_at, traceback = ran.started_at, ran.traceback
    if note:
        text = f"{error_message}; {note}" if error_message else note
        error_message = bound_text(text, NOTED_MESSAGE_MAX_CHARS)
    if row is not None:
        schedule_id, failure_count_after = row.id, row.failure_count
    elif schedule_id is None:
        raise TypeError("build_receipt() needs the row or the schedule_id")
    return Receipt(
        attempt_id=attempt.id if isinstance(attempt, RunAttempt) else attempt.attempt_id,
        schedule_id=schedule_id,
        occurrence=attempt.occurrence,
        status=status,
        finished_at=finished_at,
        result=result,
        error_type=error_type[:ERROR_TYPE_MAX_CHARS],
        error_message=error_message,
        failure_count_after=failure_count_after,
        next_run_at=row.next_run_at if row is not None else None,
        slots_skipped=slots_skipped,
        started_at=started_at,
        traceback=traceback,
    )
