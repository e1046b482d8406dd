"""The runs a worker has claimed and not yet receipted (:class:`RunsInFlight`): starting
each one in a run thread or a child process, timing it, the outcome queue its thread
reports to, the backstop of ``timeout_seconds``, renewing their leases, handing back the
ones not started at a stop, and writing the queued outcomes in batches.

Claiming ahead: at most ``concurrency`` callbacks run at once, each in a *slot* (a run
thread that, when its run returns, starts the next claim waiting in line without a trip
through the main thread). The worker may claim more than its free slots - as many runs as
its slots are expected to start within ``CLAIM_AHEAD_SECONDS``, judged by the observed
run time (:meth:`RunsInFlight.claim_room`) - so short callbacks are claimed and completed
in whole batches instead of ``concurrency`` at a time. A slot busy for longer than that
counts as taken by a long run and adds no room; a claim that still waits longer than
``HAND_BACK_SECONDS`` (the estimate was wrong: a callback turned slow) is handed back
unrun (``released``) so that another worker with a free slot can run it. Its lease is
renewed while it waits, like every run in flight.

The loop (:mod:`.loop`) decides *when* each step runs; this module owns the bookkeeping of
the runs themselves, and :mod:`.execution` runs each one.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from django.db import Error as DatabaseError

from .. import state
from .execution import isolation, runner
from .execution.placement import Placement
from .lost_leases import stop_lost
from .run_estimate import folded, runs_ahead
from .threads import RunFuture, RunThreads

if TYPE_CHECKING:
    from .clock import WorkerClock
    from .notify import Notifier

# The worker's logger: every line the worker package logs about its loop carries this name.
logger = logging.getLogger("django_durable_schedules.worker")

#: A claim waiting in line longer than this for a free slot is handed back unrun (seconds).
HAND_BACK_SECONDS = 1.0

_Item = tuple[state.Claim, "RunFuture[state.Outcome]", "isolation.IsolationPool | None", float]


class RunsInFlight:
    """One worker's runs in flight, keyed by lease token. ``submit`` and the methods the
    loop calls run in the main thread; a run's done callback (its run thread) only touches
    ``done``, ``wake`` and, under ``abandon_lock``, ``reported`` / ``abandoned``."""

    def __init__(
        self,
        worker_id: str,
        concurrency: int,
        lease_seconds: float,
        using: str,
        wake: threading.Event,
        claim_ahead_seconds: float = 0.0,
        monotonic_at: Callable[[datetime], float] | None = None,
        clock: WorkerClock | None = None,
    ):
        self.worker_id = worker_id
        self.concurrency = concurrency
        self.claim_ahead_seconds = claim_ahead_seconds
        # Slots: runs started (at most concurrency) and the claims waiting for one, in
        # claim order, each with the monotonic time it was claimed; under slot_lock.
        self.slot_lock = threading.Lock()
        self.running = 0
        self.waiting: deque[_Item] = deque()
        self.executor: RunThreads | None = None
        # Seconds one callback takes, as last observed (None: no run finished yet).
        self.run_seconds: float | None = None
        self.handed_back = 0  # claims released because they waited too long for a slot
        self.lease_seconds = lease_seconds
        self.using = using
        self.wake = wake  # set when an outcome is queued (see wake_at)
        # How many queued outcomes make a finishing run set ``wake``: 1 (each one) unless
        # the main thread is gathering a whole batch (Worker._gather), when only the run
        # that completes it wakes the loop (a wake-up a run costs a thread switch).
        self.wake_at = 1
        self.in_flight: dict[uuid.UUID, tuple[state.Claim, RunFuture[state.Outcome]]] = {}
        self.done: queue.SimpleQueue[state.Outcome] = queue.SimpleQueue()
        self.deadlines: dict[uuid.UUID, float] = {}  # lease token -> monotonic deadline
        # Each claim's lease expiry on the monotonic clock (monotonic_at: the worker's
        # estimate of the database clock, WorkerClock.monotonic_at), kept up to date by
        # renew(): a child process does not start a claim past it (isolation.py).
        self.monotonic_at = monotonic_at
        self.lease_deadlines: dict[uuid.UUID, float] = {}
        # The worker's database clock: a receipt's started_at (None: the host's clock).
        self.clock = clock
        self.abandoned: set[uuid.UUID] = set()  # timed-out runs whose outcome is discarded
        self.lost: set[uuid.UUID] = set()  # leases found lost (stop_lost: once each)
        # Where each claim runs: its thread, or a child process (hard timeouts).
        self.placement = Placement(worker_id, concurrency)
        # Runs whose outcome the run thread has queued; with abandoned, under this lock, it
        # makes sure a claim gets exactly one outcome (its own or the Timeout).
        self.reported: set[uuid.UUID] = set()
        self.abandon_lock = threading.Lock()
        # Runs abandoned at their timeout whose slot was handed on (under slot_lock).
        self.abandoned_slots: set[uuid.UUID] = set()
        # lease token -> [monotonic start, monotonic end or None] of the callback (signals)
        self.run_times: dict[uuid.UUID, list[float | None]] = {}
        self.finished = 0  # runs receipted
        self.dropped = 0  # late outcomes whose attempt retention had pruned

    def submit(self, executor: RunThreads, claim: state.Claim) -> None:
        """Start ``claim`` in a free slot, or put it in line for the next one (main thread)."""
        self.executor = executor
        pool = self.placement.pool_for(claim)
        future: RunFuture[state.Outcome] = RunFuture()
        self.in_flight[claim.lease_token] = (claim, future)
        if self.monotonic_at is not None:
            self.lease_deadlines[claim.lease_token] = self.monotonic_at(claim.lease_expires_at)

        def done(f: RunFuture[state.Outcome]) -> None:
            with self.abandon_lock:  # one outcome per claim: this one or the Timeout
                if f.cancelled() or claim.lease_token in self.abandoned:
                    self.abandoned.discard(claim.lease_token)
                    return
                self.reported.add(claim.lease_token)
            exc = f.exception()
            if exc is not None:  # runner.execute never raises; be safe anyway
                self.done.put(state.Outcome(claim, "failed", error_type=type(exc).__name__))
            else:
                self.done.put(f.result())
            if self.done.qsize() >= self.wake_at:
                self.wake.set()

        future.add_done_callback(done)
        item: _Item = (claim, future, pool, time.monotonic())
        with self.slot_lock:
            start = self.running < self.concurrency
            if start:
                self.running += 1
            else:
                self.waiting.append(item)
        if start:
            executor.submit(self._slot, item)

    def _slot(self, item: _Item | None) -> None:
        """One slot (a run thread): run ``item``, then each claim waiting in line, until
        none waits. A run abandoned at its timeout gives its slot up (:meth:`enforce_timeouts`),
        so this thread ends when that run returns."""
        while item is not None:
            claim, future, pool, claimed = item
            token = claim.lease_token
            if time.monotonic() - claimed > HAND_BACK_SECONDS and future.cancel_pending():
                # Waited too long (slow runs ahead of it, or the whole process was stopped
                # meanwhile and its lease may have been recovered): hand it back unrun.
                self._hand_back([claim])
            elif future.set_running_or_notify_cancel():  # False: released while waiting
                if claim.timeout_seconds:
                    # The backstop of enforce_timeouts, from the start of the run. In a
                    # thread: async callbacks cancel themselves at the timeout, sync ones
                    # are abandoned just after it. In a child process: the pool kills it
                    # at the timeout; this only fires if that failed.
                    limit = (
                        claim.timeout_seconds + 0.5
                        if pool is None
                        else isolation.longest_run_seconds(claim)
                    )
                    self.deadlines[token] = time.monotonic() + limit
                try:
                    future.set_result(self.execute(claim, pool))
                except BaseException as exc:  # noqa: BLE001 - handed to the future
                    future.set_exception(exc)
                self._note_run_time(token)
            with self.slot_lock:
                if token in self.abandoned_slots:
                    self.abandoned_slots.discard(token)
                    return  # the slot went to the next claim when this run was abandoned
                item = self.waiting.popleft() if self.waiting else None
                if item is None:
                    self.running -= 1

    def _note_run_time(self, token: uuid.UUID) -> None:
        """Fold the run's wall time into ``run_seconds`` (slower: at once; faster: by
        ``RUN_TIME_WEIGHT``)."""
        times = self.run_times.get(token)
        if times is None or times[0] is None or times[1] is None:
            return
        self.run_seconds = folded(self.run_seconds, max(0.0, times[1] - times[0]))

    def claim_room(self, batch_size: int) -> int:
        """How many more runs the worker may claim now (main thread): its free slots, plus
        - when ``claim_ahead_seconds`` > 0 and a run time has been observed - the runs its
        slots not taken by a long run (one running for longer than ``claim_ahead_seconds``)
        are expected to start within ``claim_ahead_seconds``, less those already in line;
        at most ``batch_size`` (one claim transaction)."""
        free = self.concurrency - len(self.in_flight)
        ahead = 0
        estimate = self.run_seconds
        if self.claim_ahead_seconds > 0 and estimate is not None:
            since = [s for s, end in list(self.run_times.values()) if end is None and s is not None]
            window, now = self.claim_ahead_seconds, time.monotonic()
            ahead = runs_ahead(self.concurrency, window, estimate, since, now, batch_size)
        return max(0, min(batch_size, free + ahead))

    def hand_back_waiting(self) -> None:
        """Release (``released`` outcome) the claims that have waited in line for a slot
        longer than ``HAND_BACK_SECONDS``: the slots are taken by runs that turned out
        slow, and another worker may have a free one (main thread)."""
        if not self.waiting:
            return
        limit = time.monotonic() - HAND_BACK_SECONDS
        with self.slot_lock:
            stale = [item for item in self.waiting if item[3] < limit]
        self._hand_back([claim for claim, future, _pool, _at in stale if future.cancel_pending()])

    def _hand_back(self, claims: list[state.Claim]) -> None:
        """Queue a ``released`` outcome for each of ``claims`` (cancelled, never started)."""
        if not claims:
            return
        for claim in claims:
            self.done.put(state.Outcome(claim, "released"))
        with self.slot_lock:
            self.handed_back += len(claims)
        self.wake.set()
        logger.info(
            "worker %s handed back %s claims that waited over %gs for a free thread",
            self.worker_id,
            len(claims),
            HAND_BACK_SECONDS,
        )

    def execute(
        self, claim: state.Claim, pool: isolation.IsolationPool | None = None
    ) -> state.Outcome:
        """``runner.execute`` in a run thread, or in one of ``pool``'s child processes,
        timing the callback (for ``run_finished``); a child's run is stopped when its
        schedule's next slot comes due (``overlap_policy`` replace, ``claim.replace_at``)."""
        times: list[float | None] = [time.monotonic(), None]
        self.run_times[claim.lease_token] = times
        token = claim.lease_token
        clock = self.clock
        try:
            if pool is None:
                return runner.execute(claim, clock.estimate if clock is not None else None)
            stop_at = None  # overlap_policy replace: stopped when the next slot comes due
            if claim.replace_at is not None and self.monotonic_at is not None:
                stop_at = self.monotonic_at(claim.replace_at)
            return pool.run(
                claim,
                lambda: self.lease_deadlines.get(token),
                clock.reading if clock is not None else None,
                stop_at,
            )
        finally:
            times[1] = time.monotonic()

    def enforce_timeouts(self) -> None:
        """A run in a thread past its timeout (hard timeouts off, or a callback kept in the
        worker) cannot be stopped: receipt it ``failed`` (Timeout) now and stop renewing its
        lease; whatever it returns later is discarded. Its thread runs on, outside the
        worker's capacity (:class:`.RunThreads`). For a run in a child process this is only
        a backstop: the pool kills the child at the timeout."""
        now = time.monotonic()
        for token, deadline in list(self.deadlines.items()):
            if deadline > now or token not in self.in_flight:
                continue
            claim, future = self.in_flight[token]
            del self.deadlines[token]
            with self.abandon_lock:
                if token in self.reported:  # it returned meanwhile
                    continue
                self.abandoned.add(token)
                # Its slot goes to the next claim in line now (or is freed); the abandoned
                # thread ends when the callback returns (_slot). Inside abandon_lock, so
                # the run's own thread cannot hand its slot on as well.
                with self.slot_lock:
                    self.abandoned_slots.add(token)
                    following = self.waiting.popleft() if self.waiting else None
                    if following is None:
                        self.running -= 1
            if following is not None and self.executor is not None:
                self.executor.submit(self._slot, following)
            logger.warning(
                "run %s #%s.%s passed timeout_seconds=%g: receipted failed, "
                "its thread is abandoned",
                claim.schedule_name,
                claim.occurrence,
                claim.attempt,
                claim.timeout_seconds,
                extra={"schedule": claim.schedule_name, "occurrence": claim.occurrence},
            )
            self.done.put(
                state.Outcome(
                    claim,
                    "failed",
                    error_type="Timeout",
                    error_message=f"still running after timeout_seconds={claim.timeout_seconds:g}; "
                    "the thread was abandoned",
                    started_at=self._started_at(token),
                )
            )

    def _started_at(self, token: uuid.UUID) -> datetime | None:
        """When the run of ``token`` started, by the worker's database clock (None: not
        known)."""
        times = self.run_times.get(token)
        if times is None or times[0] is None or self.clock is None:
            return None
        return self.clock.at_monotonic(times[0])

    def renew(self) -> None:
        """Renew the leases of the runs in flight (main thread). A renewed lease lapses
        ``lease_seconds`` after the renewal (which began at ``started`` or later: the
        deadline kept for it errs early); a lost one has lapsed: its deadline becomes now,
        so a claim not started yet is not started (its child refuses it), and a run in a
        child process is stopped (:func:`.lost_leases.stop_lost`)."""
        tokens = list(self.in_flight)
        if not tokens:
            return
        started = time.monotonic()
        owned = state.renew_leases(tokens, lease_seconds=self.lease_seconds, using=self.using)
        lost = []
        for token in tokens:
            known = self.lease_deadlines.get(token)
            if known is not None:
                renewed = started + self.lease_seconds
                self.lease_deadlines[token] = max(known, renewed) if token in owned else started
            if token not in owned:
                stalled = started - (known - self.lease_seconds) if known is not None else None
                lost.append((self.in_flight[token][0], stalled))
        stop_lost(self.worker_id, lost, self.placement.pool, self.lost)

    def release_unstarted(self) -> None:
        """Queue ``released`` for each claim in line not started yet (a stop)."""
        for claim, future in list(self.in_flight.values()):
            if future.cancel_pending():  # not those handed back already
                self.done.put(state.Outcome(claim, "released"))

    def complete(self, notify: Notifier) -> None:
        """Write every outcome waiting in ``done`` in one :func:`.state.complete` batch (the
        loop's first statement of a pass: ``Worker._complete_finished``) and forget the runs
        receipted. Outcomes not written (a database error: re-raised) or deferred go back
        into ``done``. ``notify`` sends ``outcome_dropped`` and ``run_finished``."""
        outcomes: list[state.Outcome] = []
        while True:
            try:
                outcomes.append(self.done.get_nowait())
            except queue.Empty:
                break
        if not outcomes:
            return
        try:
            report = state.complete(outcomes, using=self.using)
        except DatabaseError:
            for outcome in outcomes:  # keep them; completion is retried after reconnecting
                self.done.put(outcome)
            raise
        if report.deferred:
            # Their schedule rows were locked by another transaction (maybe the callback's
            # own): written at a later pass, never waited for here.
            deferred = {o.claim.lease_token for o in report.deferred}
            for outcome in report.deferred:
                self.done.put(outcome)
            outcomes = [o for o in outcomes if o.claim.lease_token not in deferred]
        if report.dropped:
            self.dropped += len(report.dropped)
            notify.dropped(report.dropped)
        for outcome in outcomes:
            self.in_flight.pop(outcome.claim.lease_token, None)
            self.deadlines.pop(outcome.claim.lease_token, None)
            self.lease_deadlines.pop(outcome.claim.lease_token, None)
            self.lost.discard(outcome.claim.lease_token)
            self.reported.discard(outcome.claim.lease_token)
        self.finished += len(outcomes)
        # A run handed to a database task queue did its work (the enqueue) in the
        # completion transaction: its duration is that enqueue.
        for outcome in outcomes:
            seconds = report.enqueue_seconds.get(outcome.claim.attempt_id)
            times = self.run_times.get(outcome.claim.lease_token)
            if seconds is not None and times is not None and times[1] is not None:
                times[1] += seconds
        notify.finished(outcomes, report.receipts)
        for outcome in outcomes:
            self.run_times.pop(outcome.claim.lease_token, None)
        for receipt in report.receipts:
            logger.debug(
                "receipt %s occurrence %s: %s",
                receipt.schedule_id,
                receipt.occurrence,
                receipt.status,
                extra={"occurrence": receipt.occurrence},
            )
