"""G8: ``manage.py prune_runs`` over 1,000,000 finished attempt/receipt pairs (PostgreSQL).

    .venv/bin/python bench/prune.py [--pairs 1000000] [--schedules 1000] [--batch-size 5000] \\
        [--database-url postgres://postgres@127.0.0.1:5432/dds_bench_prune]

1. Recreates the bench database, migrates it, seeds ``--schedules`` schedules, and writes
   ``--pairs`` finished pairs with plain ``INSERT ... SELECT generate_series`` (inserts
   pass the append-only guards), all finished 40-100 days ago, then ``VACUUM ANALYZE``.
2. Times the claim query (the exact SQL ``state.claim_due`` sends, as in
   ``claim_plan.py``) with nothing else running: the baseline p99.
3. Runs the real command, ``manage.py prune_runs --older-than 30 --no-input``, timing it from the
   outside, while a second connection keeps timing the claim query: does pruning slow
   claims down?
4. Verifies the run tables are empty afterwards and the guards are still in force.

Floor (issue #5, G8): <= 60 s for 1,000,000 pairs; target <= 30 s with the claim p99
unchanged. Prints JSON, then one summary line; ``--check`` exits 1 below the floor.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

import psycopg
from claim_plan import capture_claim_sql, set_due
from common import (
    ROOT,
    T_ATTEMPT,
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
    server_info,
)

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/dds_bench_prune"


def fill(conn: psycopg.Connection, pairs: int) -> None:
    """``pairs`` attempts spread over the schedules, each with a ``succeeded`` receipt."""
    conn.execute(
        f"""
        WITH s AS (SELECT array_agg(id ORDER BY name) AS ids, array_agg(name ORDER BY name)
                   AS names, count(*) AS n FROM durable_schedules_schedule)
        INSERT INTO {T_ATTEMPT} (id, schedule_name, occurrence, attempt, scheduled_for,
            claimed_at, lease_token, lease_expires_at, worker, idempotency_key, missed_slots,
            schedule_id, origin)
        SELECT gen_random_uuid(), s.names[1 + g %% s.n], g / s.n, 1,
            now() - interval '100 days' + g * interval '5 seconds',
            now() - interval '100 days' + g * interval '5 seconds',
            gen_random_uuid(), now() - interval '100 days' + g * interval '5 seconds' + interval '1 minute',
            'bench-prune', s.ids[1 + g %% s.n]::text || ':' || (g / s.n)::text, 0,
            s.ids[1 + g %% s.n], 'scheduled'
        FROM s, generate_series(0::bigint, %s::bigint - 1) AS g
        """,
        (pairs,),
    )
    conn.execute(
        f"""
        INSERT INTO {T_RECEIPT} (id, occurrence, succeeded_occurrence, status, finished_at,
            result, error_type, error_message, failure_count_after, next_run_at,
            slots_skipped, forced, attempt_id, schedule_id)
        SELECT gen_random_uuid(), a.occurrence, a.occurrence, 'succeeded',
            a.claimed_at + interval '10 milliseconds', NULL, '', '', 0, NULL, 0, false, a.id,
            a.schedule_id
        FROM {T_ATTEMPT} a
        """
    )
    conn.execute(f"VACUUM (ANALYZE) {T_ATTEMPT}")
    conn.execute(f"VACUUM (ANALYZE) {T_RECEIPT}")


def percentiles(times: list[float]) -> dict[str, float | int]:
    if not times:
        return {"samples": 0}
    times = sorted(times)
    return {
        "samples": len(times),
        "p50_ms": round(statistics.median(times), 3),
        "p99_ms": round(times[min(len(times) - 1, int(len(times) * 0.99))], 3),
        "max_ms": round(times[-1], 3),
    }


def claim_timer(url: str, sql: str, stop: threading.Event, out: list[float]) -> None:
    """Time the claim query (each in a rolled-back transaction) until ``stop`` is set,
    pacing itself at about 50 claims a second, as a busy worker would."""
    with connect(url) as conn:
        while not stop.is_set():
            with conn.transaction(force_rollback=True):
                started = time.perf_counter()
                conn.execute(sql).fetchall()
                out.append((time.perf_counter() - started) * 1000)
            stop.wait(0.02)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", type=int, default=1_000_000)
    p.add_argument("--schedules", type=int, default=1000)
    p.add_argument("--batch-size", type=int, default=5000)
    p.add_argument("--floor-seconds", type=float, default=60.0)
    p.add_argument("--database-url", default=DEFAULT_URL)
    p.add_argument("--check", action="store_true")
    args = p.parse_args(argv)
    if not dbname_of(args.database_url).startswith("dds_bench"):
        p.error("refusing to drop a database whose name does not start with dds_bench")
    env = django_env(args.database_url)

    fresh_database(args.database_url, env)
    run_django([str(ROOT / "bench" / "seed.py"), str(args.schedules)], env)
    with connect(args.database_url) as conn:
        server = server_info(conn)
        log(f"writing {args.pairs:,} finished pairs")
        started = time.monotonic()
        fill(conn, args.pairs)
        log(f"written in {time.monotonic() - started:.1f} s")
        set_due(conn, "batch_due", 100)
        sql = capture_claim_sql(env, 100)

        baseline: list[float] = []
        stop = threading.Event()
        timer = threading.Thread(target=claim_timer, args=(args.database_url, sql, stop, baseline))
        timer.start()
        time.sleep(5)
        stop.set()
        timer.join()

        during: list[float] = []
        stop = threading.Event()
        timer = threading.Thread(target=claim_timer, args=(args.database_url, sql, stop, during))
        timer.start()
        log("prune_runs --older-than 30 --no-input")
        started = time.monotonic()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "django",
                "prune_runs",
                "--older-than",
                "30",
                "--no-input",
                "--batch-size",
                str(args.batch_size),
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
        elapsed = time.monotonic() - started
        stop.set()
        timer.join()
        left = scalar(conn, f"SELECT count(*) FROM {T_ATTEMPT}") + scalar(
            conn, f"SELECT count(*) FROM {T_RECEIPT}"
        )
        guarded = scalar(
            conn,
            "SELECT count(*) FROM pg_trigger WHERE tgname LIKE %s AND tgenabled <> 'D'",
            ("durable_schedules_%append_only",),
        )
    problems = []
    if done.returncode:
        problems.append(f"prune_runs exited {done.returncode}: {done.stderr[-500:]}")
    if left:
        problems.append(f"{left} rows left in the run tables")
    if guarded < 2:
        problems.append("the append-only triggers are missing after pruning")
    passed = not problems and elapsed <= args.floor_seconds
    report: dict[str, Any] = {
        "benchmark": "prune",
        "pairs": args.pairs,
        "batch_size": args.batch_size,
        "prune_seconds": round(elapsed, 2),
        "pairs_per_second": round(args.pairs / elapsed),
        "command_output": done.stdout.strip(),
        "claim_query_before": percentiles(baseline),
        "claim_query_during_prune": percentiles(during),
        "append_only_triggers": guarded,
        "problems": problems,
        "floor": {"seconds": args.floor_seconds, "passed": passed},
        "postgresql": server,
        "code": code_version(),
    }
    before, meanwhile = report["claim_query_before"], report["claim_query_during_prune"]
    emit(
        report,
        f"prune: {args.pairs:,} pairs in {elapsed:.1f} s; claim p99 {before.get('p99_ms')} ms "
        f"before, {meanwhile.get('p99_ms')} ms during "
        f"(floor {args.floor_seconds:g} s: {'PASS' if passed else 'FAIL'})",
    )
    return 1 if args.check and not passed else 0


if __name__ == "__main__":
    sys.exit(main())
