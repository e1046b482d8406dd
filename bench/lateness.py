"""G2: lateness (claimed - scheduled) with 1,000 mixed schedules, about 100 due a second.

    .venv/bin/python bench/lateness.py [--duration 60] [--workers 2] [--plot docs/img/lateness.png]

Seeds 900 interval schedules (every 10 s, anchors spread over 10 seconds: ~90 due each
second) and 100 cron schedules (``* * * * *`` in ten time zones: a burst of 100 at every
minute), all with ``tests.noop``; starts ``--workers`` real ``run_scheduler`` processes
(``--concurrency 32`` as in ``throughput.py``, otherwise default options) and lets them run for ``--duration`` seconds. Then reads, for every
attempt whose slot fell inside the window, ``claimed_at - scheduled_for`` (both on the
database clock; ``scheduled_for`` is the nominal slot, no jitter) and reports p50 / p99 /
max in milliseconds, the run rate, and that every slot in the window ran exactly once.
Since a worker claims short runs ahead of its free threads, it also reports the slot to
the receipt's ``finished_at`` (p50 / p99 / max): an upper bound of when each callback
started, which adds the run and the completion to any wait in line for a thread.

Floor (issue #5, G2): p99 <= 200 ms. Target: p50 <= 20 ms, p99 <= 100 ms, max <= 1 s.
``--plot PATH`` writes a histogram (bench/plots.py, matplotlib). Prints JSON, then one
summary line; ``--check`` exits 1 when the floor is missed. Uses the database
``dds_bench_lateness`` (dropped and recreated).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

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
    scalar,
    set_deadlines,
    start_workers,
    stop_workers,
    wait_for_heartbeats,
    with_notifier,
)

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/dds_bench_lateness"
ZONES = [
    "UTC",
    "Europe/Paris",
    "America/New_York",
    "Asia/Tokyo",
    "Australia/Sydney",
    "America/Sao_Paulo",
    "Asia/Kolkata",
    "Europe/London",
    "Pacific/Auckland",
    "America/Los_Angeles",
]

SEED = r"""
import sys, django
django.setup()
from datetime import timedelta
from django.utils import timezone
from django_durable_schedules.models import Kind, Schedule, Status

intervals, crons, lead = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
zones = sys.argv[4].split(",")
start = timezone.now().replace(microsecond=0) + timedelta(seconds=lead)
template = Schedule(kind=Kind.INTERVAL, interval_seconds=10, timezone="UTC")
rows = []
for i in range(intervals):
    anchor = start + timedelta(seconds=i % 10)
    rows.append(Schedule(
        name=f"lat-int-{i:04d}", callback="tests.noop", kind=Kind.INTERVAL,
        interval_seconds=10, timezone="UTC", status=Status.ACTIVE, created_at=anchor,
        next_run_at=anchor, definition_hash=template.compute_definition_hash(),
    ))
Schedule.objects.bulk_create(rows, batch_size=1000)
for i in range(crons):
    Schedule.objects.create(
        name=f"lat-cron-{i:04d}", callback="tests.noop", kind=Kind.CRON, cron="* * * * *",
        timezone=zones[i % len(zones)],
    )
