"""Hard timeouts: run a claim in a child process that can be killed at its deadline.

A thread cannot be stopped, so a sync callback that hangs past its schedule's
``timeout_seconds`` would keep running (and keep its resources) for as long as it likes.
Claims with ``timeout_seconds`` therefore run in a small pool of long-lived child processes
(as Celery's ``time_limit`` and django-q2's ``timeout`` do): the worker's pool thread sends
the :class:`~.state.Claim` to an idle child, which runs :func:`.runner.execute` and sends
back the outcome's fields; the thread waits at most ``timeout_seconds``, then kills the
child (SIGKILL), receipts the run ``failed`` / ``Timeout`` and forgets the child. The next
claim starts a fresh one.

Children are started with the ``spawn`` method (a threaded parent is never forked), run
``django.setup()`` with the parent's settings module and database names (a test database
too), close their database connections between runs (``close_old_connections``), ignore
SIGINT/SIGTERM meant for the worker's process group (the worker decides when they stop) and
exit when the worker dies. A child that dies by itself (a segfault, ``os._exit`` in the
callback) is receipted ``failed`` / ``WorkerProcessDied``; the worker lives on.

What stays in the worker process, with only the soft, in-thread timeout: dispatched
registrations (tasks, commands: their outcome may carry an ``enqueue`` callable that must
run in the worker's completion transaction), callbacks the children do not know (registered
at run time outside a ``schedules.py``), and every run when ``HARD_TIMEOUTS`` is off or the
database is an in-memory SQLite one a child cannot open.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any, NoReturn

from django.conf import settings
from django.db import connections

from .exceptions import NotRegistered
from .registry import KIND_CALLABLE, registry

if TYPE_CHECKING:  # not at import: a child imports this module before django.setup()
    from .state import Claim, Outcome

logger = logging.getLogger(__name__)

#: Default of ``DURABLE_SCHEDULES["HARD_TIMEOUTS"]``: run callbacks that have
#: ``timeout_seconds`` in a child process that is killed at the deadline.
HARD_TIMEOUTS = True
#: Longest wait for a new child to import Django and the project (seconds); a child not
#: ready by then is killed and the run receipted ``failed`` (``IsolationStartFailed``).
STARTUP_TIMEOUT_SECONDS = 60.0
#: Extra time an async callback gets past ``timeout_seconds`` before its child is killed
#: (seconds): the child cancels it itself at ``timeout_seconds`` (``asyncio.wait_for``).
ASYNC_CANCEL_GRACE_SECONDS = 1.0
#: Longest wait for a killed or stopped child to be reaped (seconds).
REAP_SECONDS = 5.0
#: Longest wait for an idle child to leave after being asked to (seconds), then SIGKILL.
STOP_GRACE_SECONDS = 2.0
#: How often a child checks that its worker is still alive (seconds).
PARENT_POLL_SECONDS = 0.5

# Messages. Parent -> child: ("run", Claim) | ("stop",). Child -> parent: ("ready", pid) |
# ("outcome", fields) | ("unregistered",) | ("error", text).
_OUTCOME_FIELDS = ("status", "result", "error_type", "error_message", "terminal", "retry_after")
_spawn_lock = threading.Lock()


def hard_timeouts_enabled() -> bool:
    """``DURABLE_SCHEDULES["HARD_TIMEOUTS"]`` (default :data:`HARD_TIMEOUTS`), read at call
    time."""
    from .conf import app_settings

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


class _Child:
    """One child process and the parent's end of its pipe."""

    def __init__(self, number: int):
        ctx = multiprocessing.get_context("spawn")
        parent_end, child_end = ctx.Pipe(duplex=True)
        names = {alias: connections[alias].settings_dict.get("NAME") for alias in connections}
        module = getattr(settings, "SETTINGS_MODULE", None) or os.environ.get(
            "DJANGO_SETTINGS_MODULE", ""
        )
        self.conn: Connection = parent_end
        self.process = ctx.Process(
            target=_child_main,
            args=(child_end, module, names, os.getpid()),
            name=f"durable-isolated-{number}",
            daemon=False,  # a daemonic process may not start processes of its own
        )
        with _spawn_lock:  # Process.start() walks multiprocessing's set of children
            self.process.start()
        child_end.close()

    def wait_ready(self, timeout: float) -> str | None:
        """Wait up to ``timeout`` seconds for the child's ``ready``; returns ``None`` or why
        it did not come (the child is then killed)."""
        try:
            if self.conn.poll(timeout):
                message = self.conn.recv()
                if message[0] == "ready":
                    return None
                reason = str(message[1]) if message[0] == "error" else repr(message)
            else:
                reason = f"not ready after {timeout:g}s"
        except (EOFError, OSError):
            self.process.join(REAP_SECONDS)
            reason = f"it exited during start-up ({describe_exit(self.process.exitcode)})"
        self.kill()
        return reason

    def kill(self) -> None:
        """SIGKILL the child and reap it (waits at most ``REAP_SECONDS``)."""
        if self.process.is_alive():
            self.process.kill()
        self.process.join(REAP_SECONDS)
        self.conn.close()

    def ask_to_stop(self) -> None:
        """Ask an idle child to leave (it closes its connections and exits)."""
        try:
            self.conn.send(("stop",))
        except OSError:
            pass


