"""One child process of the hard-timeout pool (:mod:`.isolation`): the worker's handle on
it (:class:`_Child`: start it with ``spawn``, wait for its ``ready``, kill it, ask it to
stop) and the child's own life (:func:`_child_main`: set up Django, run claims, leave when
told to or when the worker is gone).

Messages. Parent -> child: ``("run", Claim)`` | ``("stop",)``. Child -> parent:
``("ready", pid)`` | ``("outcome", fields)`` | ``("unregistered",)`` | ``("error", text)``.
A child imports this module before ``django.setup()``: nothing here may need the app
registry at import time.
"""

from __future__ import annotations

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

from .registry import registry

if TYPE_CHECKING:
    from .state import Claim

#: Longest wait for a killed or stopped child to be reaped (seconds).
REAP_SECONDS = 5.0
#: How often a child checks that its worker is still alive (seconds).
PARENT_POLL_SECONDS = 0.5

#: The fields of an :class:`~.state.Outcome` a child sends back.
_OUTCOME_FIELDS = ("status", "result", "error_type", "error_message", "terminal", "retry_after")
_spawn_lock = threading.Lock()


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
