"""The worker loop: sleep until something is due, claim, run, complete, renew, heartbeat.

All SQL lives in :mod:`.state`; this module only decides *when* to call it. Callbacks run
in threads (at most ``concurrency`` runs at once; short ones are claimed ahead of free
threads, see :mod:`.inflight`) so the main thread keeps renewing leases
and heartbeating while user code runs (the heartbeat stops last). Outcomes are
completed in batches by the main thread. A run with ``timeout_seconds`` runs in a child
process that is killed at the deadline (:mod:`.isolation`; its thread only waits for it).

Signals: the first SIGTERM/SIGINT stops claiming and drains (in-flight runs finish, are
receipted, their leases kept alive until then); claims not yet started are released. A
second signal exits at once; leases still held then expire and are recovered elsewhere.

The worker is split into flat modules beside this one rather than a ``worker/`` package, so
that ``Worker`` stays ``django_durable_schedules.worker.Worker`` (the documented sender of
the signals) and every log line keeps the logger ``django_durable_schedules.worker``. This
module keeps the loop and the steps that send signals or are seams of the tests; the parts
with state of their own are helpers with explicit inputs, each built once by ``Worker``:

* :mod:`.threads` - ``RunThreads``, the threads that run callbacks;
* :mod:`.inflight` - ``RunsInFlight``, the runs claimed and not yet receipted (starting,
  timing, timeouts, lease renewal, release at a stop, writing their outcomes);
* :mod:`.worker_clock` - ``WorkerClock``, the database-clock estimate and the next due slot
  and lease expiry;
* :mod:`.outage` - ``reconnect_delay`` and ``Outage``, the bookkeeping of a database outage.

Every name this module exported before the split is still importable from here.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import Error as DatabaseError
from django.db import close_old_connections, connections

from . import signals, state
from .conf import app_settings
from .db import session, sockets, wakeups
from .inflight import RunsInFlight

# Re-exported: importable from here as before the split (``X as X``).
from .outage import RECONNECT_LOG_SECONDS as RECONNECT_LOG_SECONDS
from .outage import RECONNECT_MAX_SECONDS as RECONNECT_MAX_SECONDS
from .outage import RECONNECT_MIN_SECONDS as RECONNECT_MIN_SECONDS
from .outage import GaveUp as GaveUp
from .outage import Outage
from .outage import reconnect_delay as reconnect_delay
from .threads import RunThreads as RunThreads
from .worker_clock import CLOCK_STEP_LOG_SECONDS as CLOCK_STEP_LOG_SECONDS
from .worker_clock import WorkerClock

logger = logging.getLogger(__name__)

#: Longest wait for in-flight runs before a pass completes and claims (seconds).
GATHER_SECONDS = 0.005
#: How soon the loop notices a signal while it waits (seconds).
SIGNAL_POLL_SECONDS = 0.1


def default_worker_id() -> str:
    """``host:pid:random`` - unique per process."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


@dataclass
class WorkerOptions:
    """Options of one worker (seconds for durations); ``None`` means the setting's default."""

    worker_id: str | None = None
    batch_size: int | None = None
    concurrency: int | None = None
    lease_seconds: float | None = None
    poll_max_seconds: float | None = None
    claim_ahead_seconds: float | None = None
    once: bool = False
    using: str = "default"


