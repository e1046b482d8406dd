"""``claim_plan.py``'s ``chains_due`` situation (issue #30: "the claim stays a bounded index
scan at 10 M schedules with chains present"): the chains put on top of the ``batch_due``
table, and the capture of every statement a real claim sends for them.

:func:`add_chains` adds, with set-based SQL like ``claim_plan.build``:

* ``min(1000, max(size // 5, 2 x batch))`` kind ``after`` schedules (``after-00000001`` ...; no
  ``next_run_at``), each linked (``ScheduleLink``) to one upstream: the first ``batch`` to
  the ``batch`` due rows (so the claim's ``write_chain_slots`` finds their downstreams), the
  others to random rows of the table;
* 10 ``ChainSlot`` rows each, an hour apart: 8 of history (``run``, every fourth
  ``missed``), then ``ready`` for the next ``batch`` of them (``run`` for the others: the
  schedules the claim takes by their chains are not the due rows' downstreams, so that
  ``write_chain_slots`` walks two levels at every size: the due rows' downstreams, then
  theirs), then one ``waiting`` whose deadline is an hour ahead (not due);

then ``VACUUM (ANALYZE)`` of the three tables and a ``CHECKPOINT``.

:func:`capture_chain_sql` runs ``state.claim_due`` with a limit of ``2 x batch`` in a Django
subprocess (rolled back): the live read takes the ``batch`` due rows, the chains the rest of
the limit, so every chain statement is sent. It returns them by role: ``live`` (the live
locking read, with the uncorrelated ``EXISTS`` on the links), ``due_ready`` and ``due_late``
(``due_downstreams``' two range reads of the chain slots), ``chain_read`` (the locking read
of the schedules they name), ``settle`` (the first ``settle_chain_slots`` read),
``links_1``, ``links_2`` ... (``write_chain_slots``' link reads, one per level) and the level
``probes``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from common import ROOT, T_SCHEDULE, log

T_SLOT = "durable_schedules_chainslot"
T_LINK = "durable_schedules_schedulelink"
SLOTS_PER_DOWNSTREAM = 10
#: The plans are judged from this many schedules on: on a smaller table (1,000 rows and the
#: chains' 200) the planner rightly reads a table whole rather than by an index, in a few
#: dozen pages; its plans are reported, not judged.
JUDGED_FROM = 100_000

CAPTURE = r"""
import json, django
django.setup()
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django_durable_schedules import state

claims, error = [], None
with CaptureQueriesContext(connection) as ctx:
    try:
        with transaction.atomic():
            claims = state.claim_due(worker="plan-probe", limit=%(limit)d)
            transaction.set_rollback(True)
    except Exception as exc:
        error = repr(exc)
S, SLOT, LINK = %(tables)r
found = {"claimed": len(claims), "error": error, "probes": [], "links": [], "settle": []}
for q in ctx.captured_queries:
    sql = q["sql"]
    locking = "FOR UPDATE" in sql
    if sql.startswith(f'SELECT "{SLOT}"."downstream_id"'):
        found["due_ready" if "'ready'" in sql else "due_late"] = sql
    elif locking and sql.startswith(f'SELECT "{SLOT}".'):
        found["settle"].append(sql)
    elif locking and f'FROM "{S}"' in sql:
        # The kind after rows are read by key (the ids due_downstreams found); the live
        # rows by the claim index's ranges.
        chain = f'"{SLOT}"' in sql or f'"{S}"."id" IN (' in sql
        found["chain_read" if chain else "live"] = sql
    elif sql.startswith(f'SELECT "{LINK}"."upstream_id"'):
        found["links"].append(sql)
    elif '"priority" <' in sql and not locking:
        found["probes"].append(sql)
