"""What every peer's side of ``bench/herd.py --peers`` shares (runs inside the peer's own
venv, so it imports nothing of the project nor of the bench): the no-op job's record of
its start, the settings the bench passes through the environment, and the ready marker.

Environment (set by ``bench/herd_peer_run.py``): ``HERD_URL`` the peer's PostgreSQL URL
(its own database), ``HERD_N`` the number of cron jobs, ``HERD_OUT`` a directory for the
start records, ``HERD_WORKER`` this process's index (``setup`` for the setup step).
"""

from __future__ import annotations

import os
import time
from datetime import datetime
from pathlib import Path

URL = os.environ.get("HERD_URL", "")
N = int(os.environ.get("HERD_N", "0"))
OUT = Path(os.environ.get("HERD_OUT", "."))
WORKER = os.environ.get("HERD_WORKER", "setup")
CRON = "* * * * *"

_fd: int | None = None
_fd_pid: int | None = None


def record(job: int, slot: datetime | float | None = None) -> None:
    """Append ``"<job> <slot epoch s or -1> <start epoch s>\\n"`` to this process's start
    file (one ``O_APPEND`` write, unbuffered: a SIGKILL loses no written line). ``slot``
    is the scheduled instant when the peer hands it to the job, else ``None`` (the bench
    then takes the minute the start falls in). Thread- and fork-safe."""
    started = time.time()
    global _fd, _fd_pid
    if _fd is None or _fd_pid != os.getpid():
        _fd_pid = os.getpid()
        _fd = os.open(
            OUT / f"starts-{WORKER}-{_fd_pid}.txt", os.O_WRONLY | os.O_CREAT | os.O_APPEND
        )
    if isinstance(slot, datetime):
        slot_s = slot.timestamp()
    else:
        slot_s = -1.0 if slot is None else float(slot)
    os.write(_fd, f"{job} {slot_s:.6f} {started:.6f}\n".encode())


def ready() -> None:
    """Mark this worker as started (the bench waits for every marker before it picks the
    first measured minute)."""
    (OUT / f"ready-{WORKER}").write_text(str(os.getpid()))
