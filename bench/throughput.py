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
import sys
from pathlib import Path
from typing import Any

from common import (  # bench/ is on sys.path: scripts run as files
    DEFAULT_URL,
    ROOT,
    T_SCHEDULE,
    code_version,
    connect,
    dbname_of,
    django_env,
    log,
    python_loop_ms,
    recreate_database,
    run_django,
    scalar,
    server_info,
    set_deadlines,
    with_notifier,
)
from sql_floor import DEFAULT_BATCH, FORMS
from throughput_rounds import (  # noqa: F401 - backend_cpu_since: tests/test_bench_judgements.py
    ENGINE,
    FLOOR_WORKERS,
    SQL_FLOOR,
    backend_cpu_since,
    cpu_medians,
    medians,
    one_round,
)


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
