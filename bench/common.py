"""What every bench script shares: PostgreSQL plumbing (plain psycopg), the bench
database, Django subprocesses, real ``run_scheduler`` worker processes, /proc CPU readings
and the code version measured. Not a benchmark itself."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/dds_bench"

T_SCHEDULE = "durable_schedules_schedule"
T_ATTEMPT = "durable_schedules_runattempt"
T_RECEIPT = "durable_schedules_runreceipt"
T_HEARTBEAT = "durable_schedules_workerheartbeat"


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------
# Database plumbing (plain psycopg; the engine itself only runs in the worker processes)
# ---------------------------------------------------------------------------------------


def with_dbname(url: str, dbname: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{dbname}"))


def dbname_of(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


def connect(url: str) -> psycopg.Connection:
    return psycopg.connect(url, autocommit=True)


def scalar(conn: psycopg.Connection, sql: str, params: Any = None) -> Any:
    row = conn.execute(sql, params).fetchone()
    return None if row is None else row[0]


def server_info(conn: psycopg.Connection) -> dict[str, Any]:
    info = {
        name: scalar(conn, f"SHOW {name}")
        for name in (
            "server_version",
            "fsync",
            "synchronous_commit",
            "wal_sync_method",
            "shared_buffers",
            "commit_delay",
            "full_page_writes",
        )
    }
    return info


#: Client sessions of other databases: other users of the server skew the numbers.
OTHER_SESSIONS_SQL = (
    "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
    "AND datname IS DISTINCT FROM current_database()"
)


def recreate_database(url: str) -> None:
    name = dbname_of(url)
    with connect(with_dbname(url, "postgres")) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')


def django_env(url: str) -> dict[str, str]:
    env = dict(os.environ)
    env["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    env["DATABASE_URL"] = url
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def with_notifier(env: dict[str, str], url: str) -> dict[str, str]:
    """``env`` with one ``WebhookNotifier`` to ``url`` in the workers' ``NOTIFIERS`` (through
    tests.settings' ``DDS_TEST_DURABLE_SCHEDULES``); ``env`` itself when ``url`` is empty."""
    if not url:
        return env
    extra = json.loads(env.get("DDS_TEST_DURABLE_SCHEDULES") or "{}")
    extra["NOTIFIERS"] = {
        "bench": {
            "BACKEND": "django_durable_schedules.notify.WebhookNotifier",
            "OPTIONS": {"url": url},
        }
    }
    return {**env, "DDS_TEST_DURABLE_SCHEDULES": json.dumps(extra)}


def set_deadlines(conn: psycopg.Connection, seconds: int) -> None:
    """Give every schedule ``deadline_seconds = seconds`` (0: none)."""
    conn.execute("UPDATE durable_schedules_schedule SET deadline_seconds = %s", (seconds or None,))


def run_django(args: list[str], env: dict[str, str]) -> None:
    subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, check=True, stdout=sys.stderr, stderr=sys.stderr
    )


#: A schedule's run state as it is before its first run (columns absent from the schema
#: being measured are skipped, so the bench runs against older and newer engines).
RUN_STATE = {
    "status": "'active'",
    "degraded_reason": "''",
    "pause_reason": "''",
    "next_run_at": "NULL",
    "last_run_at": "NULL",
    "triggered_at": "NULL",
    "occurrence": "0",
    "attempt": "0",
    "retry_scheduled_for": "NULL",
    "failure_count": "0",
    "failed_occurrences": "0",
    "missed_count": "0",
    "lease_token": "NULL",
    "lease_expires_at": "NULL",
}


def reset(conn: psycopg.Connection) -> None:
    """Forget every run: empty the run tables (TRUNCATE: the append-only triggers refuse
    DELETE, not TRUNCATE) and put each schedule back to 'never run, not due'."""
    conn.execute(f"TRUNCATE {T_RECEIPT}, {T_ATTEMPT}, {T_HEARTBEAT}")
    present = {
        row[0]
        for row in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = %s",
            (T_SCHEDULE,),
        )
    }
    assignments = ", ".join(
        f"{column} = {value}" for column, value in RUN_STATE.items() if column in present
    )
    conn.execute(f"UPDATE {T_SCHEDULE} SET {assignments}")
    conn.execute(f"VACUUM (ANALYZE) {T_SCHEDULE}")
    # The emptied run tables are not analyzed: statistics saying "0 rows" make PostgreSQL
    # plan the receipts' foreign-key check on their attempt as a sequential scan, which
    # each worker's session keeps for the whole round, reading every attempt written so far
    # for each receipt (~700 rows a run at 5,000 schedules; docs/benchmarks.md). TRUNCATE
    # leaves their size unknown, as a table of a running deployment never is "empty".
    conn.execute("CHECKPOINT")  # every round starts without pending dirty pages


