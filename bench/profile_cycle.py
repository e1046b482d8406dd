"""Profile one worker cycle in-process: where does a run's time go, in the worker and in
its PostgreSQL backend?

    DJANGO_SETTINGS_MODULE=tests.settings \\
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/dds_bench \\
        .venv/bin/python bench/profile_cycle.py [--batch 16] [--cycles 200] [--cprofile] \\
            [--experiment values-update] [--experiment prepared]

Needs the bench database of ``throughput.py`` (run that once first; it is left seeded).
Makes every schedule due, then repeats the worker's steps, timing each one: wall time, CPU
of this process (client) and CPU of its PostgreSQL backend (server; read from /proc, so the
server must run on this machine), and counting its SQL statements and bytes. The steps are
those of one pass of the worker loop: ``expire_leases``, ``claim_due(limit=batch)``,
running ``tests.noop`` (``runner.execute``, on a pool thread as in the worker),
``complete``, ``next_wakeup``. ``--batch 16`` is what ``run_scheduler --concurrency 32``
claims per transaction in practice (see docs/benchmarks.md).

Experiments (prototypes of proposed engine changes, patched in at run time; the engine's
files are not modified):

* ``values-update``: write the claimed/finished schedule rows with one
  ``UPDATE ... FROM (VALUES ...)`` statement instead of one ``UPDATE`` per row;
* ``unnest-update``: the same with one array parameter per column
  (``UPDATE ... FROM unnest(%s::uuid[], ...)``): the SQL text no longer grows with the batch;
* ``prepared``: server-side parameter binding with automatic prepared statements
  (``OPTIONS = {"server_side_binding": True, "prepare_threshold": 2}``), so PostgreSQL
  parses and plans each of the engine's statements once per connection.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import django

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests package

_TICKS = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS


def values_update(rows, fields, using):
    """Prototype: one ``UPDATE ... SET c = v.c FROM (VALUES (...), ...) AS v WHERE id = v.id``
    (PostgreSQL), typed by casting the first row's placeholders."""
    from django.db import connections

    from django_durable_schedules.models import Schedule

    if not rows:
        return
    conn = connections[using]
    meta = Schedule._meta
    qn = conn.ops.quote_name
    columns = [meta.get_field(name) for name in fields]
    pk = meta.pk
    names = [pk.column, *(c.column for c in columns)]
    types = [pk.db_type(conn), *(c.db_type(conn) for c in columns)]
    first = "(" + ", ".join(f"%s::{t}" for t in types) + ")"
    other = "(" + ", ".join(["%s"] * len(names)) + ")"
    values = ", ".join([first] + [other] * (len(rows) - 1))
    sql = (
        f"UPDATE {qn(meta.db_table)} AS t SET "
        + ", ".join(f"{qn(c.column)} = v.{qn(c.column)}" for c in columns)
        + f" FROM (VALUES {values}) AS v ({', '.join(qn(n) for n in names)})"
        + f" WHERE t.{qn(pk.column)} = v.{qn(pk.column)}"
    )
    params = []
    for row in rows:
        params.append(pk.get_db_prep_save(row.pk, conn))
        params.extend(c.get_db_prep_save(getattr(row, c.attname), conn) for c in columns)
    with conn.cursor() as cursor:
        cursor.execute(sql, params)


