"""One child process of the hard-timeout pool (:mod:`.isolation`): the worker's handle on
it (:class:`Child`: start it with ``spawn``, wait for its ``ready``, kill it and its
process group, ask it to stop) and the child's own life (:func:`_child_main`: set up
Django, run claims, leave when told to or when the worker is gone).

How a child ends with its worker. Linux: the child asks the kernel for ``SIGKILL`` when
the thread that started it ends (``prctl(PR_SET_PDEATHSIG)``), so a child stuck in a C
call that holds the GIL dies with its worker too; every child is started by one
long-lived thread (:func:`start_process`), since the kernel watches that thread, not the
process. Everywhere: a thread of the child polls its parent pid (needs the GIL). Each child
leads its own process group, so a kill takes what its callbacks started with it.

Messages. Parent -> child: ``("run", Claim, lease_deadline, reading)`` | ``("stop",)``,
where ``lease_deadline`` is the ``time.monotonic()`` instant the claim's lease lapses by the
worker's estimate of the database clock (or ``None``) and ``reading`` the worker's last
database clock reading (``(datetime, monotonic)`` or ``None``: the run's ``started_at``); ``time.monotonic()`` is the
host's monotonic clock (``CLOCK_MONOTONIC``), the same in every process. Child -> parent:
``("ready", pid)`` | ``("outcome", fields)`` | ``("stale", seconds_late)`` |
``("unregistered",)`` | ``("error", text)``. A child imports this module before
``django.setup()``: nothing here may need the app registry at import time.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import queue
import signal
import sys
import threading
import time
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING, Any, NoReturn

from django.conf import settings
from django.db import connections

from ...registry import registry

if TYPE_CHECKING:
    from ...state import Claim

#: Longest wait for a killed or stopped child to be reaped (seconds).
REAP_SECONDS = 5.0
#: How often a child checks that its worker is still alive (seconds).
PARENT_POLL_SECONDS = 0.5
#: How often the worker checks that a child running a claim is still alive where it has
#: no pidfd to wait on (seconds).
DEATH_POLL_SECONDS = 0.5

#: The fields of an :class:`~.state.Outcome` a child sends back.
_OUTCOME_FIELDS = (
    "status",
    "result",
    "error_type",
    "error_message",
    "terminal",
    "retry_after",
    "started_at",
    "traceback",
)
#: ``prctl`` option: the signal a process gets when the thread that started it ends (Linux).
_PR_SET_PDEATHSIG = 1


class _Starter:
    """The one thread that starts every child process (:func:`start_process`), for the
    life of the worker process: ``PR_SET_PDEATHSIG`` fires when the *thread* that forked
    a process ends, so a child started by a run thread that ends later would be killed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._requests: queue.SimpleQueue[tuple[BaseProcess, list[BaseException], threading.Event]]
        self._requests = queue.SimpleQueue()

    def start(self, process: BaseProcess) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._serve, name="durable-isolation-starter", daemon=True
                )
                self._thread.start()
        errors: list[BaseException] = []
        done = threading.Event()
        self._requests.put((process, errors, done))
        done.wait()
        if errors:
            raise errors[0]

    def _serve(self) -> None:
        while True:
            process, errors, done = self._requests.get()
            try:
                process.start()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                errors.append(exc)
            finally:
                done.set()


_starter = _Starter()


def start_process(process: BaseProcess) -> None:
    """``process.start()`` in the one long-lived thread that starts every child (so that
    ``PR_SET_PDEATHSIG`` ties the child to the worker process, not to a passing thread);
    blocks until it has started and re-raises what ``start()`` raised."""
    _starter.start(process)