def make_due(conn: psycopg.Connection) -> None:
    """Every schedule due now: anchor the interval grid at this second (``created_at``) and
    put ``next_run_at`` on it, so the claim runs the anchor slot with nothing missed."""
    conn.execute(
        f"UPDATE {T_SCHEDULE} SET created_at = date_trunc('second', statement_timestamp()), "
        "next_run_at = date_trunc('second', statement_timestamp())"
    )


def counters(conn: psycopg.Connection, dbname: str) -> dict[str, int]:
    row = conn.execute(
        "SELECT d.xact_commit, d.xact_rollback, w.wal_sync, w.wal_write, w.wal_bytes, "
        "pg_current_wal_lsn() - '0/0'::pg_lsn "
        "FROM pg_stat_database d, pg_stat_wal w WHERE d.datname = %s",
        (dbname,),
    ).fetchone()
    keys = ("xact_commit", "xact_rollback", "wal_sync", "wal_write", "wal_bytes", "wal_lsn")
    return {k: int(v) for k, v in zip(keys, row, strict=True)}


def worker_backends(conn: psycopg.Connection) -> list[int]:
    """PIDs of the PostgreSQL backends of this database other than the bench's own."""
    rows = conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
        "AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
    ).fetchall()
    return [row[0] for row in rows]


#: Clock ticks a second (``/proc``'s CPU figures are in them).
TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of ``pids`` (all their threads), from /proc; 0 for a
    process that is gone or on a system without /proc (the local PostgreSQL runs on this
    machine; for a remote one the backend figure is meaningless)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    return total / TICKS


def python_loop_ms(iterations: int = 2_000_000) -> float:
    """Milliseconds this process takes for a fixed pure-Python loop (the best of three): how
    fast the machine is right now, to read figures taken at different times against each
    other (this 2-vCPU machine's speed varies by 1.5x or more over a day)."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        total = 0
        for i in range(iterations):
            total += i
        best = min(best, time.perf_counter() - started)
    return round(best * 1000, 1)


def machine_busy_seconds() -> float:
    """CPU seconds all CPUs spent busy since boot (/proc/stat), 0 without /proc."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return 0.0
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return (user + nice + system + irq + softirq + steal) / TICKS


# ---------------------------------------------------------------------------------------
# Workers
# ---------------------------------------------------------------------------------------


def start_workers(
    n: int,
    env: dict[str, str],
    logdir: Path,
    tag: str,
    worker_args: Sequence[str] = (),
    launcher: Sequence[str] = ("-m", "django", "run_scheduler"),
) -> list[tuple[subprocess.Popen[bytes], Path]]:
    """Start ``n`` real worker processes (``launcher`` + ``worker_args`` + ``--worker-id
    bench-<tag>-w<i>``), each logging to ``logdir/<tag>-worker<i>.log``."""
    logdir.mkdir(parents=True, exist_ok=True)
    procs = []
    for i in range(n):
        path = logdir / f"{tag}-worker{i}.log"
        cmd = [sys.executable, *launcher, *worker_args, "--worker-id", f"bench-{tag}-w{i}"]
        with path.open("wb") as out:
            procs.append(
                (
                    subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT),
                    path,
                )
            )
    return procs


def stop_workers(
    procs: list[tuple[subprocess.Popen[bytes], Path]], grace: float = 30.0
) -> list[int]:
    """SIGTERM (drain); a second SIGTERM (force) after ``grace`` seconds; SIGKILL after
    another 10. Returns the exit codes (negative: killed by that signal)."""
    for proc, _ in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    codes = []
    deadline = time.monotonic() + grace
    for proc, path in procs:
        try:
            codes.append(proc.wait(timeout=max(0.1, deadline - time.monotonic())))
            continue
        except subprocess.TimeoutExpired:
            log(
                f"worker {proc.pid} still draining after {grace:.0f}s; second SIGTERM (log: {path})"
            )
            proc.send_signal(signal.SIGTERM)
        try:
            codes.append(proc.wait(timeout=10))
        except subprocess.TimeoutExpired:
            log(f"worker {proc.pid} ignored a second SIGTERM; SIGKILL")
            proc.kill()
            codes.append(proc.wait())
    return codes


def check_alive(procs: list[tuple[subprocess.Popen[bytes], Path]]) -> None:
    for proc, path in procs:
        if proc.poll() is not None:
            tail = path.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"worker {proc.pid} exited with {proc.returncode}:\n{tail}")


