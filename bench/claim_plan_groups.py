"""``claim_plan.py``'s ``groups_due`` situation (issue #28: "the claim-plan bench holds its
floor with no groups configured, and its cost with groups is measured"): the ``batch_due``
table with concurrency groups, and every statement a real claim then sends.

:func:`make_groups` (before ``claim_plan.build``) empties the groups table and makes four
groups: ``open`` (``max_running`` 100,000: never binds), ``full-1`` and ``full-2``
(``max_running`` 2, each already at its limit, ``full_until`` lapsed: a claim that reads
their rows must lock and count them to find them full, then hold the rows back and read
again) and ``rated`` (``rate`` 10/h, used up: ``rate_until`` half an hour ahead, so the
claim's read skips its rows by its ``NOT EXISTS`` on the groups). ``claim_plan.build``
then puts every tenth row not due in one of the four (:func:`group_expressions`) and a
quarter of the ``--batch`` due rows in ``open``.

:func:`add_held` adds, with the table's indexes in place (a few hundred rows):

* ``--batch`` rows of ``rated`` and ``--batch`` of ``full-1``/``full-2`` (half each), due
  a minute before the earliest due row: ahead of the ``batch`` due rows in the claim index, so the claim must
  get past ``2 x batch`` held-back rows to fill its batch;
* two rows with a live lease (an hour) in each of ``full-1`` and ``full-2``: what makes
  them full;

then ``VACUUM (ANALYZE)`` and a ``CHECKPOINT``.

:func:`measure_groups` captures every statement of one real claim of ``--batch`` (in a
Django subprocess, rolled back): the level probe, the locking read (``read_1``: returns
the ``full-*`` rows, skips ``rated``'s), the groups' locking read and live lease count
(``full-*``: both full, every row held back), the second read that fills the batch
leaving out those rows and groups (``read_2``), ``open``'s lock and count, the calendar
and window reads, the writes (schedules, attempts, receipts, events, the groups'
``full_until``); each explained (``EXPLAIN (ANALYZE, BUFFERS)``, rolled back), timed and
judged bounded: no sequential scan of the schedules (from :data:`JUDGED_FROM` rows on) and
at most :data:`READ_BOUND` x batch rows read by its scans.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import Any

from common import ROOT, T_SCHEDULE, log

T_GROUP = "durable_schedules_concurrencygroup"
#: As ``claim_plan_chains.JUDGED_FROM``: on a small table the planner rightly reads a
#: table whole; those plans are reported, not judged.
JUDGED_FROM = 100_000
#: A statement is bounded when its scans read at most this many rows per row of the batch
#: (the claim gets past ``2 x batch`` held-back rows here: 3 x batch at least).
READ_BOUND = 10
#: The groups made, in primary key order.
GROUPS = (
    ("open", 100_000, ""),
    ("full-1", 2, ""),
    ("full-2", 2, ""),
    ("rated", None, "10/h"),
)

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
sql = [q["sql"] for q in ctx.captured_queries]
# The worker's wake-up (an idle worker's one statement on its heartbeat row): the heartbeat
# kept (the statement reads nothing without it), the second call's statements captured
# (the first also reads the priority levels, then cached).
state.heartbeat("plan-probe")
state.next_wakeup(worker_id="plan-probe")
with CaptureQueriesContext(connection) as wake:
    state.next_wakeup(worker_id="plan-probe")
wakeup = [q["sql"] for q in wake.captured_queries]
print(json.dumps({"claimed": len(claims), "error": error, "sql": sql, "wakeup": wakeup}))
"""


def make_groups(conn: Any) -> dict[str, int]:
    """Empty the groups table (``TRUNCATE ... CASCADE``: with the schedules and what points
    at them, which ``claim_plan.build`` empties anyway) and make the four groups of the
    module docstring; returns their ids by name."""
    conn.execute(f"TRUNCATE {T_GROUP} CASCADE")
    ids = {}
    for name, max_running, rate in GROUPS:
        ids[name] = conn.execute(
            f"INSERT INTO {T_GROUP} (name, description, max_running, rate, full_until, "
            "rate_until, starts, created_at, updated_at) VALUES (%s, '', %s, %s, NULL, NULL, "
            "'[]'::jsonb, now(), now()) RETURNING id",
            (name, max_running, rate),
        ).fetchone()[0]
    return ids


def group_expressions(ids: dict[str, int]) -> tuple[str, str]:
    """The ``concurrency_group_id`` of ``claim_plan.build``'s rows (SQL over its series
    ``g.g``): ``(not due, due)``: every tenth row not due in one of the four groups; a
    quarter of the due rows in ``open``."""
    every = ", ".join(str(i) for i in ids.values())
    return (
        f"CASE WHEN g.g %% 10 = 0 THEN (ARRAY[{every}])[1 + (g.g / 10) %% {len(ids)}] END",
        f"CASE WHEN g.g %% 4 = 0 THEN {ids['open']} END",
    )


