"""Peer benchmark: how many no-op jobs per second N real ``procrastinate worker``
processes complete against the same PostgreSQL, measured the way ``throughput.py``
measures ``run_scheduler``.

    .venv/bin/pip install procrastinate      # or: pip install -e '.[bench]'
    .venv/bin/python bench/peer_procrastinate.py [--jobs 5000] [--workers 1,2,4] \\
        [--database-url postgres://postgres@127.0.0.1:5432/dds_bench_procrastinate]

Method (mirrors bench/throughput.py; see bench/README.md):

1. drops and recreates the database named in ``--database-url`` (its name must start with
   ``dds_bench``) and applies procrastinate's schema (``App.schema_manager.apply_schema``);
2. for each worker count N (and each repetition): truncates procrastinate's tables, defers
   ``--jobs`` no-op jobs in one ``Task.batch_defer`` call (one INSERT, procrastinate's
   bulk path) with ``scheduled_at`` a day in the future, so none is fetchable; starts N
   ``procrastinate --app=peer_procrastinate.app worker`` processes and waits until all N
   registered themselves in ``procrastinate_workers`` (start-up is not measured); then, in
   one transaction, moves every job's ``scheduled_at`` to now and sends the
   ``job_inserted`` notification procrastinate's own insert trigger sends (so the idle
   workers are woken by LISTEN/NOTIFY as on a real defer, not by polling), and polls until
   every job is ``succeeded``; then SIGTERM. This is ``throughput.py``'s "every schedule
   due in one UPDATE" step. ``--release defer`` instead defers the jobs (one INSERT, one
   commit) once the workers wait: procrastinate's own path; both measured alike
   (74 and 81 jobs/s at 1 worker, 5,000 jobs, back to back);
3. measures from procrastinate's own ``procrastinate_events`` on the database clock:
   jobs/s = jobs / (last ``succeeded`` event - first ``started`` event), and verifies that
   every job is ``succeeded`` after exactly one attempt with exactly one ``started`` and
   one ``succeeded`` event, and that no job was retried or failed.

Worker options (the peer at its best, as its 3.10 CLI and source offer): the task is an
``async def`` no-op (``--sync-task``: a plain ``def``, run in a thread like ours),
``--concurrency 32`` (as ours), a connection pool of ``--pool-size`` connections (default
10; psycopg_pool's default is 4; one per job in flight, 4 x 33, exceeds a default
``max_connections`` of 100, and 4, 10 and 32 measured alike at 1 worker),
LISTEN/NOTIFY on, ``--fetch-job-polling-interval 0.2`` (ours: ``--max-idle 0.2``),
``--log-level=warning`` (ours: ``--verbosity 0``), jobs kept after completion (the
default; needed for the verification).

Prints one JSON object on stdout, then ``procrastinate: 1 worker X jobs/s, ...``. Exit
status: 2 if a round failed its verification or timed out, else 0. Worker logs go to
``bench/out/`` (git-ignored).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import procrastinate
import psycopg
from common import (  # bench/ is on sys.path: scripts run as files
    OTHER_SESSIONS_SQL,
    ROOT,
    check_alive,
    code_version,
    connect,
    counters,
    cpu_seconds,
    dbname_of,
    emit,
    log,
    machine_busy_seconds,
    recreate_database,
    resource_fields,
    scalar,
    server_info,
    stop_workers,
    wait_for,
    wait_started,
    worker_backends,
)

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/dds_bench_procrastinate"
URL_ENV = "DDS_BENCH_PROCRASTINATE_URL"
POOL_ENV = "DDS_BENCH_PROCRASTINATE_POOL"
SYNC_ENV = "DDS_BENCH_PROCRASTINATE_SYNC_TASK"
TASK_NAME = "noop"  # explicit: the bench (__main__) and the workers must agree on it
NOTIFY_SQL = (
    "SELECT pg_notify('procrastinate_any_queue_v1', p), "
    "pg_notify('procrastinate_queue_v1#default', p) "
    "FROM (SELECT json_build_object('type', 'job_inserted', 'job_id', 0)::text AS p) AS n"
)


def make_app(url: str, pool_size: int = 4, sync_task: bool = False) -> procrastinate.App:
    """A procrastinate App on ``url`` (a pool of ``pool_size`` connections) with the no-op
    task ``noop`` registered, ``async def`` unless ``sync_task``."""
    app = procrastinate.App(
        connector=procrastinate.PsycopgConnector(
            conninfo=url, min_size=pool_size, max_size=pool_size
        )
    )
    if sync_task:

        @app.task(name=TASK_NAME)
        def noop() -> None:
            """Does nothing (run in a thread by the worker)."""

    else:

        @app.task(name=TASK_NAME)
        async def noop() -> None:
            """Does nothing (awaited on the worker's event loop)."""

    return app


if __name__ != "__main__":
    #: What the workers load (``--app=peer_procrastinate.app``), configured by the bench
    #: through the environment. Not built in ``__main__``: procrastinate warns about an
    #: App defined there (its task names would differ from the workers').
    app = make_app(
        os.environ.get(URL_ENV, DEFAULT_URL),
        int(os.environ.get(POOL_ENV, "4")),
        os.environ.get(SYNC_ENV) == "1",
    )


# ---------------------------------------------------------------------------------------
# One round
# ---------------------------------------------------------------------------------------


def reset(conn: psycopg.Connection) -> None:
    """Forget every job, worker and event (TRUNCATE; ids restart at 1)."""
    conn.execute(
        "TRUNCATE procrastinate_events, procrastinate_periodic_defers, procrastinate_jobs, "
        "procrastinate_workers RESTART IDENTITY"
    )


def defer_jobs(bench_app: procrastinate.App, jobs: int, later: bool) -> None:
    """Defer ``jobs`` no-op jobs in one batch (one INSERT, one commit); with ``later``,
    none is fetchable for a day."""
    with bench_app.open():
        task = bench_app.tasks[TASK_NAME]
        if later:
            task = task.configure(schedule_at=dt.datetime.now(dt.UTC) + dt.timedelta(days=1))
        task.batch_defer(*({} for _ in range(jobs)))


def vacuum(conn: psycopg.Connection) -> None:
    """VACUUM (ANALYZE) the tables the workers use, then CHECKPOINT (as common.reset)."""
    for table in ("procrastinate_jobs", "procrastinate_events", "procrastinate_workers"):
        conn.execute(f"VACUUM (ANALYZE) {table}")
    conn.execute("CHECKPOINT")  # every round starts without pending dirty pages


def make_available(conn: psycopg.Connection) -> None:
    """Every job fetchable now, and the workers told so, in one transaction."""
    with conn.transaction():
        conn.execute("UPDATE procrastinate_jobs SET scheduled_at = statement_timestamp()")
        conn.execute(NOTIFY_SQL)


def start_peer_workers(
    n: int, args: argparse.Namespace, logdir: Path, tag: str
) -> list[tuple[subprocess.Popen[bytes], Path]]:
    env = dict(os.environ)
    env[URL_ENV] = args.database_url
    env[POOL_ENV] = str(args.pool_size)
    env[SYNC_ENV] = "1" if args.sync_task else "0"
    here = str(Path(__file__).resolve().parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    logdir.mkdir(parents=True, exist_ok=True)
    procs = []
    for i in range(n):
        path = logdir / f"procrastinate-{tag}-worker{i}.log"
        cmd = [
            sys.executable,
            "-m",
            "procrastinate",
            "--app=peer_procrastinate.app",
            "--log-level=warning",  # as ours (--verbosity 0): no line per job
            "worker",
            "--name",
            f"bench-{tag}-w{i}",
            "--concurrency",
            str(args.concurrency),
            "--fetch-job-polling-interval",
            str(args.polling_interval),
        ]
        with path.open("wb") as out:
            procs.append(
                (
                    subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT),
                    path,
                )
            )
    return procs


def measure(conn: psycopg.Connection, jobs: int) -> dict[str, Any]:
    j = conn.execute(
        "SELECT count(*), count(*) FILTER (WHERE status = 'succeeded'), "
        "count(*) FILTER (WHERE attempts <> 1) FROM procrastinate_jobs"
    ).fetchone()
    e = conn.execute(
        "SELECT count(*) FILTER (WHERE type = 'started'), "
        "count(DISTINCT job_id) FILTER (WHERE type = 'started'), "
        "count(*) FILTER (WHERE type = 'succeeded'), "
        "count(DISTINCT job_id) FILTER (WHERE type = 'succeeded'), "
        "count(*) FILTER (WHERE type IN ('deferred_for_retry', 'failed', 'retried', "
        "'aborted', 'cancelled')), "
        "min(at) FILTER (WHERE type = 'started'), max(at) FILTER (WHERE type = 'started'), "
        "min(at) FILTER (WHERE type = 'succeeded'), max(at) FILTER (WHERE type = 'succeeded'), "
        "count(DISTINCT at) FILTER (WHERE type = 'started') "
        "FROM procrastinate_events"
    ).fetchone()
    total, succeeded, not_one_attempt = j
    (
        started,
        started_jobs,
        finished,
        finished_jobs,
        bad_events,
        first_start,
        last_start,
        first_finish,
        last_finish,
        fetch_txns,
    ) = e
    elapsed = (last_finish - first_start).total_seconds() if finished else None
    problems = []
    if total != jobs:
        problems.append(f"{total} jobs, expected {jobs}")
    if succeeded != jobs:
        problems.append(f"{succeeded} jobs succeeded, expected {jobs}")
    if not_one_attempt:
        problems.append(f"{not_one_attempt} jobs with attempts <> 1")
    if started != jobs or started_jobs != jobs:
        problems.append(f"{started} 'started' events over {started_jobs} jobs, expected {jobs}")
    if finished != jobs or finished_jobs != jobs:
        problems.append(f"{finished} 'succeeded' events over {finished_jobs} jobs, expected {jobs}")
    if bad_events:
        problems.append(f"{bad_events} retry/failure/abort/cancel events")
    return {
        "jobs_per_second": round(jobs / elapsed, 1) if elapsed else None,
        "elapsed_seconds": round(elapsed, 3) if elapsed is not None else None,
        "fetch_phase_seconds": round((last_start - first_start).total_seconds(), 3)
        if started
        else None,
        "first_start_to_first_success_seconds": round(
            (first_finish - first_start).total_seconds(), 3
        )
        if finished
        else None,
        "jobs": total,
        "succeeded": succeeded,
        "fetch_transactions": fetch_txns,
        "verified": not problems,
        "problems": problems,
    }


def run_round(
    conn: psycopg.Connection,
    n: int,
    args: argparse.Namespace,
    bench_app: procrastinate.App,
    tag: str,
) -> dict[str, Any]:
    dbname = dbname_of(args.database_url)
    reset(conn)
    if args.release == "update":
        defer_jobs(bench_app, args.jobs, later=True)
    vacuum(conn)
    procs = start_peer_workers(n, args, args.logdir, tag)
    try:
        startup = wait_started(conn, "SELECT count(*) FROM procrastinate_workers", n, procs)
        time.sleep(0.5)  # every worker is idle, listening, now
        before = counters(conn, dbname)
        backends = worker_backends(conn)
        cpu_before = cpu_seconds([p.pid for p, _ in procs]), cpu_seconds(backends)
        busy_before = machine_busy_seconds()
        due_at = time.monotonic()
        if args.release == "update":
            make_available(conn)
        else:  # procrastinate's own path: the jobs appear at the INSERT's commit
            defer_jobs(bench_app, args.jobs, later=False)
        polls = wait_for(
            conn,
            "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'",
            args.jobs,
            due_at + args.timeout,
            procs,
            args.poll_interval,
        )
        wall = time.monotonic() - due_at
        cpu_after = cpu_seconds([p.pid for p, _ in procs]), cpu_seconds(backends)
        busy_after = machine_busy_seconds()
        # Before the workers stop: unregistering sets procrastinate_jobs.worker_id to NULL.
        per_worker = [
            row[1]
            for row in conn.execute(
                "SELECT worker_id, count(*) FROM procrastinate_jobs GROUP BY worker_id "
                "ORDER BY worker_id"
            )
        ]
        check_alive(procs)
    finally:
        codes = stop_workers(procs)
    time.sleep(1.0)  # exited backends have flushed their statistics
    after = counters(conn, dbname)
    result = measure(conn, args.jobs)
    delta = {k: after[k] - before[k] for k in after}
    delta["xact_commit"] -= polls + 3  # the bench's own polls and queries
    result.update(
        workers=n,
        wall_seconds_available_to_done=round(wall, 3),
        worker_startup_seconds=round(startup, 2),
        worker_exit_codes=codes,
        jobs_per_worker=per_worker,
        **resource_fields(delta, cpu_before, cpu_after, busy_before, busy_after, args.jobs, "job"),
    )
    if any(codes):
        result["problems"].append(f"worker exit codes {codes}")
        result["verified"] = False
    return result


# ---------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--jobs", type=int, default=5000, help="no-op jobs to run (default 5000)")
    p.add_argument(
        "--workers", default="1,2,4", help="comma-separated worker counts (default 1,2,4)"
    )
    p.add_argument(
        "--database-url",
        default=os.environ.get(URL_ENV, DEFAULT_URL),
        help=f"PostgreSQL URL of the peer's database, dropped and recreated; its name must "
        f"start with dds_bench (default {DEFAULT_URL}, or ${URL_ENV})",
    )
    p.add_argument("--repeat", type=int, default=1, help="rounds per worker count (median)")
    p.add_argument("--concurrency", type=int, default=32, help="jobs in flight per worker")
    p.add_argument("--pool-size", type=int, default=10, help="connections per worker (default 10)")
    p.add_argument("--polling-interval", type=float, default=0.2, help="worker fetch polling")
    p.add_argument("--sync-task", action="store_true", help="a plain def no-op (in a thread)")
    p.add_argument(
        "--release",
        choices=("defer", "update"),
        default="update",
        help="how the jobs become available to the idle workers: 'update' (default): "
        "deferred a day ahead beforehand, then one UPDATE of scheduled_at + NOTIFY; "
        "'defer': one batch_defer INSERT while they wait (measured alike)",
    )
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per round (default 300)")
    p.add_argument("--poll-interval", type=float, default=0.1, help="bench's success poll (s)")
    p.add_argument("--json-out", type=Path, help="also write the JSON report to this file")
    p.add_argument(
        "--skip-setup", action="store_true", help="reuse the database (schema already applied)"
    )
    p.add_argument("--logdir", type=Path, default=ROOT / "bench" / "out")
    args = p.parse_args(argv)
    args.worker_counts = [int(w) for w in args.workers.split(",") if w.strip()]
    if not args.worker_counts or min(args.worker_counts) < 1:
        p.error("--workers needs positive integers")
    if not dbname_of(args.database_url).startswith("dds_bench"):
        p.error("refusing to drop a database whose name does not start with dds_bench")
    return args


def summary_line(rates: dict[str, float | None]) -> str:
    parts = [f"{n} worker{'s' if n != '1' else ''} {r} jobs/s" for n, r in rates.items()]
    return "procrastinate: " + ", ".join(parts)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.logdir.mkdir(parents=True, exist_ok=True)
    # Built by the imported module (not __main__), as the workers build theirs.
    import peer_procrastinate

    bench_app = peer_procrastinate.make_app(args.database_url, 2, args.sync_task)
    if not args.skip_setup:
        log(f"recreating database {dbname_of(args.database_url)}")
        recreate_database(args.database_url)
        log("applying procrastinate's schema")
        with bench_app.open():
            bench_app.schema_manager.apply_schema()
    with connect(args.database_url) as conn:
        server = server_info(conn)

    rounds: dict[int, list[dict[str, Any]]] = {}
    failed = False
    for n in args.worker_counts:
        for rep in range(args.repeat):
            tag = f"n{n}-r{rep + 1}"
            try:
                with connect(args.database_url) as conn:
                    others = scalar(conn, OTHER_SESSIONS_SQL)
                    load = os.getloadavg()[0]
                    log(f"round {tag}: {n} worker(s); {others} other sessions, load {load:.2f}")
                    result = run_round(conn, n, args, bench_app, tag)
                    result.update(
                        other_client_sessions_at_start=others,
                        loadavg_1min_at_start=round(load, 2),
                    )
            except (TimeoutError, RuntimeError, psycopg.Error) as exc:
                log(f"round {tag} failed: {exc}")
                result = {
                    "workers": n,
                    "verified": False,
                    "problems": [str(exc)],
                    "jobs_per_second": None,
                }
            failed |= not result["verified"]
            log(
                f"round {tag}: {result['jobs_per_second']} jobs/s, "
                f"verified={result['verified']} {result['problems'] or ''}"
            )
            rounds.setdefault(n, []).append(result)

    rates: dict[str, float | None] = {}
    for n, results in rounds.items():
        values = [r["jobs_per_second"] for r in results if r["jobs_per_second"] is not None]
        rates[str(n)] = round(statistics.median(values), 1) if values else None
    report = {
        "benchmark": "peer_procrastinate",
        "procrastinate_version": procrastinate.__version__,
        "jobs": args.jobs,
        "worker_options": {
            "concurrency": args.concurrency,
            "pool_size": args.pool_size,
            "fetch_job_polling_interval": args.polling_interval,
            "listen_notify": True,
            "task": "def" if args.sync_task else "async def",
            "release": args.release,
        },
        "jobs_per_second": rates,
        "verified": not failed,
        "code": code_version(),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "postgresql": server,
        "rounds": rounds,
    }
    emit(
        report,
        summary_line(rates) + ("" if not failed else " - VERIFICATION FAILED"),
        args.json_out,
    )
    return 2 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