print(start.isoformat())
"""


def percentile(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(len(values) * q))]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", type=float, default=60.0)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--intervals", type=int, default=900)
    p.add_argument("--crons", type=int, default=100)
    p.add_argument(
        "--concurrency",
        type=int,
        default=32,
        help="worker --concurrency (default 32, as throughput.py; the setting's default is 4)",
    )
    p.add_argument(
        "--defaults",
        action="store_true",
        help="start the workers as a user does, with no options (the settings' defaults)",
    )
    p.add_argument("--floor-ms", type=float, default=200.0)
    p.add_argument("--plot", type=Path, help="write a lateness histogram PNG here")
    p.add_argument("--database-url", default=DEFAULT_URL)
    p.add_argument("--check", action="store_true")
    p.add_argument(
        "--deadline-seconds",
        type=int,
        default=0,
        help="give every schedule this deadline (issue #26: the sweep's cost); default none",
    )
    p.add_argument(
        "--notifier-url",
        default="",
        help="one WebhookNotifier to this URL in the workers (issue #26); default none",
    )
    args = p.parse_args(argv)
    if not dbname_of(args.database_url).startswith("dds_bench"):
        p.error("refusing to drop a database whose name does not start with dds_bench")
    env = with_notifier(django_env(args.database_url), args.notifier_url)
    fresh_database(args.database_url, env)

    with connect(args.database_url) as conn:
        procs = start_workers(
            args.workers,
            env,
            ROOT / "bench" / "out",
            "lateness",
            []  # --defaults: no options, as a user starts it (verbosity 1: a line a run)
            if args.defaults
            else ["--concurrency", str(args.concurrency), "--verbosity", "0"],
        )
        try:
            wait_for_heartbeats(conn, args.workers, procs)
            seeded = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    SEED,
                    str(args.intervals),
                    str(args.crons),
                    "5",
                    ",".join(ZONES),
                ],
                cwd=ROOT,
                env=env,
                check=True,
                capture_output=True,
                text=True,
            )
            window_start = seeded.stdout.strip().splitlines()[-1]
            set_deadlines(conn, args.deadline_seconds)
            log(f"seeded; window starts {window_start}, running {args.duration:g} s")
            time.sleep(5 + args.duration)
        finally:
            codes = stop_workers(procs)
        window_end = scalar(
            conn, "SELECT %s::timestamptz + %s * interval '1 second'", (window_start, args.duration)
        )
        rows = conn.execute(
            f"SELECT extract(epoch FROM claimed_at - scheduled_for) * 1000, attempt "
            f"FROM {T_ATTEMPT} WHERE scheduled_for >= %s AND scheduled_for < %s",
            (window_start, window_end),
        ).fetchall()
        # A claim may wait in line for a free thread (claiming ahead): the receipt's time
        # bounds the callback's start from above (it adds the run and the completion).
        receipted = conn.execute(
            f"SELECT extract(epoch FROM r.finished_at - a.scheduled_for) * 1000 "
            f"FROM {T_ATTEMPT} a JOIN {T_RECEIPT} r ON r.attempt_id = a.id "
            f"WHERE a.scheduled_for >= %s AND a.scheduled_for < %s",
            (window_start, window_end),
        ).fetchall()
        duplicates = scalar(
            conn,
            f"SELECT count(*) FROM (SELECT schedule_id, scheduled_for FROM {T_ATTEMPT} "
            "GROUP BY 1, 2 HAVING count(*) > 1) d",
        )
        not_succeeded = scalar(
            conn, f"SELECT count(*) FROM {T_RECEIPT} WHERE status NOT IN ('succeeded')"
        )
        missed = scalar(conn, "SELECT coalesce(sum(missed_slots), 0) FROM " + T_ATTEMPT)
    lateness = sorted(float(r[0]) for r in rows)
    to_receipt = sorted(float(r[0]) for r in receipted)
    expected = int(args.intervals * args.duration / 10)  # interval slots; crons add ~crons/min
    problems = []
    if duplicates:
        problems.append(f"{duplicates} slots attempted twice")
    if not_succeeded:
        problems.append(f"{not_succeeded} receipts not succeeded")
    if missed:
        problems.append(f"{missed} slots missed")
    if any(codes):
        problems.append(f"worker exit codes {codes}")
    result: dict[str, Any] = {
        "runs": len(lateness),
        "runs_per_second": round(len(lateness) / args.duration, 1),
        "interval_slots_expected_at_least": expected,
        "p50_ms": round(statistics.median(lateness), 1) if lateness else None,
        "p90_ms": round(percentile(lateness, 0.90), 1) if lateness else None,
        "p99_ms": round(percentile(lateness, 0.99), 1) if lateness else None,
        "max_ms": round(lateness[-1], 1) if lateness else None,
        "slot_to_receipt_ms": {
            "p50": round(statistics.median(to_receipt), 1) if to_receipt else None,
            "p99": round(percentile(to_receipt, 0.99), 1) if to_receipt else None,
            "max": round(to_receipt[-1], 1) if to_receipt else None,
        },
    }
    if len(lateness) < expected:
        problems.append(f"only {len(lateness)} runs in the window, expected >= {expected}")
    passed = not problems and result["p99_ms"] is not None and result["p99_ms"] <= args.floor_ms
    if args.plot and lateness:
        try:
            import plots

            plots.lateness_histogram(
                lateness,
                args.plot,
                f"Lateness, {len(lateness):,} runs, {args.workers} workers, "
                f"~{result['runs_per_second']:g} due/s",
            )
            result["plot"] = str(args.plot)
        except ImportError as exc:
            log(f"no plot: {exc}")
    report = {
        "benchmark": "lateness",
        "workers": args.workers,
        "concurrency": "default" if args.defaults else args.concurrency,
        "schedules": {"interval_10s": args.intervals, "cron_every_minute": args.crons},
        "duration_seconds": args.duration,
        "deadline_seconds": args.deadline_seconds or None,
        "notifier": bool(args.notifier_url),
        **result,
        "problems": problems,
        "floor": {"p99_ms": args.floor_ms, "passed": passed},
        "code": code_version(),
    }
    emit(
        report,
        f"lateness: p50 {result['p50_ms']} ms, p99 {result['p99_ms']} ms, max "
        f"{result['max_ms']} ms over {len(lateness):,} runs ({result['runs_per_second']}/s, "
        f"slot to receipt p99 {result['slot_to_receipt_ms']['p99']} ms, "
        f"{args.workers} workers){'; ' + '; '.join(problems) if problems else ''} "
        f"(floor p99 {args.floor_ms:g} ms: {'PASS' if passed else 'FAIL'})",
    )
    return 1 if args.check and not passed else 0


if __name__ == "__main__":
    sys.exit(main())
