"""The worker's sense of time (:class:`WorkerClock`): the database clock estimated between
readings by the monotonic clock, and what the last look at the schedules said comes next
(the earliest due slot and lease expiry), which together decide when a pass must ask the
database and when it may act on the estimate.

The loop reads and resets the look's fields directly (plain attributes); this module holds
them and the decisions made from them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from django.utils import timezone as dj_timezone

from .. import state

# The worker's logger: every line the worker package logs about its loop carries this name.
logger = logging.getLogger("django_durable_schedules.worker")

#: A change of the measured host-minus-database clock skew larger than this is logged
#: (seconds).
CLOCK_STEP_LOG_SECONDS = 1.0


class WorkerClock:
    """The database clock and the next due slot and lease expiry, as one worker knows them.

    ``due_known`` / ``expiry_known`` are cleared from other threads too (the wake-up
    listener): plain attribute writes, read at the next decision.
    """

    def __init__(self, worker_id: str, using: str):
        self.worker_id = worker_id
        self.using = using
        # The earliest lease expiry seen by the last look (db clock); an idle worker only
        # runs the recovery query when it has passed (leases are re-read at every sleep).
        self.expiry_known = False
        self.next_expiry: datetime | None = None
        # Likewise the earliest due slot: the claim transaction runs only when it has come
        # (a schedule created or triggered meanwhile is seen by the look before the sleep).
        self.due_known = False
        self.next_due: datetime | None = None
        # The database clock as last read: (database time, time.monotonic() taken just
        # before the read was sent). Decisions between reads advance it by the monotonic
        # clock, which host clock steps do not move; every read (heartbeat, decision_now)
        # re-anchors it. Anchored before the read, the estimate is never behind the
        # database clock (ahead by at most the read's round trip, or by a freeze of the
        # worker during it): a rate's start deadline checked by it is never missed.
        self.reading: tuple[datetime, float] | None = None
        self.skew = timedelta(0)  # host clock minus database clock, at the last read

    def decision_now(self) -> datetime:
        """The database clock for this pass's decisions. Idle, when the next due slot
        and the next lease expiry are both known and still ahead by the estimate of the
        database clock (:meth:`estimate`), nothing can be due: the estimate is returned
        and the round trip saved (an idle tick is then just the wake-up reads).
        Whenever either may have come, the database is asked, so a claim or a recovery is
        always decided and stamped by the database clock; that read also re-anchors the
        estimate, so a wrong estimate costs one read, never a busy loop."""
        if self.due_known and self.expiry_known:
            estimate = self.estimate()
            if not (self.claim_due(estimate) or self.lease_check_due(estimate)):
                return estimate
        before = time.monotonic()
        now = state.db_now(self.using)
        self.note_reading(now, before)
        return now

    def estimate(self) -> datetime:
        """The database clock now, estimated without a round trip: the last reading plus
        the ``time.monotonic()`` seconds since. The host's wall clock plays no part, so a
        step of it (NTP, a VM resumed, an operator) cannot make the worker act early,
        sleep too long or spin; drift is corrected at the next reading."""
        if self.reading is None:  # not read yet (start-up always reads it first)
            return dj_timezone.now()
        db_time, mono = self.reading
        return db_time + timedelta(seconds=time.monotonic() - mono)

    def at_monotonic(self, mono: float) -> datetime:
        """The database clock (aware UTC, by :meth:`estimate`) at the ``time.monotonic()``
        instant ``mono``: e.g. when a run started."""
        return self.estimate() - timedelta(seconds=time.monotonic() - mono)

    def monotonic_at(self, instant: datetime) -> float:
        """The ``time.monotonic()`` instant at which the database clock reaches ``instant``
        (aware), by :meth:`estimate`: e.g. when a lease lapses. ``time.monotonic()`` is the
        host's monotonic clock, the same in every process (a child process compares it with
        its own)."""
        return time.monotonic() + (instant - self.estimate()).total_seconds()

    def note_reading(self, db_time: datetime, sent: float | None = None) -> None:
        """Anchor :meth:`estimate` to a database reading just taken, and re-measure the
        host-minus-database skew (logged when it changed by more than
        ``CLOCK_STEP_LOG_SECONDS``: one of the clocks was stepped). ``sent``: the
        ``time.monotonic()`` instant taken just before the read was sent (None: now).
        The database read its clock after ``sent``, so the estimate anchored there is
        never behind the database clock, however long the answer took or the worker was
        frozen before noting it (a claim's start deadline is checked by it:
        :func:`.execution.runner.run_claim`); it may be ahead by as much."""
        had_reading = self.reading is not None
        self.reading = (db_time, time.monotonic() if sent is None else sent)
        skew = dj_timezone.now() - db_time
        change = (skew - self.skew).total_seconds()
        self.skew = skew
        if had_reading and abs(change) > CLOCK_STEP_LOG_SECONDS:
            logger.warning(
                "worker %s: host clock minus database clock changed by %+.1fs (now %+.1fs); "
                "the worker follows the database clock",
                self.worker_id,
                change,
                skew.total_seconds(),
            )

    def claim_due(self, now: datetime) -> bool:
        if not self.due_known:
            return True
        return self.next_due is not None and self.next_due <= now

    def lease_check_due(self, now: datetime) -> bool:
        if not self.expiry_known:
            return True
        return self.next_expiry is not None and self.next_expiry <= now


class Cadence:
    """When a duty of the loop runs: at most every ``seconds`` (``time.monotonic()``), the
    first time at once. A duty that raises is not marked done: it runs again next pass."""

    __slots__ = ("seconds", "last")

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.last = 0.0  # time.monotonic() of the pass in which the duty last ran

    def run(self, duty: Callable[[], object], mono: float) -> None:
        """Run ``duty`` if ``seconds`` have passed since it last ran (``mono``: now)."""
        if mono - self.last >= self.seconds:
            duty()
            self.last = mono


def estimator(reading: tuple[datetime, float] | None) -> Callable[[], datetime]:
    """A clock for another process of this host (a hard-timeout child): the database clock
    estimated from the worker's ``reading`` (:attr:`WorkerClock.reading`: a database time
    and the ``time.monotonic()`` of its read; the monotonic clock is the host's, the same in
    every process) - or the host's clock when there is no reading. Aware UTC."""
    if reading is None:
        return dj_timezone.now
    db_time, mono = reading

    def now() -> datetime:
        return db_time + timedelta(seconds=time.monotonic() - mono)

    return now
