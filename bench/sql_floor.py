"""The raw SQL floor of ``throughput.py`` (issue #32, goal 4): what the database work of a
durable scheduler alone costs, on the tables the bench seeds, without Django or the engine.

    .venv/bin/python bench/sql_floor.py --database-url URL [--batch 100] [--worker-id ID]

One floor worker (``throughput.py --sql-floor`` starts as many as the engine's workers,
alternating its rounds with the engine's on the same database and schedules) loops:

1. **claim**, one transaction: lock up to ``--batch`` due rows of the schedule table
   (``status = 'active'``, no lease, ``next_run_at <= now``, oldest first, ``FOR UPDATE SKIP
   LOCKED``), set their lease (token, expiry), count the occurrence, move ``next_run_at``
   one interval on (the bench's schedules are all ``interval``: the floor plans no other
   kind) and insert one attempt row each (every NOT NULL column, the engine's idempotency
   key ``<schedule id>:<occurrence>``, ``claimed_at`` on the database clock); commit;
2. **run** each claimed row: a call of a Python function that does nothing;
3. **complete**, one transaction per batch: clear the lease of each row whose lease is
   still this worker's (a lost lease is not receipted) and insert one ``succeeded``
   receipt each (``finished_at`` on the database clock, the schedule's next run); commit.

What it keeps: every index, constraint and trigger the tables have (the receipts' deferred
foreign key to their attempt, the unique keys on a lease token and on one success per
occurrence, the schedule table's 17 indexes: both updates of a run change indexed columns,
so neither is HOT, as for the engine; the edit trigger's ``WHEN`` is evaluated on every
update), ``fsync`` and ``synchronous_commit`` as the server has them, one commit per claim
and per completion. What it leaves out, being a floor and not a scheduler: lease recovery,
renewal and heartbeats, wake-ups, every other schedule kind, feature and outcome (retries,
misfires, groups, chains, events, ...), the receipt's ``started_at`` (nullable), and any
reading of the rows into Python (only ids and tokens travel).

``--form cte`` (the default, the floor) writes each transaction as ONE statement in
autocommit (data-modifying CTEs: lock + update + insert), with psycopg's server-side
binding and automatic prepared statements: one round trip per claim and per completion.
``--form split`` does the same work as separate statements in an explicit transaction
(``BEGIN``; the locking ``SELECT``; ``UPDATE ... FROM unnest``; ``INSERT ... SELECT FROM
unnest``; ``COMMIT``), the shape the engine's transactions have: the cost of the round trips.

Runs until SIGTERM (the batch in hand is completed first), then prints its counts to stdout
and exits 0. Not a benchmark by itself: ``throughput.py --sql-floor`` measures it.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

HERE = Path(__file__).resolve().parent
#: ``application_name`` of a floor worker's session: how ``throughput.py`` counts them.
APP_NAME = "dds-sql-floor"
#: Floor workers connected to the current database (their readiness).
FLOOR_SESSIONS_SQL = (
    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
    f"AND application_name = '{APP_NAME}'"
)
#: The engine's default ``BATCH_SIZE`` and the bench's ``--batch-size``: its claims take
#: whole batches (claim-ahead), 90-100 rows each in a 4-worker round of 5,000 schedules.
DEFAULT_BATCH = 100
LEASE_SECONDS = 30  # the engine's default LEASE_SECONDS

# The schedule, attempt and receipt tables (bench/common.py's T_SCHEDULE, T_ATTEMPT,
# T_RECEIPT; repeated so that this worker imports nothing but psycopg).
T_SCHEDULE = "durable_schedules_schedule"
T_ATTEMPT = "durable_schedules_runattempt"
T_RECEIPT = "durable_schedules_runreceipt"

_DUE = (
    f"SELECT id, next_run_at FROM {T_SCHEDULE} "
    "WHERE status = 'active' AND lease_token IS NULL AND next_run_at <= statement_timestamp() "
    "ORDER BY next_run_at LIMIT %(batch)s FOR UPDATE SKIP LOCKED"
)
_LEASE = (
    "lease_token = gen_random_uuid(), "
    "lease_expires_at = statement_timestamp() + %(lease)s * interval '1 second', "
    "occurrence = s.occurrence + 1, attempt = 1, last_run_at = statement_timestamp(), "
    "next_run_at = due.next_run_at + s.interval_seconds * interval '1 second'"
)
_ATTEMPT_COLUMNS = (
    "id, schedule_name, occurrence, attempt, scheduled_for, claimed_at, lease_token, "
    "lease_expires_at, worker, idempotency_key, missed_slots, schedule_id, origin"
)
_ATTEMPT_VALUES = (
    "gen_random_uuid(), name, occurrence, 1, scheduled_for, statement_timestamp(), "
    "lease_token, lease_expires_at, %(worker)s, id::text || ':' || occurrence, 0, id, "
    "'scheduled'"
)
_RECEIPT_COLUMNS = (
    "id, occurrence, succeeded_occurrence, status, finished_at, error_type, error_message, "
    "failure_count_after, next_run_at, slots_skipped, attempt_id, schedule_id, forced"
)
_RECEIPT_VALUES = (
    "gen_random_uuid(), occurrence, occurrence, 'succeeded', statement_timestamp(), '', '', "
    "0, next_run_at, 0, attempt_id, id, false"
)

#: The claim as one statement: lock, lease and move, insert the attempts.
CLAIM_CTE = (
    f"WITH due AS ({_DUE}), "
    f"claimed AS (UPDATE {T_SCHEDULE} AS s SET {_LEASE} FROM due WHERE s.id = due.id "
    "RETURNING s.id, s.name, s.occurrence, s.lease_token, s.lease_expires_at, "
    "due.next_run_at AS scheduled_for) "
    f"INSERT INTO {T_ATTEMPT} ({_ATTEMPT_COLUMNS}) SELECT {_ATTEMPT_VALUES} FROM claimed "
    "RETURNING id, schedule_id, lease_token"
)
#: The completion as one statement: release the leases still ours, insert the receipts.
COMPLETE_CTE = (
    "WITH done AS (SELECT * FROM unnest(%(attempts)s::uuid[], %(schedules)s::uuid[], "
    "%(tokens)s::uuid[]) AS d (attempt_id, schedule_id, lease_token)), "
    f"released AS (UPDATE {T_SCHEDULE} AS s SET lease_token = NULL, lease_expires_at = NULL "
    "FROM done WHERE s.id = done.schedule_id AND s.lease_token = done.lease_token "
    "RETURNING s.id, s.occurrence, s.next_run_at, done.attempt_id) "
    f"INSERT INTO {T_RECEIPT} ({_RECEIPT_COLUMNS}) SELECT {_RECEIPT_VALUES} FROM released"
)
#: The completion with each run's start (``--record-starts``, bench/herd_floor.py): the
#: receipts' ``started_at`` from one more array, the instants the runs began (this machine's
#: clock, the database's: the server is local).
COMPLETE_CTE_STARTS = (
    "WITH done AS (SELECT * FROM unnest(%(attempts)s::uuid[], %(schedules)s::uuid[], "
    "%(tokens)s::uuid[], %(starts)s::timestamptz[]) "
    "AS d (attempt_id, schedule_id, lease_token, started_at)), "
    f"released AS (UPDATE {T_SCHEDULE} AS s SET lease_token = NULL, lease_expires_at = NULL "
    "FROM done WHERE s.id = done.schedule_id AND s.lease_token = done.lease_token "
    "RETURNING s.id, s.occurrence, s.next_run_at, done.attempt_id, done.started_at) "
    f"INSERT INTO {T_RECEIPT} ({_RECEIPT_COLUMNS}, started_at) "
    f"SELECT {_RECEIPT_VALUES}, started_at FROM released"
)

# --form split: the same work, one statement per step, in an explicit transaction.
SPLIT_LOCK = _DUE
SPLIT_LEASE = (
    f"UPDATE {T_SCHEDULE} AS s SET {_LEASE} "
    "FROM unnest(%(ids)s::uuid[], %(due)s::timestamptz[]) AS due (id, next_run_at) "
    "WHERE s.id = due.id "
    "RETURNING s.id, s.name, s.occurrence, s.lease_token, s.lease_expires_at, "
    "due.next_run_at AS scheduled_for"
)
SPLIT_ATTEMPTS = (
    f"INSERT INTO {T_ATTEMPT} ({_ATTEMPT_COLUMNS}) SELECT {_ATTEMPT_VALUES} "
    "FROM unnest(%(ids)s::uuid[], %(names)s::text[], %(occ)s::int[], %(tokens)s::uuid[], "
    "%(expiries)s::timestamptz[], %(slots)s::timestamptz[]) "
    "AS c (id, name, occurrence, lease_token, lease_expires_at, scheduled_for) "
    "RETURNING id, schedule_id, lease_token"
)
SPLIT_RELEASE = (
    f"UPDATE {T_SCHEDULE} AS s SET lease_token = NULL, lease_expires_at = NULL "
    "FROM unnest(%(attempts)s::uuid[], %(schedules)s::uuid[], %(tokens)s::uuid[]) "
    "AS done (attempt_id, schedule_id, lease_token) "
    "WHERE s.id = done.schedule_id AND s.lease_token = done.lease_token "
    "RETURNING s.id, s.occurrence, s.next_run_at, done.attempt_id"
)
SPLIT_RECEIPTS = (
    f"INSERT INTO {T_RECEIPT} ({_RECEIPT_COLUMNS}) SELECT {_RECEIPT_VALUES} "
    "FROM unnest(%(ids)s::uuid[], %(occ)s::int[], %(next)s::timestamptz[], "
    "%(attempts)s::uuid[]) AS r (id, occurrence, next_run_at, attempt_id)"
)

FORMS = ("cte", "split")


def noop() -> None:
    """The run: a callback that does nothing (the bench's ``tests.noop``)."""


def claim(
    conn: psycopg.Connection, form: str, batch: int, worker: str
) -> list[tuple[uuid.UUID, uuid.UUID, uuid.UUID]]:
    """Claim up to ``batch`` due schedules in one committed transaction; returns
    ``(attempt id, schedule id, lease token)`` per claimed row (empty: nothing due)."""
    params = {"batch": batch, "lease": LEASE_SECONDS, "worker": worker}
    if form == "cte":
        return conn.execute(CLAIM_CTE, params).fetchall()
    with conn.transaction():
        due = conn.execute(SPLIT_LOCK, params).fetchall()
        if not due:
            return []
        params.update(ids=[r[0] for r in due], due=[r[1] for r in due])
        leased = conn.execute(SPLIT_LEASE, params).fetchall()
        params.update(
            ids=[r[0] for r in leased],
            names=[r[1] for r in leased],
            occ=[r[2] for r in leased],
            tokens=[r[3] for r in leased],
            expiries=[r[4] for r in leased],
            slots=[r[5] for r in leased],
        )
        return conn.execute(SPLIT_ATTEMPTS, params).fetchall()


def complete(
    conn: psycopg.Connection,
    form: str,
    runs: Sequence[tuple[uuid.UUID, uuid.UUID, uuid.UUID]],
    starts: Sequence[datetime] | None = None,
) -> int:
    """Receipt ``runs`` (as :func:`claim` returned them) ``succeeded`` and release their
    leases in one committed transaction; returns how many were receipted (a run whose lease
    is no longer this worker's is not). ``starts`` (``--record-starts``, form ``cte``):
    each run's start instant, written as its receipt's ``started_at``."""
    params: dict[str, Any] = {
        "attempts": [r[0] for r in runs],
        "schedules": [r[1] for r in runs],
        "tokens": [r[2] for r in runs],
    }
    if starts is not None:
        return conn.execute(COMPLETE_CTE_STARTS, {**params, "starts": list(starts)}).rowcount
    if form == "cte":
        return conn.execute(COMPLETE_CTE, params).rowcount
    with conn.transaction():
        released = conn.execute(SPLIT_RELEASE, params).fetchall()
        if not released:
            return 0
        rows = {
            "ids": [r[0] for r in released],
            "occ": [r[1] for r in released],
            "next": [r[2] for r in released],
            "attempts": [r[3] for r in released],
        }
        return conn.execute(SPLIT_RECEIPTS, rows).rowcount


def work(
    url: str, form: str, batch: int, worker: str, poll: float, record_starts: bool = False
) -> dict[str, int]:
    """Claim, run and complete batches until SIGTERM (the batch in hand is completed
    first); sleep ``poll`` seconds after an empty claim. ``record_starts``: note each run's
    start (UTC) and write it as its receipt's ``started_at``. Returns the counts."""
    stop = False

    def on_term(_signum: int, _frame: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    counts = {"claims": 0, "empty_claims": 0, "runs": 0, "receipted": 0, "lost": 0}
    with psycopg.connect(url, autocommit=True, application_name=APP_NAME) as conn:
        conn.prepare_threshold = 0  # a floor: every statement prepared from its first use
        while not stop:
            runs = claim(conn, form, batch, worker)
            if not runs:
                counts["empty_claims"] += 1
                time.sleep(poll)
                continue
            counts["claims"] += 1
            starts: list[datetime] | None = [] if record_starts else None
            for _ in runs:
                if starts is not None:
                    starts.append(datetime.now(UTC))
                noop()
            done = complete(conn, form, runs, starts)
            counts["runs"] += len(runs)
            counts["receipted"] += done
            counts["lost"] += len(runs) - done
    return counts


def floor_launcher() -> tuple[str, ...]:
    """What ``common.start_workers`` runs after the interpreter for a floor worker."""
    return (str(HERE / "sql_floor.py"),)


def floor_args(
    url: str, batch: int, form: str, poll: float, record_starts: bool = False
) -> list[str]:
    """The floor worker's options (``--worker-id`` is added by ``common.start_workers``)."""
    args = ["--database-url", url, "--batch", str(batch), "--form", form, "--poll", str(poll)]
    return [*args, "--record-starts"] if record_starts else args


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--database-url", required=True, help="PostgreSQL URL of the bench database")
    p.add_argument(
        "--batch",
        type=int,
        default=DEFAULT_BATCH,
        help=f"most rows per claim (default {DEFAULT_BATCH}: the engine's BATCH_SIZE)",
    )
    p.add_argument("--form", choices=FORMS, default="cte", help="cte (default) or split")
    p.add_argument(
        "--poll", type=float, default=0.2, help="sleep after an empty claim (default 0.2 s)"
    )
    p.add_argument("--worker-id", default=f"sql-floor-{os.getpid()}")
    p.add_argument(
        "--record-starts",
        action="store_true",
        help="write each run's start as its receipt's started_at (form cte; bench/herd_floor.py)",
    )
    args = p.parse_args(argv)
    if args.batch < 1:
        p.error("--batch must be positive")
    if args.record_starts and args.form != "cte":
        p.error("--record-starts needs --form cte")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    counts = work(
        args.database_url, args.form, args.batch, args.worker_id, args.poll, args.record_starts
    )
    print(f"{args.worker_id}: {counts}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
