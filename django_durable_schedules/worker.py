"""The worker loop: sleep until something is due, claim, run, complete, renew, heartbeat.

All SQL lives in :mod:`.state`; this module only decides *when* to call it. Callbacks run
in threads (at most ``concurrency`` runs at once) so the main thread keeps renewing leases
and heartbeating while user code runs (the heartbeat stops last). Outcomes are
completed in batches by the main thread. A run with ``timeout_seconds`` runs in a child
process that is killed at the deadline (:mod:`.isolation`; its thread only waits for it).

Signals: the first SIGTERM/SIGINT stops claiming and drains (in-flight runs finish, are
receipted, their leases kept alive until then); claims not yet started are released. A
second signal exits at once; leases still held then expire and are recovered elsewhere.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import Error as DatabaseError
from django.db import close_old_connections, connections
from django.utils import timezone as dj_timezone

from . import isolation, runner, signals, state
from .conf import app_settings
from .db import session, wakeups

logger = logging.getLogger(__name__)

#: Longest wait for in-flight runs before a pass completes and claims (seconds).
GATHER_SECONDS = 0.005
#: How soon the loop notices a signal while it waits (seconds).
SIGNAL_POLL_SECONDS = 0.1
#: A change of the measured host-minus-database clock skew larger than this is logged
#: (seconds).
CLOCK_STEP_LOG_SECONDS = 1.0
#: Shortest wait before trying the database again after an error (seconds).
RECONNECT_MIN_SECONDS = 0.2
#: Longest wait between two attempts to reach the database (seconds). Kept short so that
#: a worker is back within this long of its database and writes the outcomes of runs that
#: finished during the outage while their leases are still valid.
RECONNECT_MAX_SECONDS = 2.0
#: While the database stays unreachable, the error is logged again at most this often
#: (seconds); the first failure and the recovery are always logged.
RECONNECT_LOG_SECONDS = 30.0


def reconnect_delay(outage_seconds: float) -> float:
    """Seconds to wait before the next attempt to reach the database, ``outage_seconds``
    after the first failure of the outage: as long as the outage has lasted so far, within
    ``RECONNECT_MIN_SECONDS`` .. ``RECONNECT_MAX_SECONDS`` (so the waits double: 0.2, 0.2,
    0.4, 0.8, 1.6, then 2 s). It grows with elapsed time, not with a count of failed
    attempts, so however many statements failed the worker is back within
    ``RECONNECT_MAX_SECONDS`` of its database."""
    return min(RECONNECT_MAX_SECONDS, max(RECONNECT_MIN_SECONDS, outage_seconds))


def default_worker_id() -> str:
    """``host:pid:random`` - unique per process."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class RunThreads:
    """The threads that run callbacks: a submitted run starts at once, on an idle thread
    or on a new one (daemon threads, reused, never more than were busy at once).

    Unlike a ``ThreadPoolExecutor`` it has no size: the worker bounds how many runs it
    starts by counting its own runs in flight, so a thread whose run was abandoned at its
    timeout (a sync callback that cannot be stopped) takes no capacity from later runs, and
    shutting down never waits for it (nor does interpreter exit: the threads are daemons).
    """

    def __init__(self, name_prefix: str = "durable-run"):
        self._prefix = name_prefix
        self._work: queue.SimpleQueue[tuple[Future[Any], Callable[[Any], Any], Any] | None] = (
            queue.SimpleQueue()
        )
        self._lock = threading.Lock()
        self._idle = 0  # threads waiting for work, less the work already queued for them
        self._threads = 0

    def submit(self, fn: Callable[[Any], Any], arg: Any) -> Future[Any]:
        """Run ``fn(arg)`` in a thread; the future has its result (or exception)."""
        future: Future[Any] = Future()
        with self._lock:
            if self._idle > 0:
                self._idle -= 1
                start = False
            else:
                self._threads += 1
                start = True
        self._work.put((future, fn, arg))
        if start:
            name = f"{self._prefix}-{self._threads}"
            threading.Thread(target=self._loop, name=name, daemon=True).start()
        return future

    def shutdown(self, cancel_futures: bool = True) -> None:
        """Let idle threads end (without waiting for them) and, with ``cancel_futures``,
        cancel runs not yet started. Busy threads end when their run returns."""
        if cancel_futures:
            while True:
                try:
                    item = self._work.get_nowait()
                except queue.Empty:
                    break
                if item is not None:
                    item[0].cancel()
        with self._lock:
            threads = self._threads
        for _ in range(threads):
            self._work.put(None)

    def _loop(self) -> None:
        while True:
            item = self._work.get()
            if item is None:
                return
            future, fn, arg = item
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(arg))
                except BaseException as exc:  # noqa: BLE001 - handed to the future
                    future.set_exception(exc)
            del future, item  # drop the result before idling
            with self._lock:
                self._idle += 1


