"""The threads that run the worker's callbacks (:class:`RunThreads`).

The one part of the worker that knows nothing of claims, leases or the database: it starts a
thread per concurrent run and reuses idle ones. The worker decides how many runs it starts
(:mod:`.inflight`).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import CancelledError, InvalidStateError
from typing import Any, Generic, TypeVar

# The name it had before the move into worker/: a LOGGING setting may name it.
logger = logging.getLogger("django_durable_schedules.threads")

_T = TypeVar("_T")
_PENDING, _RUNNING, _FINISHED = "pending", "running", "finished"
_CANCELLED, _NOTIFIED = "cancelled", "cancelled and notified"  # as Future's two states
_CANCELLED_STATES = (_CANCELLED, _NOTIFIED)
# One lock for every RunFuture: each holds it for a few attribute writes only.
_LOCK = threading.Lock()


class RunFuture(Generic[_T]):
    """The part of ``concurrent.futures.Future`` a run needs, without a ``Condition`` of its
    own (whose making was about 4% of a no-op run's worker CPU: two per run).

    States as ``Future``'s: pending, running (``set_running_or_notify_cancel``), cancelled
    (``cancel`` while pending), finished (``set_result`` / ``set_exception``). Done
    callbacks run once done (at once if it already is), as ``Future`` runs them: an
    exception a callback raises is logged, never raised. Nothing waits for a result: it is
    read (``result``, ``exception``) by the done callbacks only, so there is no blocking
    wait, and ``result`` or ``exception`` of a future not done raises
    ``InvalidStateError``."""

    __slots__ = ("_state", "_result", "_exception", "_callbacks")

    def __init__(self) -> None:
        self._state = _PENDING
        self._result: _T | None = None
        self._exception: BaseException | None = None
        self._callbacks: list[Callable[[RunFuture[_T]], object]] = []

    def cancel(self) -> bool:
        """Cancel the run if it has not started; True when it is (now) cancelled."""
        # States only move forward: not pending now means cancelled, running or finished.
        return self.cancel_pending() or self.cancelled()

    def cancel_pending(self) -> bool:
        """Cancel the run if it has not started and nobody cancelled it before: True only
        for the one call that cancelled it (``cancel`` says True again afterwards), so
        that a claim handed back unrun gets exactly one ``released`` outcome."""
        with _LOCK:
            if self._state != _PENDING:
                return False
            self._state = _CANCELLED
        self._invoke_callbacks()
        return True

    def cancelled(self) -> bool:
        return self._state in _CANCELLED_STATES

    def running(self) -> bool:
        return self._state == _RUNNING

    def done(self) -> bool:
        return self._state in (_CANCELLED, _NOTIFIED, _FINISHED)

    def set_running_or_notify_cancel(self) -> bool:
        """Mark the run started (True), or say it was cancelled (False)."""
        with _LOCK:
            if self._state == _CANCELLED:
                self._state = _NOTIFIED
                return False
            if self._state != _PENDING:
                raise RuntimeError(f"run future in unexpected state: {self._state}")
            self._state = _RUNNING
            return True

    def set_result(self, result: _T) -> None:
        self._finish(result, None)

    def set_exception(self, exception: BaseException) -> None:
        self._finish(None, exception)

    def _finish(self, result: _T | None, exception: BaseException | None) -> None:
        with _LOCK:
            if self._state in (_CANCELLED, _NOTIFIED, _FINISHED):
                raise InvalidStateError(f"{self._state}: {self!r}")
            self._result, self._exception, self._state = result, exception, _FINISHED
        self._invoke_callbacks()

    def result(self) -> _T:
        if self._state in _CANCELLED_STATES:
            raise CancelledError()
        if self._state != _FINISHED:
            raise InvalidStateError("the run has not finished")
        if self._exception is not None:
            raise self._exception
        return self._result  # type: ignore[return-value]

    def exception(self) -> BaseException | None:
        if self._state in _CANCELLED_STATES:
            raise CancelledError()
        if self._state != _FINISHED:
            raise InvalidStateError("the run has not finished")
        return self._exception

    def add_done_callback(self, fn: Callable[[RunFuture[_T]], object]) -> None:
        with _LOCK:
            if self._state not in (_CANCELLED, _NOTIFIED, _FINISHED):
                self._callbacks.append(fn)
                return
        self._call(fn)

    def _invoke_callbacks(self) -> None:
        with _LOCK:
            callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            self._call(fn)

    def _call(self, fn: Callable[[RunFuture[_T]], object]) -> None:
        try:
            fn(self)
        except Exception:
            logger.exception("exception calling callback for %r", self)


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
        self._work: queue.SimpleQueue[tuple[RunFuture[Any], Callable[[Any], Any], Any] | None] = (
            queue.SimpleQueue()
        )
        self._lock = threading.Lock()
        self._idle = 0  # threads waiting for work, less the work already queued for them
        self._threads = 0

    def submit(self, fn: Callable[[Any], Any], arg: Any) -> RunFuture[Any]:
        """Run ``fn(arg)`` in a thread; the future has its result (or exception)."""
        future: RunFuture[Any] = RunFuture()
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
