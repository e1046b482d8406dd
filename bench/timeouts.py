"""Hard timeouts benchmark: what running callbacks in child processes (schedules with
``timeout_seconds``, :mod:`django_durable_schedules.worker.execution.isolation`) costs
against the plain thread path, on PostgreSQL with one real ``run_scheduler`` process.

    .venv/bin/python bench/timeouts.py [--schedules 500] [--concurrency 8] [--claim-ahead 0] \\
        [--database-url postgres://postgres@127.0.0.1:5432/dds_bench_timeouts] [--json-out F]

What it does:

1. drops and recreates the database named in ``--database-url`` (its name must start with
   ``dds_bench``), migrates it and seeds ``--schedules`` interval schedules (``tests.noop``,
   every 3600 s) with ``bench/seed.py``;
2. for each mode - ``thread`` (``timeout_seconds`` blank: the callback runs in a worker
   thread) and ``isolated`` (``timeout_seconds`` = ``--timeout-seconds``: it runs in a child
   process that could be killed) - resets the run state, starts one worker, waits for its
   heartbeat, makes a warm-up group of ``--concurrency`` schedules due (in ``isolated``
   mode that starts the child processes; their start-up is reported separately), waits for
   their receipts, then makes the other schedules due in one UPDATE and polls until each
   has a receipt; then SIGTERM;
3. reports from the run tables, on the database clock, for the measured (not warm-up)
   schedules: runs/s = runs / (last receipt ``finished_at`` - first ``claimed_at``), and the
   claim-to-receipt latency per run (``finished_at - claimed_at``, ms, p50/p99); then the
   difference ``isolated - thread`` (the added cost per run of hard timeouts).

The worker claims only what its free threads start (``--claim-ahead 0``), so that
claim-to-receipt is one run's own path; with claiming ahead it would also hold the wait in
line of a batch claimed ahead (see docs/benchmarks.md). Prints the JSON report on stdout,
then a one-line summary. Runs in about 30 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
from common import (  # bench/ is on sys.path: scripts run as files
    ROOT,
    T_ATTEMPT,
    T_RECEIPT,
    T_SCHEDULE,
    code_version,
    connect,
    dbname_of,
    django_env,
    emit,
    fresh_database,
    log,
    reset,
    run_django,
    scalar,
    server_info,
    start_workers,
    stop_workers,
    wait_for,
    wait_for_heartbeats,
)

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/dds_bench_timeouts"
MODES = ("thread", "isolated")


def make_due(conn: psycopg.Connection, warm: bool, warm_names: int) -> None:
    """Make the warm-up group (the first ``warm_names`` schedules by name) or the rest due
    now, on the interval grid anchored at this second (as common.make_due)."""
    op = "<" if warm else ">="
    conn.execute(
        f"UPDATE {T_SCHEDULE} SET created_at = date_trunc('second', statement_timestamp()), "
        f"next_run_at = date_trunc('second', statement_timestamp()) WHERE name {op} %s",
        (f"bench-{warm_names:06d}",),
    )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def measure(conn: psycopg.Connection, warm_names: int) -> dict[str, Any]:
    """Runs/s and per-run latency of the measured schedules; the warm-up group's span."""
    boundary = f"bench-{warm_names:06d}"
    rows = conn.execute(
        f"SELECT a.claimed_at, r.finished_at, r.status, s.name >= %s "
        f"FROM {T_ATTEMPT} a JOIN {T_RECEIPT} r ON r.attempt_id = a.id "
        f"JOIN {T_SCHEDULE} s ON s.id = a.schedule_id",
        (boundary,),
    ).fetchall()
    measured = [(c, f, st) for c, f, st, m in rows if m]
    warm = [(c, f, st) for c, f, st, m in rows if not m]
    latencies = [(f - c).total_seconds() * 1000 for c, f, _ in measured]
    span = (max(f for _, f, _ in measured) - min(c for c, _, _ in measured)).total_seconds()
    warm_span = (max(f for _, f, _ in warm) - min(c for c, _, _ in warm)).total_seconds()
    statuses: dict[str, int] = {}
    for _, _, st, _ in rows:
        statuses[st] = statuses.get(st, 0) + 1
    return {
        "runs": len(measured),
        "runs_per_second": round(len(measured) / span, 1) if span else None,
        "elapsed_seconds": round(span, 3),
        "latency_ms_p50": round(percentile(latencies, 50), 2),
        "latency_ms_p99": round(percentile(latencies, 99), 2),
        "latency_ms_mean": round(statistics.fmean(latencies), 2),
        "warmup_runs": len(warm),
        "warmup_seconds": round(warm_span, 3),
        "receipt_statuses": statuses,
    }


