"""The engine's alerts (issue #26), as pure rules: deadlines, the failure streak, a
schedule degraded or paused by the engine, and its recovery.

An alert episode opens on a schedule (``Schedule.open_alerts``: space-separated
:class:`~..models.Alert` values) and stays open until its next success, which closes every
open episode with one ``recovered`` event. Each rule reads and writes a row's attributes
and notes the event it owes on the row (:func:`note_event`, read back by
:func:`take_events`); the writer of the transaction (:mod:`.alerts`) writes each noted
event through :func:`.events.record_event` (source ``worker``) and the row's
``open_alerts``. No database access here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..conf import app_settings
from ..limits import DEADLINE_MAX_SECONDS
from ..models import NO_GRID, Alert, AttemptOrigin, EventAction, Status
from .machine import BUFFERED, RETRY, TRIGGER, pending
from .transitions import implements

if TYPE_CHECKING:
    from ..models import RunAttempt, Schedule

#: The row attribute (no column) where the rules note the events a transaction owes.
NOTED = "alert_events"
#: Origins whose runs owe nothing of the grid (a backfill slot, a re-run).
ASIDE = (AttemptOrigin.BACKFILL, AttemptOrigin.RERUN)


@dataclass(frozen=True)
class AlertEvent:
    """An engine event a rule owes: its ``action`` (:class:`~..models.EventAction`), the
    ``occurrence`` it is about and its ``changes`` (JSON-ready)."""

    action: str
    occurrence: int | None
    changes: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Owed:
    """The occurrence a schedule owes (:func:`owed_occurrence`): its number and its nominal
    slot (aware UTC)."""

    occurrence: int
    slot: datetime


def alerts_of(text: Any) -> list[str]:
    """The open alerts of an ``open_alerts`` value, in :class:`~..models.Alert` order; a
    word that is no alert (a value written behind ``save()``) is left out. Never raises."""
    words = set(text.split()) if isinstance(text, str) else set()
    return [a for a in Alert.values if a in words]


def with_alert(text: Any, alert: str) -> str:
    """``open_alerts`` with ``alert`` added (each alert once, in a fixed order)."""
    return " ".join(alerts_of(f"{text if isinstance(text, str) else ''} {alert}"))


def note_event(row: Schedule, event: AlertEvent) -> None:
    """Note on ``row`` that its transaction owes ``event`` (a new list each time, so that
    :func:`.machine.changes_of` sees the change)."""
    row.__dict__[NOTED] = [*row.__dict__.get(NOTED, ()), event]


def take_events(row: Schedule) -> list[AlertEvent]:
    """The events noted on ``row`` since it was read, removed from it."""
    return list(row.__dict__.pop(NOTED, ()))


def owed_occurrence(row: Schedule, open_attempt: RunAttempt | None = None) -> Owed | None:
    """The occurrence ``row`` owes now and its nominal slot, as a claim numbers
    occurrences (:func:`.slot_rules.choose_slot`):

    * running (a lease, with ``open_attempt`` the attempt that holds it, not a backfill
      slot's or a re-run's): the attempt's ``occurrence`` and ``scheduled_for`` (a retry keeps its
      occurrence's original slot);
    * awaiting a retry: ``row.occurrence`` at ``retry_scheduled_for``;
    * a trigger pending: ``row.occurrence + 1`` at ``triggered_at``;
    * a buffered slot pending: ``row.occurrence + 1`` at ``buffered_for``;
    * waiting for the grid: ``row.occurrence + 1`` at ``next_run_at`` (its due instant:
      jitter included; after an outage the first slot passed over).

    None when it owes nothing: not active, no next run, or a lease whose attempt is not
    given; a ``manual`` schedule owes only a triggered occurrence (a retry of it, or one
    running), never a grid slot: it has none. Pure."""
    if row.status != Status.ACTIVE:
        return None
    if row.lease_token is not None:
        if open_attempt is None or open_attempt.origin in ASIDE:
            return None
        return Owed(open_attempt.occurrence, open_attempt.scheduled_for)
    first = pending(row)
    if first == RETRY:
        assert row.retry_scheduled_for is not None
        return Owed(row.occurrence, row.retry_scheduled_for)
    grid = None if row.kind in NO_GRID else row.next_run_at
    slot = {TRIGGER: row.triggered_at, BUFFERED: row.buffered_for}.get(first, grid)
    return None if slot is None else Owed(row.occurrence + 1, slot)


def deadline_of(row: Schedule, owed: Owed | None) -> datetime | None:
    """The deadline of ``owed`` on ``row``: its slot plus ``deadline_seconds`` (bounded to
    :data:`~..limits.DEADLINE_MAX_SECONDS`); None without a deadline, an owed occurrence,
    or when the sum leaves the datetime range (a value written behind ``save()``)."""
    seconds = row.deadline_seconds
    if owed is None or not isinstance(seconds, int) or isinstance(seconds, bool):
        return None
    try:
        return owed.slot + timedelta(seconds=min(max(seconds, 1), DEADLINE_MAX_SECONDS))
    except OverflowError:
        return None


def reported(row: Schedule, occurrence: int) -> bool:
    """Whether ``occurrence`` of ``row`` was reported late already."""
    last = row.deadline_missed_occurrence
    return isinstance(last, int) and last >= occurrence


@implements("alert.deadline_missed")
def miss_deadline(row: Schedule, owed: Owed | None, now: datetime) -> bool:
    """The sweep's rule: when the database clock ``now`` has passed the deadline of the
    occurrence ``row`` owes (``owed``, :func:`owed_occurrence`) and that occurrence was not
    reported yet, report it: ``deadline_missed_occurrence`` becomes its number, ``late``
    opens and one ``deadline_missed`` event is noted (changes: ``slot``, ``deadline``, ISO
    8601). Returns whether it did. An occurrence is reported at most once: a second call
    (another worker's sweep of the same row) changes nothing. Pure."""
    deadline = deadline_of(row, owed)
    if deadline is None or owed is None or now <= deadline or reported(row, owed.occurrence):
        return False
    row.deadline_missed_occurrence = owed.occurrence
    row.open_alerts = with_alert(row.open_alerts, Alert.LATE)
    changes = {
        "slot": owed.slot.isoformat(),
        "deadline": deadline.isoformat(),
        "deadline_seconds": row.deadline_seconds,
    }
    note_event(row, AlertEvent(EventAction.DEADLINE_MISSED, owed.occurrence, changes))
    return True


@implements("alert.recovered")
def recover(row: Schedule, occurrence: int) -> bool:
    """A success (``succeeded`` or ``enqueued``) of ``occurrence``: every open episode
    closes (``open_alerts`` cleared) with one ``recovered`` event (changes: ``closed``, the
    episodes). Returns whether one was open. Free when none is (the hot path)."""
    if not row.open_alerts:
        return False
    closed = alerts_of(row.open_alerts)
    row.open_alerts = ""
    if closed:
        note_event(row, AlertEvent(EventAction.RECOVERED, occurrence, {"closed": closed}))
    return bool(closed)


@implements("alert.failing")
def note_failing(row: Schedule, occurrence: int) -> bool:
    """After a failed attempt was counted (``failure_count``): when the streak has reached
    ``FAILING_AFTER`` and no ``failing`` episode is open, open one with one ``failing``
    event (changes: ``failure_count``, ``threshold``). Returns whether it did."""
    threshold = app_settings.FAILING_AFTER
    if row.failure_count < threshold or Alert.FAILING in alerts_of(row.open_alerts):
        return False
    row.open_alerts = with_alert(row.open_alerts, Alert.FAILING)
    changes = {"failure_count": row.failure_count, "threshold": threshold}
    note_event(row, AlertEvent(EventAction.FAILING, occurrence, changes))
    return True


@implements("alert.degraded")
def note_degraded(row: Schedule, occurrence: int | None = None) -> bool:
    """``row`` was just paused as degraded by the engine: unless a ``degraded`` episode is
    open, open one with one ``degraded`` event (changes: ``reason``, ``kind``). Returns
    whether it did."""
    if Alert.DEGRADED in alerts_of(row.open_alerts):
        return False
    row.open_alerts = with_alert(row.open_alerts, Alert.DEGRADED)
    changes = {"reason": row.degraded_reason, "kind": row.degraded_kind}
    note_event(row, AlertEvent(EventAction.DEGRADED, occurrence, changes))
    return True


@implements("alert.paused")
def note_paused(row: Schedule, occurrence: int) -> None:
    """``row`` was just paused by ``pause_after_failures``: one ``paused`` event (changes:
    ``reason``, ``failed_occurrences``). It happens once per episode: a paused row fails no
    further occurrence until an operator enables it."""
    changes = {"reason": row.pause_reason, "failed_occurrences": row.failed_occurrences}
    note_event(row, AlertEvent(EventAction.PAUSED, occurrence, changes))
