"""The threads that run the worker's callbacks (:class:`RunThreads`).

Split out of :mod:`.worker` (which re-exports ``RunThreads``) as the one part of the worker
that knows nothing of claims, leases or the database: it starts a thread per concurrent run
and reuses idle ones. The worker decides how many runs it starts (:mod:`.inflight`).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any


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
