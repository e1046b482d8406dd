"""Handing freed heap memory back to the system (issue #24 item 16).

A worker's threads (``CONCURRENCY`` callback threads, the renewal and wake-up threads)
allocate through glibc, which gives busy threads their own malloc *arenas* (up to 8 per
core). Memory a callback frees goes back to its arena, not to the system, and an arena
keeps the pages of a heap as long as one chunk near its top is in use: the resident size
of a long-running worker creeps up in steps although the Python objects it holds do not
grow (a tracemalloc run shows none growing). glibc's ``malloc_trim(0)`` returns every
free page of every arena to the system (``madvise(MADV_DONTNEED)``), whatever lies above
it. :class:`HeapTrim` calls it at most every ``HEAP_TRIM_SECONDS`` (default 60) when the
worker is about to sleep: it costs a walk of the arenas' free lists (about a millisecond
for a worker's heap) and never runs in the middle of a batch.

Elsewhere (musl, macOS, Windows) there is no ``malloc_trim``: :func:`trim` does nothing
and says so by returning False.
"""

from __future__ import annotations

import ctypes
import logging
import sys
import time
from collections.abc import Callable

logger = logging.getLogger(__name__)


def _load() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None).malloc_trim  # the process's own C library
    except (OSError, AttributeError):  # musl, a static build
        return None
    function.argtypes = [ctypes.c_size_t]
    function.restype = ctypes.c_int
    return function


_MALLOC_TRIM = _load()


def available() -> bool:
    """Whether this process can trim its heap (glibc on Linux)."""
    return _MALLOC_TRIM is not None


def trim() -> bool:
    """Return the free pages of every malloc arena to the system; whether memory was
    released (False also where there is no ``malloc_trim``). Never raises."""
    if _MALLOC_TRIM is None:
        return False
    try:
        return bool(_MALLOC_TRIM(0))
    except Exception:  # noqa: BLE001 - a failed trim costs memory, never the worker
        return False


class HeapTrim:
    """A worker duty: :meth:`maybe` trims the heap when ``every`` seconds (monotonic) have
    passed since the last trim; ``every`` 0 never trims."""

    def __init__(self, every: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.every = every if available() else 0.0
        self._clock = clock
        self._last = clock()
        self.trims = 0

    def maybe(self) -> bool:
        """Trim if due; whether it trimmed."""
        if self.every <= 0:
            return False
        now = self._clock()
        if now - self._last < self.every:
            return False
        self._last = now
        started = time.perf_counter()
        trim()
        self.trims += 1
        logger.debug("heap trimmed in %.1f ms", (time.perf_counter() - started) * 1000)
        return True