class Worker:
    """One scheduler process's loop. Build it, then call :meth:`run` (blocks)."""

    def __init__(self, options: WorkerOptions | None = None):
        o = options or WorkerOptions()
        self.worker_id = o.worker_id or default_worker_id()
        self.batch_size = o.batch_size or app_settings.BATCH_SIZE
        self.concurrency = o.concurrency or app_settings.CONCURRENCY
        self.lease_seconds = o.lease_seconds or app_settings.LEASE_SECONDS
        self.renew_every = min(app_settings.RENEW_EVERY_SECONDS, self.lease_seconds / 3)
        self.poll_max = o.poll_max_seconds or app_settings.POLL_MAX_SECONDS
        self.once = o.once
        self.using = o.using
        self._wake = threading.Event()
        self.claim_ahead_seconds = (
            app_settings.CLAIM_AHEAD_SECONDS
            if o.claim_ahead_seconds is None
            else o.claim_ahead_seconds
        )
        # Stop state is plain attributes, not Events: a signal handler may write them (see
        # install_signal_handlers).
        self._stopping = False
        self._forced = False
        self._signals: list[tuple[int, bool]] = []  # (signum, forced) noted by the handler
        # The database clock estimate and the next due slot and lease expiry.
        self._clock = WorkerClock(self.worker_id, self.using)
        self._runs = RunsInFlight(
            self.worker_id,
            self.concurrency,
            self.lease_seconds,
            self.using,
            self._wake,
            claim_ahead_seconds=self.claim_ahead_seconds,
            monotonic_at=self._clock.monotonic_at,
        )
        self._outage = Outage(self.worker_id)  # the current database outage, if any
        self._started_at: datetime | None = None
        self.on_idle: Callable[[], None] | None = None  # test seam
        # PostgreSQL: a LISTEN thread that ends the idle sleep when a schedule changes.
        self._listener = (
            wakeups.Listener() if self.once else wakeups.listener(self.using, self._on_wakeup)
        )

    # -- control ---------------------------------------------------------------------

    def request_stop(self, force: bool = False) -> None:
        """Stop claiming and drain; with ``force`` (or on a second request) stop at once.
        Safe from any thread; a signal handler uses :meth:`_note_stop` instead."""
        self._note_stop(force)
        self._wake.set()

    def _note_stop(self, force: bool = False) -> bool:
        """Record a stop request with plain attribute writes only; returns ``forced``."""
        if self._stopping or force:
            self._forced = True
        self._stopping = True
        return self._forced

    def install_signal_handlers(self) -> None:
        """SIGTERM/SIGINT: first drains, second forces (main thread only).

        The handler takes no lock: it runs in the main thread between two bytecodes, maybe
        while that thread holds ``_wake``'s lock (``Event.set`` would deadlock) or is inside
        a logging handler. It only notes the request; the loop polls for it (:meth:`_pause`)
        and logs it.
        """

        def handler(signum: int, frame: Any) -> None:
            self._signals.append((signum, self._note_stop()))

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)

    # -- the loop --------------------------------------------------------------------

    def run(self) -> int:
        """Run until stopped (or one pass with ``once``); returns the process exit code.
        With ``once``, raises :class:`.outage.GaveUp` on a database error it cannot get past."""
        logger.info(
            "worker %s starting (concurrency %s, batch %s, claim ahead %ss, lease %ss)",
            self.worker_id,
            self.concurrency,
            self.batch_size,
            self.claim_ahead_seconds,
            self.lease_seconds,
        )
        executor = RunThreads()
        last_renew = last_beat = 0.0
        claimed_total = 0
        released = False
        pass_done = False  # --once: claimed what was due; finish those runs, then exit
        # No read or write of this thread's connection waits for ever (db/sockets.py).
        unbound_sockets = sockets.bound_sockets(self.using, app_settings.SOCKET_TIMEOUT_SECONDS)
        try:  # the start-up too: a --once worker may give up there (GaveUp)
            self._listener.start()  # before the first look at what is due: no change is missed
            # This thread's own transactions never wait long for a row lock (db/session.py).
            session.limit_lock_waits(self.using, app_settings.LOCK_TIMEOUT_SECONDS)
            self._startup()
            while not self._forced:
                self._log_signals()
                if self._stopping and not released:
                    # A stop request hands back claims whose callback has not started. (Not
                    # the end of a --once pass: its claims were made to be run.)
                    self._runs.release_unstarted()
                    released = True
                try:
                    self._runs.enforce_timeouts()
                    self._gather()
                    self._complete_finished()
                    if (self._stopping or pass_done) and not self._runs.in_flight:
                        break
                    mono = time.monotonic()
                    if mono - last_renew >= self.renew_every:
                        self._runs.renew()
                        last_renew = mono
                    if mono - last_beat >= self.renew_every:
                        self._heartbeat()
                        last_beat = mono
                    full = False
                    if not (self._stopping or pass_done):
                        now = self._clock.decision_now()
                        if self._clock.lease_check_due(now):
                            recovered = state.expire_leases(
                                limit=self.batch_size, now=now, using=self.using
                            )
                            self._clock.expiry_known = False
                            if recovered and signals.leases_recovered.has_listeners(Worker):
                                signals.send_robust(
                                    signals.leases_recovered,
                                    Worker,
                                    count=recovered,
                                    worker_id=self.worker_id,
                                )
                        # Claims that waited too long for a slot go back (inflight.py).
                        self._runs.hand_back_waiting()
                        # Free slots plus the runs they are expected to start soon (claiming
                        # ahead). Abandoned runs are no longer in flight: their threads take
                        # no capacity (RunThreads grows instead).
                        free = self._runs.claim_room(self.batch_size)
                        if free > 0 and self._clock.claim_due(now):
                            self._clock.due_known = False
                            # No ``now``: claim_due judges "due" and stamps the claim by the
                            # database clock after its locking read, so a run released or
                            # finished by another worker meanwhile is never re-claimed at an
                            # instant before that receipt.
                            claims = state.claim_due(
                                worker=self.worker_id,
                                limit=free,
                                lease_seconds=self.lease_seconds,
                                using=self.using,
                            )
                            for claim in claims:
                                self._runs.submit(executor, claim)
                            if claims and signals.run_claimed.has_listeners(Worker):
                                self._send_claimed(claims)
                            claimed_total += len(claims)
                            full = len(claims) == free
                        if self.once and (
                            claimed_total >= self.batch_size or (free > 0 and not full)
                        ):
                            pass_done = True  # --once: one pass over what is due now
                    self._outage.ended()
                    finishing = self._stopping or pass_done
                    if not full and not (finishing and not self._runs.in_flight):
                        self._sleep()
                except DatabaseError as exc:
                    # Wait, then run the next pass, whose first write is the outcomes
                    # waiting in done (_complete_finished) - before any renewal, claim or
                    # lease recovery - so that runs that finished during the outage are
                    # receipted while their leases hold.
                    self._pause(self._unreachable(exc, "database error in worker %s"))
                    self._wake.clear()
        finally:
            self._log_signals()
            self._listener.stop()
            session.clear_lock_wait_limit(self.using)
            unbound_sockets()
            # Never waits for a thread: after a drain only abandoned runs are left, and a
            # forced stop leaves at once (their leases expire and are recovered elsewhere).
            executor.shutdown(cancel_futures=True)
            if self._runs.isolation is not None:
                self._runs.isolation.close(force=self._forced)
            # A forced stop still says it stopped (health and check W002 would otherwise
            # count this worker alive until its heartbeat goes stale), but only over a
            # connection already open: a forced exit never waits for a database to answer.
            if not self._forced or connections[self.using].connection is not None:
                self._final_heartbeat(in_flight=len(self._runs.in_flight) if self._forced else 0)
        logger.info("worker %s stopped (%s runs)", self.worker_id, self._runs.finished)
        return 1 if self._forced else 0

    # -- steps -------------------------------------------------------------------------

    def _startup(self) -> None:
        """Sync code-declared schedules and write the first heartbeat, retrying (see
        :func:`reconnect_delay`) until the database answers or a stop is requested."""
        while not self._stopping:
            self._log_signals()
            try:
                state.sync_declared(using=self.using)
                self._heartbeat()
                self._outage.ended()
                return
            except DatabaseError as exc:
                self._pause(self._unreachable(exc, "worker %s cannot reach the database"))

    def _unreachable(self, exc: DatabaseError, message: str) -> float:
        """Note a database error: drop the connection, forget what the last look at the
        schedules said (it may be stale by the time the database answers again), and return
        the seconds to wait before the next attempt (:meth:`.Outage.failed`: timed from the
        outage's first error, logged at its start, then at most every
        ``RECONNECT_LOG_SECONDS``; ``message`` has one ``%s``: the worker id). A ``--once``
        worker raises :class:`.outage.GaveUp` instead on an error it cannot get past
        (:meth:`.Outage.give_up`); a long-running one waits however long it takes."""
        delay = self._outage.failed(exc, message)
        gave_up = self._outage.give_up(exc) if self.once else None
        if gave_up is not None:
            raise gave_up from exc
        self._reset_connection()
        self._clock.due_known = self._clock.expiry_known = False
        return delay

    def _send_claimed(self, claims: list[state.Claim]) -> None:
        """Send ``run_claimed`` for committed claims (main thread, robust)."""
        for claim in claims:
            signals.send_robust(signals.run_claimed, Worker, claim=claim, worker_id=self.worker_id)

    def _send_finished(self, outcomes: list[state.Outcome], receipts: list[Any]) -> None:
        """Send ``run_finished`` for each receipt :func:`.state.complete` committed."""
        claims = {o.claim.attempt_id: o.claim for o in outcomes}
        now = time.monotonic()
        for receipt in receipts:
            claim = claims.get(receipt.attempt_id)
            if claim is None:  # pragma: no cover - complete() writes receipts of these only
                continue
            times = self._runs.run_times.get(claim.lease_token)
            duration = None if times is None else (times[1] or now) - (times[0] or now)
            signals.send_robust(
                signals.run_finished,
                Worker,
                receipt=receipt,
                claim=claim,
                schedule_name=claim.schedule_name,
                duration=duration,
                worker_id=self.worker_id,
            )

    def _gather(self) -> None:
        """Give runs still in flight a moment (at most ``GATHER_SECONDS``) to finish, so one
        pass completes and claims a whole batch instead of settling into half batches
        (docs/benchmarks.md: fixed costs per transaction dominate short runs)."""
        deadline = time.monotonic() + GATHER_SECONDS
        runs = self._runs
        try:
            while runs.in_flight and runs.done.qsize() < len(runs.in_flight):
                # Woken by the run that completes the batch, not by each one (set before
                # the check below: a run finishing in between still sees it).
                runs.wake_at = len(runs.in_flight)
                if runs.done.qsize() >= runs.wake_at:
                    return
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._signals:
                    return
                self._wake.wait(remaining)
                self._wake.clear()
        finally:
            runs.wake_at = 1

    def _complete_finished(self) -> None:
        """Write every outcome waiting in ``done`` in one :func:`.state.complete` batch.

        This is the first database statement of each pass (nothing before it in ``run``
        touches the database), so after an outage the runs that finished meanwhile are
        receipted before any renewal, claim or lease recovery, while their leases still
        hold. If the write fails the outcomes go back into ``done`` and the next pass, after
        the reconnect wait, writes them first again."""
        self._runs.complete(Worker, self._send_finished)

    def _heartbeat(self) -> None:
        db_now = state.heartbeat(
            self.worker_id,
            in_flight=len(self._runs.in_flight),
            runs_finished=self._runs.finished,
            started_at=self._started_at,
            using=self.using,
        )
        self._started_at = self._started_at or db_now
        self._clock.note_reading(db_now)

    def _final_heartbeat(self, in_flight: int = 0) -> None:
        try:
            state.heartbeat(
                self.worker_id,
                in_flight=in_flight,
                runs_finished=self._runs.finished,
                stopping=True,
                using=self.using,
            )
        except DatabaseError:
            logger.warning("worker %s could not record its stop", self.worker_id)

    def _sleep(self) -> None:
        wakeup = state.next_wakeup(worker_id=self.worker_id, using=self.using)
        self._clock.expiry_known, self._clock.next_expiry = True, wakeup.lease_expiry
        self._clock.due_known, self._clock.next_due = True, wakeup.due
        delay = min(self.poll_max, state.seconds_until(wakeup.earliest, self._clock.estimate()))
        if self._runs.in_flight:
            delay = min(delay, self.renew_every)
        if self._runs.deadlines:
            soonest = min(list(self._runs.deadlines.values()))  # list: threads add to it
            delay = min(delay, max(0.0, soonest - time.monotonic()))
        if delay > 0:
            if self.on_idle is not None:
                self.on_idle()
            self._pause(delay)
        self._wake.clear()
        if delay > 0.5:
            close_old_connections()

    def _on_wakeup(self, payload: str | None) -> None:
        """A schedule changed (called from the listener thread): look again at once."""
        self._clock.due_known = False
        self._wake.set()

    def _pause(self, delay: float) -> None:
        """Wait up to ``delay`` seconds for ``_wake``, or until a signal is pending (noticed
        within ``SIGNAL_POLL_SECONDS``: the handler cannot set the event)."""
        deadline = time.monotonic() + delay
        while not self._signals:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._wake.wait(min(remaining, SIGNAL_POLL_SECONDS)):
                return

    def _log_signals(self) -> None:
        """Log (and so clear) the signals the handler noted."""
        while self._signals:
            signum, forced = self._signals.pop(0)
            logger.warning(
                "worker %s got signal %s: %s",
                self.worker_id,
                signum,
                "forcing exit" if forced else "draining",
            )

    def _reset_connection(self) -> None:
        try:
            connections[self.using].close()
        except DatabaseError:
            pass