def add_held(conn: Any, batch: int, ids: dict[str, int], held: int = 0) -> dict[str, int]:
    """The held-back due rows and the live leases of the module docstring, the rate used
    up; ``held``: how many held-back rows of each kind (``rated``, ``full-*``) instead of
    ``batch`` (``claim_plan.py --group-held``: a backlog the claim must get past). Returns
    how many rows of each kind it wrote."""
    held = held or batch
    columns = [
        row[0]
        for row in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
            "ORDER BY ordinal_position",
            (T_SCHEDULE,),
        )
    ]

    def insert(prefix: str, count: int, group: str, **special: str) -> None:
        special = {
            "id": "gen_random_uuid()",
            "name": f"'{prefix}-' || lpad(g::text, 8, '0')",
            "status": "'active'",
            "priority": "0",
            "concurrency_group_id": group,
            "lease_token": "NULL",
            "lease_expires_at": "NULL",
            **special,
        }
        values = [special.get(column, f"t.{column}") for column in columns]
        conn.execute(
            f"INSERT INTO {T_SCHEDULE} ({', '.join(columns)}) "
            f"SELECT {', '.join(values)} FROM (SELECT * FROM {T_SCHEDULE} ORDER BY name "
            "LIMIT 1) AS t CROSS JOIN generate_series(1, %s) AS g",
            (count,),
        )

    # A minute before the earliest due row (a build of 10 M rows takes minutes: a time
    # relative to now() would put the held rows after the free ones).
    earliest = conn.execute(
        f"SELECT min(next_run_at) FROM {T_SCHEDULE} WHERE lease_token IS NULL "
        "AND status IN ('active', 'paused')"
    ).fetchone()[0]
    due = f"'{earliest.isoformat()}'::timestamptz - interval '1 minute'"
    full = f"CASE WHEN g %% 2 = 0 THEN {ids['full-1']} ELSE {ids['full-2']} END"
    insert("held-rated", held, str(ids["rated"]), next_run_at=due)
    insert("held-full", held, full, next_run_at=due)
    insert(
        "leased",
        4,
        full,
        next_run_at="now() + interval '1 hour'",
        lease_token="gen_random_uuid()",
        lease_expires_at="now() + interval '1 hour'",
    )
    # The rate used up: its last 10 starts in the past ten minutes, held half an hour.
    conn.execute(
        f"UPDATE {T_GROUP} SET rate_until = now() + interval '30 minutes', starts = "
        "(SELECT jsonb_agg(extract(epoch FROM now()) - 60 * k) FROM generate_series(1, 10) k) "
        "WHERE id = %s",
        (ids["rated"],),
    )
    for table in (T_SCHEDULE, T_GROUP):
        conn.execute(f"VACUUM (ANALYZE) {table}")
    conn.execute("CHECKPOINT")
    return {"held_rated": held, "held_full": held, "leased": 4}


def label(sql: str, seen: dict[str, int]) -> str:
    """A short role for a captured statement: verb and table (``select_schedule``,
    ``update_concurrencygroup``, ...), ``probe`` for a level probe, ``read`` for a locking
    read of the schedules, numbered when repeated."""
    verb = sql.split(None, 1)[0].lower()
    # The table a SELECT reads is its first column's (its select list may hold subqueries).
    table = re.match(r'(?:SELECT|INSERT INTO|UPDATE)\s+"durable_schedules_(\w+)"', sql)
    name = f"{verb}_{table.group(1) if table else 'clock'}"
    if verb == "select" and table and table.group(1) == "schedule":
        if "FOR UPDATE" in sql:
            name = "read"
        elif '"priority" <' in sql:
            name = "probe"
    if verb == "select" and "FOR UPDATE" in sql and name != "read":
        name += "_locked"
    if "COUNT(" in sql.upper() and "concurrency_group" in sql:
        name = "group_count"
    seen[name] = seen.get(name, 0) + 1
    return f"{name}_{seen[name]}"


