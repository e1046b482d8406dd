"""Issue #14 goals 4 and 5: the admin and API pages over big tables (PostgreSQL).

    .venv/bin/python bench/big_tables.py [--schedules 1000000] [--receipts 10000000] \\
        [--busy 1000] [--requests 7] [--reuse] [--check] \\
        [--database-url postgres://postgres@127.0.0.1:5432/dds_bench_big_tables]

1. Builds the tables (or, with ``--reuse``, keeps the ones a previous run built with the
   same sizes, and only applies new migrations, timing them): ``--schedules`` schedules
   (a mix of statuses, kinds, degraded, failing and running rows) and ``--receipts``
   finished attempt/receipt pairs spread evenly over the first ``--busy`` schedules by
   name (those on the lists' first page: 10,000 receipts each by default, an hourly
   schedule's 14 months), with ``INSERT ... SELECT generate_series`` (inserts pass the
   append-only guards). The run tables' indexes and constraints are dropped during the
   inserts and built again after them, then every table is ``VACUUM ANALYZE``d.
2. Times each page with Django's test client in this process (a logged-in superuser):
   ``--requests`` requests after one warm-up, median and max of the whole request in
   milliseconds (server time: no network, no browser), the number of queries and the
   slowest query of one request.
3. Reports each table's and index's size and bytes per row (for ``docs/scale.md``).

Floor (issue #14, goal 4): every page's median <= 300 ms. Prints JSON, then one summary
line; ``--check`` exits 1 when a page misses the floor or does not answer 200.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

import psycopg
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
    run_django,
    scalar,
    server_info,
)

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/dds_bench_big_tables"
BUILD_TABLE = "bench_big_tables_build"

#: Receipt statuses of the synthetic history, by share (per mille): mostly successes.
RECEIPT_MIX = (
    "CASE WHEN g % 1000 < 900 THEN 'succeeded' WHEN g % 1000 < 950 THEN 'failed' "
    "WHEN g % 1000 < 980 THEN 'skipped' WHEN g % 1000 < 990 THEN 'lease_expired' "
    "WHEN g % 1000 < 995 THEN 'missed' ELSE 'degraded' END"
)


def schedule_values(columns: list[str], busy: int, per: int) -> list[str]:
    """The SELECT list that makes schedule ``g`` from the template row ``t``: 90% active,
    6% paused, 2% failed, 1% completed, 1% cancelled; one in ten a cron; one in a thousand
    degraded (paused, with a reason), one in fifty failing, one in a thousand running."""
    status = (
        "CASE WHEN g % 1000 = 7 THEN 'paused' WHEN g % 100 < 90 THEN 'active' "
        "WHEN g % 100 < 96 THEN 'paused' WHEN g % 100 < 98 THEN 'failed' "
        "WHEN g % 100 < 99 THEN 'completed' ELSE 'cancelled' END"
    )
    special = {
        "id": "gen_random_uuid()",
        "name": "'big-' || lpad(g::text, 7, '0')",
        "callback": "CASE WHEN g % 7 = 0 THEN 'tests.other' ELSE t.callback END",
        "kind": "CASE WHEN g % 10 = 5 THEN 'cron' ELSE 'interval' END",
        "cron": "CASE WHEN g % 10 = 5 THEN '*/5 * * * *' ELSE '' END",
        "interval_seconds": "CASE WHEN g % 10 = 5 THEN NULL ELSE 3600 END",
        "timezone": "CASE WHEN g % 3 = 0 THEN 'Europe/Paris' ELSE 'UTC' END",
        "status": status,
        "degraded_reason": "CASE WHEN g % 1000 = 7 THEN 'callback not registered' ELSE '' END",
        "failure_count": "CASE WHEN g % 50 = 3 THEN 2 ELSE 0 END",
        "lease_token": "CASE WHEN g % 1000 = 11 THEN gen_random_uuid() END",
        "lease_expires_at": "CASE WHEN g % 1000 = 11 THEN now() + interval '1 hour' END",
        "occurrence": f"CASE WHEN g < {busy} THEN {per} ELSE 0 END",
        "next_run_at": "CASE WHEN g % 100 < 96 THEN date_trunc('second', now()) "
        "+ (g % 86400) * interval '1 second' END",
        "created_at": "now() - interval '400 days'",
    }
    return [special.get(column, f"t.{column}") for column in columns]


def table_columns(conn: psycopg.Connection, table: str) -> list[str]:
    return [
        row[0]
        for row in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
            "ORDER BY ordinal_position",
            (table,),
        )
    ]


def drop_indexes(conn: psycopg.Connection, tables: list[str]) -> list[str]:
    """Drop the tables' constraints (but NOT NULL and CHECK) and indexes; returns the
    statements that create them again, foreign keys last."""
    constraints = conn.execute(
        "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid), contype "
        "FROM pg_constraint WHERE conrelid = ANY(%s::regclass[]) AND contype IN ('p','u','f')",
        (tables,),
    ).fetchall()
    indexes = conn.execute(
        "SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid) FROM pg_index i "
        "WHERE i.indrelid = ANY(%s::regclass[]) AND NOT EXISTS "
        "(SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)",
        (tables,),
    ).fetchall()
    recreate = [f"ALTER TABLE {t} ADD CONSTRAINT {n} {d}" for t, n, d, k in constraints if k != "f"]
    recreate += [definition for _, definition in indexes]
    recreate += [
        f"ALTER TABLE {t} ADD CONSTRAINT {n} {d}" for t, n, d, k in constraints if k == "f"
    ]
    for table, name, _, _kind in sorted(constraints, key=lambda c: c[3] != "f"):
        conn.execute(f"ALTER TABLE {table} DROP CONSTRAINT {name}")
    for name, _ in indexes:
        conn.execute(f"DROP INDEX {name}")
    return recreate


def build(conn: psycopg.Connection, schedules: int, receipts: int, busy: int) -> dict[str, float]:
    """The tables (see the module docstring); returns the seconds each step took."""
    per = receipts // busy
    steps: dict[str, float] = {}
    started = time.monotonic()
    columns = table_columns(conn, T_SCHEDULE)
    conn.execute(
        f"INSERT INTO {T_SCHEDULE} ({', '.join(columns)}) "
        f"SELECT {', '.join(schedule_values(columns, busy, per))} "
        f"FROM generate_series(0::bigint, {int(schedules)}::bigint - 1) AS g, "
        f"(SELECT * FROM {T_SCHEDULE} LIMIT 1) AS t"
    )
    conn.execute(f"DELETE FROM {T_SCHEDULE} WHERE name NOT LIKE 'big-%'")  # the template
    steps["schedules_s"] = time.monotonic() - started
    conn.execute("SET maintenance_work_mem = '1GB'")
    recreate = drop_indexes(conn, [T_ATTEMPT, T_RECEIPT])
    started = time.monotonic()
    conn.execute(
        f"""
        WITH s AS (SELECT id, name, row_number() OVER (ORDER BY name) - 1 AS i
                   FROM {T_SCHEDULE} ORDER BY name LIMIT %(busy)s)
        INSERT INTO {T_ATTEMPT} (id, schedule_name, occurrence, attempt, scheduled_for,
            claimed_at, lease_token, lease_expires_at, worker, idempotency_key, missed_slots,
            schedule_id, origin)
        SELECT gen_random_uuid(), s.name, o, 1,
            date_trunc('hour', now()) - (%(per)s - o) * interval '1 hour',
            date_trunc('hour', now()) - (%(per)s - o) * interval '1 hour' + interval '40 ms',
            gen_random_uuid(),
            date_trunc('hour', now()) - (%(per)s - o) * interval '1 hour' + interval '30 s',
            'bench-' || (s.i %% 4)::text, s.id::text || ':' || o::text, 0, s.id, 'scheduled'
        FROM s, generate_series(1, %(per)s) AS o
        """,
        {"busy": busy, "per": per},
    )
    steps["attempts_s"] = time.monotonic() - started
    started = time.monotonic()
    mix = RECEIPT_MIX.replace("g %", "(a.occurrence + hashtext(a.schedule_name)) %")
    conn.execute(
        f"""
        INSERT INTO {T_RECEIPT} (id, occurrence, succeeded_occurrence, status, finished_at,
            result, error_type, error_message, failure_count_after, next_run_at,
            slots_skipped, forced, attempt_id, schedule_id)
        SELECT gen_random_uuid(), r.occurrence,
            CASE WHEN r.status = 'succeeded' THEN r.occurrence END, r.status,
            r.claimed_at + interval '50 ms', NULL,
            CASE WHEN r.status = 'failed' THEN 'RuntimeError' ELSE '' END,
            CASE WHEN r.status = 'failed' THEN 'upstream answered 503' ELSE '' END,
            CASE WHEN r.status = 'failed' THEN 1 ELSE 0 END,
            r.scheduled_for + interval '1 hour', 0, false, r.id, r.schedule_id
        FROM (SELECT a.*, {mix} AS status FROM {T_ATTEMPT} a) r
        """
    )
    steps["receipts_s"] = time.monotonic() - started
    started = time.monotonic()
    for statement in recreate:
        conn.execute(statement)
    steps["indexes_s"] = time.monotonic() - started
    started = time.monotonic()
    for table in (T_SCHEDULE, T_ATTEMPT, T_RECEIPT):
        conn.execute(f"VACUUM (ANALYZE) {table}")
    steps["vacuum_analyze_s"] = time.monotonic() - started
    conn.execute(f"CREATE TABLE {BUILD_TABLE} (schedules bigint, receipts bigint, busy bigint)")
    conn.execute(f"INSERT INTO {BUILD_TABLE} VALUES (%s, %s, %s)", (schedules, receipts, busy))
    return {k: round(v, 1) for k, v in steps.items()}


def built_with(conn: psycopg.Connection) -> tuple[int, int, int] | None:
    if not scalar(conn, "SELECT to_regclass(%s) IS NOT NULL", (BUILD_TABLE,)):
        return None
    row = conn.execute(f"SELECT schedules, receipts, busy FROM {BUILD_TABLE}").fetchone()
    return None if row is None else (row[0], row[1], row[2])


def sizes(conn: psycopg.Connection) -> dict[str, Any]:
    """Bytes of each table (heap, TOAST, all indexes) and of each index, per row."""
    out: dict[str, Any] = {}
    for table in (T_SCHEDULE, T_ATTEMPT, T_RECEIPT):
        rows = scalar(conn, f"SELECT count(*) FROM {table}")
        heap = scalar(conn, "SELECT pg_table_size(%s)", (table,))
        total = scalar(conn, "SELECT pg_total_relation_size(%s)", (table,))
        indexes = {
            name: {"bytes": size, "bytes_per_row": round(size / max(rows, 1), 1)}
            for name, size in conn.execute(
                "SELECT indexrelid::regclass::text, pg_relation_size(indexrelid) FROM pg_index "
                "WHERE indrelid = %s::regclass ORDER BY 2 DESC",
                (table,),
            )
        }
        out[table] = {
            "rows": rows,
            "table_bytes": heap,
            "total_bytes": total,
            "table_bytes_per_row": round(heap / max(rows, 1), 1),
            "total_bytes_per_row": round(total / max(rows, 1), 1),
            "indexes": indexes,
        }
    return out


def pages(busy_id: str, quiet_id: str) -> dict[str, str]:
    """The pages timed, by name: path and query."""
    admin = "/admin/durable_schedules"
    return {
        "admin_schedules": f"{admin}/schedule/",
        "admin_schedules_paused": f"{admin}/schedule/?status__exact=paused",
        "admin_schedules_failing": f"{admin}/schedule/?failing=yes",
        "admin_schedules_degraded": f"{admin}/schedule/?degraded=yes",
        "admin_schedules_running": f"{admin}/schedule/?running=yes",
        "admin_schedules_once": f"{admin}/schedule/?kind__exact=once",
        "admin_schedules_search": f"{admin}/schedule/?q=big-0123456",
        "admin_schedules_fragment": f"{admin}/schedule/?q=0123456",
        "admin_timeline_7d": f"{admin}/schedule/timeline/?range=7d",
        "api_schedules": "/api/schedules/",
        "api_schedules_paused": "/api/schedules/?status=paused",
        "api_schedules_callback": "/api/schedules/?callback=tests.other",
        "api_schedules_degraded": "/api/schedules/?degraded=true",
        "api_schedules_failing": "/api/schedules/?failing=true",
        "admin_receipts": f"{admin}/runreceipt/",
        "admin_receipts_failed": f"{admin}/runreceipt/?status__exact=failed",
        "admin_receipts_schedule": f"{admin}/runreceipt/?schedule__id__exact={busy_id}",
        "admin_attempts": f"{admin}/runattempt/",
        "api_receipts": "/api/receipts/",
        "api_receipts_schedule": f"/api/receipts/?schedule={busy_id}",
        "api_receipts_failed": "/api/receipts/?status=failed",
        "api_receipts_missed_schedule": f"/api/receipts/?schedule={busy_id}&status=missed",
        "api_health": "/api/health/",
        # A schedule's statistics (issue #29): a fixed number of queries, the percentiles
        # over the latest STATS_SAMPLE receipts of each window.
        "api_stats_busy": f"/api/schedules/{busy_id}/stats/",
        # The machines' probe (load balancers, Kubernetes): held to the floor, unlike the
        # snapshot (two indexed queries, whatever the size of the tables).
        "api_probe": "/api/health/probe/",
        "admin_health": f"{admin}/schedule/health/",
        "admin_schedule_change_busy": f"{admin}/schedule/{busy_id}/change/",
        "admin_schedule_change_quiet": f"{admin}/schedule/{quiet_id}/change/",
    }


def time_pages(url: str, requests: int, only: str = "") -> dict[str, Any]:
    """Each page of :func:`pages`: median and max ms of ``requests`` requests after a
    warm-up, status, queries and the slowest query of one request."""
    os.environ.update(django_env(url))
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.signals import request_started
    from django.db import connection, reset_queries
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from django_durable_schedules.models import Schedule

    request_started.disconnect(reset_queries)  # or every request forgets its queries
    user_model = get_user_model()
    user = user_model.objects.filter(username="bench-admin").first()
    if user is None:
        user = user_model.objects.create_superuser("bench-admin", "bench@example.com", "x")
    client = Client()
    client.force_login(user)
    ids = Schedule.objects.values_list("pk", flat=True)
    busy_id, quiet_id = str(ids.order_by("name")[0]), str(ids.order_by("-name")[0])
    results: dict[str, Any] = {}
    for name, path in pages(busy_id, quiet_id).items():
        if only and not any(part in name for part in only.split(",")):
            continue
        with CaptureQueriesContext(connection) as ctx:
            response = client.get(path)
        times, cpu = [], []
        for _ in range(requests):
            started, cpu_started = time.perf_counter(), time.process_time()
            client.get(path)
            times.append((time.perf_counter() - started) * 1000)
            cpu.append((time.process_time() - cpu_started) * 1000)
        slowest = max(ctx.captured_queries, key=lambda q: float(q["time"]), default=None)
        results[name] = {
            "path": path,
            "status": response.status_code,
            "median_ms": round(statistics.median(times), 1),
            "max_ms": round(max(times), 1),
            # Django's own CPU (this process): the rendering, without the database's time
            # and less sensitive than the wall clock to a busy machine.
            "django_cpu_median_ms": round(statistics.median(cpu), 1),
            "queries": len(ctx.captured_queries),
            "slowest_query_ms": round(1000 * float(slowest["time"]), 1) if slowest else None,
            "slowest_query": slowest["sql"][:300] if slowest else None,
        }
        log(
            f"{name:32} {results[name]['median_ms']:8.1f} ms median, "
            f"{results[name]['max_ms']:8.1f} max, "
            f"{results[name]['django_cpu_median_ms']:6.1f} ms Django CPU, "
            f"{results[name]['queries']} queries (status {response.status_code})"
        )
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--schedules", type=int, default=1_000_000)
    p.add_argument("--receipts", type=int, default=10_000_000)
    p.add_argument("--busy", type=int, default=1000, help="schedules that have the receipts")
    p.add_argument("--requests", type=int, default=7)
    p.add_argument("--pages", default="", help="only the pages whose names contain one of these")
    p.add_argument("--floor-ms", type=float, default=300.0)
    p.add_argument("--reuse", action="store_true", help="keep a database built with these sizes")
    p.add_argument("--database-url", default=DEFAULT_URL)
    p.add_argument("--check", action="store_true")
    args = p.parse_args(argv)
    if not dbname_of(args.database_url).startswith("dds_bench_big"):
        p.error("refusing to drop a database whose name does not start with dds_bench_big")
    env = django_env(args.database_url)
    wanted = (args.schedules, args.receipts, args.busy)
    build_steps: dict[str, Any] = {}
    try:
        with connect(args.database_url) as conn:
            have = built_with(conn)
    except psycopg.OperationalError:
        have = None
    if args.reuse and have == wanted:
        log("reusing the tables built before; applying new migrations")
        started = time.monotonic()
        run_django(["-m", "django", "migrate", "--verbosity", "1"], env)
        build_steps["migrate_s"] = round(time.monotonic() - started, 1)
    else:
        fresh_database(args.database_url, env)
        run_django([str(ROOT / "bench" / "seed.py"), "1"], env)
        with connect(args.database_url) as conn:
            log(f"building {args.schedules:,} schedules and {args.receipts:,} pairs")
            build_steps = build(conn, *wanted)
            log(f"built: {build_steps}")
    with connect(args.database_url) as conn:
        server = server_info(conn)
        table_sizes = sizes(conn)
    speed = python_loop_ms()  # how fast the machine is now, to read figures side by side
    log(f"machine speed: python loop {speed} ms (lower is faster)")
    results = time_pages(args.database_url, args.requests, args.pages)
    # The health snapshot is not a list (it counts every schedule by status): reported,
    # not held to the floor; a 503 (not healthy) is its normal answer here, as it is the
    # probe's (no worker runs beside this bench), which is held to the floor.
    failed = [
        n
        for n, r in results.items()
        if "health" not in n
        and (
            r["status"] not in ((200, 503) if n == "api_probe" else (200,))
            or r["median_ms"] > args.floor_ms
        )
    ]
    passed = not failed
    report = {
        "benchmark": "big_tables",
        "schedules": args.schedules,
        "receipts": args.receipts,
        "busy_schedules": args.busy,
        "requests": args.requests,
        "build": build_steps,
        "pages": results,
        "sizes": table_sizes,
        "floor": {"median_ms": args.floor_ms, "passed": passed, "missed": failed},
        "postgresql": server,
        "machine_python_loop_ms": speed,
        "code": code_version(),
    }
    worst = max(results.items(), key=lambda item: item[1]["median_ms"])
    emit(
        report,
        f"big_tables: {args.schedules:,} schedules, {args.receipts:,} receipts; "
        f"{len(results)} pages, worst median {worst[1]['median_ms']} ms ({worst[0]}), "
        f"most queries {max(r['queries'] for r in results.values())}, "
        f"speed {speed} ms "
        f"(floor {args.floor_ms:g} ms: {'PASS' if passed else 'FAIL: ' + ', '.join(failed)})",
    )
    return 1 if args.check and not passed else 0


if __name__ == "__main__":
    sys.exit(main())
