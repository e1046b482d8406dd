"""The rounds of bench/throughput.py: starting the workers of a round (the engine's
``run_scheduler`` or the raw SQL floor's, bench/sql_floor.py), measuring it from the run
tables on the database clock (runs/s, verification, transactions, WAL, CPU of workers and
their backends per run) and the medians over repetitions. ``throughput.py`` parses the
options and prints the report (its docstring says what a round does)."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import psycopg
from common import (  # bench/ is on sys.path: scripts run as files
    OTHER_SESSIONS_SQL,
    ROOT,
    T_ATTEMPT,
    T_RECEIPT,
    T_SCHEDULE,
    code_version,
    connect,
    counters,
    cpu_seconds,
    dbname_of,
    log,
    machine_busy_seconds,
    make_due,
    reset,
    resource_fields,
    run_django,
    scalar,
    start_workers,
    stop_workers,
    wait_for,
    wait_for_heartbeats,
    wait_started,
    worker_backends,
)
from sql_floor import FLOOR_SESSIONS_SQL, floor_args, floor_launcher

FLOOR_WORKERS = 4
#: The two kinds of round: the engine's workers, and the raw SQL floor's (bench/sql_floor.py).
ENGINE, SQL_FLOOR = "engine", "sql_floor"


def bench_workers(
    n: int, env: dict[str, str], args: argparse.Namespace, logdir: Path, tag: str, kind: str
) -> list[tuple[subprocess.Popen[bytes], Path]]:
    if kind == SQL_FLOOR:
        fargs = floor_args(args.database_url, args.floor_batch, args.floor_form, args.max_idle)
        return start_workers(n, env, logdir, f"floor-{tag}", fargs, floor_launcher())
    launcher: tuple[str, ...] = ("-m", "django", "run_scheduler")
    if args.experiment:
        # Prototype engine changes patched in at run time (bench/experiment_worker.py).
        launcher = (str(ROOT / "bench" / "experiment_worker.py"), args.experiment, "--")
    worker_args = [
        "--batch-size",
        str(args.batch_size),
        "--concurrency",
        str(args.concurrency),
        "--max-idle",
        str(args.max_idle),
        "--verbosity",
        "0",
    ]
    if args.defaults:  # as a user starts it: no options, the settings' defaults (and
        worker_args = []  # Django's verbosity 1: a log line per run, into the worker's log)
    return start_workers(n, env, logdir, tag, worker_args, launcher)


# One round
# ---------------------------------------------------------------------------------------


def measure(conn: psycopg.Connection, schedules: int) -> dict[str, Any]:
    a = conn.execute(
        f"SELECT count(*), count(DISTINCT schedule_id), min(claimed_at), max(claimed_at), "
        f"count(DISTINCT (worker, claimed_at)) FROM {T_ATTEMPT}"
    ).fetchone()
    r = conn.execute(
        f"SELECT count(*), count(*) FILTER (WHERE status = 'succeeded'), min(finished_at), "
        f"max(finished_at), count(DISTINCT finished_at) FROM {T_RECEIPT}"
    ).fetchone()
    duplicated = scalar(
        conn,
        f"SELECT count(*) FROM (SELECT schedule_id FROM {T_ATTEMPT} GROUP BY schedule_id "
        "HAVING count(*) > 1) AS d",
    )
    unreceipted = scalar(
        conn,
        f"SELECT count(*) FROM {T_ATTEMPT} a LEFT JOIN {T_RECEIPT} r ON r.attempt_id = a.id "
        "WHERE r.id IS NULL",
    )
    per_worker = dict(
        conn.execute(
            f"SELECT worker, count(*) FROM {T_ATTEMPT} GROUP BY worker ORDER BY worker"
        ).fetchall()
    )
    leased = scalar(conn, f"SELECT count(*) FROM {T_SCHEDULE} WHERE lease_token IS NOT NULL")
    attempts, distinct_schedules, first_claim, last_claim, claim_txns = a
    receipts, succeeded, first_finish, last_finish, finish_instants = r
    elapsed = (last_finish - first_claim).total_seconds() if receipts else None
    problems = []
    if attempts != schedules:
        problems.append(f"{attempts} attempts, expected {schedules}")
    if distinct_schedules != schedules:
        problems.append(f"attempts cover {distinct_schedules} schedules, expected {schedules}")
    if receipts != schedules:
        problems.append(f"{receipts} receipts, expected {schedules}")
    if succeeded != receipts:
        problems.append(f"{receipts - succeeded} receipts not 'succeeded'")
    if duplicated:
        problems.append(f"{duplicated} schedules with more than one attempt")
    if unreceipted:
        problems.append(f"{unreceipted} attempts without a receipt")
    if leased:
        problems.append(f"{leased} schedules still hold a lease after the workers stopped")
    return {
        "runs_per_second": round(schedules / elapsed, 1) if elapsed else None,
        "elapsed_seconds": round(elapsed, 3) if elapsed is not None else None,
        "claim_phase_seconds": round((last_claim - first_claim).total_seconds(), 3),
        "first_claim_to_first_receipt_seconds": round(
            (first_finish - first_claim).total_seconds(), 3
        ),
        "attempts": attempts,
        "receipts": receipts,
        "succeeded": succeeded,
        "schedules_with_two_attempts": duplicated,
        "claim_transactions": claim_txns,
        "mean_claim_batch": round(attempts / claim_txns, 1) if claim_txns else None,
        "completion_transactions": finish_instants,
        "mean_completion_batch": round(receipts / finish_instants, 1) if finish_instants else None,
        "attempts_per_worker": per_worker,
        "verified": not problems,
        "problems": problems,
        **({"diagnostics": diagnostics(conn)} if problems else {}),
    }


def diagnostics(conn: psycopg.Connection, sample: int = 3) -> dict[str, Any]:
    """What went wrong, for a round that failed verification: receipt statuses and the
    full history of a few schedules that were attempted more than once."""
    statuses = dict(
        conn.execute(f"SELECT status, count(*) FROM {T_RECEIPT} GROUP BY status").fetchall()
    )
    ids = [
        row[0]
        for row in conn.execute(
            f"SELECT schedule_id FROM {T_ATTEMPT} GROUP BY schedule_id HAVING count(*) > 1 "
            "ORDER BY count(*) DESC, schedule_id LIMIT %s",
            (sample,),
        )
    ]
    history = {}
    for sid in ids:
        history[str(sid)] = {
            "schedule": conn.execute(
                f"SELECT name, status, occurrence, attempt, next_run_at, created_at, "
                f"last_run_at, missed_count, definition_hash FROM {T_SCHEDULE} WHERE id = %s",
                (sid,),
            ).fetchone(),
            "attempts": conn.execute(
                f"SELECT a.occurrence, a.attempt, a.worker, a.scheduled_for, a.claimed_at, "
                f"r.status, r.finished_at, r.error_type, r.error_message, r.next_run_at "
                f"FROM {T_ATTEMPT} a LEFT JOIN {T_RECEIPT} r ON r.attempt_id = a.id "
                "WHERE a.schedule_id = %s ORDER BY a.claimed_at",
                (sid,),
            ).fetchall(),
        }
    return {"receipt_statuses": statuses, "duplicated_schedules": history}


def backend_cpu_since(
    before: dict[int, float], after: list[int], cpu: Any = None
) -> tuple[float, int]:
    """CPU seconds the backends ``after`` (pids alive at the round's end) used since
    ``before`` (pid -> CPU seconds at its start): all of it for a backend opened during the
    round. Also how many of ``before`` ended meanwhile (their CPU is lost: a lower bound
    then). ``cpu``: pids -> CPU seconds (default :func:`cpu_seconds`)."""
    cpu = cpu or cpu_seconds
    used = sum(cpu([pid]) - before.get(pid, 0.0) for pid in after)
    return used, len(set(before) - set(after))


def run_round(
    conn: psycopg.Connection,
    n: int,
    args: argparse.Namespace,
    env: dict[str, str],
    logdir: Path,
    tag: str,
    kind: str = ENGINE,
) -> dict[str, Any]:
    dbname = dbname_of(args.database_url)
    reset(conn)
    procs = bench_workers(n, env, args, logdir, tag, kind)
    try:
        if kind == SQL_FLOOR:  # each floor worker's session is open: it polls for due rows
            startup = wait_started(conn, FLOOR_SESSIONS_SQL, n, procs)
        else:
            startup = wait_for_heartbeats(conn, n, procs)
        time.sleep(0.5)  # every worker is in its idle poll loop now
        before = counters(conn, dbname)
        # Per backend: a worker started without options closes its connection while it
        # idles (CONN_MAX_AGE), so its backend of the round is often opened after this.
        backends_before = {pid: cpu_seconds([pid]) for pid in worker_backends(conn)}
        cpu_before = cpu_seconds([p.pid for p, _ in procs]), 0.0
        busy_before, own_before = machine_busy_seconds(), time.process_time()
        due_at = time.monotonic()
        make_due(conn)
        polls = wait_for(
            conn,
            f"SELECT count(*) FROM {T_RECEIPT}",
            args.schedules,
            due_at + args.timeout,
            procs,
            args.poll_interval,
        )
        wall = time.monotonic() - due_at
        backends_after = worker_backends(conn)
        backend_cpu, backends_gone = backend_cpu_since(backends_before, backends_after)
        cpu_after = cpu_seconds([p.pid for p, _ in procs]), backend_cpu
        busy_after, own_after = machine_busy_seconds(), time.process_time()
    finally:
        codes = stop_workers(procs)
    time.sleep(1.0)  # exited backends have flushed their statistics
    after = counters(conn, dbname)
    result = measure(conn, args.schedules)
    delta = {k: after[k] - before[k] for k in after}
    # The bench's own polls are transactions too (one per poll, plus the counters queries).
    delta["xact_commit"] -= polls + 2
    result.update(
        kind=kind,
        workers=n,
        wall_seconds_due_to_done=round(wall, 3),
        worker_startup_seconds=round(startup, 2),
        worker_exit_codes=codes,
        bench_cpu_seconds=round(own_after - own_before, 2),
        db_backends_opened_during_round=len(set(backends_after) - set(backends_before)),
        db_backends_gone_during_round=backends_gone,
        **resource_fields(
            delta, cpu_before, cpu_after, busy_before, busy_after, args.schedules, "run"
        ),
    )
    if any(codes):
        result["problems"].append(f"worker exit codes {codes}")
        result["verified"] = False
    return result


def one_round(
    args: argparse.Namespace, env: dict[str, str], n: int, tag: str, kind: str
) -> dict[str, Any]:
    """One round of ``kind`` (:data:`ENGINE` or :data:`SQL_FLOOR`) with ``n`` workers, on a
    fresh connection (it survives a server restart); a round that raised is reported as
    failed verification."""
    try:
        if not args.skip_setup and kind == ENGINE:
            # The engine may have gained migrations since the database was built
            # (a no-op otherwise); the round then measures the code it runs.
            run_django(["-m", "django", "migrate", "--verbosity", "0"], env)
        with connect(args.database_url) as conn:
            others = scalar(conn, OTHER_SESSIONS_SQL)
            load = os.getloadavg()[0]
            log(
                f"round {tag} {kind}: {n} worker(s); {others} other client sessions, load {load:.2f}"
            )
            result = run_round(conn, n, args, env, args.logdir, tag, kind)
            result.update(
                other_client_sessions_at_start=others,
                loadavg_1min_at_start=round(load, 2),
                code=code_version(),
            )
    except (TimeoutError, RuntimeError, psycopg.Error, subprocess.CalledProcessError) as exc:
        log(f"round {tag} {kind} failed: {exc}")
        result = {
            "kind": kind,
            "workers": n,
            "verified": False,
            "problems": [str(exc)],
            "runs_per_second": None,
        }
    log(
        f"round {tag} {kind}: {result['runs_per_second']} runs/s, "
        f"verified={result['verified']} {result['problems'] or ''}"
    )
    return result


def medians(
    rounds: dict[int, list[dict[str, Any]]], key: str = "runs_per_second"
) -> dict[str, float | None]:
    """Per worker count, the median of ``key`` over its rounds that have it."""
    out: dict[str, float | None] = {}
    for n, results in rounds.items():
        values = [r[key] for r in results if r.get(key) is not None]
        out[str(n)] = round(statistics.median(values), 3 if "cpu" in key else 1) if values else None
    return out


def cpu_medians(rounds: dict[int, list[dict[str, Any]]]) -> dict[str, dict[str, float | None]]:
    """Per worker count, the median worker and backend CPU per run (ms)."""
    worker = medians(rounds, "worker_cpu_ms_per_run")
    backend = medians(rounds, "db_backend_cpu_ms_per_run")
    return {n: {"worker_ms": worker[n], "db_backend_ms": backend[n]} for n in worker}


# ---------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------
