"""Memory soak: one real ``run_scheduler`` process running many no-op schedules for a
while, its resident memory (VmRSS) sampled over time.

    .venv/bin/python bench/memory_soak.py [--minutes 4] [--long] [--schedules 1000]
        [--interval-seconds 10] [--sample-seconds 10] [--mix noop|mixed|chaos]
        [--env NAME=VALUE ...]
        [--worker-args "..."] [--database-url postgres://.../dds_bench_soak] [--json-out F]

1. Drops and recreates the bench database (its name must start with ``dds_bench``; on
   PostgreSQL), migrates it and creates ``--schedules`` interval schedules of
   ``tests.noop`` every ``--interval-seconds`` (1,000 every 10 s: ~100 runs/s), their
   grids spread over the interval so the load is even. ``--mix mixed`` makes nine in ten
   of them other shapes: payloads echoed into results, failures retried, skips, cron
   ``* * * * *`` and ``FREQ=MINUTELY`` rules in five zones. ``--mix chaos`` is the load
   of ``bench/chaos.py`` (issue #24's report) on one worker: the callbacks of
   ``bench/chaos_app`` (settings ``bench/chaos_settings.py``, 4 s leases): ``chaos.work``
   fails 10 % (3 attempts, backoff 0.5 s to 2 s), skips 8 %, sleeps past its lease 5 %
   (the worker keeps renewing it); one schedule in ten is ``chaos.poison`` (messages of
   20,000 characters with NUL and lone surrogates, ``RetryRun`` delays of NaN, -1, inf
   and 1.8e12, results with cycles, NaN and 400-digit ints); one in fifty has
   ``timeout_seconds = 3`` (a child process, killed when the callback overruns), one in
   twenty-five is a cron ``* * * * *``. Give it enough threads for the sleeps, e.g.
   ``--schedules 750 --worker-args "--concurrency 32"`` (about 73 runs/s).
2. Starts one worker (``run_scheduler --verbosity 0`` plus ``--worker-args``; ``--env``
   adds variables to its environment only, e.g. ``--env MALLOC_ARENA_MAX=2`` to compare;
   ``--malloc-log F`` starts it through ``bench/malloc_worker.py``, which logs glibc's
   ``mallinfo2()`` to F, and with ``--env DDS_BENCH_TRACEMALLOC=1`` the Python allocations
   that grew most), waits for its heartbeat, and every
   ``--sample-seconds`` prints one line: elapsed minutes, VmRSS (MiB), the receipts
   written so far, the worker's threads (``/proc/PID/status``) and child processes. ``--minutes`` (default 4) or ``--long`` (25 minutes, the span of the
   report in issue #24) is the soak's length.
3. Stops the worker (SIGTERM) and prints the JSON report, then one summary line: RSS at
   the first sample, at the end, the maximum, and the slope (MiB per minute, least
   squares) over the second half of the samples (start-up and the first cache fills
   are over by then): a plateau has a slope near 0; and the most threads seen.

Other load on the machine makes the numbers noisy; compare runs taken back to back.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from common import (
    ROOT,
    T_RECEIPT,
    code_version,
    connect,
    dbname_of,
    django_env,
    emit,
    fresh_database,
    log,
    run_django,
    scalar,
    start_workers,
    stop_workers,
    wait_for_heartbeats,
)

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/dds_bench_soak"

SEED = r"""
import sys, django
django.setup()
from datetime import timedelta
from django.utils import timezone
from django_durable_schedules.models import Kind, Schedule, Status
count, every, mix = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
now = timezone.now().replace(microsecond=0)
template = Schedule(kind=Kind.INTERVAL, interval_seconds=every, timezone="UTC")
fingerprint = template.compute_definition_hash()
ZONES = ("Europe/Paris", "America/New_York", "Asia/Tokyo", "Australia/Sydney", "UTC")
rows = []
for i in range(count):
    anchor = now + timedelta(seconds=i % every)
    row = Schedule(
        name=f"soak-{i:06d}", callback="tests.noop", kind=Kind.INTERVAL,
        interval_seconds=every, timezone="UTC", status=Status.ACTIVE, created_at=anchor,
        next_run_at=anchor, definition_hash=fingerprint,
    )
    if mix == "mixed" and i % 10:
        # 1 in 10 plain; the others: payloads and results, failures and retries, skips,
        # cron every minute in five zones, and calendar rules.
        shape = i % 10
        if shape in (1, 2):
            row.callback, row.payload = "tests.echo", {"i": i, "text": "x" * (i % 500)}
        elif shape == 3:
            row.callback, row.max_attempts = "tests.fail", 3
            row.backoff_base_seconds, row.backoff_cap_seconds = 1, 4
        elif shape == 4:
            row.callback = "tests.skip"
        elif shape in (5, 6):
            row.kind, row.cron, row.interval_seconds = Kind.CRON, "* * * * *", None
            row.timezone = ZONES[i % len(ZONES)]
        elif shape == 7:
            row.kind, row.rrule, row.interval_seconds = Kind.RRULE, "FREQ=MINUTELY", None
            row.timezone = ZONES[i % len(ZONES)]
    elif mix == "chaos":
        # The chaos soak's callbacks (bench/chaos_app): chaos.work fails 10 %, skips 8 %,
        # sleeps past its lease 5 %; 1 in 10 chaos.poison (20,000-character messages,
        # RetryRun(nan / -1 / inf / 1.8e12), results with cycles, NaN, 400-digit ints);
        # 1 in 50 has timeout_seconds = 3 (a child process, killed when it overruns);
        # 1 in 25 a cron * * * * *. 3 attempts, backoff 0.5 s doubling to 2 s.
        row.callback, row.max_attempts = "chaos.work", 3
        row.backoff_base_seconds, row.backoff_cap_seconds = 0.5, 2.0
        if i % 10 == 3:
            row.callback = "chaos.poison"
        elif i % 50 == 7:
            row.timeout_seconds = 3
        elif i % 25 == 11:
            row.kind, row.cron, row.interval_seconds = Kind.CRON, "* * * * *", None
            row.timezone = ZONES[i % len(ZONES)]
        row.definition_hash = row.compute_definition_hash()
        if row.kind != Kind.INTERVAL:
            row.next_run_at = row.plan(now, first=True)
    if mix == "mixed" and i % 10:
        if row.kind != Kind.INTERVAL:
            row.definition_hash = row.compute_definition_hash()
            row.next_run_at = row.plan(now, first=True)
    rows.append(row)
