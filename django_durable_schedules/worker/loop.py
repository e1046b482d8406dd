"""The worker loop (:class:`Worker`): a list of duties, each with its own cadence -
complete finished runs, enforce timeouts, renew leases, heartbeat, recover expired
leases, sweep deadlines, end pauses, claim, sleep.

All SQL lives in :mod:`..state`; this module only decides *when* to call it. Callbacks run
in threads (at most ``concurrency`` runs at once; short ones are claimed ahead of free
threads, see :mod:`.inflight`) so the main thread keeps renewing leases and heartbeating
while user code runs (the heartbeat stops last). Outcomes are completed in batches by the
main thread. A run with ``timeout_seconds`` runs in a child process that is killed at the
deadline (:mod:`.execution.isolation`; its thread only waits for it).

Signals: the first SIGTERM/SIGINT stops claiming and drains (in-flight runs finish, are
receipted, their leases kept alive until then); claims not yet started are released. A
second signal exits at once; leases still held then expire and are recovered elsewhere.

The parts with state of their own are helpers with explicit inputs, each built once by
``Worker``: ``RunThreads`` (:mod:`.threads`), ``RunsInFlight`` (:mod:`.inflight`),
``WorkerClock`` (:mod:`.clock`), ``Outage`` (:mod:`.outage`), ``StopRequests``
(:mod:`.stop`), ``Heartbeats`` (:mod:`.beats`), ``PauseEnds`` (:mod:`.pause_ends`: the
schedules whose pause ended) and ``Notifier`` (:mod:`.notify`: the signals it sends); ``Deliveries``
(:mod:`.deliveries`) sends alert notifications from threads of its own, started after the
start-up and stopped at the end (not with ``--once``), never waited for by the loop.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime
from functools import partial

from django.db import Error as DatabaseError
from django.db import close_old_connections, connections

from .. import state
from ..conf import app_settings
from ..db import session, sockets, wakeups
from .beats import Heartbeats
from .clock import Cadence, WorkerClock
from .deliveries import Deliveries
from .heap import HeapTrim
from .inflight import RunsInFlight
from .notify import Notifier
from .options import WorkerOptions, default_worker_id
from .outage import Outage
from .pause_ends import PauseEnds
from .stop import StopRequests
from .threads import RunThreads

# Named, not __name__: the worker's log lines kept this name when it became a package.
logger = logging.getLogger("django_durable_schedules.worker")

#: Longest wait for in-flight runs before a pass completes and claims (seconds).
GATHER_SECONDS = 0.005
#: How soon the loop notices a signal while it waits (seconds).
SIGNAL_POLL_SECONDS = 0.1
#: How often a worker sweeps for occurrences past their deadline (seconds).
DEADLINE_SWEEP_SECONDS = 10.0


class Worker:
    """One scheduler process's loop. Build it, then call :meth:`run` (blocks).

    Each pass of the loop does the worker's duties in this order, each at its cadence:

    * enforce timeouts - every pass: a run in a thread past its deadline is receipted
      (:meth:`.RunsInFlight.enforce_timeouts`);
    * complete finished runs - every pass, after waiting at most ``GATHER_SECONDS`` for a
      whole batch (:meth:`_gather`): the pass's first statement (:meth:`_complete_finished`);
    * renew leases - every ``renew_every`` seconds (:meth:`.RunsInFlight.renew`);
    * heartbeat - every ``renew_every`` seconds, on its own clock (:meth:`_heartbeat`);
    * recover expired leases - not while stopping or at the end of a ``--once`` pass: when
      a lease may have expired by the worker's clock (:meth:`_recover_expired`);
    * sweep deadlines - likewise, every ``DEADLINE_SWEEP_SECONDS`` and at the start, before
      the first claim (:func:`.state.sweep_deadlines`);
    * resume the schedules whose pause ended - likewise, when the earliest end has come
      (:class:`.pause_ends.PauseEnds`, :func:`.state.resume_paused`);
    * claim - likewise: when a slot is free and a slot may be due (:meth:`_claim`);
    * sleep - unless the claim filled its batch or the worker is done: until the next due
      slot, lease expiry or end of a pause, a wake-up, a signal or the next duty (:meth:`_sleep`); first,
      every ``HEAP_TRIM_SECONDS``, freed heap goes back to the system (:class:`.HeapTrim`).

    A database error ends the pass: the worker waits (:meth:`_unreachable`) and the next
    pass writes the outcomes waiting first.
    """

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
        self.pools = state.worker_pools(o.pools)  # what it claims; ("default",) by default
        self._wake = threading.Event()
        self.claim_ahead_seconds = (
            app_settings.CLAIM_AHEAD_SECONDS
            if o.claim_ahead_seconds is None
            else o.claim_ahead_seconds
        )
        self._stop = StopRequests(self.worker_id)  # written by a signal handler too
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
            clock=self._clock,
        )
        self._notify = Notifier(Worker, self.worker_id, self._runs.run_times)  # the signals
        self._deliveries = Deliveries(self.worker_id, self.using)  # alert notifications
        self._outage = Outage(self.worker_id)  # the current database outage, if any
        self._beats = Heartbeats(self.worker_id, self.using, self._clock, self.pools)
        self._renewal = Cadence(self.renew_every)  # lease renewal
        self._beat = Cadence(self.renew_every)  # heartbeat
        self._deadlines = Cadence(DEADLINE_SWEEP_SECONDS)  # the deadline sweep
        self._sweep = state.DeadlineSweep(self.using)
        self._pause_ends = PauseEnds(self.using, self.batch_size, self.poll_max, self._clock)
        self._heap = HeapTrim(app_settings.HEAP_TRIM_SECONDS)  # before a sleep
        self._threads = RunThreads()  # run threads; made anew by each run() (_begin)
        self._unbind_sockets: Callable[[], None] = lambda: None
        self._released = False  # a stop request released the claims not started
        self._claimed_total = 0  # claims of this run() (--once: at most a batch)
        self._pass_done = False  # --once: claimed what was due; finish those runs, then exit
        self.on_idle: Callable[[], None] | None = None  # test seam
        # PostgreSQL: a LISTEN thread that ends the idle sleep when a schedule changes.
        self._listener = (
            wakeups.Listener() if self.once else wakeups.listener(self.using, self._on_wakeup)
        )

    # -- control ---------------------------------------------------------------------

    def request_stop(self, force: bool = False) -> None:
        """Stop claiming and drain; with ``force`` (or on a second request) stop at once.
        Safe from any thread; a signal handler only notes the request (:mod:`.stop`)."""
        self._stop.note(force)
        self._wake.set()

    def install_signal_handlers(self) -> None:
        """SIGTERM/SIGINT: first drains, second forces (main thread only; see
        :meth:`.StopRequests.install_handlers`)."""
        self._stop.install_handlers()

    # -- the loop --------------------------------------------------------------------

    def run(self) -> int:
        """Run until stopped (or one pass with ``once``); returns the process exit code: 1
        after a forced stop, else 0. With ``once``, raises :class:`.outage.GaveUp` on a
        database error it cannot get past. The duties and their cadences: see the class."""
        self._begin()
        try:  # the start-up too: a --once worker may give up there (GaveUp)
            self._open_session()
            self._startup()
            while not self._stop.forced:
                self._take_stop_requests()
                try:
                    self._runs.enforce_timeouts()
                    self._gather()
                    self._complete_finished()
                    if self._finishing and not self._runs.in_flight:
                        break
                    mono = time.monotonic()
                    self._renewal.run(self._runs.renew, mono)
                    self._beat.run(self._heartbeat, mono)
                    full = False
                    if not self._finishing:
                        now = self._clock.decision_now()
                        self._recover_expired(now)
                        self._deadlines.run(partial(self._sweep_deadlines, now), mono)
                        self._pause_ends.run(now)
                        full = self._claim(now)
                    self._outage.ended()
                    if not full and not (self._finishing and not self._runs.in_flight):
                        self._sleep()
                except DatabaseError as exc:
                    # Wait, then run the next pass, whose first write is the outcomes
                    # waiting in done (_complete_finished) - before any renewal, claim or
                    # lease recovery - so that runs that finished during the outage are
                    # receipted while their leases hold.
                    self._pause(self._unreachable(exc, "database error in worker %s"))
                    self._wake.clear()
        finally:
            self._close_session()
        logger.info("worker %s stopped (%s runs)", self.worker_id, self._runs.finished)
        return 1 if self._stop.forced else 0

    # -- the duties --------------------------------------------------------------------

    @property
    def _finishing(self) -> bool:
        """No more claims: a stop was requested, or a ``--once`` pass claimed what was due
        (its claims were made to be run: they finish, then the worker exits)."""
        return self._stop.stopping or self._pass_done

    def _recover_expired(self, now: datetime) -> None:
        """Recover the leases that expired (another worker died), when the earliest lease
        expiry the last look saw has passed by ``now`` (or is not known)."""
        if not self._clock.lease_check_due(now):
            return
        recovered = state.expire_leases(limit=self.batch_size, now=now, using=self.using)
        self._clock.expiry_known = False
        self._notify.recovered(recovered)

    def _sweep_deadlines(self, now: datetime | None = None) -> None:
        """Report the occurrences past their deadline: found by ``now`` (the pass's
        database clock, estimated while idle; None: read it), each judged again by the
        database clock read in its own transaction (:class:`.state.DeadlineSweep`)."""
        self._sweep.run(now=now, limit=self.batch_size)

    def _claim(self, now: datetime) -> bool:
        """Hand back the claims that waited too long for a slot (:mod:`.inflight`), then
        claim as many runs as there is room for when a slot may be due by ``now``, and
        start them. Returns whether the claim filled its room (the loop goes round again
        without sleeping). A ``--once`` pass is done once it claimed a batch, or claimed
        less than it had room for."""
        self._runs.hand_back_waiting()
        # Free slots plus the runs they are expected to start soon (claiming ahead).
        # Abandoned runs are no longer in flight: their threads take no capacity
        # (RunThreads grows instead).
        free = self._runs.claim_room(self.batch_size)
        full = False
        if free > 0 and self._clock.claim_due(now):
            self._clock.due_known = False
            # No ``now``: claim_due judges "due" and stamps the claim by the database clock
            # after its locking read, so a run released or finished by another worker
            # meanwhile is never re-claimed at an instant before that receipt.
            claims = state.claim_due(
                worker=self.worker_id,
                limit=free,
                lease_seconds=self.lease_seconds,
                using=self.using,
                pools=self.pools,
            )
            for claim in claims:
                self._runs.submit(self._threads, claim)
            self._notify.claimed(claims)
            self._claimed_total += len(claims)
            full = len(claims) == free
        if self.once and (self._claimed_total >= self.batch_size or (free > 0 and not full)):
            self._pass_done = True  # --once: one pass over what is due now
        return full

    # -- start and end -----------------------------------------------------------------

    def _begin(self) -> None:
        """Log the start; fresh run threads and pass state; bound every socket wait of this
        thread's connection (db/sockets.py: no read or write waits for ever)."""
        logger.info(
            "worker %s starting (concurrency %s, batch %s, claim ahead %ss, lease %ss) pools=%s",
            self.worker_id,
            self.concurrency,
            self.batch_size,
            self.claim_ahead_seconds,
            self.lease_seconds,
            ",".join(self.pools),
        )
        self._threads = RunThreads()
        self._renewal.last = self._beat.last = self._deadlines.last = 0.0
        self._claimed_total = 0
        self._released = self._pass_done = False
        self._unbind_sockets = sockets.bound_sockets(
            self.using, app_settings.SOCKET_TIMEOUT_SECONDS
        )

    def _open_session(self) -> None:
        """Start listening (before the first look at what is due: no change is missed) and
        bound this thread's row-lock waits (db/session.py)."""
        self._listener.start()
        session.limit_lock_waits(self.using, app_settings.LOCK_TIMEOUT_SECONDS)

    def _close_session(self) -> None:
        """Undo :meth:`_begin` and :meth:`_open_session`, stop the children, say it stopped."""
        self._stop.log()
        self._listener.stop()
        self._deliveries.stop()
        session.clear_lock_wait_limit(self.using)
        self._unbind_sockets()
        # Never waits for a thread: after a drain only abandoned runs are left, and a
        # forced stop leaves at once (their leases expire and are recovered elsewhere).
        self._threads.shutdown(cancel_futures=True)
        self._runs.placement.close(force=self._stop.forced)
        # A forced stop still says it stopped (health and check W002 would otherwise
        # count this worker alive until its heartbeat goes stale), on a connection of its
        # own (an idle pause may have closed this thread's), waiting at most
        # FORCED_STOP_REPORT_SECONDS: a forced exit never waits longer for a database.
        if self._stop.forced:
            self._beats.final_bounded(len(self._runs.in_flight), self._runs.finished)
        else:
            self._beats.final(0, self._runs.finished)

    def _take_stop_requests(self) -> None:
        """Log the signals noted; at the first stop request hand back the claims whose
        callback has not started (not at the end of a --once pass: its claims were made
        to be run)."""
        self._stop.log()
        if self._stop.stopping and not self._released:
            self._runs.release_unstarted()
            self._released = True

    # -- steps -------------------------------------------------------------------------

    def _startup(self) -> None:
        """Sync code-declared schedules, re-plan those planned under other zone rules
        (:func:`.state.regrid_other_rules`), report what missed its deadline while no
        worker ran (before the first claim runs it) and write the first heartbeat,
        retrying (see :func:`reconnect_delay`) until the database answers or a stop is
        requested; then start the notifiers' delivery threads (not with ``once``)."""
        while not self._stop.stopping:
            self._stop.log()
            try:
                state.sync_declared(using=self.using)
                state.regrid_other_rules(using=self.using)  # zone rules read at start
                self._deadlines.run(self._sweep_deadlines, time.monotonic())
                self._heartbeat()
                self._outage.ended()
                break
            except DatabaseError as exc:
                self._pause(self._unreachable(exc, "worker %s cannot reach the database"))
        if not self.once and not self._stop.stopping:
            self._deliveries.start()

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
                if remaining <= 0 or self._stop.noted:
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
        self._runs.complete(self._notify)

    def _heartbeat(self) -> None:
        self._beats.beat(len(self._runs.in_flight), self._runs.finished)

    def _sleep(self) -> None:
        wakeup = state.next_wakeup(worker_id=self.worker_id, using=self.using, pools=self.pools)
        self._clock.expiry_known, self._clock.next_expiry = True, wakeup.lease_expiry
        self._clock.due_known, self._clock.next_due = True, wakeup.due
        self._pause_ends.note(wakeup.resume)
        estimate = self._clock.estimate()
        delay = min(self.poll_max, state.seconds_until(wakeup.earliest, estimate))
        delay = min(delay, self._pause_ends.seconds(estimate))
        if self._runs.in_flight:
            delay = min(delay, self.renew_every)
        delay = min(delay, self._deadlines.last + DEADLINE_SWEEP_SECONDS - time.monotonic())
        if self._runs.deadlines:
            soonest = min(list(self._runs.deadlines.values()))  # list: threads add to it
            delay = min(delay, max(0.0, soonest - time.monotonic()))
        if delay > 0:
            if self.on_idle is not None:
                self.on_idle()
            self._heap.maybe()
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
        while not self._stop.noted:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._wake.wait(min(remaining, SIGNAL_POLL_SECONDS)):
                return

    def _reset_connection(self) -> None:
        try:
            connections[self.using].close()
        except DatabaseError:
            pass