def capture_group_sql(env: dict[str, str], batch: int) -> dict[str, Any]:
    """Every statement of one real claim of ``batch`` (see the module docstring) but the
    transaction's own (savepoints), by :func:`label`, in the order sent; with ``claimed``
    and ``error``."""
    out = subprocess.run(
        [sys.executable, "-c", CAPTURE % {"limit": batch}],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    found = json.loads(out.strip().splitlines()[-1])
    seen: dict[str, int] = {}
    statements = {
        label(sql, seen): sql
        for sql in found["sql"]
        if sql.split(None, 1)[0].upper() in ("SELECT", "UPDATE", "INSERT", "DELETE")
    }
    if "read_2" not in statements or "group_count_1" not in statements:
        raise RuntimeError(f"the claim held nothing back: {list(statements)} {found['error']}")
    for n, sql in enumerate(found["wakeup"], 1):
        statements[f"wakeup_{n}"] = sql
    return {"statements": statements, "claimed": found["claimed"], "error": found["error"]}


def is_group_statement(role: str) -> bool:
    """Whether a statement of :func:`label`'s ``role`` is one a claim sends only because of
    its concurrency groups (a claim of no group sends none of them)."""
    if role.startswith("wakeup_"):  # the wake-up's, not the claim's
        return False
    if "concurrencygroup" in role or role.startswith("group_count"):
        return True
    return role.startswith(("read_", "probe_")) and not role.endswith("_1")


def bounded(summary: dict[str, Any], size: int, batch: int) -> bool:
    """Whether one statement's plan (``claim_plan.summarize``) reads no schedules by a
    sequential scan (from :data:`JUDGED_FROM` rows on) and at most :data:`READ_BOUND` rows
    per row of the batch (kept or dropped by the scan's filter). A backlog of held-back rows
    due before the free ones is read through (``--group-held`` above ``READ_BOUND x batch /
    2``: not bounded, see docs/benchmarks.md)."""
    if size < JUDGED_FROM:
        return True
    read = summary["rows_read_by_scans"] + summary["rows_filtered_by_scans"]
    return T_SCHEDULE not in summary["seq_scans"] and read <= READ_BOUND * batch


def measure_groups(
    conn: Any,
    env: dict[str, str],
    size: int,
    batch: int,
    samples: int,
    explain: Any,
    time_query: Any,
) -> dict[str, Any]:
    """The ``groups_due`` row of ``claim_plan.py``'s results: the first locking read as
    ``plan`` with its timing (the keys of the other situations' rows), the level probe as
    ``level_probe``, and every statement in ``group_statements`` (its plan's summary, its
    timing, ``bounded`` and its SQL). ``group_p99_ms_added``: every statement's p99 but the
    first read's and the probe's, added (a pessimistic sum); ``groups_only_p99_ms_added``:
    the p99s of the statements only groups cause (:func:`is_group_statement`), added;
    ``groups_bounded``: every statement :func:`bounded`."""
    captured = capture_group_sql(env, batch)
    measured = {}
    for role, sql in captured["statements"].items():
        try:
            summary = explain(conn, sql)
            timing = time_query(conn, sql, samples)
        except Exception as exc:  # a write that cannot be replayed: reported, not judged
            measured[role] = {"error": repr(exc)[:300], "sql": sql[:2000]}
            log(f"groups_due {role:28}: not replayed: {exc!r:.120}")
            continue
        measured[role] = {
            **summary,
            **timing,
            "bounded": bounded(summary, size, batch),
            "sql": sql[:2000],
        }
        m = measured[role]
        log(
            f"groups_due {role:28}: p50 {m['p50_ms']} p99 {m['p99_ms']} ms, "
            f"{m['shared_buffers']} buffers, {m['rows_read_by_scans']} rows read "
            f"+ {m['rows_filtered_by_scans']} filtered out, "
            f"seq scans {m['seq_scans'] or 'none'}, {' > '.join(m['nodes'])}"
        )
    wakeup = {r: measured.pop(r) for r in list(measured) if r.startswith("wakeup_")}
    timed = {r: m for r, m in measured.items() if "p99_ms" in m}
    read, probe = timed["read_1"], timed.get("probe_1")
    rest = [m for r, m in timed.items() if r not in ("read_1", "probe_1")]
    return {
        "level_probe": {
            "statements": 1,
            "p99_ms": probe["p99_ms"],
            "plan": {k: probe[k] for k in ("index_scan", "shared_buffers", "nodes")},
        }
        if probe
        else None,
        **{k: read[k] for k in read if k.endswith("_ms")},
        "plan": {
            k: v for k, v in read.items() if not k.endswith("_ms") and k not in ("bounded", "sql")
        },
        "group_statements": measured,
        "group_p99_ms_added": round(sum(m["p99_ms"] for m in rest), 3),
        # What the groups add to a claim of no group: their locks, counts and writes, and
        # the second probe and read that fill the places of the rows held back.
        "groups_only_p99_ms_added": round(
            sum(m["p99_ms"] for r, m in timed.items() if is_group_statement(r)), 3
        ),
        "group_buffers_added": sum(m["shared_buffers"] for m in timed.values()),
        "groups_bounded": all(m["bounded"] for m in timed.values()),
        # An idle worker's wake-up on this table: its statements (one on its heartbeat row
        # where its reads compile once), judged like the claim's: it reads no held group's
        # backlog (issue #32: the held rows' count must not set its time).
        "wakeup_statements": wakeup,
        "wakeup_p50_ms": round(sum(m.get("p50_ms", 0) for m in wakeup.values()), 3),
        "wakeup_p99_ms": round(sum(m.get("p99_ms", 0) for m in wakeup.values()), 3),
        "wakeup_bounded": bool(wakeup) and all(m.get("bounded") for m in wakeup.values()),
        "claimed": captured["claimed"],
        "claim_error": captured["error"],
        "table_bytes": conn.execute("SELECT pg_table_size(%s)", (T_SCHEDULE,)).fetchone()[0],
        "index_bytes": conn.execute("SELECT pg_indexes_size(%s)", (T_SCHEDULE,)).fetchone()[0],
        "load_average": list(os.getloadavg()),
    }
