"""Issue #32 goal 2: a sustained day, compressed.

    .venv/bin/python bench/sustained.py [--schedules 100000] [--minutes 30] [--workers 4]
        [--prune-every 60] [--keep-minutes 5] [--warmup-minutes 1] [--worker-args "..."]
        [--database-url postgres://.../dds_bench_sustained] [--check] [--json-out PATH]

1. Recreates the bench database (named ``dds_bench...``), migrates it, makes one interval
   schedule of ``tests.noop`` every ``--interval`` s (60) with the ORM and copies it in SQL
   to ``--schedules``, their grids spread evenly (to the ms) over one interval: N / 60
   runs a second, every second.
2. Starts ``--workers`` real ``run_scheduler`` processes with the settings' defaults (plus
   ``--worker-args``); every ``--prune-every`` s runs ``manage.py prune_runs --older-than
   <--keep-minutes> --no-input`` beside them, and every ``--vacuum-every`` s a plain
   ``VACUUM`` of the schedule and run tables (by default only when the server's
   autovacuum is off: the bench stands in for it; the report says which).
3. Once a minute, after it is over: start lateness p50 / p99 of the runs finished in it
   (``started_at - scheduled_for``; read by ``finished_at``, an indexed, time-bounded
   scan), runs counted, each worker's VmRSS, the schedule table's heap / index / total
   size, updates, HOT updates, dead tuples and vacuums (``pg_stat_user_tables``), the
   attempts and receipts inserted and alive, slots recorded missed, schedules overdue by
   over 5 s, ``/proc/loadavg`` and the CPU used in it (``cpu``: the workers', their
   backends', the machine's busy share and the engine's ms per run; bench/cpu_meter.py).

Floors (the first ``--warmup-minutes`` are not judged; "first" and "last" are the first
and last ``W = min(5, judged minutes // 2)`` judged minutes):

* lateness flat: median of the last W per-minute p99s <= 1.2 x the first W's + 50 ms
  (the absolute allowance keeps 10 ms against 13 ms from failing);
* RSS flat: each worker's median VmRSS over the last W minutes <= 1.1 x its median over
  the first W + 8 MiB;
* schedule table bounded: heap + indexes at the end <= 2 x their size after the first W;
* runs keep up: 0 missed slots, and the judged minutes ran >= 99 % of their slots;
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

import common
from common import ROOT, T_ATTEMPT, T_RECEIPT, T_SCHEDULE, log, scalar
from cpu_meter import CpuMeter
from memory_soak import rss_kib

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/dds_bench_sustained"
#: Seconds between the grid's anchor and the moment the workers are started.
LEAD_SECONDS = 30
#: Seconds after a minute ends before it is read (its last runs finish).
READ_DELAY = 5

#: One schedule made by the ORM (every default as the engine sets it); ``seed`` copies it.
SEED = r"""
import sys, django
django.setup()
from datetime import datetime
from django_durable_schedules.models import Kind, Schedule, Status
every, base = int(sys.argv[1]), datetime.fromisoformat(sys.argv[2])
row = Schedule(
    name="day-0000000", callback="tests.noop", kind=Kind.INTERVAL, interval_seconds=every,
    timezone="UTC", status=Status.ACTIVE, created_at=base, next_run_at=base,
)
row.definition_hash = row.compute_definition_hash()
row.save()
"""


def seed(conn: Any, env: dict[str, str], n: int, every: int, base: datetime) -> None:
    """``n`` schedules: the ORM's one, copied in SQL with its grid's anchor (``created_at``,
    ``next_run_at``) at ``base + i * every / n`` (milliseconds) for the i-th."""
    args = [sys.executable, "-c", SEED, str(every), base.isoformat()]
    subprocess.run(args, cwd=ROOT, env=env, check=True)
    sql = "SELECT column_name FROM information_schema.columns WHERE table_name = %s"
    columns = [r[0] for r in conn.execute(sql, (T_SCHEDULE,))]
    offset = "t.created_at + (g::bigint * %(ms)s / %(n)s) * interval '1 millisecond'"
    made = {"id": "gen_random_uuid()", "name": "'day-' || lpad(g::text, 7, '0')"}
    made |= {"created_at": offset, "next_run_at": offset}
    values = ", ".join(made.get(c, f"t.{c}") for c in columns)
    conn.execute(
        f"INSERT INTO {T_SCHEDULE} ({', '.join(columns)}) SELECT {values} "
        f"FROM {T_SCHEDULE} t, generate_series(1, %(last)s) g WHERE t.name = 'day-0000000'",
        {"ms": every * 1000, "n": n, "last": n - 1},
    )


#: The bench's stand-in for autovacuum (``--vacuum-every``): plain VACUUM of each table.
VACUUM = (
    "import sys, psycopg\n"
    "with psycopg.connect(sys.argv[1], autocommit=True) as c:\n"
    "    for t in sys.argv[2:]: c.execute(f'VACUUM {t}')"
)

TABLE_SQL = """
SELECT pg_relation_size(c.oid), pg_indexes_size(c.oid), pg_total_relation_size(c.oid),
       s.n_tup_ins, s.n_tup_upd, s.n_tup_hot_upd, s.n_tup_del, s.n_live_tup, s.n_dead_tup,
       s.last_vacuum, s.last_autovacuum, s.autovacuum_count
FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid WHERE c.relname = %s
"""
TABLE_KEYS = "heap_bytes index_bytes total_bytes inserted updated hot_updated deleted live dead"
TABLE_KEYS += " last_vacuum last_autovacuum autovacuums"


def table_stats(conn: Any, table: str) -> dict[str, Any]:
    """Sizes (bytes) and cumulative tuple counters of ``table`` (``pg_stat_user_tables``)."""
    row = conn.execute(TABLE_SQL, (table,)).fetchone()
    return dict(zip(TABLE_KEYS.split(), row, strict=True))


def loadavg() -> str:
    """The 1, 5 and 15 minute load averages (Linux)."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def minute_sample(
    conn: Any, start: datetime, end: datetime, pids: list[int], cpu: CpuMeter
) -> dict[str, Any]:
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
    hot = sched["hot_updated"] / max(1, sched["updated"])
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
        "worker_rss_mib": [round(rss_kib(pid) / 1024, 1) or None for pid in pids],
        "schedule_table": {**sched, "hot_ratio": round(hot, 4)},
        "attempts": {k: attempts[k] for k in ("inserted", "deleted", "live", "total_bytes")},
        "receipts": {k: receipts[k] for k in ("inserted", "deleted", "live", "total_bytes")},
        "loadavg": loadavg(),
        "cpu": cpu.sample(conn, pids, runs),
    }


class Periodic:
    """``cmd`` (a subprocess) every ``every`` seconds (0: never), one at a time: one still
    running when the next is due is counted in ``overlaps`` and that turn is skipped."""

    def __init__(self, cmd: list[str], env: dict[str, str], every: float) -> None:
        self.cmd, self.env, self.every = cmd, env, every
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = 0.0
        self.next_at = time.monotonic() + every
        self.durations: list[float] = []
        self.failures = self.overlaps = 0

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
        self.started = now
        self.proc = subprocess.Popen(
            self.cmd, cwd=ROOT, env=self.env, stdout=subprocess.DEVNULL, stderr=sys.stderr
        )

    def report(self) -> dict[str, Any]:
        return {"durations_s": self.durations, "overlaps": self.overlaps, "failures": self.failures}

    def finish(self) -> None:
        if self.proc is not None:
            self.proc.wait()
            self.poll()


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def judge(args: argparse.Namespace, minutes: list[dict[str, Any]], pruner: Periodic) -> dict:
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
    ok = all(x["bound_mib"] and x["last_mib"] and x["last_mib"] <= x["bound_mib"] for x in workers)
    floors["rss_flat"] = {"workers": workers, "passed": ok}

    def size(m: dict[str, Any]) -> int:
        return m["schedule_table"]["heap_bytes"] + m["schedule_table"]["index_bytes"]

    floors["schedule_table_bounded"] = {
        "after_first_bytes": size(first[-1]),
        "end_bytes": size(last[-1]),
        "bound_bytes": 2 * size(first[-1]),
        "passed": size(last[-1]) <= 2 * size(first[-1]),
    }
    expected = args.schedules * 60 / args.interval
    ran = sum(m["runs"] for m in judged)  # a late run may finish in the next minute
    missed = args.missed_count  # the schedules' own count (the attempts' is per minute)
    floors["keeps_up"] = {
        "expected_runs_per_minute": round(expected),
        "judged_runs_fraction": round(ran / (expected * len(judged)), 4),
        "missed_slots": missed,
        "passed": ran >= 0.99 * expected * len(judged) and missed == 0,
    }
    keep_bound = (args.keep_minutes + args.prune_every / 60 + 2) * expected
    live = last[-1]["receipts"]["live"]
    floors["prune_keeps_pace"] = {
        "prune_seconds_max": max(pruner.durations, default=None),
        **{k: v for k, v in pruner.report().items() if k != "durations_s"},
        "receipts_live_end": live,
        "receipts_live_bound": round(keep_bound),
        "passed": args.prune_every <= 0
        or (pruner.overlaps == 0 and pruner.failures == 0 and live <= keep_bound),
    }
    return floors


