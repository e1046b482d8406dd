"""Shared fixtures: the SQLite flush hook, worker subprocesses, polling helpers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import pytest
from django.core.management.commands import flush
from django.db import connections

REPO = Path(__file__).resolve().parents[1]

# Test teardown flushes tables with DELETE on SQLite and MySQL, which the append-only triggers refuse;
# let flush (tests only) through the same gate retention uses, with the audit triggers
# muted (their events would outlive the flush of the event table).
_original_flush = flush.Command.handle


def _flush_through_gate(self, **options):
    from django_durable_schedules.db.audit import muted
    from django_durable_schedules.db.retention import retention_gate

    using = options.get("database") or "default"
    with retention_gate(using), muted(using):
        return _original_flush(self, **options)


flush.Command.handle = _flush_through_gate


def _flush_by_delete_on_postgresql() -> None:
    """Empty the tables after a ``transaction=True`` test with ``DELETE`` on PostgreSQL
    (as Django already does on MySQL/MariaDB), not ``TRUNCATE``: a ``TRUNCATE`` of the
    ~25 tables makes new files for each table and index: 0.91 s of teardown per test,
    against 0.10 s with ``DELETE`` (15 ``transaction=True`` tests that each create a
    schedule, ``--durations=0``, 2026-12-03); about 1,000 tests use it. The append-only
    triggers let the ``DELETE`` through the retention gate, opened in the flush's own
    transaction; foreign keys are deferred to its commit, so the order of the tables does
    not matter. ``reset_sequences`` keeps Django's ``TRUNCATE``."""
    try:
        from django.db.backends.postgresql.operations import DatabaseOperations
    except ImportError:  # pragma: no cover - psycopg is not installed
        return

    from django_durable_schedules.db.audit import PG_SETTING as AUDIT_SETTING
    from django_durable_schedules.db.retention import PG_GATE_SETTING

    truncate = DatabaseOperations.sql_flush

    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        if reset_sequences or not tables:
            return truncate(
                self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade
            )
        return [
            f"SET LOCAL {PG_GATE_SETTING} = 'open';",
            f"SET LOCAL {AUDIT_SETTING} = 'muted';",
            "SET CONSTRAINTS ALL DEFERRED;",
            *(f"DELETE FROM {self.quote_name(table)};" for table in tables),
        ]

    DatabaseOperations.sql_flush = sql_flush


_flush_by_delete_on_postgresql()


def database_url(alias: str = "default") -> str:
    """A DATABASE_URL pointing worker subprocesses at the *test* database."""
    s = connections[alias].settings_dict
    engine = s["ENGINE"]
    if engine.endswith("sqlite3"):
        return f"sqlite:///{s['NAME']}"
    scheme = "postgres" if "postgresql" in engine else "mysql"
    user = s.get("USER") or ""
    password = f":{s['PASSWORD']}" if s.get("PASSWORD") else ""
    return f"{scheme}://{user}{password}@{s.get('HOST') or '127.0.0.1'}:{s.get('PORT') or ''}/{s['NAME']}"


class WorkerProcess:
    """A real ``manage.py run_scheduler`` subprocess (``python -m django``)."""

    def __init__(
        self, *args: str, env: dict[str, str] | None = None, settings: str = "tests.settings"
    ):
        full_env = dict(os.environ)
        full_env.update(
            DJANGO_SETTINGS_MODULE=settings,
            DATABASE_URL=database_url(),
            PYTHONPATH=str(REPO),
            PYTHONUNBUFFERED="1",
        )
        full_env.update(env or {})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "django", "run_scheduler", *args],
            cwd=REPO,
            env=full_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        # Read the output in a thread: an undrained pipe fills up (64 KiB) and blocks the
        # worker's logging, which would look like a hung scheduler.
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._pump, daemon=True)
        self._reader.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def signal(self, sig: int = signal.SIGTERM) -> None:
        self.proc.send_signal(sig)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)

    def wait(self, timeout: float = 60) -> int:
        return self.proc.wait(timeout)

    def output(self) -> str:
        """Everything the worker printed so far."""
        return "".join(self.lines)

    def stop(self) -> None:
        """SIGTERM (a drain), then wait up to 30 s for the exit; kill it after that."""
        self.request_stop()
        self.wait_stopped()

    def request_stop(self) -> None:
        """The first half of :meth:`stop`: SIGTERM, if the process still runs."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def wait_stopped(self, timeout: float = 30) -> None:
        """The second half of :meth:`stop`: wait up to ``timeout`` seconds, then kill."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()


def stop_all(workers) -> None:
    """Stop ``workers`` side by side: SIGTERM to each, then wait for each (each still
    bounded by 30 s). One after the other, each drain (its threads, its final heartbeat,
    its interpreter's exit: ~0.5 s) waited for the one before: 2.7 s to stop 4 workers."""
    for w in workers:
        w.request_stop()
    for w in workers:
        w.wait_stopped()


