"""Issue #32 goal 1: the herd at the top of the minute on the raw SQL floor.

    .venv/bin/python bench/herd_floor.py [--schedules 10000] [--workers 4] [--minutes 3]
        [--poll 0.01] [--batch 100] [--json-out PATH]

What the herd of ``bench/herd.py`` costs when the scheduler is nothing but the SQL a
durable scheduler must do per run (``bench/sql_floor.py``: one statement claims up to 100
due rows, leases them, moves each one interval on and writes their attempts; one statement
releases the leases still held and writes the ``succeeded`` receipts; no Django, no engine,
every index, constraint and trigger kept, fsync on). The same protocol as ``herd.py``:
``--schedules`` rows all due at the same minute boundaries (``interval`` schedules of 60 s
whose first run is a boundary: the floor plans only intervals, which is the same grid as
``* * * * *``), ``--workers`` floor processes started well before the first boundary,
``--minutes`` boundaries, the same figures per boundary (``herd.minute_figures``: time to
the last start, start and claim lateness p50/p99, missed, duplicated; the start is each
run's own instant, noted just before its no-op is called and written as its receipt's
``started_at``) and the same CPU figures (workers, their backends, the rest of the
machine), taken from a second before each boundary to its herd's last receipt.

No worker is killed: the floor recovers no lease, so a killed floor worker's runs would
be lost, not late. For the engine the kill costs at most its claim room (about 104 runs)
at lease expiry, under the p99 at 10,000 (``herd.py``'s docstring); what this bench asks is
how fast the database work alone can start a herd on this machine. Between boundaries the
floor workers poll every ``--poll`` seconds (an empty claim each), so each herd starts
within that of its boundary.

Prints JSON, then one summary line per size. Uses the database ``dds_bench_herd_floor``
(dropped and recreated for each size).
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from common import (
    ROOT,
    code_version,
    connect,
    cpu_seconds,
    dbname_of,
    django_env,
    emit,
    fresh_database,
    python_loop_ms,
    scalar,
    server_info,
    start_workers,
    stop_workers,
    wait_started,
    worker_backends,
)
from herd import (
    cpu_fields,
    cpu_sample,
    lateness,
    minute_figures,
    seed_herd,
    sleep_until,
    watch_herd,
)
from sql_floor import DEFAULT_BATCH, FLOOR_SESSIONS_SQL, floor_args, floor_launcher

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/dds_bench_herd_floor"
#: Receipts of the slots at a boundary (the herd is done when there are N).


def run_size(args: argparse.Namespace, n: int) -> dict[str, Any]:
    """The floor's herd of ``n`` rows over ``args.minutes`` boundaries: per minute the
    figures of ``herd.minute_figures`` and its CPU, and the run's lateness."""
    env = django_env(args.database_url)
    fresh_database(args.database_url, env)
    with connect(args.database_url) as conn:
        first = seed_herd(conn, env, n, args.lead, kind="interval")
        fargs = floor_args(args.database_url, args.batch, "cte", args.poll, record_starts=True)
        procs = start_workers(
            args.workers, env, ROOT / "bench" / "out", f"herdfloor{n}", fargs, floor_launcher()
        )
        try:
            wait_started(conn, FLOOR_SESSIONS_SQL, args.workers, procs)
            if scalar(conn, "SELECT now()") >= first:
                raise RuntimeError("the floor workers started after the first boundary")
            boundaries = [first + timedelta(minutes=i) for i in range(args.minutes)]
            # CPU from a second before each boundary to its herd's last receipt (not the
            # idle polling of the rest of the minute, which the engine's workers sleep).
            cpu: list[dict[str, Any]] = []
            for boundary in boundaries:
                sleep_until(conn, boundary - timedelta(seconds=1))
                before = cpu_sample(procs)
                base = {pid: cpu_seconds([pid]) for pid in worker_backends(conn)}
                seen: dict[int, float] = {}
                watch_herd(conn, boundary, n, boundary + timedelta(seconds=50), seen, 0.05)
                spent = {pid: c - base.get(pid, 0.0) for pid, c in seen.items()}
                cpu.append(cpu_fields(before, cpu_sample(procs), spent, n))
            sleep_until(conn, boundaries[-1] + timedelta(seconds=50))
        finally:
            codes = stop_workers([p for p in procs if p[0].poll() is None])
        minutes = [minute_figures(conn, b, n) for b in boundaries]
        for m, spent_cpu in zip(minutes, cpu, strict=True):
            m["cpu_s"] = spent_cpu
        info = server_info(conn)
    starts = sorted(t for m in minutes for t in m.pop("_starts"))
    return {
        "schedules": n,
        "workers": args.workers,
        "poll_s": args.poll,
        "batch": args.batch,
        "minutes": minutes,
        "start_lateness_s": lateness(starts),
        "missed": sum(m["missed"] for m in minutes),
        "duplicated": sum(m["duplicated"] for m in minutes),
        "worker_exit_codes": codes,
        "database": {k: info.get(k) for k in ("server_version", "fsync", "synchronous_commit")},
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--schedules", default="10000", help="sizes, comma-separated")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--minutes", type=int, default=3)
    p.add_argument("--poll", type=float, default=0.01, help="seconds between empty claims")
    p.add_argument(
        "--batch",
        type=int,
        default=DEFAULT_BATCH,
        help=f"most rows per claim (default {DEFAULT_BATCH}: the engine's BATCH_SIZE)",
    )
    p.add_argument(
        "--lead", type=float, default=8.0, help="least seconds before the first boundary"
    )
    p.add_argument("--database-url", default=DEFAULT_URL)
    p.add_argument("--json-out", type=Path)
    args = p.parse_args(argv)
    if not dbname_of(args.database_url).startswith("dds_bench"):
        p.error("refusing to drop a database whose name does not start with dds_bench")
    loop_ms = python_loop_ms()
    results = [run_size(args, int(s)) for s in args.schedules.split(",") if s.strip()]
    report = {
        "benchmark": "herd_floor",
        "machine_python_loop_ms": round(loop_ms, 1),
        "sizes": results,
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "code": code_version(),
    }
    emit(report, "", args.json_out)
    for r in results:
        lat = r["start_lateness_s"]
        print(
            f"herd on the raw SQL floor: {r['schedules']:,} rows, {r['workers']} floor workers "
            f"(batch {r['batch']}, no kill): start lateness p50 {lat['p50']} s, p99 {lat['p99']} s, max "
            f"{lat['max']} s; last start per minute "
            f"{[m['last_start_s'] for m in r['minutes']]} s; starts/s "
            f"{[m['starts_per_s'] for m in r['minutes']]}; CPU ms/run workers+db "
            f"{[m['cpu_s']['engine_ms_per_run'] for m in r['minutes']]}; {r['missed']} missed, "
            f"{r['duplicated']} duplicated (issue #32's floor for the engine: p99 <= 1 s; "
            f"machine loop {loop_ms:.0f} ms)",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