def run(args: argparse.Namespace) -> dict[str, Any]:
    env = common.django_env(args.database_url)
    common.fresh_database(args.database_url, env)
    with common.connect(args.database_url) as conn:
        started = time.monotonic()
        base = datetime(2000, 1, 1, tzinfo=UTC)
        seed(conn, env, args.schedules, args.interval, base)
        count = scalar(conn, f"SELECT count(*) FROM {T_SCHEDULE}")
        log(f"{count} schedules seeded in {time.monotonic() - started:.0f} s")
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
        rel = "SELECT reloptions FROM pg_class WHERE relname = %s"
        reloptions = scalar(conn, rel, (T_SCHEDULE,))
        av = "SELECT name, setting FROM pg_settings WHERE name LIKE 'autovacuum%%'"
        autovacuum = dict(conn.execute(av).fetchall())
        initial = table_stats(conn, T_SCHEDULE)
        worker_args = shlex.split(args.worker_args)
        procs = common.start_workers(
            args.workers, env, ROOT / "bench" / "out", "sustained", worker_args
        )
        pids = [p.pid for p, _ in procs]
        days = f"{args.keep_minutes / 1440:.6f}"
        prune = ["-m", "django", "prune_runs", "--older-than", days, "--no-input"]
        pruner = Periodic([sys.executable, *prune], env, args.prune_every)
        if args.vacuum_every < 0:  # auto: stand in for autovacuum where the server has none
            args.vacuum_every = 60.0 if autovacuum["autovacuum"] == "off" else 0.0
        tables = [T_SCHEDULE, T_ATTEMPT, T_RECEIPT]
        vacuum = [sys.executable, "-c", VACUUM, args.database_url, *tables]
        vacuumer = Periodic(vacuum, env, args.vacuum_every)
        minutes: list[dict[str, Any]] = []
        try:
            common.wait_for_heartbeats(conn, args.workers, procs)
            cpu = CpuMeter()
            cpu.sample(conn, pids)
            if scalar(conn, "SELECT now()") >= t0:
                log("the workers started after the first slots: the first minute runs late")
            for k in range(args.minutes):
                start, end = t0 + timedelta(minutes=k), t0 + timedelta(minutes=k + 1)
                while scalar(conn, "SELECT now()") < end + timedelta(seconds=READ_DELAY):
                    pruner.poll()
                    vacuumer.poll()
                    for proc, path in procs:
                        if proc.poll() is not None:
                            raise RuntimeError(f"worker {proc.pid} exited (log: {path})")
                    time.sleep(0.5)
                minutes.append(minute_sample(conn, start, end, pids, cpu))
                m = minutes[-1]
                log(
                    f"minute {k + 1}: {m['runs']} runs, p50 {m['lateness_p50_ms']} ms, p99 "
                    f"{m['lateness_p99_ms']} ms, rss {m['worker_rss_mib']} MiB, schedule table "
                    f"{m['schedule_table']['total_bytes'] / 2**20:.1f} MiB (HOT "
                    f"{m['schedule_table']['hot_ratio']}), dead {m['schedule_table']['dead']}, "
                    f"receipts live {m['receipts']['live']}, load {m['loadavg']}, cpu {m['cpu']}"
                )
        finally:
            codes = common.stop_workers(procs)
            pruner.finish()
            vacuumer.finish()
        args.missed_count = int(
            scalar(conn, f"SELECT coalesce(sum(missed_count), 0) FROM {T_SCHEDULE}")
        )
        info = common.server_info(conn)
    return {
        "minutes": minutes,
        "floors": judge(args, minutes, pruner),
        "worker_exit_codes": codes,
        "prune": {
            "every_s": args.prune_every,
            "keep_minutes": args.keep_minutes,
            **pruner.report(),
        },
        "vacuum": {"every_s": args.vacuum_every, **vacuumer.report()},
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
    vac = "seconds between the bench's VACUUMs (0: none; default: 60 if autovacuum is off)"
    p.add_argument("--vacuum-every", type=float, default=-1.0, help=vac)
    p.add_argument("--database-url", default=DEFAULT_URL)
    p.add_argument("--check", action="store_true")
    p.add_argument("--json-out", type=Path)
    args = p.parse_args(argv)
    if not common.dbname_of(args.database_url).startswith("dds_bench"):
        p.error("refusing to drop a database whose name does not start with dds_bench")
    loop_ms = common.python_loop_ms()
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
        "machine_python_loop_ms": loop_ms,
        "machine_python_loop_ms_after": common.python_loop_ms(),
        "loadavg_before": load_before,
        **result,
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "code": common.code_version(),
    }
    floors = result["floors"]
    passed = "error" not in floors and all(f["passed"] for f in floors.values())
    lines = (
        [f"  FAIL: {floors['error']}"]
        if "error" in floors
        else [f"  {name}: {'PASS' if f['passed'] else 'FAIL'} {f}" for name, f in floors.items()]
    )
    common.emit(report, "\n".join(lines), args.json_out)
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