def _outcome(claim: Claim, status: str, **fields: Any) -> Outcome:
    from .state import Outcome

    return Outcome(claim, status, **fields)


def describe_exit(code: int | None) -> str:
    """``exit code N`` or ``killed by SIGNAME`` for a process's ``exitcode``."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class IsolationPool:
    """Up to ``size`` child processes (the worker's ``concurrency``) that run claims and can
    be killed. Thread-safe: each of the worker's run threads calls :meth:`run`."""

    def __init__(self, size: int):
        self.size = size
        self._idle: list[_Child] = []
        self._count = 0  # children alive: idle, running a claim or starting
        self._started = 0
        self._busy: set[_Child] = set()
        self._closed = False
        self._cond = threading.Condition()

    def run(self, claim: Claim) -> Outcome:
        """Run ``claim`` in a child and return its outcome; never raises.

        Blocks at most :func:`longest_run_seconds`. The time limit (``timeout_seconds``;
        plus ``ASYNC_CANCEL_GRACE_SECONDS`` for an async callback, which its child cancels
        at ``timeout_seconds``) counts from the moment the child gets the claim, not from
        a child's start-up. Past it the child is killed: ``failed`` / ``Timeout``. A child
        that dies meanwhile: ``failed`` / ``WorkerProcessDied``. A callback the children do
        not know (registered at run time, not in a ``schedules.py``) runs in this thread
        instead (:func:`.runner.execute`, soft timeout).
        """
        from . import runner

        child = self._acquire(claim)
        if not isinstance(child, _Child):  # no child: the outcome says why
            return child
        timeout = float(claim.timeout_seconds or 0)
        try:
            if registry.get(claim.callback).is_async:
                timeout += ASYNC_CANCEL_GRACE_SECONDS
        except NotRegistered:  # unregistered meanwhile: the child says what it knows
            pass
        reusable = False
        try:
            try:
                child.conn.send(("run", claim))
                ready = child.conn.poll(timeout)
                message = child.conn.recv() if ready else None
            except (EOFError, OSError):
                child.process.join(REAP_SECONDS)
                died = describe_exit(child.process.exitcode)
                logger.warning(
                    "run %s #%s.%s failed: its process %s died (%s) before it returned",
                    claim.schedule_name,
                    claim.occurrence,
                    claim.attempt,
                    child.process.pid,
                    died,
                    extra={"schedule": claim.schedule_name, "occurrence": claim.occurrence},
                )
                return _outcome(
                    claim,
                    "failed",
                    error_type="WorkerProcessDied",
                    error_message=f"the run's process died ({died}) before it returned",
                )
            if message is None:
                logger.warning(
                    "run %s #%s.%s failed: it passed timeout_seconds=%g and its process %s "
                    "is killed",
                    claim.schedule_name,
                    claim.occurrence,
                    claim.attempt,
                    claim.timeout_seconds,
                    child.process.pid,
                    extra={"schedule": claim.schedule_name, "occurrence": claim.occurrence},
                )
                return _outcome(
                    claim,
                    "failed",
                    error_type="Timeout",
                    error_message=f"stopped after timeout_seconds={claim.timeout_seconds:g}: "
                    "its process was killed",
                )
            reusable = True
            if message[0] == "outcome":
                return _outcome(claim, **message[1])
            if message[0] == "unregistered":
                logger.warning(
                    "callback %r is not registered in a fresh process (registered outside "
                    "a schedules.py?): it runs in the worker, its timeout cannot stop it",
                    claim.callback,
                    extra={"schedule": claim.schedule_name, "occurrence": claim.occurrence},
                )
                return runner.execute(claim)
            reusable = False
            return _outcome(
                claim, "failed", error_type="IsolationError", error_message=str(message)[:1000]
            )
        finally:
            self._release(child, reusable)

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
            child.process.kill()
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

    def _acquire(self, claim: Claim) -> _Child | Outcome:
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
            child = _Child(number)
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

    def _release(self, child: _Child, reusable: bool) -> None:
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
            child = _Child(number)
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


# ---------------------------------------------------------------------------------------
# The child
# ---------------------------------------------------------------------------------------


def _child_main(conn: Connection, module: str, names: dict[str, Any], parent_pid: int) -> None:
    """A child's whole life: set up Django, then run claims until told to stop or the
    worker is gone. Leaves with ``os._exit`` so a thread a callback leaked cannot keep it
    alive."""
    # Signals sent to the worker's process group (Ctrl-C, a service manager's SIGTERM) are
    # the worker's to handle: it drains, then stops its children. A no-op handler, not
    # SIG_IGN, so processes a callback starts get the default dispositions back.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: None)
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True).start()
    try:
        if module:
            os.environ["DJANGO_SETTINGS_MODULE"] = module
        import django

        for alias, name in names.items():  # e.g. the test database pytest-django created
            if alias in settings.DATABASES and name:
                settings.DATABASES[alias]["NAME"] = name
        django.setup()
        from . import runner
    except BaseException as exc:  # noqa: BLE001 - report why, then leave
        _send(conn, ("error", f"django.setup() failed: {type(exc).__name__}: {exc}"[:1000]))
        _leave(1)
    _send(conn, ("ready", os.getpid()))
    from django.db import close_old_connections

    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):  # the worker is gone
            _leave(0)
        if message[0] != "run":
            _leave(0)
        claim: Claim = message[1]
        if claim.callback not in registry:
            _send(conn, ("unregistered",))
            continue
        outcome = runner.execute(claim)
        close_old_connections()
        fields = {name: getattr(outcome, name) for name in _OUTCOME_FIELDS}
        if not _send(conn, ("outcome", fields)):
            fields.update(result=None, error_message="(the outcome could not be sent back)")
            _send(conn, ("outcome", fields))


def _send(conn: Connection, message: tuple[Any, ...]) -> bool:
    """Send ``message`` to the worker; ``False`` if it cannot be pickled. Leaves if the
    worker is gone."""
    try:
        conn.send(message)
    except OSError:  # the worker is gone
        _leave(0)
    except Exception:  # noqa: BLE001 - an unpicklable value (nothing was written)
        return False
    return True


def _watch_parent(parent_pid: int) -> None:
    """Leave as soon as the worker is gone (this process was re-parented), even while a
    callback runs. No flushing: the main thread may hold a stream's lock."""
    while os.getppid() == parent_pid:
        time.sleep(PARENT_POLL_SECONDS)
    os._exit(0)


def _leave(code: int) -> NoReturn:
    """Close this thread's connections, flush the streams and exit at once."""
    try:
        connections.close_all()
    except Exception:  # noqa: BLE001 - leaving anyway
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass
    os._exit(code)