print(json.dumps(found))
"""


def remove_chains(conn: Any) -> None:
    """Empty the chain tables (before a build: their rows point at the schedules)."""
    conn.execute(f"TRUNCATE {T_SLOT}, {T_LINK}")


def add_chains(conn: Any, size: int, batch: int) -> dict[str, int]:
    """Put the chains described in the module docstring on the ``batch_due`` table of
    ``size`` rows; returns how many downstreams, links and slots it wrote."""
    downstreams = min(1000, max(size // 5, 2 * batch))
    columns = [
        row[0]
        for row in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
            "ORDER BY ordinal_position",
            (T_SCHEDULE,),
        )
    ]
    special = {
        "id": "gen_random_uuid()",
        "name": "'after-' || lpad(g::text, 8, '0')",
        "kind": "'after'",
        "status": "'active'",
        "priority": "0",
        "lease_token": "NULL",
        "lease_expires_at": "NULL",
        "next_run_at": "NULL",
        "last_run_at": "NULL",
    }
    values = [special.get(column, f"t.{column}") for column in columns]
    conn.execute(
        f"INSERT INTO {T_SCHEDULE} ({', '.join(columns)}) "
        f"SELECT {', '.join(values)} FROM (SELECT * FROM {T_SCHEDULE} ORDER BY name LIMIT 1) "
        "AS t CROSS JOIN generate_series(1, %s) AS g",
        (downstreams,),
    )
    # Downstream n (by name) after the n-th due row for n <= batch, else after a random row.
    conn.execute(
        f"""
        WITH d AS (
            SELECT id, row_number() OVER (ORDER BY name) AS n FROM {T_SCHEDULE}
            WHERE name LIKE 'after-%%' AND kind = 'after'
        ), due AS (
            SELECT id, row_number() OVER (ORDER BY id) AS n FROM {T_SCHEDULE}
            WHERE next_run_at <= now() AND kind <> 'after'
        ), pick AS (
            SELECT n, 'plan-' || lpad(floor(random() * %s)::bigint::text, 8, '0') AS name
            FROM d WHERE n > %s
        )
        INSERT INTO {T_LINK} (created_at, downstream_id, upstream_id)
        SELECT now(), d.id, due.id FROM d JOIN due USING (n) WHERE d.n <= %s
        UNION ALL
        SELECT now(), d.id, s.id FROM d JOIN pick USING (n)
        JOIN {T_SCHEDULE} AS s ON s.name = pick.name
        """,
        (size, batch, batch),
    )
    # Slot k (0..9) of downstream n: scheduled 10 - k hours ago (whole seconds).
    conn.execute(
        f"""
        WITH d AS (
            SELECT id, row_number() OVER (ORDER BY name) AS n FROM {T_SCHEDULE}
            WHERE name LIKE 'after-%%' AND kind = 'after'
        ), s AS (
            SELECT d.id, d.n, k.k,
                date_trunc('second', now()) - (10 - k.k) * interval '1 hour' AS at,
                CASE WHEN k.k = 9 THEN 'waiting'
                     WHEN k.k = 8 AND d.n > %s AND d.n <= %s THEN 'ready'
                     WHEN k.k %% 4 = 3 THEN 'missed' ELSE 'run' END AS status
            FROM d CROSS JOIN generate_series(0, {SLOTS_PER_DOWNSTREAM - 1}) AS k(k)
        )
        INSERT INTO {T_SLOT}
            (id, downstream_id, scheduled_for, deadline, done, status, created_at, finished_at)
        SELECT gen_random_uuid(), id, at,
            CASE WHEN status IN ('waiting', 'ready')
                 THEN date_trunc('second', now()) + interval '1 hour'
                 ELSE at + interval '10 minutes' END,
            CASE WHEN status = 'missed' THEN '[]'::jsonb ELSE '["upstream"]'::jsonb END,
            status, at,
            CASE WHEN status IN ('run', 'missed') THEN at + interval '10 minutes' END
        FROM s
        """,
        (batch, 2 * batch),
    )
    for table in (T_SCHEDULE, T_LINK, T_SLOT):
        conn.execute(f"VACUUM (ANALYZE) {table}")
    conn.execute("CHECKPOINT")
    counts = {
        "downstreams": downstreams,
        "links": conn.execute(f"SELECT count(*) FROM {T_LINK}").fetchone()[0],
        "slots": conn.execute(f"SELECT count(*) FROM {T_SLOT}").fetchone()[0],
    }
    counts["ready_slots"] = conn.execute(
        f"SELECT count(*) FROM {T_SLOT} WHERE status = 'ready'"
    ).fetchone()[0]
    return counts


def capture_chain_sql(env: dict[str, str], batch: int) -> dict[str, Any]:
    """The statements of one real claim of ``2 x batch`` (see the module docstring), by
    role: ``{"live": sql, "due_ready": sql, "due_late": sql, "chain_read": sql, "settle":
    sql, "links_1": sql, ..., "probe_1": sql, ...}``, plus ``claimed`` (how many it
    claimed) and ``settles`` (how many settle reads it sent). Raises ``RuntimeError`` when
    one of the roles is missing."""
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            CAPTURE % {"limit": 2 * batch, "tables": (T_SCHEDULE, T_SLOT, T_LINK)},
        ],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    found = json.loads(out.strip().splitlines()[-1])
    missing = [
        role
        for role in ("live", "due_ready", "due_late", "chain_read", "settle", "links")
        if not found.get(role)
    ]
    if missing:
        raise RuntimeError(f"the claim sent no {', '.join(missing)} statement: {found}")
    statements = {role: found[role] for role in ("live", "due_ready", "due_late", "chain_read")}
    statements["settle"] = found["settle"][0]
    statements |= {f"links_{n}": sql for n, sql in enumerate(found["links"], 1)}
    statements |= {f"probe_{n}": sql for n, sql in enumerate(found["probes"], 1)}
    return {
        "statements": statements,
        "claimed": found["claimed"],
        "settles": len(found["settle"]),
        "error": found["error"],
    }


def bounded(summary: dict[str, Any]) -> bool:
    """Whether one chain statement's plan (``claim_plan.summarize``) reads no table of
    schedules or chain slots by a sequential scan, anywhere in the plan."""
    return not any(t in (T_SCHEDULE, T_SLOT) for t in summary["seq_scans"])


def measure_chains(
    conn: Any,
    env: dict[str, str],
    size: int,
    batch: int,
    samples: int,
    explain: Any,
    time_query: Any,
) -> dict[str, Any]:
    """The ``chains_due`` row of ``claim_plan.py``'s results: the captured claim's live read
    as ``plan`` and its timing (the keys of the other situations' rows), its level probes as
    ``level_probe``, and every statement by role in ``chain_statements``: the plan's summary
    (``explain``: ``claim_plan.explain``), its timing (``time_query``: p50 / p99 / max ms,
    server and round trip) and ``bounded`` (:func:`bounded`). ``chain_p99_ms_added``: the
    p99s of the chain statements (all but the live read and probes) added up, the settle
    read once (a claim sends one per downstream it claims: ``settles``). ``chains_bounded``:
    every statement :func:`bounded`, from :data:`JUDGED_FROM` schedules on (True below)."""
    captured = capture_chain_sql(env, batch)
    measured = {}
    for role, sql in captured["statements"].items():
        summary = explain(conn, sql)
        measured[role] = {
            **summary,
            **time_query(conn, sql, samples),
            "bounded": bounded(summary),
            "sql": sql,
        }
    probes = [m for role, m in measured.items() if role.startswith("probe_")]
    live = measured["live"]
    chain = {r: m for r, m in measured.items() if r != "live" and not r.startswith("probe_")}
    for role, m in measured.items():
        log(
            f"chains_due {role:10}: p50 {m['p50_ms']} p99 {m['p99_ms']} ms, "
            f"{m['shared_buffers']} buffers, seq scans {m['seq_scans'] or 'none'}, "
            f"{' > '.join(m['nodes'])}"
        )
    return {
        "level_probe": {
            "statements": len(probes),
            "p99_ms": round(sum(o["p99_ms"] for o in probes), 3),
            "plan": {
                "index_scan": all(o["index_scan"] for o in probes),
                "shared_buffers": sum(o["shared_buffers"] for o in probes),
                "nodes": sorted({n for o in probes for n in o["nodes"]}),
            },
        }
        if probes
        else None,
        **{k: live[k] for k in live if k.endswith("_ms")},
        "plan": {
            k: v for k, v in live.items() if not k.endswith("_ms") and k not in ("bounded", "sql")
        },
        "chain_statements": measured,
        "chain_p99_ms_added": round(sum(m["p99_ms"] for m in chain.values()), 3),
        "chains_bounded": size < JUDGED_FROM or all(m["bounded"] for m in measured.values()),
        "claimed": captured["claimed"],
        "settles": captured["settles"],
        "claim_error": captured["error"],
        "claim_limit": 2 * batch,
        "table_bytes": conn.execute("SELECT pg_table_size(%s)", (T_SCHEDULE,)).fetchone()[0],
        "index_bytes": conn.execute("SELECT pg_indexes_size(%s)", (T_SCHEDULE,)).fetchone()[0],
        "load_average": list(os.getloadavg()),
    }