@pytest.fixture
def start_worker():
    started: list[WorkerProcess] = []

    def start(*args: str, **kwargs) -> WorkerProcess:
        w = WorkerProcess(*args, **kwargs)
        started.append(w)
        return w

    yield start
    stop_all(started)


def freeze(worker: WorkerProcess, schedule_pk=None, tries: int = 100) -> None:
    """SIGSTOP ``worker`` at a moment it holds no lock another worker's write would wait
    for: a lock on SQLite's database file (the tests' rollback journal: a reader's shared
    lock too holds off a writer's commit), or (PostgreSQL, MariaDB) the row lock of the
    schedule ``schedule_pk``. A worker stopped inside a write transaction (a lease
    renewal, a claim: milliseconds of each second) keeps that lock until SIGCONT, so the
    other workers' writes wait for it (SQLite: silently, up to the 20 s busy timeout);
    that is not what a frozen worker's test is about (tests/test_lost_lease.py's frozen
    worker failed so in CI, SQLite lane, 2026-12-07: worker B never ran attempt 2). After
    each SIGSTOP a probe takes the lock, waiting at most 0.2 s; when it cannot, SIGCONT, a short
    sleep, and again."""
    for _ in range(tries):
        worker.signal(signal.SIGSTOP)
        try:
            free = lock_free(schedule_pk)
        except BaseException:
            worker.signal(signal.SIGCONT)  # never left stopped by a probe that failed
            raise
        if free:
            return
        worker.signal(signal.SIGCONT)
        time.sleep(0.02)
    raise AssertionError(f"could not freeze the worker outside a write in {tries} tries")


def lock_free(schedule_pk) -> bool:
    """Whether another connection can take the database file's exclusive lock (SQLite:
    no other connection reads or writes) or ``schedule_pk``'s row lock (the others)
    waiting at most 0.2 s (SQLite) or not at all: a probe, rolled back."""
    import sqlite3

    from django.db import DatabaseError, connection, transaction

    if connection.vendor == "sqlite":
        probe = sqlite3.connect(connection.settings_dict["NAME"], timeout=0.2)
        probe.isolation_level = None
        try:
            probe.execute("BEGIN EXCLUSIVE")
            probe.execute("ROLLBACK")
            return True
        except sqlite3.OperationalError:
            return False
        finally:
            probe.close()
    if schedule_pk is None:
        return True
    from django_durable_schedules.models import Schedule

    try:
        with transaction.atomic():
            list(Schedule.objects.select_for_update(nowait=True).filter(pk=schedule_pk))
        return True
    except DatabaseError:
        return False