def wait_for(
    conn: psycopg.Connection,
    sql: str,
    target: int,
    deadline: float,
    procs: list[tuple[subprocess.Popen[bytes], Path]],
    interval: float,
) -> int:
    polls = 0
    while True:
        value = scalar(conn, sql)
        polls += 1
        if value >= target:
            return polls
        check_alive(procs)
        if time.monotonic() > deadline:
            raise TimeoutError(f"{sql!r} reached {value}, not {target}, before the deadline")
        time.sleep(interval)


def code_version() -> dict[str, Any]:
    """The commit measured, and whether the engine had uncommitted changes (the numbers
    belong to exactly that code)."""

    def git(*a: str) -> str:
        try:
            return subprocess.run(
                ["git", *a], cwd=ROOT, capture_output=True, text=True, check=True
            ).stdout.rstrip("\n")
        except (OSError, subprocess.CalledProcessError):
            return ""

    dirty = git("status", "--porcelain", "--", "django_durable_schedules")
    return {
        "commit": git("rev-parse", "--short", "HEAD").strip() or None,
        "engine_uncommitted_changes": [line[3:] for line in dirty.splitlines()],
    }


def emit(report: dict[str, Any], summary: str, json_out: Path | None = None) -> None:
    """Print ``report`` as JSON on stdout, then the one-line ``summary``."""
    text = json.dumps(report, indent=2, default=str)
    print(text)
    if json_out:
        json_out.write_text(text + "\n")
    print(summary, flush=True)


def fresh_database(url: str, env: dict[str, str]) -> None:
    """Drop and recreate the bench database at ``url`` and migrate it (tests.settings)."""
    log(f"recreating {dbname_of(url)}")
    recreate_database(url)
    run_django(["-m", "django", "migrate", "--verbosity", "0"], env)


def wait_started(
    conn: psycopg.Connection,
    sql: str,
    n: int,
    procs: list[tuple[subprocess.Popen[bytes], Path]],
) -> float:
    """Wait (at most 60 s) until ``sql`` counts ``n`` registered workers; returns the seconds
    it took. On timeout the ``TimeoutError`` carries the end of the first worker's log."""
    started = time.monotonic()
    try:
        wait_for(conn, sql, n, started + 60, procs, 0.1)
    except TimeoutError:
        tail = procs[0][1].read_text(errors="replace")[-1500:]
        raise TimeoutError(f"the workers did not start; {procs[0][1]} ends with:\n{tail}") from None
    return time.monotonic() - started


def wait_for_heartbeats(
    conn: psycopg.Connection, n: int, procs: list[tuple[subprocess.Popen[bytes], Path]]
) -> float:
    """Wait (at most 60 s) until ``n`` workers have written a heartbeat (see wait_started)."""
    return wait_started(conn, f"SELECT count(*) FROM {T_HEARTBEAT}", n, procs)


def resource_fields(
    delta: dict[str, int],
    cpu_before: tuple[float, float],
    cpu_after: tuple[float, float],
    busy_before: float,
    busy_after: float,
    units: int,
    unit: str,
) -> dict[str, Any]:
    """What a round cost, per ``unit`` ("run", "job") of ``units`` done: commits, WAL syncs
    and bytes (``delta``: :func:`counters` after minus before, the bench's own commits
    already taken out), CPU seconds of the workers and of their PostgreSQL backends
    (``(workers, backends)`` from :func:`cpu_seconds`, between "due" and "done"), and the CPU
    the rest of the machine used meanwhile (:func:`machine_busy_seconds`): a busy machine
    skews a round."""
    worker_cpu = cpu_after[0] - cpu_before[0]
    backend_cpu = cpu_after[1] - cpu_before[1]
    return {
        f"commits_per_{unit}": round(delta["xact_commit"] / units, 2),
        f"wal_syncs_per_{unit}": round(delta["wal_sync"] / units, 3),
        f"wal_bytes_per_{unit}": round(delta["wal_lsn"] / units),
        "db_counters_delta": delta,
        "worker_cpu_seconds": round(worker_cpu, 2),
        "db_backend_cpu_seconds": round(backend_cpu, 2),
        f"worker_cpu_ms_per_{unit}": round(1000 * worker_cpu / units, 3),
        f"db_backend_cpu_ms_per_{unit}": round(1000 * backend_cpu / units, 3),
        "other_cpu_seconds": round((busy_after - busy_before) - worker_cpu - backend_cpu, 2),
    }
