"""Hard timeouts: run a claim in a child process that can be killed at its deadline.

A thread cannot be stopped, so a sync callback that hangs past its schedule's
``timeout_seconds`` would keep running (and keep its resources) for as long as it likes.
Claims with ``timeout_seconds`` therefore run in a small pool of long-lived child processes
(as Celery's ``time_limit`` and django-q2's ``timeout`` do): the worker's pool thread sends
the :class:`~.state.Claim` to an idle child, which runs :func:`.runner.execute` and sends
back the outcome's fields (bounded there, so any value can be sent); the thread waits at
most ``timeout_seconds``, then kills the child and its process group (SIGKILL), receipts
the run ``failed`` / ``Timeout`` and forgets the child. The next claim starts a fresh one.
A run of an ``overlap_policy`` replace schedule still running when the schedule's next slot
comes due is killed the same way, and reported ``replaced`` (:func:`.stops.replaced`).

Children are started with the ``spawn`` method (a threaded parent is never forked) by one
long-lived thread, lead their own process groups, run ``django.setup()`` with the parent's
settings module and database names (a test database too), close their database
connections between runs (``close_old_connections``), ignore SIGINT/SIGTERM (the worker
decides when they stop) and die with the worker (Linux: ``PR_SET_PDEATHSIG``, even while
stuck in C; elsewhere a watching thread: see :mod:`.isolation_child`). A child that dies by
itself (a segfault, ``os._exit`` in the callback) is receipted at once ``failed`` /
``WorkerProcessDied``, its group killed; the worker lives on. A child does not start a
claim whose lease has lapsed by the worker's estimate of the database clock (the worker
was stalled): ``released``.

What stays in the worker process, with only the soft, in-thread timeout: dispatched
registrations (tasks, commands: their outcome may carry an ``enqueue`` callable that must
run in the worker's completion transaction), callbacks the children do not know (registered
at run time outside a ``schedules.py``), and every run when ``HARD_TIMEOUTS`` is off or the
database is an in-memory SQLite one a child cannot open.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import connections

from ...exceptions import NotRegistered
from ...registry import KIND_CALLABLE, registry
from . import stops
from .isolation_child import REAP_SECONDS, Child

if TYPE_CHECKING:  # not at import: .state needs the app registry, which a module may not
    from ...state import Claim, Outcome

# The name it had before the move into worker/: a LOGGING setting may name it.
logger = logging.getLogger("django_durable_schedules.isolation")

#: Default of ``DURABLE_SCHEDULES["HARD_TIMEOUTS"]``: run callbacks that have
#: ``timeout_seconds`` in a child process that is killed at the deadline.
HARD_TIMEOUTS = True
#: Longest wait for a new child to import Django and the project (seconds); a child not
#: ready by then is killed and the run receipted ``failed`` (``IsolationStartFailed``).
STARTUP_TIMEOUT_SECONDS = 60.0
#: Extra time an async callback gets past ``timeout_seconds`` before its child is killed
#: (seconds): the child cancels it itself at ``timeout_seconds`` (``asyncio.wait_for``).
ASYNC_CANCEL_GRACE_SECONDS = 1.0
#: Longest wait for an idle child to leave after being asked to (seconds), then SIGKILL.
STOP_GRACE_SECONDS = 2.0
#: How often a run's thread reads its lease's deadline again at the longest (seconds): a
#: child whose lease lapses unrenewed is killed (``IsolationPool._wait_within_lease``).
LEASE_POLL_SECONDS = 1.0


def hard_timeouts_enabled() -> bool:
    """``DURABLE_SCHEDULES["HARD_TIMEOUTS"]`` (default :data:`HARD_TIMEOUTS`), read at call
    time."""
    from ...conf import app_settings

    return app_settings.HARD_TIMEOUTS


def unavailable_reason() -> str | None:
    """Why children cannot run claims in this process (``None``: they can): settings made
    with ``settings.configure()`` (no module a child could import) or an in-memory SQLite
    database (a child would open an empty one of its own)."""
    if not os.environ.get("DJANGO_SETTINGS_MODULE") and not getattr(
        settings, "SETTINGS_MODULE", None
    ):
        return "settings were not loaded from a module"
    for alias in connections:
        conn = connections[alias]
        name = str(conn.settings_dict.get("NAME") or "")
        if conn.vendor == "sqlite" and (name in ("", ":memory:") or "mode=memory" in name):
            return f"database {alias!r} is an in-memory SQLite database"
    return None


def isolates(claim: Claim) -> bool:
    """Whether ``claim`` runs in a child process: it has ``timeout_seconds``, hard timeouts
    are on, and its callback is a registered plain callable (sync or async)."""
    if not claim.timeout_seconds or not hard_timeouts_enabled():
        return False
    try:
        registration = registry.get(claim.callback)
    except NotRegistered:  # runner.execute receipts it degraded, in the worker
        return False
    return registration.kind == KIND_CALLABLE


def longest_run_seconds(claim: Claim) -> float:
    """An upper bound of how long :meth:`IsolationPool.run` takes for ``claim`` (seconds):
    waiting for a child (at most a start-up), the callback's time limit, the grace of an
    async callback and the reaping of a killed child. The worker's in-thread backstop uses
    it."""
    return (
        STARTUP_TIMEOUT_SECONDS
        + float(claim.timeout_seconds or 0)
        + ASYNC_CANCEL_GRACE_SECONDS
        + 2 * REAP_SECONDS
    )


def _outcome(claim: Claim, status: str, **fields: Any) -> Outcome:
    from ...state import Outcome

    return Outcome(claim, status, **fields)


class IsolationPool:
    """Up to ``size`` child processes (the worker's ``concurrency``) that run claims and can
    be killed. Thread-safe: each of the worker's run threads calls :meth:`run`."""

    def __init__(self, size: int):
        self.size = size
        self._idle: list[Child] = []
        self._count = 0  # children alive: idle, running a claim or starting
        self._started = 0
        self._busy: set[Child] = set()
        # lease token -> the child running that claim; token -> why stop() killed it
        self._running: dict[uuid.UUID, Child] = {}
        self._stopped: dict[uuid.UUID, str] = {}
        self._closed = False
        self._cond = threading.Condition()

    def run(
        self,
        claim: Claim,
        lease_deadline: Callable[[], float | None] | None = None,
        reading: tuple[datetime, float] | None = None,
        stop_at: float | None = None,
    ) -> Outcome:
        """Run ``claim`` in a child and return its outcome; never raises.

        Blocks at most :func:`longest_run_seconds`. The time limit (``timeout_seconds``;
        plus ``ASYNC_CANCEL_GRACE_SECONDS`` for an async callback, which its child cancels
        at ``timeout_seconds``) counts from the moment the child gets the claim, not from
        a child's start-up. Past it the child and its process group are killed:
        ``failed`` / ``Timeout``. A child that dies meanwhile (even while a process it
        started holds its pipe open): ``failed`` / ``WorkerProcessDied`` at once, with its
        exit code or signal, its process group killed. A callback the children do not know
        (registered at run time, not in a ``schedules.py``) runs in this thread instead
        (:func:`.runner.execute`, soft timeout).

        ``lease_deadline``, called when the claim is handed to the child, gives the
        ``time.monotonic()`` instant its lease lapses (``None``: unknown). The child does
        not start a claim past it (the worker was stalled: its lease may be another
        worker's by now): ``released``, nothing ran.

        ``reading``: the worker's last database clock reading (:attr:`.clock.WorkerClock.reading`),
        from which the child stamps the outcome's ``started_at``; a run whose child is killed
        or dies gets the instant the claim was handed to it.
        """
        from ..clock import estimator
        from . import runner

        clock = estimator(reading)

        child = self._acquire(claim)
        if not isinstance(child, Child):  # no child: the outcome says why
            return child
        timeout = float(claim.timeout_seconds or 0)
        try:
            if registry.get(claim.callback).is_async:
                timeout += ASYNC_CANCEL_GRACE_SECONDS
        except NotRegistered:  # unregistered meanwhile: the child says what it knows
            pass
        reusable = False
        token = claim.lease_token
        with self._cond:
            self._running[token] = child
        try:
            try:
                started_at = clock()
                deadline = lease_deadline() if lease_deadline else None
                sent = time.monotonic()
                child.conn.send(("run", claim, deadline, reading))
                time_limit_at = sent + timeout
                wait_until = time_limit_at
                if stop_at is not None:  # overlap_policy replace: stopped at the next slot
                    wait_until = min(time_limit_at, max(sent, stop_at))
                # A lease that lapsed before the send: the child refuses the claim itself.
                fenced = lease_deadline if deadline is not None and deadline > sent else None
                readable = self._wait_within_lease(child, token, wait_until, fenced)
                if readable is False:  # it died without a word
                    raise EOFError
                message = child.conn.recv() if readable else None
            except (EOFError, OSError):
                child.kill()
                why = self._stopped.get(token)
                if why is not None:  # stop(): the lease was lost
                    return stops.lease_lost(claim, child.process.pid, started_at, why)
                return stops.died(claim, child.process.pid, child.process.exitcode, started_at)
            if message is None:
                # Killed with its process group by _release (SIGKILL: children ignore SIGTERM).
                if stop_at is not None and stop_at < time_limit_at:
                    return stops.replaced(claim, child.process.pid, started_at)
                return stops.timed_out(claim, child.process.pid, started_at)
            reusable = token not in self._stopped  # killed just after it reported
            if message[0] == "outcome":
                return _outcome(claim, **message[1])
            if message[0] == "stale":
                return stops.stale(claim, message[1])
            if message[0] == "unregistered":
                logger.warning(
                    "callback %r is not registered in a fresh process (registered outside "
                    "a schedules.py?): it runs in the worker, its timeout cannot stop it",
                    claim.callback,
                    extra={"schedule": claim.schedule_name, "occurrence": claim.occurrence},
                )
                return runner.execute(claim, clock)
            reusable = False
            return _outcome(
                claim, "failed", error_type="IsolationError", error_message=str(message)[:1000]
            )
        finally:
            with self._cond:
                self._running.pop(token, None)
                self._stopped.pop(token, None)
            self._release(child, reusable)

    def _wait_within_lease(
        self,
        child: Child,
        token: uuid.UUID,
        until: float,
        lease_deadline: Callable[[], float | None] | None,
    ) -> bool | None:
        """:meth:`.Child.wait_message` until ``until`` (``time.monotonic()``), stopping the
        child (:meth:`stop`) once the lease of ``token`` lapses unrenewed: ``lease_deadline()``
        is read again at each lapse it gave and at least every ``LEASE_POLL_SECONDS`` (a
        renewal moves it later; a lease the worker found lost moves it to the past).

        The worker renews from its main thread; while the database is unreachable or a
        renewal hangs, nothing renews, and a run whose lease lapsed may be recovered and
        run again by another worker. A worker resumed after a freeze (SIGSTOP) kills it
        here first too, before its next renewal finds the lease lost
        (:func:`.lost_leases.stop_lost`). The deadline errs early
        (:meth:`.inflight.RunsInFlight.renew`), so the child is gone before the database's
        clock lets anyone recover the lease. Returns what ``wait_message`` returned."""
        while True:
            now = time.monotonic()
            lapse = lease_deadline() if lease_deadline is not None else None
            if lapse is not None and lapse <= now:
                self.stop(token, "its lease lapsed unrenewed (the worker was stalled or "
                          "could not reach the database)")  # fmt: skip
                readable = child.wait_message(REAP_SECONDS)
                return False if readable is None else readable  # run() reads why: _stopped
            step_end = until if lapse is None else min(until, lapse, now + LEASE_POLL_SECONDS)
            readable = child.wait_message(max(0.0, step_end - now))
            if readable is not None or step_end >= until:
                return readable

    def stop(self, token: uuid.UUID, reason: str) -> bool:
        """Kill (SIGKILL, with its process group) the child running the claim of lease
        ``token`` now, from any thread; its :meth:`run` returns at once ``failed`` /
        ``LeaseLost`` with ``reason`` (:func:`.stops.lease_lost`) - or the outcome the
        child had already sent. ``False`` (nothing done): no child runs that claim (not
        handed to one yet, or finished)."""
        with self._cond:
            child = self._running.get(token)
            if child is None:
                return False
            self._stopped.setdefault(token, reason)
        child.kill_group()
        return True

    def close(self, force: bool = False) -> None:
        """Stop every child and refuse new runs. Idle children are asked to leave (then
        killed after ``STOP_GRACE_SECONDS``); children still running a claim are killed at
        once, and so is every child with ``force`` (the worker's second signal), which
        never waits longer than ``REAP_SECONDS`` per child."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            busy = list(self._busy)
            self._cond.notify_all()
        for child in busy:
            child.kill_group()
        if not force:
            for child in idle:  # all asked first: they leave side by side
                child.ask_to_stop()
            deadline = time.monotonic() + STOP_GRACE_SECONDS
            for child in idle:
                child.process.join(max(0.0, deadline - time.monotonic()))
        for child in idle:
            child.kill()  # reaps (SIGKILL first if still alive)
        for child in busy:  # their run threads close the pipes (they may be reading them)
            child.process.join(REAP_SECONDS)

    def pids(self) -> list[int]:
        """Process ids of the children alive now (tests, diagnostics)."""
        with self._cond:
            children = [*self._idle, *self._busy]
        return [c.process.pid for c in children if c.process.pid is not None]

    # -- internals -------------------------------------------------------------------

    def _acquire(self, claim: Claim) -> Child | Outcome:
        """An idle child, or a new one if fewer than ``size`` are alive; waits (at most
        ``STARTUP_TIMEOUT_SECONDS``) for one to come free otherwise."""
        deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
        with self._cond:
            while True:
                if self._closed:
                    return _outcome(claim, "released")
                if self._idle:
                    child = self._idle.pop()
                    self._busy.add(child)
                    return child
                if self._count < self.size:
                    self._count += 1
                    self._started += 1
                    number = self._started
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return _outcome(
                        claim,
                        "failed",
                        error_type="IsolationStartFailed",
                        error_message=f"no process came free within {STARTUP_TIMEOUT_SECONDS:g}s",
                    )
                self._cond.wait(remaining)
        try:
            child = Child(number)
        except Exception as exc:  # noqa: BLE001 - cannot start a process: a failed run
            self._forget()
            return _outcome(
                claim,
                "failed",
                error_type="IsolationStartFailed",
                error_message=f"cannot start a process for the run: {exc!r}"[:1000],
            )
        with self._cond:
            self._busy.add(child)
        reason = child.wait_ready(STARTUP_TIMEOUT_SECONDS)
        if reason is not None:
            with self._cond:
                self._busy.discard(child)
            self._forget()
            logger.error("a process for runs with timeout_seconds failed to start: %s", reason)
            return _outcome(
                claim,
                "failed",
                error_type="IsolationStartFailed",
                error_message=f"the run's process did not start: {reason}"[:1000],
            )
        return child

    def _release(self, child: Child, reusable: bool) -> None:
        with self._cond:
            self._busy.discard(child)
            closed = self._closed
            if reusable and not closed and child.process.is_alive():
                self._idle.append(child)
                self._cond.notify()
                return
        child.kill()  # timed out, died or closed meanwhile: never reused
        self._forget()
        if not closed:  # the next run need not wait for a start-up
            threading.Thread(
                target=self._replace, name="durable-isolation-start", daemon=True
            ).start()

    def _replace(self) -> None:
        """Start a child in the background and add it to the idle ones (after a kill)."""
        with self._cond:
            if self._closed or self._count >= self.size:
                return
            self._count += 1
            self._started += 1
            number = self._started
        try:
            child = Child(number)
        except Exception:  # noqa: BLE001 - the next run tries again and says why
            self._forget()
            return
        with self._cond:
            self._busy.add(child)  # so that close() kills it
        reason = child.wait_ready(STARTUP_TIMEOUT_SECONDS)
        with self._cond:
            self._busy.discard(child)
            if reason is None and not self._closed:
                self._idle.append(child)
                self._cond.notify()
                return
        child.kill()
        self._forget()

    def _forget(self) -> None:
        with self._cond:
            self._count -= 1
            self._cond.notify()
