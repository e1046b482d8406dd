"""``run_scheduler`` with glibc's allocator watched (used by ``bench/memory_soak.py
--malloc-log``): a daemon thread appends, every ``EVERY`` seconds, one JSON line to
LOG_FILE with ``mallinfo2()`` (``arena``: bytes the main and thread arenas took from the
system with brk/mmap, ``uordblks``: bytes in use, ``fordblks``: free bytes kept in them,
``hblkhd``: bytes in large mmap'd blocks) and VmRSS, and with ``TRIM`` > 0 calls
``malloc_trim(0)`` every ``TRIM`` seconds (an experiment: the engine itself never trims).
glibc only; without it nothing is logged.
``DDS_BENCH_TRACEMALLOC=1`` also traces Python allocations and logs the eight places
whose allocations grew most since the first minute.

    python bench/malloc_worker.py LOG_FILE EVERY TRIM -- [run_scheduler options]
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import sys
import threading
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def watch(log_file: Path, every: float, trim: float) -> None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallinfo2.restype = _MallInfo2
    except (OSError, AttributeError):
        return
    traced = os.environ.get("DDS_BENCH_TRACEMALLOC") == "1"
    baseline = None
    started = last_trim = time.monotonic()
    while True:
        time.sleep(every)
        now = time.monotonic()
        if trim > 0 and now - last_trim >= trim:
            libc.malloc_trim(0)
            last_trim = now
        info = libc.mallinfo2()
        line = {f: getattr(info, f) for f, _ in _MallInfo2._fields_}
        line.update(
            seconds=round(now - started, 1), rss_kib=_rss_kib(), threads=threading.active_count()
        )
        if traced:
            # Python allocations that grew since the first minute, by where they were made.
            snapshot = tracemalloc.take_snapshot()
            if baseline is None and now - started >= 60:
                baseline = snapshot
            elif baseline is not None:
                top = snapshot.compare_to(baseline, "lineno")[:8]
                line["traced_kib"] = tracemalloc.get_traced_memory()[0] // 1024
                line["grew"] = [f"{stat.size_diff // 1024:+} KiB {stat.traceback}" for stat in top]
        with log_file.open("a") as out:
            out.write(json.dumps(line) + "\n")


def main() -> None:
    log_file, every, trim = Path(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
    rest = sys.argv[sys.argv.index("--") + 1 :]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    if os.environ.get("DDS_BENCH_TRACEMALLOC") == "1":
        tracemalloc.start(1)
    django.setup()
    threading.Thread(target=watch, args=(log_file, every, trim), daemon=True).start()
    from django.core.management import execute_from_command_line

    execute_from_command_line(["manage.py", "run_scheduler", *rest])


if __name__ == "__main__":
    main()
