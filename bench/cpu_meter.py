"""CPU per minute for the long benches (bench/sustained.py): the workers' CPU, their
PostgreSQL backends' and the whole machine's, between two samples, from ``/proc``.

A backend that appeared since the last sample counts from zero (a prune's or a worker's
new connection); one that ended since loses the CPU it used (the workers' connections
come and go between claims when ``CONN_MAX_AGE`` is 0, as by default: the backends'
figure is a lower bound, often far below). The machine's busy seconds (``/proc/stat``,
every core; idle and iowait not busy) are the upper bound: the workers, the database and
everything else (the bench's prune and vacuum; on a busy machine, the rest).
``machine_ms_per_run`` is the engine's CPU per run on an otherwise idle machine."""

from __future__ import annotations

import os
import time
from typing import Any

import common


class CpuMeter:
    """CPU seconds between calls of :meth:`sample` (the first call starts the count)."""

    def __init__(self) -> None:
        self.workers: dict[int, float] = {}
        self.backends: dict[int, float] = {}
        self.machine = (time.monotonic(), common.machine_busy_seconds())

    def _delta(self, seen: dict[int, float], pids: list[int]) -> float:
        now = {pid: common.cpu_seconds([pid]) for pid in pids}
        used = sum(max(0.0, now[pid] - seen.get(pid, 0.0)) for pid in pids)
        seen.clear()
        seen.update(now)
        return used

    def sample(self, conn: Any, worker_pids: list[int], runs: int | None = None) -> dict[str, Any]:
        """Since the last call: ``workers_s``, ``backends_s`` (the database's client
        backends but the bench's own), ``machine_s`` (busy seconds of all cores),
        ``machine_busy`` (0-1: of all the cores' time) and, given ``runs``,
        ``workers_ms_per_run`` and ``machine_ms_per_run``."""
        workers = self._delta(self.workers, worker_pids)
        backends = self._delta(self.backends, common.worker_backends(conn))
        at, busy = time.monotonic(), common.machine_busy_seconds()
        used = busy - self.machine[1]
        share = used / max(1e-9, (at - self.machine[0]) * (os.cpu_count() or 1))
        self.machine = (at, busy)
        out: dict[str, Any] = {
            "workers_s": round(workers, 2),
            "backends_s": round(backends, 2),
            "machine_s": round(used, 2),
            "machine_busy": round(share, 3),
        }
        if runs:
            out["workers_ms_per_run"] = round(workers * 1000 / runs, 3)
            out["machine_ms_per_run"] = round(used * 1000 / runs, 3)
        return out