def unnest_update(rows, fields, using):
    """Prototype: one ``UPDATE ... FROM unnest(%s::uuid[], %s::integer[], ...)`` whose SQL
    text (one array parameter per column) does not depend on the batch size (PostgreSQL)."""
    from django.db import connections

    from django_durable_schedules.models import Schedule

    if not rows:
        return
    conn = connections[using]
    meta = Schedule._meta
    qn = conn.ops.quote_name
    columns = [meta.pk, *(meta.get_field(name) for name in fields)]
    sql = (
        f"UPDATE {qn(meta.db_table)} AS t SET "
        + ", ".join(f"{qn(c.column)} = v.{qn(c.column)}" for c in columns[1:])
        + " FROM unnest("
        + ", ".join(f"%s::{c.db_type(conn)}[]" for c in columns)
        + f") AS v ({', '.join(qn(c.column) for c in columns)})"
        + f" WHERE t.{qn(meta.pk.column)} = v.{qn(meta.pk.column)}"
    )
    params = [[c.get_db_prep_save(getattr(row, c.attname), conn) for row in rows] for c in columns]
    with conn.cursor() as cursor:
        cursor.execute(sql, params)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--cycles", type=int, default=200)
    p.add_argument("--cprofile", action="store_true", help="print the top functions")
    p.add_argument("--cprofile-out", type=Path, help="also write the cProfile stats there")
    p.add_argument(
        "--experiment",
        action="append",
        default=[],
        choices=["values-update", "unnest-update", "prepared"],
    )
    args = p.parse_args()
    django.setup()

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from django_durable_schedules import state
    from django_durable_schedules.state import completion, runs
    from django_durable_schedules.worker.execution import runner

    if "prepared" in args.experiment:
        connection.settings_dict["OPTIONS"].update(server_side_binding=True, prepare_threshold=2)
    for name, update in (("values-update", values_update), ("unnest-update", unnest_update)):
        if name in args.experiment:  # the two modules that write schedule batches
            runs.update_rows = completion.update_rows = update

    with connection.cursor() as cur:
        cur.execute("TRUNCATE durable_schedules_runreceipt, durable_schedules_runattempt")
        cur.execute(
            "UPDATE durable_schedules_schedule SET status = 'active', next_run_at = "
            "date_trunc('second', statement_timestamp()), created_at = date_trunc('second', "
            "statement_timestamp()), occurrence = 0, attempt = 0, retry_scheduled_for = NULL, "
            "lease_token = NULL, lease_expires_at = NULL, last_run_at = NULL, missed_count = 0"
        )
        cur.execute("VACUUM ANALYZE durable_schedules_schedule")
        cur.execute("SELECT pg_backend_pid()")
        backend = cur.fetchone()[0]
        cur.execute("SELECT count(*) FROM durable_schedules_schedule")
        available = cur.fetchone()[0]
    cycles = min(args.cycles, available // args.batch)

    wall: dict[str, float] = defaultdict(float)
    cpu: dict[str, float] = defaultdict(float)
    server: dict[str, float] = defaultdict(float)
    queries: dict[str, int] = defaultdict(int)
    sql_bytes: dict[str, int] = defaultdict(int)
    runs = 0

    def step(name, fn, *a, **kw):
        s0 = proc_cpu(backend)
        t0, c0 = time.perf_counter(), time.process_time()
        with CaptureQueriesContext(connection) as ctx:
            value = fn(*a, **kw)
        wall[name] += time.perf_counter() - t0
        cpu[name] += time.process_time() - c0
        server[name] += proc_cpu(backend) - s0
        queries[name] += len(ctx.captured_queries)
        sql_bytes[name] += sum(len(q["sql"]) for q in ctx.captured_queries)
        return value

    # Callbacks run on a pool thread, as in the worker: runner.execute() ends with
    # close_old_connections(), which (CONN_MAX_AGE = 0) would close the main thread's
    # connection after every batch if it ran here.
    pool = ThreadPoolExecutor(1)
    # The worker asks for its wake-up with its id: one statement on its heartbeat row
    # (state.next_wakeup); without one the reads are separate (several times the cost).
    state.heartbeat("profile")
    profiler = cProfile.Profile() if args.cprofile else None
    if profiler:
        profiler.enable()
    for _ in range(cycles):
        step("expire_leases", state.expire_leases, limit=100)
        claims = step("claim_due", state.claim_due, worker="profile", limit=args.batch)
        outcomes = step("execute (noop)", lambda cs: list(pool.map(runner.execute, cs)), claims)
        step("complete", state.complete, outcomes)
        step("next_wakeup", state.next_wakeup, worker_id="profile")
        runs += len(claims)
    if profiler:
        profiler.disable()
    with connection.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()")
        if cur.fetchone()[0] != backend:
            print("warning: the connection was reopened; server CPU figures are incomplete")

    total_wall = sum(wall.values())
    client, srv = sum(cpu.values()) / runs * 1000, sum(server.values()) / runs * 1000
    print(
        f"{runs} runs in {cycles} cycles of up to {args.batch} "
        f"{args.experiment or ''}: {total_wall / runs * 1000:.3f} ms wall/run "
        f"(one worker: {runs / total_wall:.0f} runs/s); CPU/run: client {client:.3f} ms + "
        f"server {srv:.3f} ms = {client + srv:.3f} ms "
        f"(CPU-bound ceiling on {os.cpu_count()} cores: "
        f"{os.cpu_count() * 1000 / (client + srv):.0f} runs/s)"
    )
    print(
        f"{'step':<16}{'wall ms/run':>12}{'client cpu':>12}{'server cpu':>12}"
        f"{'queries/cycle':>15}{'SQL bytes/cycle':>17}"
    )
    for name, seconds in wall.items():
        print(
            f"{name:<16}{seconds / runs * 1000:>12.3f}{cpu[name] / runs * 1000:>12.3f}"
            f"{server[name] / runs * 1000:>12.3f}{queries[name] / cycles:>15.1f}"
            f"{sql_bytes[name] / cycles:>17.0f}"
        )
    if profiler:
        stats = pstats.Stats(profiler)
        stats.sort_stats("tottime").print_stats(30)
        if args.cprofile_out:
            stats.dump_stats(args.cprofile_out)


if __name__ == "__main__":
    main()
