"""G7: an idle worker: statements per second, memory, and how fast a change wakes it.

    .venv/bin/python bench/idle.py [--sizes 1000,100000,1000000] [--idle-seconds 60] [--check]

For each table size (schedules copied from one seeded row, see ``claim_plan.grow``), with
nothing due for the whole window (every ``next_run_at`` a day or more away):

1. starts one real ``run_scheduler`` (default options) through ``bench/counting_worker.py``,
   which counts every SQL statement its Django connections send;
2. after start-up settles, counts the statements over ``--idle-seconds`` and reads the
   worker's resident memory (VmRSS) at the end;
3. then ``--wakeups`` times: triggers one schedule through ``state.trigger`` in another
   process (what the API and admin call) and measures trigger commit -> attempt
   ``claimed_at`` on the database clock (PostgreSQL LISTEN/NOTIFY wakes the worker; without
   it the worker notices at its next poll, up to ``POLL_MAX_SECONDS`` later).

Floor (issue #5, G7): <= 1 statement/s per worker at 100,000 schedules. Targets: a change
wakes a worker in <= 100 ms; RSS flat (+-10%) from 1k to 1M schedules. Prints JSON, then
one summary line; ``--check`` exits 1 when the floor is missed. Uses the database
``dds_bench_idle`` (dropped and recreated).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from claim_plan import grow
from common import (
    ROOT,
    T_ATTEMPT,
    T_HEARTBEAT,
    T_SCHEDULE,
    code_version,
    connect,
    dbname_of,
    django_env,
    emit,
    fresh_database,
    log,
    run_django,
    scalar,
    stop_workers,
    wait_for_heartbeats,
)

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/dds_bench_idle"

TRIGGER = r"""
import json, sys, django
django.setup()
from django_durable_schedules import state
from django_durable_schedules.models import Schedule
pk = Schedule.objects.order_by("name").values_list("pk", flat=True).first()
state.trigger(pk, source="bench")
print(json.dumps({"id": str(pk), "committed_at": state.db_now().isoformat()}))
"""


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def read_count(path: Path) -> int:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def wake_once(conn: Any, env: dict[str, str], timeout: float) -> float | None:
    before = scalar(conn, f"SELECT count(*) FROM {T_ATTEMPT}")
    out = subprocess.run(
        [sys.executable, "-c", TRIGGER], cwd=ROOT, env=env, check=True, capture_output=True
    ).stdout
    info = json.loads(out.decode().strip().splitlines()[-1])
    deadline = time.monotonic() + timeout
    while scalar(conn, f"SELECT count(*) FROM {T_ATTEMPT}") <= before:
        if time.monotonic() > deadline:
            return None
        time.sleep(0.01)
    claimed = scalar(conn, f"SELECT max(claimed_at) FROM {T_ATTEMPT}")
    from datetime import datetime

    return (claimed - datetime.fromisoformat(info["committed_at"])).total_seconds() * 1000


def measure_size(
    conn: Any, env: dict[str, str], args: argparse.Namespace, size: int
) -> dict[str, Any]:
    grow(conn, size)
    conn.execute(f"TRUNCATE {T_HEARTBEAT}")
    conn.execute(
        f"UPDATE {T_SCHEDULE} SET status = 'active', lease_token = NULL, "
        "lease_expires_at = NULL, triggered_at = NULL, "
        "next_run_at = date_trunc('second', now()) + interval '1 day' + "
        "(random() * interval '1 day')"
    )
    conn.execute(f"VACUUM (ANALYZE) {T_SCHEDULE}")
    with tempfile.TemporaryDirectory() as tmp:
        count_file = Path(tmp) / "count"
        log_path = ROOT / "bench" / "out" / f"idle-{size}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("wb") as out:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    str(ROOT / "bench" / "counting_worker.py"),
                    str(count_file),
                    "--",
                    "--worker-id",
                    f"bench-idle-{size}",
                    "--verbosity",
                    "0",
                ],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            wait_for_heartbeats(conn, 1, [(proc, log_path)])
            time.sleep(args.settle_seconds)
            start_count, started = read_count(count_file), time.monotonic()
            time.sleep(args.idle_seconds)
            statements = read_count(count_file) - start_count
            elapsed = time.monotonic() - started
            rss = rss_kib(proc.pid)
            wakes = [wake_once(conn, env, args.wake_timeout) for _ in range(args.wakeups)]
        finally:
            stop_workers([(proc, log_path)], grace=10)
    measured = [w for w in wakes if w is not None]
    return {
        "schedules": size,
        "idle_seconds": round(elapsed, 1),
        "statements": statements,
        "statements_per_second": round(statements / elapsed, 3),
        "rss_mib": round(rss / 1024, 1),
        "wake_ms": [round(w, 1) for w in measured],
        "wake_ms_median": round(statistics.median(measured), 1) if measured else None,
        "wakes_missed": len(wakes) - len(measured),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1000,100000,1000000")
    p.add_argument("--idle-seconds", type=float, default=60.0)
    p.add_argument("--settle-seconds", type=float, default=3.0)
    p.add_argument("--wakeups", type=int, default=5)
    p.add_argument("--wake-timeout", type=float, default=15.0)
    p.add_argument("--floor", type=float, default=1.0, help="statements/s at 100,000")
    p.add_argument("--database-url", default=DEFAULT_URL)
    p.add_argument("--check", action="store_true")
    args = p.parse_args(argv)
    if not dbname_of(args.database_url).startswith("dds_bench"):
        p.error("refusing to drop a database whose name does not start with dds_bench")
    sizes = sorted(int(s) for s in args.sizes.split(","))
    env = django_env(args.database_url)
    fresh_database(args.database_url, env)
    run_django([str(ROOT / "bench" / "seed.py"), "1"], env)
    results = []
    with connect(args.database_url) as conn:
        for size in sizes:
            log(f"{size:,} schedules: idle for {args.idle_seconds:g} s")
            result = measure_size(conn, env, args, size)
            log(f"{size:,}: {result}")
            results.append(result)
    at_floor = [r for r in results if r["schedules"] >= 100_000] or results
    passed = all(r["statements_per_second"] <= args.floor for r in at_floor)
    rss = [r["rss_mib"] for r in results]
    report = {
        "benchmark": "idle",
        "results": results,
        "rss_growth_percent": round(100 * (max(rss) - min(rss)) / min(rss), 1),
        "floor": {"statements_per_second": args.floor, "passed": passed},
        "code": code_version(),
    }
    cells = ", ".join(
        f"{r['schedules']:,}: {r['statements_per_second']} stmt/s, {r['rss_mib']} MiB, "
        f"wake {r['wake_ms_median']} ms"
        for r in results
    )
    emit(
        report,
        f"idle: {cells}; RSS {report['rss_growth_percent']}% apart "
        f"(floor {args.floor:g} stmt/s: {'PASS' if passed else 'FAIL'})",
    )
    return 1 if args.check and not passed else 0


if __name__ == "__main__":
    sys.exit(main())