class Child:
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
        start_process(self.process)
        child_end.close()
        # Its end, seen by the kernel (Linux 5.3+): readable once it has exited, whoever
        # else holds its pipes. Elsewhere the loop of wait_message polls its exit code.
        self.pidfd: int | None = None
        if hasattr(os, "pidfd_open") and self.process.pid is not None:
            try:
                self.pidfd = os.pidfd_open(self.process.pid)
            except OSError:
                pass

    def wait_message(self, timeout: float) -> bool | None:
        """Wait up to ``timeout`` seconds for a message from the child or for its end.
        ``True``: a message can be read (``conn.recv()``); ``False``: the child has exited
        without one (its process group is killed); ``None``: neither came in time.

        The end of the child is seen at once, by its pidfd (Linux) or its exit code (polled
        every ``DEATH_POLL_SECONDS``), even while a process it started holds copies of its
        pipe and of ``Process.sentinel`` (``os.system("... &")``, ``close_fds=False``)."""
        deadline = time.monotonic() + timeout
        handles: list[Any] = [self.conn, self.process.sentinel]
        if self.pidfd is not None:
            handles.append(self.pidfd)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready = wait(handles, min(remaining, DEATH_POLL_SECONDS))
            if self.conn in ready and not (len(ready) > 1 or self.exited()):
                return True
            if ready or self.exited():
                # Dead: what it left in its group goes too, and with it those copies of
                # its pipe, so reading what it sent before it died cannot block.
                self.kill_group()
                return self.conn.poll(0)

    def exited(self) -> bool:
        """Whether the child has exited (reaps it if so)."""
        return self.process.exitcode is not None

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
            self.kill()
            return f"it exited during start-up ({describe_exit(self.process.exitcode)})"
        self.kill()
        return reason

    def kill_group(self) -> None:
        """SIGKILL the child and every process of its process group (what its callbacks
        started and left there); does not reap it. Harmless if they are gone."""
        pid = self.process.pid
        if pid is not None and hasattr(os, "killpg"):  # POSIX
            try:
                os.killpg(pid, signal.SIGKILL)  # its group: itself and its descendants
            except OSError:  # no such group: gone, or not led by it yet (start-up)
                pass
        if self.process.exitcode is None:
            self.process.kill()

    def kill(self) -> None:
        """SIGKILL the child and its process group (:meth:`kill_group`) and reap it (waits
        at most ``REAP_SECONDS``)."""
        self.kill_group()
        self.process.join(REAP_SECONDS)
        self.conn.close()
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None

    def ask_to_stop(self) -> None:
        """Ask an idle child to leave (it closes its connections and exits)."""
        try:
            self.conn.send(("stop",))
        except OSError:
            pass


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


def die_with_parent(parent_pid: int) -> None:
    """Tie this process's life to its parent's, first thing in a child. Linux: the kernel
    sends ``SIGKILL`` when the thread that started it ends (``prctl(PR_SET_PDEATHSIG)``,
    through ``ctypes``; it works while this process is stuck in C holding the GIL). Then
    leave at once if the parent is already gone (``os.getppid()`` is no longer
    ``parent_pid``: it died before the request was made). Elsewhere only the second part:
    :func:`_watch_parent` polls from a thread."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):  # no libc prctl: the watch thread remains
            pass
    if os.getppid() != parent_pid:
        os._exit(0)


def lead_own_group() -> None:
    """Make this process the leader of a process group of its own (``setpgid(0, 0)``), so
    that the worker can kill it with every process its callbacks start (``killpg``)."""
    try:
        os.setpgid(0, 0)
    except (OSError, AttributeError):  # a session leader already leads its group; Windows
        pass


def _child_main(conn: Connection, module: str, names: dict[str, Any], parent_pid: int) -> None:
    """A child's whole life: set up Django, then run claims until told to stop or the
    worker is gone. Leaves with ``os._exit`` so a thread a callback leaked cannot keep it
    alive."""
    die_with_parent(parent_pid)
    lead_own_group()
    # Its own process group already keeps Ctrl-C at a terminal away; a SIGINT/SIGTERM sent
    # to it by pid is ignored too: the worker decides when it stops (it drains, then stops
    # its children). A no-op handler, not SIG_IGN, so processes a callback starts get the
    # default dispositions back.
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

    from ...state import bound_outcome
    from ..clock import estimator

    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):  # the worker is gone
            _leave(0)
        if message[0] != "run":
            _leave(0)
        claim: Claim = message[1]
        deadline: float | None = message[2]
        reading = message[3] if len(message) > 3 else None
        if deadline is not None and time.monotonic() >= deadline:
            # Its lease lapsed before it could start here (the worker was stalled while
            # this process started or the claim waited): another worker may run it now.
            _send(conn, ("stale", time.monotonic() - deadline))
            continue
        if claim.callback not in registry:
            _send(conn, ("unregistered",))
            continue
        # Bounded here (as the state machine would): any value a callback returned or
        # raised becomes plain data that can be sent back.
        outcome = bound_outcome(runner.execute(claim, estimator(reading)))
        close_old_connections()
        fields = {name: getattr(outcome, name) for name in _OUTCOME_FIELDS}
        if not _send(conn, ("outcome", fields)):
            _send(conn, ("outcome", _plain_fields(fields)))


def _plain_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` of an outcome that could not be sent back, cut down to values that can:
    its status, error type and terminal flag kept, no result, no retry delay, a message
    saying so."""
    status = fields.get("status")
    error_type = fields.get("error_type")
    return {
        "status": str.__str__(status) if isinstance(status, str) else "failed",
        "result": None,
        "error_type": str.__str__(error_type)[:200] if isinstance(error_type, str) else "",
        "error_message": "(the outcome could not be sent back from the run's process)",
        "terminal": fields.get("terminal") is True,
        "retry_after": None,
        "started_at": fields.get("started_at"),  # a datetime: it pickles
        "traceback": None,
    }


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