def run_mode(
    conn: psycopg.Connection, mode: str, args: argparse.Namespace, env: dict[str, str]
) -> dict[str, Any]:
    reset(conn)
    timeout = args.timeout_seconds if mode == "isolated" else None
    conn.execute(f"UPDATE {T_SCHEDULE} SET timeout_seconds = %s", (timeout,))
    worker_args = [
        "--concurrency",
        str(args.concurrency),
        "--batch-size",
        str(args.batch_size),
        "--claim-ahead",
        str(args.claim_ahead),
        "--max-idle",
        "0.2",
        "--verbosity",
        "0",
    ]
    procs = start_workers(1, env, args.logdir, f"timeouts-{mode}", worker_args)
    warm_names = args.concurrency
    try:
        wait_for_heartbeats(conn, 1, procs)
        time.sleep(0.5)  # the worker is in its idle loop
        make_due(conn, warm=True, warm_names=warm_names)
        wait_for(
            conn,
            f"SELECT count(*) FROM {T_RECEIPT}",
            warm_names,
            time.monotonic() + 60,
            procs,
            0.05,
        )
        due_at = time.monotonic()
        make_due(conn, warm=False, warm_names=warm_names)
        wait_for(
            conn,
            f"SELECT count(*) FROM {T_RECEIPT}",
            args.schedules,
            due_at + args.round_timeout,
            procs,
            0.05,
        )
        wall = time.monotonic() - due_at
    finally:
        codes = stop_workers(procs)
    result = measure(conn, warm_names)
    result.update(
        mode=mode,
        timeout_seconds=timeout,
        wall_seconds_due_to_done=round(wall, 3),
        worker_exit_codes=codes,
    )
    problems = []
    if result["receipt_statuses"] != {"succeeded": args.schedules}:
        problems.append(f"receipts {result['receipt_statuses']}, expected all succeeded")
    if any(codes):
        problems.append(f"worker exit codes {codes}")
    result.update(verified=not problems, problems=problems)
    return result


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--schedules", type=int, default=500, help="schedules (default 500)")
    p.add_argument("--concurrency", type=int, default=8, help="worker --concurrency (default 8)")
    p.add_argument("--batch-size", type=int, default=100)
    p.add_argument(
        "--claim-ahead",
        type=float,
        default=0.0,
        help="worker --claim-ahead (default 0: claims only what free threads start, so "
        "claim -> receipt is the run's own path, not a wait in line)",
    )
    p.add_argument(
        "--timeout-seconds",
        type=float,
        default=30.0,
        help="timeout_seconds of the isolated round (never reached; default 30)",
    )
    p.add_argument("--round-timeout", type=float, default=120.0, help="seconds per round")
    p.add_argument(
        "--database-url",
        default=os.environ.get("DDS_BENCH_TIMEOUTS_DATABASE_URL", DEFAULT_URL),
        help=f"PostgreSQL URL of the bench database, dropped and recreated; its name "
        f"must start with dds_bench (default {DEFAULT_URL})",
    )
    p.add_argument("--json-out", type=Path, help="also write the JSON report to this file")
    p.add_argument(
        "--logdir",
        type=Path,
        default=ROOT / "bench" / "out",
        help="worker logs (default bench/out, git-ignored)",
    )
    args = p.parse_args(argv)
    if not dbname_of(args.database_url).startswith("dds_bench"):
        p.error("refusing to drop a database whose name does not start with dds_bench")
    if args.schedules <= args.concurrency:
        p.error("--schedules must be more than --concurrency (the warm-up group)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    env = django_env(args.database_url)
    args.logdir.mkdir(parents=True, exist_ok=True)
    fresh_database(args.database_url, env)
    log(f"seeding {args.schedules} schedules")
    run_django([str(ROOT / "bench" / "seed.py"), str(args.schedules)], env)
    rounds: dict[str, dict[str, Any]] = {}
    with connect(args.database_url) as conn:
        server = server_info(conn)
        assert scalar(conn, f"SELECT count(*) FROM {T_SCHEDULE}") == args.schedules
        for mode in MODES:
            log(f"round {mode}")
            try:
                rounds[mode] = run_mode(conn, mode, args, env)
            except (
                TimeoutError,
                RuntimeError,
                psycopg.Error,
                subprocess.CalledProcessError,
            ) as exc:
                log(f"round {mode} failed: {exc}")
                rounds[mode] = {"mode": mode, "verified": False, "problems": [str(exc)]}
            log(f"round {mode}: {rounds[mode].get('runs_per_second')} runs/s")
    verified = all(r["verified"] for r in rounds.values())
    added: dict[str, Any] = {}
    if verified:
        t, i = rounds["thread"], rounds["isolated"]
        added = {
            "latency_ms_p50": round(i["latency_ms_p50"] - t["latency_ms_p50"], 2),
            "latency_ms_p99": round(i["latency_ms_p99"] - t["latency_ms_p99"], 2),
            "runs_per_second_ratio": round(i["runs_per_second"] / t["runs_per_second"], 3),
            "child_startup_seconds": i["warmup_seconds"],
        }
    report = {
        "benchmark": "timeouts",
        "schedules": args.schedules,
        "worker_options": {
            "concurrency": args.concurrency,
            "batch_size": args.batch_size,
            "claim_ahead": args.claim_ahead,
        },
        "rounds": rounds,
        "isolated_minus_thread": added,
        "verified": verified,
        "code": code_version(),
        "postgresql": server,
        "machine": {"cpus": os.cpu_count(), "loadavg_1min": round(os.getloadavg()[0], 2)},
    }
    if verified:
        t, i = rounds["thread"], rounds["isolated"]
        summary = (
            f"timeouts: thread {t['runs_per_second']} runs/s (p50 {t['latency_ms_p50']} ms, "
            f"p99 {t['latency_ms_p99']} ms); isolated {i['runs_per_second']} runs/s "
            f"(p50 {i['latency_ms_p50']} ms, p99 {i['latency_ms_p99']} ms); added p50 "
            f"{added['latency_ms_p50']} ms/run, child start-up {added['child_startup_seconds']} s"
        )
    else:
        summary = "timeouts: VERIFICATION FAILED"
    emit(report, summary, args.json_out)
    return 0 if verified else 2


if __name__ == "__main__":
    sys.exit(main())
