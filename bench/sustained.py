"""Issue #32 goal 2: a sustained day, compressed.

    .venv/bin/python bench/sustained.py [--schedules 100000] [--minutes 30] [--workers 4]
        [--prune-every 60] [--keep-minutes 5] [--warmup-minutes 1] [--worker-args "..."]
        [--database-url postgres://.../dds_bench_sustained] [--check] [--json-out PATH]

1. Drops and recreates the bench database (its name must start with ``dds_bench``),
   migrates it and seeds ``--schedules`` interval schedules of ``tests.noop`` every
   ``--interval`` seconds (60), their grids spread evenly (to the millisecond) over the
   first interval: about N / 60 runs a second, every second. ``VACUUM ANALYZE``.
2. Starts ``--workers`` real ``run_scheduler`` processes with the settings' defaults (plus
   ``--worker-args``), and every ``--prune-every`` seconds runs ``manage.py prune_runs
   --older-than <--keep-minutes> --no-input`` beside them (one at a time; a prune still
   running when the next is due is counted as ``prune_overlaps``).
3. Once a minute, after that minute is over (receipts are read by ``finished_at``, an
   indexed, time-bounded scan: the tables grow): start lateness p50 / p99 of the runs
   finished in the minute (``started_at - scheduled_for``), the runs counted, each
   worker's VmRSS, the schedule table's heap, index and total size, its updates and HOT
   updates (``pg_stat_user_tables``), dead tuples, last autovacuum, the attempts and
   receipts inserted so far and alive now, their tables' sizes, slots the engine recorded
   as missed, schedules overdue by more than 5 s, and ``/proc/loadavg``.

Floors (the first ``--warmup-minutes`` are not judged; "first" and "last" are the first
and last ``W = min(5, judged minutes // 2)`` judged minutes):

* lateness flat: median of the last W per-minute p99s <= 1.2 x the first W's + 50 ms
  (the absolute allowance keeps 10 ms against 13 ms from failing);
* RSS flat: each worker's median VmRSS over the last W minutes <= 1.1 x its median over
  the first W + 8 MiB;
* schedule table bounded: heap + indexes at the end <= 2 x their size after the first W;
* runs keep up: 0 missed slots, and every judged minute ran >= 99 % of its slots;
* prune keeps pace: no prune overlapped the next, and the receipts alive at the end are
  at most (keep + prune interval + 2 minutes) of runs.

Prints the JSON report (per-minute samples included), then one PASS/FAIL line per floor
and a summary; ``--check`` exits 1 when any floor fails. Database ``dds_bench_sustained``.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from common import (
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
    python_loop_ms,
    scalar,
    server_info,
    start_workers,
    stop_workers,
    wait_for_heartbeats,
)

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/dds_bench_sustained"
#: Seconds between the grid's anchor and the moment the workers are started.
LEAD_SECONDS = 15
#: Seconds after a minute ends before it is read (its last runs finish).
READ_DELAY = 5

SEED = r"""
import sys, django
django.setup()
from datetime import datetime, timedelta
from django_durable_schedules.models import Kind, Schedule, Status
count, every, base = int(sys.argv[1]), int(sys.argv[2]), datetime.fromisoformat(sys.argv[3])
digest = Schedule(kind=Kind.INTERVAL, interval_seconds=every, timezone="UTC").compute_definition_hash()
for start in range(0, count, 5000):
    rows = []
    for i in range(start, min(count, start + 5000)):
        anchor = base + timedelta(milliseconds=(i * every * 1000) // count)
        rows.append(Schedule(
            name=f"day-{i:07d}", callback="tests.noop", kind=Kind.INTERVAL,
            interval_seconds=every, timezone="UTC", status=Status.ACTIVE, created_at=anchor,
            next_run_at=anchor, definition_hash=digest,
        ))
    Schedule.objects.bulk_create(rows, batch_size=1000)
print(Schedule.objects.count())
"""

TABLE_SQL = """
SELECT pg_relation_size(c.oid), pg_indexes_size(c.oid), pg_total_relation_size(c.oid),
       s.n_tup_ins, s.n_tup_upd, s.n_tup_hot_upd, s.n_tup_del, s.n_live_tup, s.n_dead_tup,
       s.last_autovacuum, s.autovacuum_count
FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid WHERE c.relname = %s
"""
TABLE_KEYS = (
    "heap_bytes",
    "index_bytes",
    "total_bytes",
    "inserted",
    "updated",
    "hot_updated",
    "deleted",
    "live",
    "dead",
    "last_autovacuum",
    "autovacuums",
)


def table_stats(conn: Any, table: str) -> dict[str, Any]:
    """Sizes (bytes) and cumulative tuple counters of ``table`` (``pg_stat_user_tables``)."""
    row = conn.execute(TABLE_SQL, (table,)).fetchone()
    return dict(zip(TABLE_KEYS, row, strict=True))


def rss_mib(pid: int) -> float | None:
    """VmRSS of ``pid`` in MiB, None when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return ""


def minute_sample(conn: Any, start: datetime, end: datetime, pids: list[int]) -> dict[str, Any]:
    """The figures of the minute [start, end) (see the module's docstring)."""
    runs, p50, p99, worst = conn.execute(
        f"SELECT count(*), percentile_cont(0.5) WITHIN GROUP (ORDER BY x), "
        f"percentile_cont(0.99) WITHIN GROUP (ORDER BY x), max(x) FROM ("
        f"SELECT extract(epoch FROM r.started_at - a.scheduled_for) AS x FROM {T_RECEIPT} r "
        f"JOIN {T_ATTEMPT} a ON a.id = r.attempt_id "
        f"WHERE r.finished_at >= %s AND r.finished_at < %s) t",
        (start, end),
    ).fetchone()
    missed = scalar(
        conn,
        f"SELECT coalesce(sum(missed_slots), 0) FROM {T_ATTEMPT} "
        f"WHERE claimed_at >= %s AND claimed_at < %s",
        (start, end),
    )
    overdue = scalar(
        conn,
        f"SELECT count(*) FROM {T_SCHEDULE} WHERE status = 'active' "
        f"AND next_run_at < now() - interval '5 seconds'",
    )
    sched = table_stats(conn, T_SCHEDULE)
    attempts = table_stats(conn, T_ATTEMPT)
    receipts = table_stats(conn, T_RECEIPT)
    return {
        "minute_start": start.isoformat(timespec="seconds"),
        "runs": runs,
        "lateness_p50_ms": None if p50 is None else round(float(p50) * 1000, 1),
        "lateness_p99_ms": None if p99 is None else round(float(p99) * 1000, 1),
        "lateness_max_ms": None if worst is None else round(float(worst) * 1000, 1),
        "missed_slots": int(missed),
        "overdue_schedules": overdue,
        "worker_rss_mib": [rss_mib(pid) for pid in pids],
        "schedule_table": {
            **sched,
            "hot_ratio": round(sched["hot_updated"] / sched["updated"], 4)
            if sched["updated"]
            else None,
        },
        "attempts": {k: attempts[k] for k in ("inserted", "deleted", "live", "total_bytes")},
        "receipts": {k: receipts[k] for k in ("inserted", "deleted", "live", "total_bytes")},
        "loadavg": loadavg(),
    }


class Pruner:
    """``manage.py prune_runs`` every ``every`` seconds, one at a time."""

    def __init__(self, env: dict[str, str], every: float, keep_minutes: float) -> None:
        self.env, self.every, self.days = env, every, keep_minutes / 1440
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = 0.0
        self.next_at = time.monotonic() + every
        self.durations: list[float] = []
        self.failures = 0
        self.overlaps = 0

    def poll(self) -> None:
        now = time.monotonic()
        if self.proc is not None and self.proc.poll() is not None:
            self.durations.append(round(now - self.started, 2))
            self.failures += self.proc.returncode != 0
            self.proc = None
        if now < self.next_at or self.every <= 0:
            return
        self.next_at += self.every
        if self.proc is not None:
            self.overlaps += 1
            return
        cmd = [sys.executable, "-m", "django", "prune_runs", "--older-than", f"{self.days:.6f}"]
        self.started = now
        self.proc = subprocess.Popen(
            [*cmd, "--no-input"],
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def finish(self) -> None:
        if self.proc is not None:
            self.proc.wait()
            self.poll()


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def judge(args: argparse.Namespace, minutes: list[dict[str, Any]], pruner: Pruner) -> dict:
    """The floors (see the module's docstring) over the judged minutes."""
    judged = minutes[args.warmup_minutes :]
    w = min(5, len(judged) // 2)
    if w < 1:
        return {"error": "too few minutes to judge (need warmup + 2)"}
    first, last = judged[:w], judged[-w:]
    floors: dict[str, Any] = {}
    p99_first = median([m["lateness_p99_ms"] for m in first if m["lateness_p99_ms"] is not None])
    p99_last = median([m["lateness_p99_ms"] for m in last if m["lateness_p99_ms"] is not None])
    bound = None if p99_first is None else round(1.2 * p99_first + 50, 1)
    floors["lateness_flat"] = {
        "first_p99_ms": p99_first,
        "last_p99_ms": p99_last,
        "bound_ms": bound,
        "passed": bound is not None and p99_last is not None and p99_last <= bound,
    }
    workers = []
    for i in range(args.workers):
        a = median([m["worker_rss_mib"][i] for m in first if m["worker_rss_mib"][i]])
        b = median([m["worker_rss_mib"][i] for m in last if m["worker_rss_mib"][i]])
        limit = None if a is None else round(1.1 * a + 8, 1)
        workers.append({"first_mib": a, "last_mib": b, "bound_mib": limit})
    floors["rss_flat"] = {
        "workers": workers,
        "passed": all(
            x["bound_mib"] is not None
            and x["last_mib"] is not None
            and x["last_mib"] <= x["bound_mib"]
            for x in workers
        ),
    }

    def size(m: dict[str, Any]) -> int:
        return m["schedule_table"]["heap_bytes"] + m["schedule_table"]["index_bytes"]

    floors["schedule_table_bounded"] = {
        "after_first_bytes": size(first[-1]),
        "end_bytes": size(last[-1]),
        "bound_bytes": 2 * size(first[-1]),
        "passed": size(last[-1]) <= 2 * size(first[-1]),
    }
    expected = args.schedules * 60 / args.interval
    short = [m["minute_start"] for m in judged if m["runs"] < 0.99 * expected]
    missed = sum(m["missed_slots"] for m in minutes) + args.missed_count
    floors["keeps_up"] = {
        "expected_runs_per_minute": round(expected),
        "minutes_below_99_percent": short,
        "missed_slots": missed,
        "passed": not short and missed == 0,
    }
    keep_bound = (args.keep_minutes + args.prune_every / 60 + 2) * expected
    live = last[-1]["receipts"]["live"]
    floors["prune_keeps_pace"] = {
        "prune_runs": len(pruner.durations),
        "prune_seconds_max": max(pruner.durations, default=None),
        "prune_overlaps": pruner.overlaps,
        "prune_failures": pruner.failures,
        "receipts_live_end": live,
        "receipts_live_bound": round(keep_bound),
        "passed": args.prune_every <= 0
        or (pruner.overlaps == 0 and pruner.failures == 0 and live <= keep_bound),
    }
    return floors


def run(args: argparse.Namespace) -> dict[str, Any]:
    env = django_env(args.database_url)
    fresh_database(args.database_url, env)
    with connect(args.database_url) as conn:
        started = time.monotonic()
        base = datetime(2000, 1, 1, tzinfo=UTC)
        seeded = subprocess.run(
            [sys.executable, "-c", SEED, str(args.schedules), str(args.interval), base.isoformat()],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        log(f"{seeded.stdout.strip()} schedules seeded in {time.monotonic() - started:.0f} s")
        # The grid's anchor: LEAD_SECONDS from now, so the first runs come after the start.
        t0: datetime = scalar(conn, "SELECT date_trunc('second', now())") + timedelta(
            seconds=LEAD_SECONDS
        )
        conn.execute(
            f"UPDATE {T_SCHEDULE} SET created_at = %s + (created_at - %s), "
            "next_run_at = %s + (created_at - %s)",
            (t0, base, t0, base),
        )
        conn.execute(f"VACUUM (ANALYZE) {T_SCHEDULE}")
        conn.execute("CHECKPOINT")
        reloptions = scalar(
            conn, "SELECT reloptions FROM pg_class WHERE relname = %s", (T_SCHEDULE,)
        )
        autovacuum = {
            r[0]: r[1]
            for r in conn.execute(
                "SELECT name, setting FROM pg_settings WHERE name LIKE 'autovacuum%%'"
            )
        }
        initial = table_stats(conn, T_SCHEDULE)
        worker_args = shlex.split(args.worker_args)
        procs = start_workers(args.workers, env, ROOT / "bench" / "out", "sustained", worker_args)
        pids = [p.pid for p, _ in procs]
        pruner = Pruner(env, args.prune_every, args.keep_minutes)
        minutes: list[dict[str, Any]] = []
        try:
            wait_for_heartbeats(conn, args.workers, procs)
            if scalar(conn, "SELECT now()") >= t0:
                log("the workers started after the first slots: the first minute runs late")
            for k in range(args.minutes):
                start, end = t0 + timedelta(minutes=k), t0 + timedelta(minutes=k + 1)
                while scalar(conn, "SELECT now()") < end + timedelta(seconds=READ_DELAY):
                    pruner.poll()
                    for proc, path in procs:
                        if proc.poll() is not None:
                            raise RuntimeError(f"worker {proc.pid} exited (log: {path})")
                    time.sleep(0.5)
                minutes.append(minute_sample(conn, start, end, pids))
                m = minutes[-1]
                log(
                    f"minute {k + 1}: {m['runs']} runs, p50 {m['lateness_p50_ms']} ms, p99 "
                    f"{m['lateness_p99_ms']} ms, rss {m['worker_rss_mib']} MiB, schedule table "
                    f"{m['schedule_table']['total_bytes'] / 2**20:.1f} MiB (HOT "
                    f"{m['schedule_table']['hot_ratio']}), dead {m['schedule_table']['dead']}, "
                    f"receipts live {m['receipts']['live']}, load {m['loadavg']}"
                )
        finally:
            codes = stop_workers(procs)
            pruner.finish()
        args.missed_count = int(
            scalar(conn, f"SELECT coalesce(sum(missed_count), 0) FROM {T_SCHEDULE}")
        )
        info = server_info(conn)
    return {
        "minutes": minutes,
        "floors": judge(args, minutes, pruner),
        "worker_exit_codes": codes,
        "prune_durations_s": pruner.durations,
        "schedule_table_initial": initial,
        "schedule_table_reloptions": reloptions,
        "autovacuum_settings": autovacuum,
        "database": info,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--schedules", type=int, default=100_000)
    p.add_argument("--interval", type=int, default=60, help="seconds between a schedule's runs")
    p.add_argument("--minutes", type=int, default=30)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--worker-args", default="", help="extra run_scheduler options (quoted)")
    p.add_argument("--prune-every", type=float, default=60.0, help="seconds; 0: never")
    p.add_argument("--keep-minutes", type=float, default=5.0, help="prune_runs --older-than")
    p.add_argument("--warmup-minutes", type=int, default=1)
    p.add_argument("--database-url", default=DEFAULT_URL)
    p.add_argument("--check", action="store_true")
    p.add_argument("--json-out", type=Path)
    args = p.parse_args(argv)
    if not dbname_of(args.database_url).startswith("dds_bench"):
        p.error("refusing to drop a database whose name does not start with dds_bench")
    loop_ms = python_loop_ms()
    load_before = loadavg()
    result = run(args)
    report = {
        "benchmark": "sustained",
        "schedules": args.schedules,
        "interval_s": args.interval,
        "runs_per_second": round(args.schedules / args.interval, 1),
        "minutes": args.minutes,
        "workers": args.workers,
        "worker_options": args.worker_args or "none (the settings' defaults)",
        "prune": {"every_s": args.prune_every, "keep_minutes": args.keep_minutes},
        "machine_python_loop_ms": loop_ms,
        "machine_python_loop_ms_after": python_loop_ms(),
        "loadavg_before": load_before,
        **result,
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "code": code_version(),
    }
    floors = result["floors"]
    passed = "error" not in floors and all(f["passed"] for f in floors.values())
    lines = [f"  {name}: {'PASS' if f['passed'] else 'FAIL'} {f}" for name, f in floors.items()]
    emit(report, "\n".join(lines), args.json_out)
    print(
        f"sustained: {args.schedules:,} schedules every {args.interval} s "
        f"({report['runs_per_second']:g} runs/s), {args.minutes} min, {args.workers} workers, "
        f"prune every {args.prune_every:g} s: {'PASS' if passed else 'FAIL'} "
        f"(machine loop {loop_ms:.0f} ms, load {load_before})",
        flush=True,
    )
    return 1 if args.check and not passed else 0


if __name__ == "__main__":
    sys.exit(main())
