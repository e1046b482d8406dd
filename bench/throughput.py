"""Throughput benchmark: how many runs per second N real ``run_scheduler`` processes
complete against PostgreSQL.

    .venv/bin/python bench/throughput.py [--schedules 5000] [--workers 1,2,4] \\
        [--database-url postgres://postgres@127.0.0.1:5432/dds_bench] [--repeat 1] [--check]

What it does (see bench/README.md and docs/benchmarks.md):

1. drops and recreates the database named in ``--database-url`` (its name must start with
   ``dds_bench``), migrates it with ``python -m django migrate`` (tests.settings) and
   inserts ``--schedules`` interval schedules (``tests.noop``, every 3600 s) with
   ``bench/seed.py``;
2. for each worker count N (and each repetition): truncates attempts, receipts and
   heartbeats, resets every schedule to "never run" with no ``next_run_at`` (so nothing is
   due), starts N ``manage.py run_scheduler`` processes, waits until all N have written a
   heartbeat (so process start-up is not measured), then makes every schedule due in one
   UPDATE and polls until one receipt per schedule exists; then SIGTERM;
3. measures from the run tables, on the database clock: runs/s = schedules /
   (last receipt ``finished_at`` - first attempt ``claimed_at``), and verifies one attempt
   per schedule and one ``succeeded`` receipt per attempt.

Each round also records, for explaining the number: claim/completion transactions and
their mean batch, commits, WAL syncs and WAL bytes per run (pg_stat_database, pg_stat_wal:
the WAL figures are server-wide), CPU of the worker processes and of their PostgreSQL
backends per run (the backends open when the last receipt is written: all of the CPU of
one opened during the round, which workers started without options do, as they close
their connection while idle), and the CPU the rest of the machine used meanwhile (/proc: the server
must run on this machine for the CPU figures). ``--experiment`` runs the workers with
prototype engine changes patched in (bench/experiment_worker.py). ``--deadline-seconds N``
gives every schedule a deadline (never missed when N is larger than a round), and
``--notifier-url URL`` configures one webhook notifier in the workers: the cost of the
deadline sweep and of a configured notifier (issue #26). ``--sql-floor`` pairs every round
with one of the raw SQL floor (bench/sql_floor.py: as many floor workers doing only the
claim and completion SQL, on the same database and schedules, reset alike; the pair's order
alternates) and reports its runs/s and CPU per run, and the ratio engine/floor (issue #32
goal 4: >= ``--ratio-target``, 0.40, at 4 workers).

Prints one JSON object on stdout, then a one-line summary. Exit status: 2 if a round failed
its verification or timed out; 1 with ``--check`` if 4 workers (the largest N measured if 4
is not among them) stay under ``--floor`` runs/s, or, with ``--sql-floor``, their ratio to
the floor stays under ``--ratio-target``; else 0.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
from common import (  # bench/ is on sys.path: scripts run as files
    DEFAULT_URL,
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
    django_env,
    log,
    machine_busy_seconds,
    make_due,
    python_loop_ms,
    recreate_database,
    reset,
    resource_fields,
    run_django,
    scalar,
    server_info,
    set_deadlines,
    start_workers,
    stop_workers,
    wait_for,
    wait_for_heartbeats,
    wait_started,
    with_notifier,
    worker_backends,
)
from sql_floor import DEFAULT_BATCH, FLOOR_SESSIONS_SQL, FORMS, floor_args, floor_launcher

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


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--schedules", type=int, default=5000, help="schedules to run (default 5000)")
    p.add_argument(
        "--group-max-running",
        type=int,
        default=None,
        help="put every schedule in one concurrency group of this max_running (its cost: "
        "each claim locks and counts the group; a cap above the workers' threads never "
        "holds a run back)",
    )
    p.add_argument(
        "--groups",
        type=int,
        default=0,
        help="with --group-max-running: spread the schedules round-robin over this many "
        "groups of that max_running, not one (default: one group)",
    )
    p.add_argument(
        "--workers", default="1,2,4", help="comma-separated worker counts (default 1,2,4)"
    )
    p.add_argument(
        "--database-url",
        default=os.environ.get("DDS_BENCH_DATABASE_URL", DEFAULT_URL),
        help=f"PostgreSQL URL of the bench database, dropped and recreated; its name "
        f"must start with dds_bench (default {DEFAULT_URL})",
    )
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="rounds per worker count; the median runs/s is reported (default 1)",
    )
    p.add_argument(
        "--defaults",
        action="store_true",
        help="start the workers with no options, as a user does (ignores the three below)",
    )
    p.add_argument("--batch-size", type=int, default=100)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--max-idle", type=float, default=0.2)
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per round (default 300)")
    p.add_argument("--poll-interval", type=float, default=0.1, help="receipt count poll (seconds)")
    p.add_argument("--floor", type=float, default=1500.0, help="runs/s required at 4 workers (G1)")
    p.add_argument("--check", action="store_true", help="exit 1 if the floor is missed")
    p.add_argument(
        "--experiment",
        default="",
        help="comma-separated prototype changes to patch into the workers "
        "(see bench/experiment_worker.py); default: the engine as it is",
    )
    p.add_argument(
        "--deadline-seconds",
        type=int,
        default=0,
        help="give every schedule this deadline_seconds (issue #26: the cost of the "
        "deadline sweep; large enough never to be missed); default: no deadline",
    )
    p.add_argument(
        "--notifier-url",
        default="",
        help="configure NOTIFIERS with one WebhookNotifier to this URL in the workers "
        "(issue #26: the cost of a configured notifier); default: none",
    )
    p.add_argument(
        "--sql-floor",
        action="store_true",
        help="pair each round with one of the raw SQL floor (bench/sql_floor.py, as many "
        "workers) on the same database, alternately first; report both and their ratio",
    )
    p.add_argument(
        "--floor-batch",
        type=int,
        default=None,
        help=f"rows per claim of the SQL floor (default --batch-size, {DEFAULT_BATCH}: the "
        "engine's BATCH_SIZE)",
    )
    p.add_argument("--floor-form", choices=FORMS, default="cte", help="see bench/sql_floor.py")
    p.add_argument(
        "--ratio-target",
        type=float,
        default=0.40,
        help="engine/floor runs/s required at 4 workers with --sql-floor (issue #32 goal 4); "
        "--check exits 1 below it too",
    )
    p.add_argument("--json-out", type=Path, help="also write the JSON report to this file")
    p.add_argument(
        "--skip-setup",
        action="store_true",
        help="reuse an already migrated and seeded bench database",
    )
    p.add_argument(
        "--logdir",
        type=Path,
        default=ROOT / "bench" / "out",
        help="worker logs (default bench/out, git-ignored)",
    )
    args = p.parse_args(argv)
    args.floor_batch = args.floor_batch or args.batch_size
    args.worker_counts = [int(w) for w in args.workers.split(",") if w.strip()]
    if not args.worker_counts or min(args.worker_counts) < 1:
        p.error("--workers needs positive integers")
    if not dbname_of(args.database_url).startswith("dds_bench"):
        p.error("refusing to drop a database whose name does not start with dds_bench")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    env = django_env(args.database_url)
    env = with_notifier(env, args.notifier_url)
    args.logdir.mkdir(parents=True, exist_ok=True)
    dbname = dbname_of(args.database_url)

    if not args.skip_setup:
        log(f"recreating database {dbname}")
        recreate_database(args.database_url)
        log("migrating")
        run_django(["-m", "django", "migrate", "--verbosity", "0"], env)
        log(f"seeding {args.schedules} schedules")
        seed_env = dict(env)
        if args.group_max_running:
            seed_env["DDS_BENCH_GROUP_MAX_RUNNING"] = str(args.group_max_running)
            seed_env["DDS_BENCH_GROUPS"] = str(args.groups)
        run_django([str(ROOT / "bench" / "seed.py"), str(args.schedules)], seed_env)

    rounds: dict[int, list[dict[str, Any]]] = {}
    floor_rounds: dict[int, list[dict[str, Any]]] = {}
    failed = False
    with connect(args.database_url) as conn:
        set_deadlines(conn, args.deadline_seconds)
        present = scalar(conn, f"SELECT count(*) FROM {T_SCHEDULE}")
        if present != args.schedules:
            log(f"the database holds {present} schedules, not {args.schedules}")
            return 2
        server = server_info(conn)
    speed = python_loop_ms()
    log(
        f"PostgreSQL {server['server_version']}: fsync={server['fsync']} "
        f"synchronous_commit={server['synchronous_commit']}; a 2M-step Python loop: {speed} ms"
    )
    for n in args.worker_counts:
        for rep in range(args.repeat):
            kinds = [ENGINE]
            if args.sql_floor:  # paired rounds, alternately first: both see the same load
                kinds = [ENGINE, SQL_FLOOR] if rep % 2 == 0 else [SQL_FLOOR, ENGINE]
            for kind in kinds:
                result = one_round(args, env, n, f"n{n}-r{rep + 1}", kind)
                failed |= not result["verified"]
                into = rounds if kind == ENGINE else floor_rounds
                into.setdefault(n, []).append(result)

    summary = medians(rounds)
    floor_summary = medians(floor_rounds)
    ratios = {
        str(n): round(summary[str(n)] / floor_summary[str(n)], 3)
        if summary[str(n)] and floor_summary.get(str(n))
        else None
        for n in floor_rounds
    }
    floor_n = FLOOR_WORKERS if FLOOR_WORKERS in rounds else max(rounds)
    at_floor = summary[str(floor_n)]
    passed = at_floor is not None and at_floor >= args.floor and not failed
    ratio = ratios.get(str(floor_n))
    ratio_passed = ratio is not None and ratio >= args.ratio_target and not failed
    report = {
        "benchmark": "throughput",
        "deadline_seconds": args.deadline_seconds or None,
        "notifier": bool(args.notifier_url),
        "schedules": args.schedules,
        "groups": {"count": args.groups or 1, "max_running": args.group_max_running}
        if args.group_max_running
        else None,
        "experiment": args.experiment or None,
        "worker_options": "defaults (no options: verbosity 1, a log line per run)"
        if args.defaults
        else {
            "batch_size": args.batch_size,
            "concurrency": args.concurrency,
            "max_idle": args.max_idle,
            "verbosity": 0,
        },
        "runs_per_second": summary,
        "floor": {"workers": floor_n, "runs_per_second": args.floor, "passed": passed},
        "sql_floor": {
            "batch": args.floor_batch,
            "form": args.floor_form,
            "runs_per_second": floor_summary,
            "ratio_engine_to_floor": ratios,
            "cpu_ms_per_run": {"engine": cpu_medians(rounds), "floor": cpu_medians(floor_rounds)},
            "target": {"workers": floor_n, "ratio": args.ratio_target, "passed": ratio_passed},
            "rounds": floor_rounds,
        }
        if args.sql_floor
        else None,
        "verified": not failed,
        "code": code_version(),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "python_loop_ms": speed,
        },
        "postgresql": server,
        "rounds": rounds,
    }
    text = json.dumps(report, indent=2, default=str)
    print(text)
    if args.json_out:
        args.json_out.write_text(text + "\n")
    parts = [f"{n} worker{'s' if n != 1 else ''} {summary[str(n)]} runs/s" for n in rounds]
    verdict = "PASS" if passed else "FAIL"
    print(
        f"throughput: {', '.join(parts)} (floor {args.floor:g} at {floor_n} workers: {verdict}; "
        f"machine speed: a 2M-step Python loop in {speed} ms)"
        + ("" if not failed else " - VERIFICATION FAILED")
    )
    if args.sql_floor:
        cpu, fcpu = cpu_medians(rounds), cpu_medians(floor_rounds)
        parts = [
            f"{n} worker{'s' if n != 1 else ''} {summary[str(n)]} vs {floor_summary[str(n)]} "
            f"runs/s = {ratios[str(n)]} (CPU/run worker+db: engine {cpu[str(n)]['worker_ms']}"
            f"+{cpu[str(n)]['db_backend_ms']} ms, floor {fcpu[str(n)]['worker_ms']}"
            f"+{fcpu[str(n)]['db_backend_ms']} ms)"
            for n in floor_rounds
        ]
        print(
            f"sql floor: engine vs raw SQL floor (batch {args.floor_batch}, {args.floor_form}): "
            f"{', '.join(parts)} (target >= {args.ratio_target:g} at {floor_n} workers: "
            f"{'PASS' if ratio_passed else 'FAIL'})"
        )
    if failed:
        return 2
    if args.check and not (passed and (ratio_passed or not args.sql_floor)):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