@dataclass
class WorkerOptions:
    """Options of one worker (seconds for durations); ``None`` means the setting's default."""

    worker_id: str | None = None
    batch_size: int | None = None
    concurrency: int | None = None
    lease_seconds: float | None = None
    poll_max_seconds: float | None = None
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
        self._in_flight: dict[uuid.UUID, tuple[state.Claim, Future[state.Outcome]]] = {}
        self._done: queue.SimpleQueue[state.Outcome] = queue.SimpleQueue()
        self._wake = threading.Event()
        # Stop state is plain attributes, not Events: a signal handler may write them (see
        # install_signal_handlers).
        self._stopping = False
        self._forced = False
        self._signals: list[tuple[int, bool]] = []  # (signum, forced) noted by the handler
        self._runs_finished = 0
        self._outcomes_dropped = 0  # late outcomes whose attempt retention had pruned
        # The earliest lease expiry seen by the last look (db clock); an idle worker only
        # runs the recovery query when it has passed (leases are re-read at every sleep).
        self._expiry_known = False
        self._next_expiry: datetime | None = None
        # Likewise the earliest due slot: the claim transaction runs only when it has come
        # (a schedule created or triggered meanwhile is seen by the look before the sleep).
        self._due_known = False
        self._next_due: datetime | None = None
        self._deadlines: dict[uuid.UUID, float] = {}  # lease token -> monotonic deadline
        self._abandoned: set[uuid.UUID] = set()  # timed-out runs whose outcome is discarded
        # Child processes for runs with timeout_seconds (hard timeouts), started lazily.
        self._isolation: isolation.IsolationPool | None = None
        self._isolation_checked = False  # unavailable_reason() looked at (and logged) once
        self._isolation_off: str | None = None  # why child processes cannot be used
        # Runs whose outcome the run thread has queued; with _abandoned, under this lock, it
        # makes sure a claim gets exactly one outcome (its own or the Timeout).
        self._reported: set[uuid.UUID] = set()
        self._abandon_lock = threading.Lock()
        # lease token -> [monotonic start, monotonic end or None] of the callback (signals)
        self._run_times: dict[uuid.UUID, list[float | None]] = {}
        # The database clock as last read: (database time, time.monotonic() of the read).
        # Decisions between reads advance it by the monotonic clock, which host clock steps
        # do not move; every read (heartbeat, _decision_now) re-anchors it.
        self._clock: tuple[datetime, float] | None = None
        self._skew = timedelta(0)  # host clock minus database clock, at the last read
        # time.monotonic() of the first database error of the current outage, or None.
        self._outage_since: float | None = None
        self._outage_logged = 0.0  # time.monotonic() of the outage's last error log line
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
        """Run until stopped (or one pass with ``once``); returns the process exit code."""
        logger.info(
            "worker %s starting (concurrency %s, batch %s, lease %ss)",
            self.worker_id,
            self.concurrency,
            self.batch_size,
            self.lease_seconds,
        )
        executor = RunThreads()
        last_renew = last_beat = 0.0
        claimed_total = 0
        released = False
        pass_done = False  # --once: claimed what was due; finish those runs, then exit
        self._listener.start()  # before the first look at what is due: no change is missed
        # This thread's own transactions never wait long for a row lock (db/session.py).
        session.limit_lock_waits(self.using, app_settings.LOCK_TIMEOUT_SECONDS)
        self._startup()
        try:
            while not self._forced:
                self._log_signals()
                if self._stopping and not released:
                    # A stop request hands back claims whose callback has not started. (Not
                    # the end of a --once pass: its claims were made to be run.)
                    self._release_unstarted()
                    released = True
                try:
                    self._enforce_timeouts()
                    self._gather()
                    self._complete_finished()
                    if (self._stopping or pass_done) and not self._in_flight:
                        break
                    mono = time.monotonic()
                    if mono - last_renew >= self.renew_every:
                        self._renew()
                        last_renew = mono
                    if mono - last_beat >= self.renew_every:
                        self._heartbeat()
                        last_beat = mono
                    full = False
                    if not (self._stopping or pass_done):
                        now = self._decision_now()
                        if self._lease_check_due(now):
                            state.expire_leases(limit=self.batch_size, now=now, using=self.using)
                            self._expiry_known = False
                        # Abandoned runs are no longer in flight: their threads take no
                        # capacity (RunThreads grows instead).
                        free = self.concurrency - len(self._in_flight)
                        if free > 0 and self._claim_due(now):
                            self._due_known = False
                            # No ``now``: claim_due judges "due" and stamps the claim by the
                            # database clock after its locking read, so a run released or
                            # finished by another worker meanwhile is never re-claimed at an
                            # instant before that receipt.
                            claims = state.claim_due(
                                worker=self.worker_id,
                                limit=min(self.batch_size, free),
                                lease_seconds=self.lease_seconds,
                                using=self.using,
                            )
                            for claim in claims:
                                self._submit(executor, claim)
                            if claims and signals.run_claimed.has_listeners(Worker):
                                self._send_claimed(claims)
                            claimed_total += len(claims)
                            full = len(claims) == free
                        if self.once and (
                            claimed_total >= self.batch_size or (free > 0 and not full)
                        ):
                            pass_done = True  # --once: one pass over what is due now
                    self._reachable()
                    finishing = self._stopping or pass_done
                    if not full and not (finishing and not self._in_flight):
                        self._sleep()
                except DatabaseError as exc:
                    # Wait, then run the next pass, whose first write is the outcomes
                    # waiting in _done (_complete_finished) - before any renewal, claim or
                    # lease recovery - so that runs that finished during the outage are
                    # receipted while their leases hold.
                    self._pause(self._unreachable(exc, "database error in worker %s"))
                    self._wake.clear()
        finally:
            self._log_signals()
            self._listener.stop()
            session.clear_lock_wait_limit(self.using)
            # Never waits for a thread: after a drain only abandoned runs are left, and a
            # forced stop leaves at once (their leases expire and are recovered elsewhere).
            executor.shutdown(cancel_futures=True)
            if self._isolation is not None:
                self._isolation.close(force=self._forced)
            # A forced stop still says it stopped (health and check W002 would otherwise
            # count this worker alive until its heartbeat goes stale), but only over a
            # connection already open: a forced exit never waits for a database to answer.
            if not self._forced or connections[self.using].connection is not None:
                self._final_heartbeat(in_flight=len(self._in_flight) if self._forced else 0)
        logger.info("worker %s stopped (%s runs)", self.worker_id, self._runs_finished)
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
                self._reachable()
                return
            except DatabaseError as exc:
                self._pause(self._unreachable(exc, "worker %s cannot reach the database"))

    def _unreachable(self, exc: DatabaseError, message: str) -> float:
        """Note a database error: drop the connection, forget what the last look at the
        schedules said (it may be stale by the time the database answers again), and return
        the seconds to wait before the next attempt (:func:`reconnect_delay`, timed from the
        outage's first error). Logs the first error of an outage, then at most every
        ``RECONNECT_LOG_SECONDS`` (``message`` has one ``%s``: the worker id)."""
        mono = time.monotonic()
        if self._outage_since is None:
            self._outage_since = self._outage_logged = mono
            log = True
        else:
            log = mono - self._outage_logged >= RECONNECT_LOG_SECONDS
        delay = reconnect_delay(mono - self._outage_since)
        if log:
            self._outage_logged = mono
            logger.error(
                message + " (retry in %.1fs, then at most every %.1fs): %s",
                self.worker_id,
                delay,
                RECONNECT_MAX_SECONDS,
                exc,
            )
        self._reset_connection()
        self._due_known = self._expiry_known = False
        return delay

    def _reachable(self) -> None:
        """The database answered: end the current outage, if any (logged with its length)."""
        if self._outage_since is not None:
            logger.warning(
                "worker %s reached the database again after %.1fs",
                self.worker_id,
                time.monotonic() - self._outage_since,
            )
            self._outage_since = None

    def _submit(self, executor: RunThreads, claim: state.Claim) -> None:
        pool = self._pool_for(claim)
        future = executor.submit(lambda c: self._execute(c, pool), claim)
        self._in_flight[claim.lease_token] = (claim, future)
        if claim.timeout_seconds:
            # The backstop of _enforce_timeouts. In a thread: async callbacks cancel
            # themselves at the timeout, sync ones are abandoned just after it. In a child
            # process: the pool kills it at the timeout; this only fires if that failed.
            limit = (
                claim.timeout_seconds + 0.5
                if pool is None
                else isolation.longest_run_seconds(claim)
            )
            self._deadlines[claim.lease_token] = time.monotonic() + limit

        def done(f: Future[state.Outcome]) -> None:
            with self._abandon_lock:  # one outcome per claim: this one or the Timeout
                if f.cancelled() or claim.lease_token in self._abandoned:
                    self._abandoned.discard(claim.lease_token)
                    return
                self._reported.add(claim.lease_token)
            exc = f.exception()
            if exc is not None:  # runner.execute never raises; be safe anyway
                self._done.put(state.Outcome(claim, "failed", error_type=type(exc).__name__))
            else:
                self._done.put(f.result())
            self._wake.set()

        future.add_done_callback(done)

    def _execute(
        self, claim: state.Claim, pool: isolation.IsolationPool | None = None
    ) -> state.Outcome:
        """``runner.execute`` in a run thread, or in one of ``pool``'s child processes,
        timing the callback (for ``run_finished``)."""
        times: list[float | None] = [time.monotonic(), None]
        self._run_times[claim.lease_token] = times
        try:
            return runner.execute(claim) if pool is None else pool.run(claim)
        finally:
            times[1] = time.monotonic()

    def _pool_for(self, claim: state.Claim) -> isolation.IsolationPool | None:
        """The isolation pool if ``claim`` runs in a child process (hard timeout), started
        on first use, else ``None`` (it runs in a thread)."""
        if not isolation.isolates(claim):
            return None
        if not self._isolation_checked:
            self._isolation_checked = True
            self._isolation_off = isolation.unavailable_reason()
            if self._isolation_off:
                logger.warning(
                    "worker %s: runs with timeout_seconds run in threads (a sync callback "
                    "past its timeout cannot be stopped): %s",
                    self.worker_id,
                    self._isolation_off,
                )
        if self._isolation_off:
            return None
        if self._isolation is None:
            self._isolation = isolation.IsolationPool(self.concurrency)
        return self._isolation

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
            times = self._run_times.get(claim.lease_token)
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
        while self._in_flight and self._done.qsize() < len(self._in_flight):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._signals:
                return
            self._wake.wait(remaining)
            self._wake.clear()

    def _complete_finished(self) -> None:
        """Write every outcome waiting in ``_done`` in one :func:`.state.complete` batch.

        This is the first database statement of each pass (nothing before it in ``run``
        touches the database), so after an outage the runs that finished meanwhile are
        receipted before any renewal, claim or lease recovery, while their leases still
        hold. If the write fails the outcomes go back into ``_done`` and the next pass, after
        the reconnect wait, writes them first again."""
        outcomes: list[state.Outcome] = []
        while True:
            try:
                outcomes.append(self._done.get_nowait())
            except queue.Empty:
                break
        if not outcomes:
            return
        try:
            report = state.complete(outcomes, using=self.using)
        except DatabaseError:
            for outcome in outcomes:  # keep them; completion is retried after reconnecting
                self._done.put(outcome)
            raise
        if report.deferred:
            # Their schedule rows were locked by another transaction (maybe the callback's
            # own): written at a later pass, never waited for here.
            deferred = {o.claim.lease_token for o in report.deferred}
            for outcome in report.deferred:
                self._done.put(outcome)
            outcomes = [o for o in outcomes if o.claim.lease_token not in deferred]
        if report.dropped:
            self._outcomes_dropped += len(report.dropped)
            for outcome in report.dropped:
                signals.send_robust(
                    signals.outcome_dropped,
                    Worker,
                    outcome=outcome,
                    schedule_name=outcome.claim.schedule_name,
                    worker_id=self.worker_id,
                )
        for outcome in outcomes:
            self._in_flight.pop(outcome.claim.lease_token, None)
            self._deadlines.pop(outcome.claim.lease_token, None)
            self._reported.discard(outcome.claim.lease_token)
        self._runs_finished += len(outcomes)
        if report.receipts and signals.run_finished.has_listeners(Worker):
            self._send_finished(outcomes, report.receipts)
        for outcome in outcomes:
            self._run_times.pop(outcome.claim.lease_token, None)
        for receipt in report.receipts:
            logger.debug(
                "receipt %s occurrence %s: %s",
                receipt.schedule_id,
                receipt.occurrence,
                receipt.status,
                extra={"occurrence": receipt.occurrence},
            )

    def _decision_now(self) -> datetime:
        """The database clock for this pass's decisions. Idle, when the next due slot
        and the next lease expiry are both known and still ahead by the estimate of the
        database clock (:meth:`_db_clock`), nothing can be due: the estimate is returned
        and the round trip saved (an idle tick is then just the wake-up reads).
        Whenever either may have come, the database is asked, so a claim or a recovery is
        always decided and stamped by the database clock; that read also re-anchors the
        estimate, so a wrong estimate costs one read, never a busy loop."""
        if self._due_known and self._expiry_known:
            estimate = self._db_clock()
            if not (self._claim_due(estimate) or self._lease_check_due(estimate)):
                return estimate
        now = state.db_now(self.using)
        self._note_db_clock(now)
        return now

    def _db_clock(self) -> datetime:
        """The database clock now, estimated without a round trip: the last reading plus
        the ``time.monotonic()`` seconds since. The host's wall clock plays no part, so a
        step of it (NTP, a VM resumed, an operator) cannot make the worker act early,
        sleep too long or spin; drift is corrected at the next reading."""
        if self._clock is None:  # not read yet (start-up always reads it first)
            return dj_timezone.now()
        db_time, mono = self._clock
        return db_time + timedelta(seconds=time.monotonic() - mono)

    def _note_db_clock(self, db_time: datetime) -> None:
        """Anchor :meth:`_db_clock` to a database reading just taken, and re-measure the
        host-minus-database skew (logged when it changed by more than
        ``CLOCK_STEP_LOG_SECONDS``: one of the clocks was stepped)."""
        had_reading = self._clock is not None
        self._clock = (db_time, time.monotonic())
        skew = dj_timezone.now() - db_time
        change = (skew - self._skew).total_seconds()
        self._skew = skew
        if had_reading and abs(change) > CLOCK_STEP_LOG_SECONDS:
            logger.warning(
                "worker %s: host clock minus database clock changed by %+.1fs (now %+.1fs); "
                "the worker follows the database clock",
                self.worker_id,
                change,
                skew.total_seconds(),
            )

    def _claim_due(self, now: datetime) -> bool:
        if not self._due_known:
            return True
        return self._next_due is not None and self._next_due <= now

    def _lease_check_due(self, now: datetime) -> bool:
        if not self._expiry_known:
            return True
        return self._next_expiry is not None and self._next_expiry <= now

    def _enforce_timeouts(self) -> None:
        """A run in a thread past its timeout (hard timeouts off, or a callback kept in the
        worker) cannot be stopped: receipt it ``failed`` (Timeout) now and stop renewing its
        lease; whatever it returns later is discarded. Its thread runs on, outside the
        worker's capacity (:class:`RunThreads`). For a run in a child process this is only
        a backstop: the pool kills the child at the timeout."""
        now = time.monotonic()
        for token, deadline in list(self._deadlines.items()):
            if deadline > now or token not in self._in_flight:
                continue
            claim, future = self._in_flight[token]
            del self._deadlines[token]
            with self._abandon_lock:
                if token in self._reported:  # it returned meanwhile
                    continue
                self._abandoned.add(token)
            logger.warning(
                "run %s #%s.%s passed timeout_seconds=%g: receipted failed, "
                "its thread is abandoned",
                claim.schedule_name,
                claim.occurrence,
                claim.attempt,
                claim.timeout_seconds,
                extra={"schedule": claim.schedule_name, "occurrence": claim.occurrence},
            )
            self._done.put(
                state.Outcome(
                    claim,
                    "failed",
                    error_type="Timeout",
                    error_message=f"still running after timeout_seconds={claim.timeout_seconds:g}; "
                    "the thread was abandoned",
                )
            )

    def _renew(self) -> None:
        tokens = list(self._in_flight)
        if not tokens:
            return
        owned = state.renew_leases(tokens, lease_seconds=self.lease_seconds, using=self.using)
        for token in set(tokens) - owned:
            claim = self._in_flight[token][0]
            logger.warning(
                "worker %s lost the lease of %s occurrence %s",
                self.worker_id,
                claim.schedule_name,
                claim.occurrence,
                extra={"schedule": claim.schedule_name, "occurrence": claim.occurrence},
            )

    def _heartbeat(self) -> None:
        db_now = state.heartbeat(
            self.worker_id,
            in_flight=len(self._in_flight),
            runs_finished=self._runs_finished,
            started_at=self._started_at,
            using=self.using,
        )
        self._started_at = self._started_at or db_now
        self._note_db_clock(db_now)

    def _final_heartbeat(self, in_flight: int = 0) -> None:
        try:
            state.heartbeat(
                self.worker_id,
                in_flight=in_flight,
                runs_finished=self._runs_finished,
                stopping=True,
                using=self.using,
            )
        except DatabaseError:
            logger.warning("worker %s could not record its stop", self.worker_id)

    def _release_unstarted(self) -> None:
        released = []
        for claim, future in list(self._in_flight.values()):
            if future.cancel():
                released.append(state.Outcome(claim, "released"))
        if released:
            for outcome in released:
                self._done.put(outcome)

    def _sleep(self) -> None:
        wakeup = state.next_wakeup(using=self.using)
        self._expiry_known, self._next_expiry = True, wakeup.lease_expiry
        self._due_known, self._next_due = True, wakeup.due
        delay = min(self.poll_max, state.seconds_until(wakeup.earliest, self._db_clock()))
        if self._in_flight:
            delay = min(delay, self.renew_every)
        if self._deadlines:
            delay = min(delay, max(0.0, min(self._deadlines.values()) - time.monotonic()))
        if delay > 0:
            if self.on_idle is not None:
                self.on_idle()
            self._pause(delay)
        self._wake.clear()
        if delay > 0.5:
            close_old_connections()

    def _on_wakeup(self, payload: str | None) -> None:
        """A schedule changed (called from the listener thread): look again at once."""
        self._due_known = False
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