def wait_until(predicate, timeout: float = 30.0, interval: float = 0.1, message: str = "condition"):
    """Poll ``predicate`` (which may query the database) until true or ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


#: Test modules whose steps (claim, complete, expire, recover, the operator actions) are
#: held to the transition table: each step must be one a declared row allows
#: (tests/transition_steps.py, ``state.transitions.allows``). Not for a module that counts
#: queries: the observer reads the tables before and after each step.
TRANSITION_OBSERVED = frozenset(
    {
        "tests.test_totality_properties",
        "tests.test_totality_worker_paths",
        "tests.test_calendar_totality",
        "tests.test_rrule_totality",
        "tests.test_state_rules",
        "tests.test_foreign_lease_token",
        "tests.test_bad_values",
        "tests.test_bad_values_paths",
        "tests.test_overlap",
        "tests.test_overlap_replace",
        "tests.test_catch_up",
        "tests.test_backfill",
        "tests.test_excluded_count",
        "tests.test_policies",
        "tests.test_degraded_kind",
        "tests.test_zone_rules",
        "tests.test_rerun",
        "tests.test_manual_kind",
        "tests.test_pause_until",
    }
)


@pytest.fixture(autouse=True)
def _steps_are_transition_rows(request):
    if request.module.__name__ in TRANSITION_OBSERVED:
        from .transition_steps import observe

        observe(request.getfixturevalue("monkeypatch"))


#: Fixtures through which a test reaches the database (pytest-django's ``db``,
#: ``transactional_db``, ``admin_user``, ``live_server`` ... all request the first two).
_DATABASE_FIXTURES = frozenset({"_django_db_helper", "db", "transactional_db", "live_server"})


def _touches_database(item) -> bool:
    return item.get_closest_marker("django_db") is not None or bool(
        _DATABASE_FIXTURES & set(getattr(item, "fixturenames", ()))
    )


#: The marker of a test that reaches the database but whose outcome does not depend on
#: the database's vendor (its point is time-zone arithmetic, a page's HTML, a browser's
#: clicks, a rule searched by Hypothesis...): run on SQLite only, as the pure tests.
#: Never for a test whose point is the database: claims, leases, locking, SKIP LOCKED,
#: constraints, triggers, raw SQL writes, real workers against the database, migrations.
VENDOR_INDEPENDENT = "vendor_independent"


def _sqlite_only(item) -> bool:
    return not _touches_database(item) or item.get_closest_marker(VENDOR_INDEPENDENT) is not None


def _on_a_server_database() -> bool:
    """True when this run's database is PostgreSQL or MariaDB (``DATABASE_URL`` set, not
    ``sqlite:``), as ``scripts/test`` sets it for each database."""
    url = os.environ.get("DATABASE_URL", "")
    return bool(url) and not url.startswith("sqlite")


def property_examples(n: int) -> int:
    """Hypothesis examples for a property about pure logic (slot arithmetic) that reaches
    the database only because it goes through the state functions: ``n`` on SQLite, at
    most ``DDS_HYPOTHESIS_SERVER_EXAMPLES`` (default 5) on PostgreSQL and MariaDB, where
    the same search would find the same thing again (their claim and lock paths have their
    own tests). ``DDS_TEST_PURE_EVERYWHERE=1`` keeps ``n`` everywhere."""
    if not _on_a_server_database() or os.environ.get("DDS_TEST_PURE_EVERYWHERE") == "1":
        return n
    return max(1, min(n, int(os.environ.get("DDS_HYPOTHESIS_SERVER_EXAMPLES", "5"))))


def server_examples(n: int, server: int = 10) -> int:
    """Hypothesis examples for a property about what each database lets in (values
    written behind ``save()``, raw SQL): it must still run on PostgreSQL and MariaDB, but
    the search space (the strategies) is the same on every vendor, so ``n`` on SQLite and
    at most ``server`` there (``DDS_HYPOTHESIS_SERVER_POISON_EXAMPLES`` replaces it). Each
    vendor's refusals (NUL, dates out of range, text in a date column, foreign keys) are
    values of short lists that a few examples meet; the full count runs on SQLite, whose
    run is the longest search. ``DDS_TEST_PURE_EVERYWHERE=1`` keeps ``n`` everywhere."""
    if not _on_a_server_database() or os.environ.get("DDS_TEST_PURE_EVERYWHERE") == "1":
        return n
    limit = int(os.environ.get("DDS_HYPOTHESIS_SERVER_POISON_EXAMPLES", str(server)))
    return max(1, min(n, limit))


def pytest_collection_modifyitems(config, items):
    """On PostgreSQL and MariaDB, deselect the tests whose outcome cannot depend on the
    database's vendor; they run on SQLite.

    ``scripts/test`` runs the suite once per database. Two kinds of test would run the same
    thing three times: a test that never opens a connection (the pure timing, rule and
    layering tests: no ``django_db`` mark, no database fixture), and a test marked
    ``@pytest.mark.vendor_independent`` (it uses the database only as the place its rows
    live; see :data:`VENDOR_INDEPENDENT` for what must never be marked). Both run on SQLite
    (``DATABASE_URL`` unset or ``sqlite:``) and are deselected elsewhere, said in pytest's
    "deselected" count. ``DDS_TEST_PURE_EVERYWHERE=1`` runs both kinds on every database.

    ``DDS_TEST_SHARD=K/N`` keeps the K-th of N shards, whole test files chosen by a stable
    hash of their path: ``scripts/test`` runs SQLite's run as two shards side by side (one
    pytest process keeps one core busy, and SQLite's run is the longest)."""
    shard = shard_of(os.environ.get("DDS_TEST_SHARD", ""))
    if shard is not None:
        kept, dropped = [], []
        for item in items:
            (kept if file_shard(item, shard[1]) == shard[0] else dropped).append(item)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = kept
    if not _on_a_server_database() or os.environ.get("DDS_TEST_PURE_EVERYWHERE") == "1":
        return
    kept, sqlite_only = [], []
    for item in items:
        (sqlite_only if _sqlite_only(item) else kept).append(item)
    if sqlite_only:
        config.hook.pytest_deselected(items=sqlite_only)
        items[:] = kept


def shard_of(value: str) -> tuple[int, int] | None:
    """``DDS_TEST_SHARD=K/N`` as ``(K - 1, N)``; None when unset."""
    if not value:
        return None
    try:
        k, n = (int(part) for part in value.split("/"))
    except ValueError:
        k = n = 0
    if not 1 <= k <= n:
        raise pytest.UsageError(f"DDS_TEST_SHARD must be K/N with 1 <= K <= N (got {value!r})")
    return k - 1, n


def file_shard(item, shards: int) -> int:
    """The shard of an item's test file: a stable hash of its path relative to the
    repository, so a file's module fixtures are set up in one shard only."""
    path = Path(item.path).resolve()
    try:
        name = path.relative_to(REPO).as_posix()
    except ValueError:
        name = path.as_posix()
    return zlib.crc32(name.encode()) % shards


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Say the random order's seed at the end, even under ``-q`` (which hides the header
    where pytest-randomly prints it): a failure that depends on the order is repeated
    with ``--randomly-seed=N``."""
    seed = getattr(config.option, "randomly_seed", None)
    if seed is not None and config.pluginmanager.has_plugin("randomly"):
        terminalreporter.write_line(f"tests ran in a random order: --randomly-seed={seed}")