Schedule.objects.bulk_create(rows, batch_size=1000)
print(f"seeded {Schedule.objects.count()} schedules every {every} s ({mix})")
"""


def status_field(pid: int, name: str) -> int:
    """The first number of the ``name:`` line of ``/proc/PID/status`` (0 when the process
    is gone): ``VmRSS`` in KiB, ``Threads``."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith(f"{name}:"):
            return int(line.split()[1])
    return 0


def rss_kib(pid: int) -> int:
    """VmRSS of ``pid`` in KiB (0 when the process is gone)."""
    return status_field(pid, "VmRSS")


def children_of(pid: int) -> int:
    """How many child processes ``pid`` has now (its isolation children)."""
    count = 0
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            count += len((task / "children").read_text().split())
    except OSError:
        pass
    return count


def slope_per_minute(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of ``(minutes, MiB)`` points, MiB per minute (0 for < 2)."""
    if len(points) < 2:
        return 0.0
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if not sxx:
        return 0.0
    return sum((x - mx) * (y - my) for x, y in points) / sxx


def summarize(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Start, end, max RSS (MiB) and the slope over the second half of ``samples`` (each
    ``{"minutes": float, "rss_mib": float, "threads": int, ...}``), and the most threads
    the worker had at a sample."""
    if not samples:
        return {
            "start_mib": None,
            "end_mib": None,
            "max_mib": None,
            "slope_mib_per_min": None,
            "max_threads": None,
        }
    rss = [s["rss_mib"] for s in samples]
    half = samples[len(samples) // 2 :]
    slope = slope_per_minute([(s["minutes"], s["rss_mib"]) for s in half])
    return {
        "start_mib": rss[0],
        "end_mib": rss[-1],
        "max_mib": max(rss),
        "growth_mib": round(rss[-1] - rss[0], 1),
        "slope_mib_per_min": round(slope, 3),
        "max_threads": max(s.get("threads", 0) for s in samples),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=4.0)
    p.add_argument("--long", action="store_true", help="25 minutes (overrides --minutes)")
    p.add_argument("--schedules", type=int, default=1000)
    p.add_argument("--interval-seconds", type=int, default=10)
    p.add_argument("--sample-seconds", type=float, default=10.0)
    p.add_argument(
        "--mix",
        choices=("noop", "mixed", "chaos"),
        default="noop",
        help="noop: tests.noop only; mixed: also payloads, failures with retries, skips, "
        "cron and calendar rules in five zones; chaos: bench/chaos_app's callbacks (lease "
        "overruns, failures and retries, skips, poison messages and results, a few hard "
        "timeouts in child processes)",
    )
    p.add_argument("--env", action="append", default=[], help="NAME=VALUE for the worker")
    p.add_argument("--worker-args", default="", help="more run_scheduler options")
    p.add_argument(
        "--malloc-log",
        type=Path,
        help="start the worker through bench/malloc_worker.py, logging mallinfo2 here",
    )
    p.add_argument(
        "--malloc-trim-experiment",
        type=float,
        default=0.0,
        help="with --malloc-log: the launcher itself calls malloc_trim(0) every S seconds",
    )
    p.add_argument("--database-url", default=DEFAULT_URL)
    p.add_argument("--json-out", type=Path)
    args = p.parse_args(argv)
    if not dbname_of(args.database_url).startswith("dds_bench"):
        p.error("refusing to drop a database whose name does not start with dds_bench")
    minutes = 25.0 if args.long else args.minutes
    env = django_env(args.database_url)
    fresh_database(args.database_url, env)
    run_django(
        ["-c", SEED, str(args.schedules), str(args.interval_seconds), args.mix],
        env,
    )
    worker_env = dict(env)
    if args.mix == "chaos":
        chaos_log = ROOT / "bench" / "out" / "soak-chaos.log"
        chaos_log.parent.mkdir(parents=True, exist_ok=True)
        chaos_log.unlink(missing_ok=True)
        worker_env.update(
            DJANGO_SETTINGS_MODULE="chaos_settings",
            CHAOS_LOG=str(chaos_log),
            CHAOS_LEASE_SECONDS="4",
            PYTHONPATH=os.pathsep.join((str(ROOT / "bench"), worker_env["PYTHONPATH"])),
        )
    for item in args.env:
        name, _, value = item.partition("=")
        worker_env[name] = value
    logdir = ROOT / "bench" / "out"
    worker_args = ["--verbosity", "0", *shlex.split(args.worker_args)]
    samples: list[dict[str, Any]] = []
    with connect(args.database_url) as conn:
        launcher: tuple[str, ...] = ("-m", "django", "run_scheduler")
        if args.malloc_log:
            args.malloc_log.unlink(missing_ok=True)
            launcher = (
                str(ROOT / "bench" / "malloc_worker.py"),
                str(args.malloc_log),
                str(args.sample_seconds),
                str(args.malloc_trim_experiment),
                "--",
            )
        procs = start_workers(1, worker_env, logdir, "soak", worker_args, launcher)
        try:
            wait_for_heartbeats(conn, 1, procs)
            proc = procs[0][0]
            started = time.monotonic()
            while True:
                elapsed = time.monotonic() - started
                rss = rss_kib(proc.pid)
                receipts = scalar(conn, f"SELECT count(*) FROM {T_RECEIPT}")
                sample = {
                    "minutes": round(elapsed / 60, 2),
                    "rss_mib": round(rss / 1024, 1),
                    "receipts": receipts,
                    "threads": status_field(proc.pid, "Threads"),
                    "children": children_of(proc.pid),
                }
                samples.append(sample)
                print(
                    f"{sample['minutes']:7.2f} min  RSS {sample['rss_mib']:7.1f} MiB  "
                    f"{receipts:>9,} receipts  {sample['threads']:>4} threads  "
                    f"{sample['children']:>3} children",
                    file=sys.stderr,
                    flush=True,
                )
                if proc.poll() is not None:
                    log(f"the worker exited with {proc.returncode}")
                    break
                if elapsed >= minutes * 60:
                    break
                time.sleep(min(args.sample_seconds, max(0.1, minutes * 60 - elapsed)))
        finally:
            codes = stop_workers(procs, grace=20)
    summary = summarize(samples)
    runs = samples[-1]["receipts"] if samples else 0
    span = samples[-1]["minutes"] if samples else 0
    report = {
        "benchmark": "memory_soak",
        "minutes": minutes,
        "schedules": args.schedules,
        "interval_seconds": args.interval_seconds,
        "mix": args.mix,
        "worker_env": args.env,
        "worker_args": worker_args,
        "runs": runs,
        "runs_per_second": round(runs / (span * 60), 1) if span else None,
        "worker_exit_codes": codes,
        "summary": summary,
        "samples": samples,
        "code": code_version(),
    }
    emit(
        report,
        f"memory_soak: {minutes:g} min, {args.mix}, {runs:,} runs; RSS {summary['start_mib']} -> "
        f"{summary['end_mib']} MiB (max {summary['max_mib']}), slope "
        f"{summary['slope_mib_per_min']} MiB/min over the second half"
        + (f" [{' '.join(args.env)}]" if args.env else ""),
        args.json_out,
    )
    return 0 if all(c == 0 for c in codes) else 2


if __name__ == "__main__":
    sys.exit(main())
