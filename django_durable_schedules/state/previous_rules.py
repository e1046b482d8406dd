"""The previous run (issue #30, item 2): the last successful run of a schedule, kept on its
row so that a claim hands it to the callback (``ctx.previous``) with no statement of its own.

:func:`note_success` is part of a success's changes: the completion's rules call it on the
locked row (the live grid's :func:`.outcomes.apply_outcome`, a backfill slot's and a
re-run's receipts), and the completion's one ``UPDATE`` of the row writes it
(:data:`.columns.COMPLETE_FIELDS`). :func:`previous_of` reads it back from the row the
claim's locking read loaded, never raising for a value written behind ``save()``.

"Last" is by nominal instant: a success moves it unless the row holds a success of a later
slot, so a re-run or a backfill of an older slot never moves it back; a success of the same
slot (a forced re-run) replaces it, as the later finish. A re-run's nominal instant is
that of its occurrence (its first attempt's ``scheduled_for``, read with the one statement
the re-run's completion makes anyway: :func:`.reruns.rerun_facts`), not the instant it
was requested at. Pure: no database access.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..conf import app_settings
from ..models import SUCCESS_STATUSES
from ..projection import is_storable, project_result
from .transitions import implements
from .values import Previous

if TYPE_CHECKING:
    from ..models import Schedule
    from .records import Receipt

#: The largest occurrence number a ``Previous`` carries (the column's range everywhere).
_OCCURRENCE_MAX = 2**31 - 1


def _instant(value: Any) -> datetime | None:
    """``value`` if it is an aware datetime, else None."""
    if type(value) is datetime and value.utcoffset() is not None:
        return value
    return None


@implements("outcome.succeeded", "outcome.backfill", "outcome.rerun")
def note_success(row: Schedule, receipt: Receipt, scheduled_for: datetime | None) -> bool:
    """After ``receipt`` was built on the locked ``row``: a success (``succeeded`` or
    ``enqueued``: :data:`..models.SUCCESS_STATUSES`) of the occurrence whose nominal
    instant is ``scheduled_for`` becomes the row's previous run (occurrence, nominal
    instant, finish, the receipt's bounded result) unless the row holds one of a later
    nominal instant; at the same instant the later finish replaces it.

    ``scheduled_for`` None: the instant is not known (a re-run whose occurrence's first
    attempt retention pruned): the success replaces the finish and result of the previous
    run only when it is of the same occurrence, and moves nothing otherwise. Returns
    whether it moved. Never raises: a held instant that is no aware datetime (written
    behind ``save()``) is replaced."""
    if receipt.status not in SUCCESS_STATUSES:
        return False
    held = _instant(row.previous_scheduled_for)
    if scheduled_for is None:
        if held is None or row.previous_occurrence != receipt.occurrence:
            return False
        scheduled_for = held  # the same occurrence again: its instant stays
    if held is not None and scheduled_for < held:
        return False  # an older slot (a re-run, a backfill): the later success stays
    row.previous_occurrence = receipt.occurrence
    row.previous_scheduled_for = scheduled_for
    row.previous_finished_at = receipt.finished_at
    row.previous_result = receipt.result
    return True


def previous_of(row: Schedule) -> Previous | None:
    """The :class:`~.values.Previous` of the row a claim read, or None (no success yet, or
    a value written behind ``save()`` that is not one: an occurrence that is no count, an
    instant that is no aware datetime). Its result is handed on as stored when it is plain
    JSON within ``RESULT_MAX_BYTES`` (what a completion writes), else bounded the way a
    receipt's is (:func:`..projection.project_result`). Never raises."""
    occurrence = getattr(row, "previous_occurrence", None)
    if occurrence is None:
        return None
    try:
        if type(occurrence) is not int or not 0 <= occurrence <= _OCCURRENCE_MAX:
            return None
        scheduled_for = _instant(row.previous_scheduled_for)
        finished_at = _instant(row.previous_finished_at)
        if scheduled_for is None or finished_at is None:
            return None
        result = row.previous_result
        max_bytes = app_settings.RESULT_MAX_BYTES
        if result is not None and not is_storable(result, max_bytes):
            result = project_result(result, max_bytes)
        return Previous(occurrence, scheduled_for, finished_at, result)
    except Exception:  # noqa: BLE001 - a bad stored value is no previous run, never a crash
        return None
