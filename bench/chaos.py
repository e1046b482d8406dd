"""Chaos soak (G5): real workers killed, stalled and cut off from their database while
callbacks fail, skip and overrun their leases; then an audit of the run tables and of a
side-effect log written by the callbacks themselves.

    .venv/bin/python bench/chaos.py [--workers 4] [--duration 300] [--kill-every 10]
        [--stall-every 30] [--schedules 24] [--lease-seconds 4]
        [--database-url postgres://postgres@127.0.0.1:5432/dds_chaos]
        [--restart-postgres | --no-restart-postgres] [--poison | --no-poison]
        [--poison-schedules 6] [--groups | --no-groups] [--group-schedules 6]
        [--chains | --no-chains] [--parallel | --no-parallel]
        [--seed 1] [--keep] [--json-out F]

What it does:

1. Makes a fresh database: on PostgreSQL and MariaDB/MySQL ``dds_chaos_<pid>`` on the
   server of ``--database-url`` (the URL's own database name is never touched; dropped
   again at the end unless ``--keep``); on SQLite the file of the URL (deleted first).
   Migrates it and creates ``--schedules`` schedules of the callback ``chaos.work``
   (bench/chaos_app/schedules.py): interval schedules every 1 or 2 s, and every sixth one a
   cron ``* * * * *``; 3 attempts per occurrence, backoff 0.5 s doubling to 2 s.
2. Starts ``--workers`` real ``run_scheduler`` processes (``--lease-seconds``, max idle
   1 s) and for ``--duration`` seconds: every ``--kill-every`` s SIGKILLs a random worker
   among those up for half of it (a kill waits, due, while none is: ``Fleet.up``) and
   starts a replacement; every ``--stall-every`` s (0: never) freezes one with SIGSTOP
   for lease + 2 s (resumed by a timer thread), so its leases expire and are recovered
   elsewhere while its runs go on (their late outcomes must be fenced); on PostgreSQL, half-way through, restarts the
   server once (``pg_ctlcluster ... restart``; skipped with a note when that is not
   possible here, e.g. a remote server). The callbacks fail (10 %), raise ``SkipRun``
   (8 %) or sleep past their lease (5 %: the worker must keep renewing it), decided by a
   hash of the idempotency key and attempt, so runs are reproducible.
   With ``--poison`` (the default) bad values are mixed into that load (issue 11: no
   single value stops the fleet). Poison rows: eight more ``chaos.work`` schedules
   (``chaos-victim-*``) get, one after another between 15 % and 50 % of the soak, a value
   written behind ``save()`` (``QuerySet.update()`` or raw SQL, sometimes with a matching
   ``definition_hash``) and are made due at once: an unknown zone, a zone tzdata removed,
   cron ``61 * * * *`` and ``0 0 31 2 *``, ``interval_seconds = 2**62``, and the durations
   ``backoff_base_seconds = 1e12``, ``backoff_cap_seconds = NaN``, ``timeout_seconds = -1``
   (a database may refuse a value where it enters: recorded as refused). A write the
   database keeps refusing for a while (SQLite busy under load) is retried each second and
   the soak runs on until half its duration has passed after the last one. Poison outcomes:
   ``--poison-schedules`` schedules of ``chaos.poison`` raise messages with NUL, lone
   surrogates and 20,000 characters, ``RetryRun(after_seconds=nan / -1 / inf / 1.8e12)``,
   and return results with NUL and surrogate keys, NaN, a 400-digit int, a cycle and an
   object whose ``repr`` raises.
   With ``--groups`` (the default) ``--group-schedules`` schedules every 1 s in each of
   two concurrency groups (bench/chaos_groups.py): ``chaos-capped`` (``max_running=2``)
   and ``chaos-rated`` (``rate="3/s"``), of ``chaos.grouped`` with ``timeout_seconds``
   (isolation children: a frozen worker's child is killed on resume, a SIGKILLed worker's
   child dies with it).
   With ``--chains`` (the default) three chains of kind ``after`` schedules
   (bench/chaos_chains.py): roots every 3 s (one with a single attempt, so its failures
   leave its downstream instants missed), two steps below each, one step after two roots
   on the same grid.
   With ``--parallel`` (the default) four ``overlap_policy="allow"`` schedules
   (bench/chaos_parallel.py): ``max_parallel`` 2 or 3, one attempt, of ``chaos.parallel``
   (30 % of its runs take 2.5 to 3.5 s: occurrences overlap and the limit binds); two
   every 2 s claimed first (``priority``), two every 1 s, one of them in isolation
   children, one ending half-way.
3. Stops the workers with SIGTERM (they must drain and exit 0), waits for the leases of
   killed workers to expire and recovers them (``state.expire_leases``, as a worker
   would), then audits.

The audit (each item a count; any non-zero count is a violation and exit status 1):

* ``duplicate_successes``: an occurrence (schedule, occurrence number) with more than one
  ``succeeded`` receipt;
* ``double_success_in_log``: an idempotency key whose callback completed normally
  (``done ... ok`` in the side-effect log) more than once where more than one of those
  attempts is receipted ``succeeded``. Completing normally more than once is allowed
  (at-least-once: the earlier attempt's lease was lost, a worker died after the callback
  returned) as long as every other such attempt is receipted ``lease_expired`` or
  ``lease_lost``; ``ok_with_wrong_receipt`` counts normal completions receipted anything
  else (``failed``, ``skipped``, ...), ``phantom_successes`` counts ``succeeded`` receipts
  without a normal completion of that same attempt in the log;
* ``attempt_executed_twice``: one attempt (key, attempt number) started more than once;
* ``lost_occurrences``: an occurrence number in ``1..schedule.occurrence`` with no attempt,
  or whose last attempt ended ``failed``/``lease_expired``/``lease_lost``/``released`` but
  is neither given up (``max_attempts`` reached) nor still pending as the schedule's
  current retry, nor ended by its schedule's degraded pause (a row its completion or lease
  recovery could not move on, a poison written while the run was out: the receipt keeps
  the run's own status, ``lease_expired`` for a worker that died, noting ``the schedule
  was paused: ...``, and the pause leaves nothing to retry; counted in
  ``occurrences_ended_by_degraded_pause``), nor an ``allow`` schedule's occurrence handed
  back unrun (``released``: not retried, its slot is counted in ``missed_count``, which
  ``--parallel`` audits). (Missed slots are coalesced into one run or receipted ``missed`` and do
  not take occurrence numbers of their own: ``slots_skipped``/``missed_count`` count them.)
* ``attempt_gaps``: attempt numbers of an occurrence that are not exactly 1..k;
* ``multiple_receipts`` (attempts with more than one receipt), ``orphan_receipts``,
  ``open_attempts`` (attempts without a receipt at the end), ``leases_left``;
* ``unclean_worker_exits`` (a worker that did not exit 0 after its SIGTERM) and
  ``worker_crashes`` (a worker that exited on its own during the soak: every worker
  death must be one the chaos caused);
* with ``--poison``: ``poison_not_contained`` (a row whose poison was written and names a
  definition field, not ``paused`` with a ``degraded_reason`` at the end, or health not
  counting it), ``healthy_stalled`` (a plain ``chaos-every-*`` interval schedule not
  claimed after the last poison was written, a claim handed back unrun not counted: the
  callbacks' planned failures and the SIGKILLs and freezes of a short soak may leave a
  schedule without a success, or even without a receipted outcome, in that window - a
  run on a worker SIGKILLed mid-run ends ``lease_expired`` - never without a claim; on a
  loaded machine the soak runs on past ``--duration``, chaos included, until each was
  claimed or ``--extend-max`` seconds passed: ``soak_extended`` in the report), ``unbounded_next_runs`` (a
  ``next_run_at`` more than 31 days ahead), ``invalid_receipt_text`` (NUL in a receipt's
  text, or a result that is not strict JSON) and ``dropped_outcomes`` (outcomes the
  engine logged as dropped because no receipt of them could be stored).
* with ``--groups`` (the rules in bench/chaos_groups.py): ``group_over_max_running``
  (more runs of ``chaos-capped`` holding a live lease at one instant than
  ``max_running``, from the callbacks' own start/done lines, a run without ``done`` ended
  at its worker's SIGKILL or resume, a frozen worker's run cut at freeze + lease -
  renewal period) and ``group_claims_over_rate`` (more claims, ``RunAttempt.claimed_at``,
  in any window of ``rate_window`` than the count: the engine's own rule),
  ``group_started_late`` (a callback of ``chaos-rated`` started more than the rate's
  margin plus ``START_SLACK_SECONDS`` after its claim: past its start deadline) and
  ``group_over_rate`` (more callback starts of ``chaos-rated`` than its count in any
  window of the rate's length less ``START_SLACK_SECONDS``). The grouped schedules are in
  every other check (nothing lost).
* with ``--chains`` (the rules in bench/chaos_chains.py, instants of the live grid only):
  ``chain_instant_succeeded_twice`` (a downstream instant with more than one success),
  ``chain_ran_before_upstreams`` (a downstream attempt claimed before every upstream's
  success receipt for its instant was finished), ``chain_slot_undecided`` (a chain slot
  ``run`` without a receipt or ``missed`` without an ``UpstreamNotDone`` receipt, or still
  open after more than 10 s past its deadline with its downstream free: the engine
  settles slots on a free downstream only) and ``chain_ready_stalled`` (a ready slot left
  unclaimed for more than 15 s while its downstream was free).
* with ``--parallel`` (the rules in bench/chaos_parallel.py): ``parallel_over_max`` (more
  runs of one ``allow`` schedule holding a live lease at one instant than its
  ``max_parallel``, from the callbacks' own start/done lines, cut as the groups' check
  cuts them), ``parallel_claims_over_max`` (the same at each claim, from ``claimed_at``
  and the receipts' ``finished_at``), ``parallel_occurrence_claimed_twice``,
  ``parallel_occurrence_receipted_twice``, ``parallel_slot_unaccounted`` and
  ``parallel_slot_counted_twice`` (the grid's decided slots against the occurrences run
  plus ``missed_count``), ``parallel_lease_left_by_drain`` (an ``OccurrenceLease`` of a
  worker that drained left at the stop), ``parallel_leases_left`` (any left after the
  lease recovery) and ``parallel_schedule_stuck`` (left ``active`` with no next run). Their occurrences overlap by design; every other check covers them.

Prints the JSON report on stdout, then one summary line. Worker logs and the side-effect
log go to ``bench/out/chaos-<pid>/``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

import chaos_chains
import chaos_groups
import chaos_parallel
import chaos_surfaces

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/dds_chaos"
SETTLED = {"succeeded", "skipped", "missed", "degraded", "cancelled"}
FENCED = {"lease_expired", "lease_lost"}


def say(message: str) -> None:
    print(f"[chaos {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------
# The database
# ---------------------------------------------------------------------------------------


def vendor_of(url: str) -> str:
    scheme = urlsplit(url).scheme
    if scheme.startswith("postgres") or scheme == "pgsql":
        return "postgresql"
    if scheme in ("mysql", "mariadb", "mysql2"):
        return "mysql"
    if scheme.startswith("sqlite"):
        return "sqlite"
    raise SystemExit(f"chaos: unsupported database URL scheme {scheme!r}")


def with_dbname(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


def fresh_database(url: str, vendor: str) -> str:
    """Create the soak's own empty database; returns its URL."""
    if vendor == "sqlite":
        import dj_database_url

        path = Path(dj_database_url.parse(url)["NAME"] or "")
        if not path.name or str(path) == ":memory:":
            raise SystemExit("chaos: SQLite needs a file: sqlite:////absolute/path")
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        return url
    name = f"dds_chaos_{os.getpid()}"
    _admin(url, vendor, f"DROP DATABASE IF EXISTS {name}")
    create = f"CREATE DATABASE {name}"
    if vendor == "mysql":
        create += " CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
    _admin(url, vendor, create)
    return with_dbname(url, name)


def drop_database(url: str, vendor: str) -> None:
    if vendor == "sqlite":
        return
    name = urlsplit(url).path.lstrip("/")
    force = " WITH (FORCE)" if vendor == "postgresql" else ""
    _admin(url, vendor, f"DROP DATABASE IF EXISTS {name}{force}")


def _admin(url: str, vendor: str, sql: str) -> None:
    """Run one statement outside any database of ours (server maintenance connection)."""
    if vendor == "postgresql":
        import psycopg

        with psycopg.connect(with_dbname(url, "postgres"), autocommit=True) as conn:
            conn.execute(sql)
        return
    import MySQLdb

    parts = urlsplit(url)
    conn = MySQLdb.connect(
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 3306,
        user=unquote(parts.username or "root"),
        passwd=unquote(parts.password or ""),
    )
    try:
        conn.cursor().execute(sql)
    finally:
        conn.close()


def setup_django(url: str, log_path: Path, lease: int) -> dict[str, str]:
    """Configure this process for the soak database; returns the workers' environment."""
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="chaos_settings",
        DATABASE_URL=url,
        CHAOS_LOG=str(log_path),
        CHAOS_LEASE_SECONDS=str(lease),
        PYTHONPATH=os.pathsep.join(
            p for p in (str(BENCH), str(ROOT), os.environ.get("PYTHONPATH")) if p
        ),
        PYTHONUNBUFFERED="1",
    )
    os.environ.update({k: env[k] for k in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "CHAOS_LOG")})
    os.environ["CHAOS_LEASE_SECONDS"] = str(lease)
    for p in (str(ROOT), str(BENCH)):
        if p not in sys.path:
            sys.path.insert(0, p)
    import django

    django.setup()
    return env


def create_schedules(
    count: int,
    rng: random.Random,
    poison_schedules: int = 0,
    *,
    surfaces: bool = True,
    groups: int = 0,
    chains: bool = False,
    parallel: float = 0.0,
) -> None:
    """``count`` plain ``chaos.work`` schedules; with ``poison_schedules``, also the poison
    victims (:data:`POISON_ROWS`) and that many ``chaos.poison`` schedules; with
    ``surfaces``, the calendars and backfills of :mod:`chaos_surfaces`; with ``groups``,
    that many schedules in each of the two concurrency groups of :mod:`chaos_groups`; with
    ``chains``, the chains of :mod:`chaos_chains`; with ``parallel`` (the soak's duration,
    seconds), the ``allow`` schedules of :mod:`chaos_parallel`."""
    from django_durable_schedules import state

    common = {
        "callback": "chaos.work",
        "max_attempts": 3,
        "backoff_base_seconds": 0.5,
        "backoff_cap_seconds": 2.0,
    }
    for i in range(count):
        if i % 6 == 5:
            state.create_schedule(
                name=f"chaos-cron-{i:03}", kind="cron", cron="* * * * *", **common
            )
        else:
            state.create_schedule(
                name=f"chaos-every-{i:03}",
                kind="interval",
                interval_seconds=rng.choice((1, 2)),
                # A third of them queue one overlapped slot (buffered runs in the mix).
                overlap_policy="buffer_one" if i % 3 == 1 else "skip",
                **common,
            )
    if surfaces:
        chaos_surfaces.create_surfaces(common, rng, poison=bool(poison_schedules))
    if groups:
        chaos_groups.create_grouped(common, groups)
    if chains:
        chaos_chains.create_chains(common)
    if parallel:
        chaos_parallel.create_parallel(common, parallel)
    if not poison_schedules:
        return
    for i, (kind, *_rest) in enumerate(POISON_ROWS):
        shape = {"cron": "* * * * *"} if kind == "cron" else {"interval_seconds": 2}
        state.create_schedule(name=f"chaos-victim-{i:02}", kind=kind, **shape, **common)
    for i in range(poison_schedules):
        state.create_schedule(
            name=f"chaos-poison-{i:02}",
            kind="interval",
            interval_seconds=rng.choice((1, 2)),
            **{**common, "callback": "chaos.poison"},
        )


# ---------------------------------------------------------------------------------------
# Poison rows (--poison)
# ---------------------------------------------------------------------------------------

#: Values written behind ``save()`` into ``chaos-victim-<i>`` (row ``i``): the victim's
#: kind, the field, the value, how (``update``: ``QuerySet.update()``, ``sql``: raw SQL),
#: whether the matching ``definition_hash`` is written too (so the edit looks planned), and
#: what the engine must do: ``degraded`` (pause it with the reason) or ``bounded`` (a
#: duration: used within its bounds, or the row paused; either way no stop).
POISON_ROWS: tuple[tuple[str, str, Any, str, bool, str], ...] = (
    ("interval", "timezone", "Mars/Olympus", "update", False, "degraded"),
    ("cron", "cron", "61 * * * *", "sql", False, "degraded"),
    ("cron", "cron", "0 0 31 2 *", "update", True, "degraded"),
    ("interval", "interval_seconds", 2**62, "update", False, "degraded"),
    ("interval", "timezone", "US/Pacific-New", "sql", True, "degraded"),
    ("interval", "backoff_base_seconds", 1e12, "update", False, "bounded"),
    ("interval", "backoff_cap_seconds", float("nan"), "sql", False, "bounded"),
    ("interval", "timeout_seconds", -1.0, "update", False, "bounded"),
)


def write_poison(index: int, vendor: str = "", surfaces: bool = False) -> dict[str, Any] | None:
    """Write poison row ``index`` (:data:`POISON_ROWS`, then with ``surfaces`` the surface
    poisons of :func:`chaos_surfaces.poisons_for` ``vendor``) and make the victim due now.
    Returns what happened, or None when the database could not be reached (try again)."""
    from django.db import (
        DatabaseError,
        InterfaceError,
        OperationalError,
        connection,
        connections,
        transaction,
    )

    from django_durable_schedules import state
    from django_durable_schedules.models import Schedule

    if index >= len(POISON_ROWS):
        name = chaos_surfaces.poisons_for(vendor)[index - len(POISON_ROWS)]
        try:
            entry = chaos_surfaces.write_surface_poison(name, vendor)
        except (OperationalError, InterfaceError) as exc:
            if connection.vendor != "mysql" or getattr(exc, "args", (0,))[0] in (2002, 2006, 2013):
                connections.close_all()
                return None
            entry = {"surface": name, "victim": name, "result": f"refused: {exc}"[:200]}
        except (DatabaseError, ValueError, TypeError, OverflowError, UnicodeError) as exc:
            entry = {"surface": name, "victim": name, "result": f"refused: {exc}"[:200]}
        finally:
            connections.close_all()
        say(f"poison {entry['victim']}: {name}: {entry['result']}")
        return entry
    _kind, field, value, via, rehash, expect = POISON_ROWS[index]
    entry: dict[str, Any] = {
        "victim": f"chaos-victim-{index:02}",
        "field": field,
        "value": repr(value),
        "via": via,
        "rehash": rehash,
        "expect": expect,
    }
    try:
        row = Schedule.objects.get(name=entry["victim"])
        at = state.db_now().replace(microsecond=0)
        with transaction.atomic():
            if via == "sql":
                f = Schedule._meta.get_field(field)
                qn = connection.ops.quote_name
                with connection.cursor() as cursor:
                    cursor.execute(
                        f"UPDATE {qn(Schedule._meta.db_table)} SET {qn(f.column)} = %s "
                        f"WHERE {qn(Schedule._meta.pk.column)} = %s",
                        [
                            f.get_db_prep_save(value, connection),
                            Schedule._meta.pk.get_db_prep_value(row.pk, connection),
                        ],
                    )
            else:
                Schedule.objects.filter(pk=row.pk).update(**{field: value})
            if rehash:
                fresh = Schedule.objects.get(pk=row.pk)
                Schedule.objects.filter(pk=row.pk).update(
                    definition_hash=fresh.compute_definition_hash()
                )
            Schedule.objects.filter(pk=row.pk, status="active").update(next_run_at=at)
        entry.update(result="written", at=at)
    except (OperationalError, InterfaceError) as exc:
        if connection.vendor != "mysql" or getattr(exc, "args", (0,))[0] in (2002, 2006, 2013):
            connections.close_all()
            return None  # the server is away (the PostgreSQL restart): later
        entry.update(result=f"refused: {type(exc).__name__}: {str(exc)[:200]}")
    except (DatabaseError, ValueError, TypeError, OverflowError, UnicodeError) as exc:
        entry.update(result=f"refused: {type(exc).__name__}: {str(exc)[:200]}")
    finally:
        connections.close_all()  # the soak itself stays off the database between writes
    say(f"poison {entry['victim']}: {field} = {entry['value']} via {via}: {entry['result']}")
    return entry


# ---------------------------------------------------------------------------------------
# The workers and the chaos
# ---------------------------------------------------------------------------------------


class Fleet:
    """The worker processes: start, SIGKILL and replace, freeze (SIGSTOP) and resume."""

    def __init__(self, env: dict[str, str], outdir: Path, lease: int, rng: random.Random):
        self.env, self.outdir, self.lease, self.rng = env, outdir, lease, rng
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.frozen: dict[str, float] = {}  # worker id -> monotonic time to resume
        self.started = self.killed = self.stalled = 0
        self.killed_ids: set[str] = set()  # workers SIGKILLed: their leases are recovered
        self.crashes: list[dict[str, Any]] = []
        # (wall time, "kill" | "stop" | "cont", worker pid), and (wall time, "outage" |
        # "outage_end", 0) around the PostgreSQL restart: what the audits end and cut runs by
        self.events: list[tuple[float, str, int]] = []
        self.children_survived_sigkill: list[int] = []  # isolation children alive 3 s after
        self.lock = threading.Lock()  # frozen/events: the loop and the resume timers

    def start(self) -> str:
        self.started += 1
        wid = f"chaos-w{self.started:03}"
        with (self.outdir / f"{wid}.log").open("wb") as out:
            self.procs[wid] = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "django",
                    "run_scheduler",
                    "--worker-id",
                    wid,
                    "--lease-seconds",
                    str(self.lease),
                    "--max-idle",
                    "1",
                    "--concurrency",
                    "4",
                ],
                cwd=ROOT,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        return wid

    def reap(self) -> None:
        """A worker that exited on its own is a crash: record it and start a replacement."""
        for wid, proc in list(self.procs.items()):
            if proc.poll() is not None:
                tail = (self.outdir / f"{wid}.log").read_text(errors="replace")[-1500:]
                self.crashes.append({"worker": wid, "code": proc.returncode, "log_tail": tail})
                say(f"worker {wid} exited on its own ({proc.returncode}); replacing it")
                with self.lock:
                    del self.procs[wid]
                    self.frozen.pop(wid, None)
                self.start()

    def up(self, wid: str, for_seconds: float = 0.0) -> bool:
        """Whether worker ``wid`` reached its loop (its log says it is starting) at least
        ``for_seconds`` ago: a worker still importing Django holds no claim, and killing it
        proves nothing of the engine; on a loaded machine (an import taking 10-18 s, longer
        than ``--kill-every``) such kills, and kills just after the start, starved the
        fleet until the healthy schedules went unclaimed."""
        try:
            with (self.outdir / f"{wid}.log").open("rb") as log:
                head = log.read(8192)
        except OSError:
            return False
        for line in head.splitlines():
            if b" starting (" in line:
                try:
                    at = datetime.strptime(line[:23].decode(), "%Y-%m-%d %H:%M:%S,%f")
                except ValueError:
                    return True  # up; when, not known
                return (datetime.now() - at).total_seconds() >= for_seconds
        return False

    def kill_random(self, up_for: float = 0.0) -> bool:
        """SIGKILL a random worker that has been up for ``up_for`` seconds (:meth:`up`) and
        start another in its place; False (nothing killed, the kill stays due) while none
        has."""
        ready = [wid for wid in sorted(self.procs) if self.up(wid, up_for)]
        if not ready:
            return False
        wid = self.rng.choice(ready)
        with self.lock:
            proc = self.procs.pop(wid)
            self.frozen.pop(wid, None)
            children = chaos_groups.children_of(proc.pid)
            self.events.append((time.time(), "kill", proc.pid))
            proc.kill()
        proc.wait()
        self.children_survived_sigkill += chaos_groups.still_alive(children, within=3.0)
        self.killed += 1
        self.killed_ids.add(wid)
        say(f"SIGKILL {wid}; started {self.start()}")
        return True

    def stall_random(self) -> None:
        awake = sorted(set(self.procs) - set(self.frozen))
        if not awake:
            return
        wid = self.rng.choice(awake)
        with self.lock:
            self.events.append((time.time(), "stop", self.procs[wid].pid))
            self.procs[wid].send_signal(signal.SIGSTOP)
            self.frozen[wid] = time.monotonic() + self.lease + 2
        timer = threading.Timer(self.lease + 2, self.resume)
        timer.daemon = True
        timer.start()
        self.stalled += 1
        say(f"SIGSTOP {wid} for {self.lease + 2}s")

    def resume(self, everyone: bool = False) -> None:
        """SIGCONT the frozen workers whose time is up (all with ``everyone``). Also called
        from a timer thread at each stall's end: the soak's own loop may be blocked on the
        database (SQLite: by the frozen worker's write lock) and must not delay it."""
        with self.lock:
            now = time.monotonic()
            for wid, until in list(self.frozen.items()):
                if everyone or until <= now:
                    self.procs[wid].send_signal(signal.SIGCONT)
                    self.events.append((time.time(), "cont", self.procs[wid].pid))
                    del self.frozen[wid]

    def stop(self, grace: float = 60.0) -> list[dict[str, Any]]:
        """SIGTERM every worker (drain); returns those that did not exit 0 in time. A
        worker is signalled once it logged its start (its SIGTERM handler is installed
        before: a replacement still importing Django on a loaded host would die of the
        signal's default action, which says nothing of its drain), or after ``grace``."""
        self.resume(everyone=True)
        deadline = time.monotonic() + grace
        for wid, proc in self.procs.items():
            log = self.outdir / f"{wid}.log"
            while proc.poll() is None and time.monotonic() < deadline:
                if b" starting (" in log.read_bytes():
                    break
                time.sleep(0.1)
        for proc in self.procs.values():
            proc.send_signal(signal.SIGTERM)
        unclean = []
        for wid, proc in self.procs.items():
            try:
                code = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
            if code != 0:
                unclean.append({"worker": wid, "code": code})
        return unclean


def restart_postgres(url: str) -> dict[str, Any]:
    """Restart the local PostgreSQL cluster serving ``url`` (fast shutdown), the one
    ``pg_lsclusters`` lists on the URL's port (default 5432), never another; returns what
    happened, with a note instead of raising when it is not possible here."""
    parts = urlsplit(url)
    if parts.hostname not in ("127.0.0.1", "localhost", "::1", None):
        return {"done": False, "note": f"server {parts.hostname} is not local"}
    port = str(parts.port or 5432)
    commands: list[list[str]] = []
    if shutil.which("pg_lsclusters") and shutil.which("pg_ctlcluster"):
        listing = subprocess.run(["pg_lsclusters", "-h"], capture_output=True, text=True).stdout
        for line in listing.splitlines():
            fields = line.split()
            if len(fields) >= 3 and fields[2] == port:
                commands.append(
                    [
                        "pg_ctlcluster",
                        "--skip-systemctl-redirect",
                        "-m",
                        "fast",
                        fields[0],
                        fields[1],
                        "restart",
                    ]
                )
    # ``service postgresql restart`` restarts every cluster of the machine: only where no
    # cluster can be chosen by its port (no pg_lsclusters), never beside a chosen one.
    if not shutil.which("pg_lsclusters") and shutil.which("service"):
        commands.append(["service", "postgresql", "restart"])
    start = time.monotonic()
    for cmd in commands:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if done.returncode == 0:
            up = _wait_postgres(url, 60)
            seconds = round(time.monotonic() - start, 2)
            say(f"PostgreSQL restarted ({' '.join(cmd)}) in {seconds}s")
            return {"done": up, "command": " ".join(cmd), "seconds": seconds}
        say(f"{' '.join(cmd)} failed: {(done.stderr or done.stdout).strip()[-300:]}")
    return {"done": False, "note": "no working restart command here (pg_ctlcluster, service)"}


def _wait_postgres(url: str, seconds: float) -> bool:
    import psycopg

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            psycopg.connect(url, connect_timeout=2).close()
            return True
        except psycopg.Error:
            time.sleep(0.2)
    return False


def strike(fleet: Fleet, now: float, due: list[float], args: argparse.Namespace) -> None:
    """One tick of the chaos: reap the workers that died and resume the frozen ones whose
    time is up, then SIGKILL one once ``due[0]`` passed and freeze one once ``due[1]``
    passed (``time.monotonic()`` seconds), each moved on by ``--kill-every`` /
    ``--stall-every``; a kill waits, due, until a worker has been up (:meth:`Fleet.up`)
    for half of ``--kill-every``."""
    fleet.reap()
    fleet.resume()
    if now >= due[0] and fleet.kill_random(args.kill_every / 2):
        due[0] += args.kill_every
    if now >= due[1]:
        fleet.stall_random()
        due[1] += args.stall_every


def soak(
    fleet: Fleet, args: argparse.Namespace, url: str, vendor: str, poisoned: list[dict[str, Any]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The chaos itself; appends each poison row written (``--poison``) to ``poisoned``.
    Returns the PostgreSQL restart's report and the soak's extension past ``--duration``
    (``seconds``, ``still_waiting_on``: what the liveness checks still miss)."""
    for _ in range(args.workers):
        fleet.start()
    restart: dict[str, Any] = {"done": False, "note": "not requested"}
    restart_pending = args.restart_postgres
    if restart_pending and vendor != "postgresql":
        restart, restart_pending = {"done": False, "note": f"not PostgreSQL ({vendor})"}, False
    t0 = time.monotonic()
    # The next SIGKILL and the next freeze (monotonic seconds; strike() moves them on).
    due = [
        t0 + args.kill_every if args.kill_every > 0 else float("inf"),
        t0 + args.stall_every if args.stall_every > 0 else float("inf"),
    ]
    restart_at = t0 + args.duration / 2
    n = len(POISON_ROWS) if args.poison else 0
    if args.poison and args.surfaces:
        n += len(chaos_surfaces.poisons_for(vendor))
    # Poison rows one after another between 15 % and 50 % of the soak (healthy schedules
    # then have half of it to show they kept running).
    poison_at = [t0 + args.duration * (0.15 + 0.35 * i / max(1, n - 1)) for i in range(n)]
    tries = 0
    # A poison write the database refused for a while (SQLite busy under load) lands late:
    # the soak then runs on until healthy schedules have had half the duration after it.
    end = t0 + args.duration
    while (now := time.monotonic()) < end:
        strike(fleet, now, due, args)
        if poison_at and now >= poison_at[0]:
            entry = write_poison(len(poisoned), vendor, args.surfaces)
            tries += 1
            if entry is None and tries >= 30:
                entry = {"victim": f"chaos-victim-{len(poisoned):02}", "result": "unreachable"}
            if entry is not None:
                poisoned.append(entry)
                poison_at.pop(0)
                tries = 0
                end = max(end, now + args.duration * 0.5)
            else:
                poison_at[0] = now + 1.0
        if restart_pending and now >= restart_at:
            restart_pending = False
            say("restarting PostgreSQL")
            fleet.events.append((time.time(), "outage", 0))  # every worker: no renewals
            restart = restart_postgres(url)
            fleet.events.append((time.time(), "outage_end", 0))
        time.sleep(0.1)
    # The liveness checks need time with workers: on a loaded machine (CI runs three soaks
    # and a test suite side by side) two workers killed every 10 s, each restart taking
    # seconds to import Django, and slow callbacks ahead in priority can leave a healthy
    # schedule unclaimed in the half-duration after the last poison. Then the soak runs on,
    # kills and freezes included, until every one was claimed or --extend-max seconds
    # passed: a poison that stops the claim path still fails the audit.
    extended_from = time.monotonic()
    limit = extended_from + max(0.0, args.extend_max)
    waiting = waiting_on(poisoned, args.surfaces) if args.poison else []
    while waiting and (now := time.monotonic()) < limit:
        strike(fleet, now, due, args)
        time.sleep(1.0)
        waiting = waiting_on(poisoned, args.surfaces)
    extended = round(time.monotonic() - extended_from, 1)
    if extended >= 1:
        say(f"soak extended {extended} s for the liveness checks (still waiting on "
            f"{len(waiting)})")  # fmt: skip
    return restart, {"seconds": extended, "still_waiting_on": waiting[:10]}


def healthy_unclaimed(poisoned: list[dict[str, Any]], *, receipted: bool = False) -> dict[str, Any]:
    """The plain ``chaos-every-*`` schedules with no claim after the last poison written
    (``healthy_stalled``), each with its latest claim's instant (None: never claimed);
    empty when no poison was written. Counted: the claims not handed back unrun (a claim
    proves the claim path kept taking the row after the poison; its outcome - a success,
    a planned failure, or a lease lost to a SIGKILL or a freeze - is the chaos's).
    ``receipted``: only claims with a receipt already (during the soak: a claim still in
    flight may yet be handed back, so what this finds then holds at the audit too)."""
    from django.db.models import Max

    from django_durable_schedules.models import RunAttempt, Schedule

    written_at = [e["at"] for e in poisoned if e.get("result") == "written"]
    if not written_at:
        return {}
    last = max(written_at)
    claims = RunAttempt.objects.exclude(receipt__status="released")
    if receipted:
        claims = claims.filter(receipt__isnull=False)
    latest = dict(
        claims.values("schedule__name")
        .annotate(at=Max("claimed_at"))
        .values_list("schedule__name", "at")
    )
    names = Schedule.objects.filter(name__startswith="chaos-every-").values_list("name", flat=True)
    return {n: latest.get(n) for n in sorted(names) if not (latest.get(n) and latest[n] > last)}


def waiting_on(poisoned: list[dict[str, Any]], surfaces: bool) -> list[str]:
    """What the audit's liveness checks would still find at this instant: the healthy
    schedules not claimed since the last poison (:func:`healthy_unclaimed`, receipted
    claims only) and, with ``surfaces``, the innocent backfills that ran no slot
    (``chaos_surfaces.unrun_backfills``) and the poisoned rows whose pass neither paused
    them nor went on (``chaos_surfaces.stalled_victims``)."""
    from django.db import DatabaseError, connections

    try:
        found = list(healthy_unclaimed(poisoned, receipted=True))
        if surfaces:
            found += chaos_surfaces.unrun_backfills(poisoned)
            found += [example for _, example in chaos_surfaces.stalled_victims(poisoned)]
    except DatabaseError as exc:  # SQLite busy under load: not known yet, ask again
        found = [f"(not read: {exc})"]
    finally:
        connections.close_all()  # the soak stays off the database between its writes
    return found


def settle(lease: int) -> int:
    """Recover the leases of killed workers once they expire (as a worker would); returns
    how many were recovered."""
    from django_durable_schedules import state
    from django_durable_schedules.models import OccurrenceLease, Schedule

    recovered = 0
    deadline = time.monotonic() + lease * 3 + 15
    while True:
        recovered += state.expire_leases(limit=1000)
        if (
            not Schedule.objects.filter(lease_token__isnull=False).exists()
            and not OccurrenceLease.objects.exists()
        ):
            return recovered
        if time.monotonic() > deadline:
            return recovered
        time.sleep(0.25)


# ---------------------------------------------------------------------------------------
# The audit
# ---------------------------------------------------------------------------------------


def read_log(path: Path) -> tuple[Counter[tuple[str, int]], dict[tuple[str, int], list[str]]]:
    starts: Counter[tuple[str, int]] = Counter()
    dones: dict[tuple[str, int], list[str]] = defaultdict(list)
    if not path.exists():
        return starts, dones
    for line in path.read_text().splitlines():
        fields = line.split()
        if fields[0] == "start":
            starts[(fields[1], int(fields[2]))] += 1
        elif fields[0] == "done":
            dones[(fields[1], int(fields[2]))].append(fields[3])
    return starts, dones


def audit(log_path: Path) -> dict[str, Any]:
    from django_durable_schedules.conf import app_settings
    from django_durable_schedules.models import Backfill, RunAttempt, RunReceipt, Schedule
    from django_durable_schedules.state.bounds import COUNT_MAX
    from django_durable_schedules.state.records import PAUSE_NOTE

    schedules = {s.id: s for s in Schedule.objects.all()}
    attempts = list(
        RunAttempt.objects.values(
            "id", "schedule_id", "occurrence", "attempt", "idempotency_key", "origin"
        )
    )
    backfill_of = {b.schedule_id: b for b in Backfill.objects.all()}
    receipts = list(
        RunReceipt.objects.values(
            "attempt_id", "schedule_id", "occurrence", "status", "slots_skipped", "error_message"
        )
    )
    by_attempt: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for r in receipts:
        by_attempt[r["attempt_id"]].append(r)
    attempt_ids = {a["id"] for a in attempts}
    by_key = {(a["idempotency_key"], a["attempt"]): a for a in attempts}
    occurrences: dict[tuple[Any, int], list[dict[str, Any]]] = defaultdict(list)
    for a in attempts:
        occurrences[(a["schedule_id"], a["occurrence"])].append(a)

    examples: dict[str, list[Any]] = defaultdict(list)
    counts: Counter[str] = Counter()

    def violation(name: str, example: Any) -> None:
        counts[name] += 1
        if len(examples[name]) < 5:
            examples[name].append(example)

    for a in attempts:
        n = len(by_attempt[a["id"]])
        if n == 0:
            violation("open_attempts", a["idempotency_key"] + f"#{a['attempt']}")
        elif n > 1:
            violation("multiple_receipts", a["idempotency_key"] + f"#{a['attempt']}")
    for r in receipts:
        if r["attempt_id"] not in attempt_ids:
            violation("orphan_receipts", str(r["attempt_id"]))
    succeeded = Counter(
        (r["schedule_id"], r["occurrence"]) for r in receipts if r["status"] == "succeeded"
    )
    for key, n in succeeded.items():
        if n > 1:
            violation("duplicate_successes", f"{key[0]}:{key[1]} x{n}")

    pending = given_up = backfill_ended = ended_by_pause = counted_missed = 0
    for sid, row in schedules.items():
        if row.lease_token is not None:
            violation("leases_left", row.name)
        have = {o for (s, o) in occurrences if s == sid}
        fired = row.occurrence
        if not (type(fired) is int and 0 <= fired <= COUNT_MAX):
            # A poison written behind save() (SQLite: any text; a count the next increment
            # overflows): no count the engine goes on from.
            fired = max(have, default=0)
        for o in sorted(set(range(1, fired + 1)) - have):
            violation("lost_occurrences", f"{row.name} #{o}: no attempt")
        for o in sorted(have - set(range(1, fired + 1))):
            violation("lost_occurrences", f"{row.name} #{o}: beyond schedule.occurrence")
        max_attempts = row.max_attempts or app_settings.MAX_ATTEMPTS
        for o in sorted(have):
            tries = sorted(occurrences[(sid, o)], key=lambda a: a["attempt"])
            if [a["attempt"] for a in tries] != list(range(1, len(tries) + 1)):
                violation("attempt_gaps", f"{row.name} #{o}: {[a['attempt'] for a in tries]}")
            last = tries[-1]
            got = by_attempt[last["id"]]
            if not got or got[0]["status"] in SETTLED:
                continue
            status = got[0]["status"]
            if (
                o == fired
                and row.retry_scheduled_for is not None
                and row.attempt == last["attempt"]
            ):
                pending += 1
            elif status in ("failed", "lease_expired") and last["attempt"] >= max_attempts:
                given_up += 1
            elif status == "released" and row.overlap_policy == "allow":
                counted_missed += 1  # never retried: its slot is in missed_count
            elif last["origin"] == "backfill" and _backfill_settled(
                backfill_of.get(sid), o, status
            ):
                backfill_ended += 1
            elif (
                row.status == "paused"
                and row.degraded_reason
                and PAUSE_NOTE in (got[0]["error_message"] or "")
            ):
                ended_by_pause += 1  # its run's own status; the degraded pause ended it
            else:
                violation(
                    "lost_occurrences",
                    f"{row.name} #{o}: attempt {last['attempt']} ended {status}, nothing retries it",
                )

    starts, dones = read_log(log_path)
    ok_succeeded: Counter[str] = Counter()
    reexecuted: Counter[str] = Counter()
    for (key, attempt), outcomes in dones.items():
        for outcome in outcomes:
            if outcome != "ok":
                continue
            reexecuted[key] += 1
            a = by_key.get((key, attempt))
            status = by_attempt[a["id"]][0]["status"] if a and by_attempt[a["id"]] else None
            if status == "succeeded":
                ok_succeeded[key] += 1
            elif status not in FENCED:
                violation("ok_with_wrong_receipt", f"{key}#{attempt}: {status}")
    for key, n in ok_succeeded.items():
        if n > 1:
            violation("double_success_in_log", f"{key} x{n}")
    for (key, attempt), n in starts.items():
        if n > 1:
            violation("attempt_executed_twice", f"{key}#{attempt} x{n}")
    for a in attempts:
        got = by_attempt[a["id"]]
        if got and got[0]["status"] == "succeeded":
            if "ok" not in dones.get((a["idempotency_key"], a["attempt"]), []):
                violation("phantom_successes", f"{a['idempotency_key']}#{a['attempt']}")

    statuses = Counter(r["status"] for r in receipts)
    invalid = _invalid_receipts()
    for example in invalid:
        violation("invalid_receipt_text", example)
    return {
        "violations": {name: counts.get(name, 0) for name in VIOLATIONS},
        "examples": dict(examples),
        "totals": {
            "schedules": len(schedules),
            "occurrences": len(occurrences),
            "attempts": len(attempts),
            "receipts": len(receipts),
            "receipts_by_status": dict(sorted(statuses.items())),
            "occurrences_pending_retry": pending,
            "occurrences_given_up": given_up,
            "allow_occurrences_released_counted_missed": counted_missed,
            "backfill_slots_ended_unsuccessfully": backfill_ended,
            "occurrences_ended_by_degraded_pause": ended_by_pause,
            "slots_skipped": sum(r["slots_skipped"] or 0 for r in receipts),
            "missed_count": sum(s.missed_count for s in schedules.values()),
            "executions_started": sum(starts.values()),
            "executions_killed_or_unfinished": sum(starts.values())
            - sum(len(v) for v in dones.values()),
            "keys_completed_ok_more_than_once": sum(1 for n in reexecuted.values() if n > 1),
        },
    }


def _backfill_settled(backfill: Any, occurrence: int, status: str) -> bool:
    """Whether a backfill slot (occurrence ``occurrence``) whose last attempt ended
    ``status`` is settled by the backfill's rules: a failed slot is not retried (the rule:
    backfill the range again); a slot released or whose lease expired is the backfill's
    current slot (its next attempt is claimed next) or its backfill was cancelled."""
    if status == "failed":
        return True
    if backfill is None:
        return False
    if backfill.status == "active":
        return backfill.occurrence == occurrence
    return backfill.status == "cancelled"


def _invalid_receipts() -> list[str]:
    """Receipts whose text holds NUL, or whose result is not strict JSON (NaN, infinity)."""
    from django_durable_schedules.models import RunReceipt

    bad = []
    for rid, error_type, message, result in RunReceipt.objects.values_list(
        "id", "error_type", "error_message", "result"
    ).iterator():
        problems = [
            name
            for name, text in (("error_type", error_type), ("message", message))
            if "\x00" in (text or "")
        ]
        try:
            encoded = json.dumps(result, allow_nan=False)
            if "\\u0000" in encoded:
                problems.append("NUL in result")
        except (TypeError, ValueError):
            problems.append("result not strict JSON")
        if problems:
            bad.append(f"{rid}: {', '.join(problems)}")
    return bad


def audit_poison(poisoned: list[dict[str, Any]], outdir: Path) -> dict[str, Any]:
    """The ``--poison`` checks: poisoned rows contained, healthy schedules still running,
    next runs bounded, no outcome dropped (see the module docstring)."""

    from django_durable_schedules import health, state
    from django_durable_schedules.models import RunReceipt, Schedule

    counts: Counter[str] = Counter()
    examples: dict[str, list[Any]] = defaultdict(list)

    def violation(name: str, example: Any) -> None:
        counts[name] += 1
        if len(examples[name]) < 5:
            examples[name].append(example)

    rows = {s.name: s for s in Schedule.objects.all()}
    outcomes: Counter[str] = Counter()
    for entry in poisoned:
        if "surface" in entry:  # judged by chaos_surfaces.audit_surfaces
            continue
        row = rows[entry["victim"]]
        written = entry.get("result") == "written"
        contained = row.status == "paused" and bool(row.degraded_reason)
        entry["final"] = {"status": row.status, "degraded_reason": row.degraded_reason}
        if not written:
            outcomes["refused"] += 1
        elif contained:
            outcomes["paused_degraded"] += 1
        elif entry["expect"] == "bounded":
            outcomes["bounded"] += 1
        else:
            violation("poison_not_contained", f"{row.name} ({entry['field']}): {row.status}")
    snapshot = health.snapshot()
    paused = sum(1 for r in rows.values() if r.degraded_reason)
    if snapshot.degraded != paused:
        violation("poison_not_contained", f"health counts {snapshot.degraded}, not {paused}")

    for name, at in healthy_unclaimed(poisoned).items():
        violation("healthy_stalled", f"{name}: last claimed {at}")

    horizon = state.db_now() + timedelta(days=31)
    for row in rows.values():
        if row.next_run_at is not None and row.next_run_at > horizon:
            violation("unbounded_next_runs", f"{row.name}: {row.next_run_at.isoformat()}")

    dropped = 0
    tracebacks = 0
    for path in sorted(outdir.glob("chaos-w*.log")):
        text = path.read_text(errors="replace")
        dropped += text.count("dropped the outcome")
        tracebacks += text.count("Traceback (most recent call last)")
    for _ in range(dropped):
        violation("dropped_outcomes", "see the worker logs")
    return {
        "violations": dict(counts),
        "examples": dict(examples),
        "poison": {
            "rows": poisoned,
            "rows_outcome": dict(outcomes),
            "health_degraded": snapshot.degraded,
            "poison_callback_receipts": dict(
                Counter(
                    RunReceipt.objects.filter(
                        schedule__name__startswith="chaos-poison-"
                    ).values_list("status", flat=True)
                )
            ),
            "worker_log_tracebacks": tracebacks,
        },
    }


VIOLATIONS = (
    "duplicate_successes",
    "double_success_in_log",
    "ok_with_wrong_receipt",
    "phantom_successes",
    "attempt_executed_twice",
    "lost_occurrences",
    "attempt_gaps",
    "multiple_receipts",
    "orphan_receipts",
    "open_attempts",
    "leases_left",
    "unclean_worker_exits",
    "worker_crashes",
    "poison_not_contained",
    "healthy_stalled",
    "unbounded_next_runs",
    "invalid_receipt_text",
    "dropped_outcomes",
)


# ---------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--duration", type=float, default=300.0, help="seconds of chaos")
    p.add_argument(
        "--extend-max",
        type=float,
        default=90.0,
        help="with --poison: after --duration, run on (chaos included) at most this many "
        "seconds until every healthy schedule was claimed since the last poison and every "
        "innocent backfill ran a slot (default 90; 0: never)",
    )
    p.add_argument(
        "--database-url",
        default=os.environ.get("DDS_CHAOS_DATABASE_URL", DEFAULT_URL),
        help="server to use (PostgreSQL/MariaDB: a fresh dds_chaos_<pid> is created there; "
        "SQLite: this file, deleted first)",
    )
    p.add_argument("--kill-every", type=float, default=10.0, help="seconds; 0: never")
    p.add_argument("--stall-every", type=float, default=30.0, help="seconds; 0: never")
    p.add_argument(
        "--restart-postgres",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="restart the (local) PostgreSQL server once, half-way (default on; PostgreSQL only)",
    )
    p.add_argument(
        "--poison",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="mix poison rows and poison outcomes into the load (default on)",
    )
    p.add_argument(
        "--poison-schedules",
        type=int,
        default=6,
        help="schedules of the chaos.poison callback (with --poison)",
    )
    p.add_argument(
        "--surfaces",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="calendars and backfills in the load (and their poisons with --poison; default on)",
    )
    p.add_argument(
        "--groups",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="schedules in a max_running group and in a rate group, and the audit of both "
        "limits from the callbacks' own records (default on)",
    )
    p.add_argument(
        "--group-schedules",
        type=int,
        default=6,
        help="schedules in each of the two concurrency groups (with --groups)",
    )
    p.add_argument(
        "--chains",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="three chains of kind 'after' schedules, and the audit of their slots (default on)",
    )
    p.add_argument(
        "--parallel",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="overlap_policy allow schedules (max_parallel 2 and 3), and the audit of the "
        "limit and of their slots (default on)",
    )
    p.add_argument("--schedules", type=int, default=24)
    p.add_argument("--lease-seconds", type=int, default=4)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--keep", action="store_true", help="keep the soak database afterwards")
    p.add_argument("--json-out", type=Path)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rng = random.Random(args.seed)
    vendor = vendor_of(args.database_url)
    outdir = BENCH / "out" / f"chaos-{os.getpid()}"
    outdir.mkdir(parents=True, exist_ok=True)
    log_path = outdir / "side-effects.log"
    url = fresh_database(args.database_url, vendor)
    say(f"{vendor}: database {urlsplit(url).path.lstrip('/')}, logs in {outdir}")
    env = setup_django(url, log_path, args.lease_seconds)

    from django.core.management import call_command
    from django.db import connections

    call_command("migrate", verbosity=0, interactive=False)
    create_schedules(
        args.schedules,
        rng,
        args.poison_schedules if args.poison else 0,
        surfaces=args.surfaces,
        groups=args.group_schedules if args.groups else 0,
        chains=args.chains,
        parallel=args.duration if args.parallel else 0.0,
    )
    connections.close_all()  # the soak itself stays off the database (and the restart)

    fleet = Fleet(env, outdir, args.lease_seconds, rng)
    started = time.monotonic()
    poisoned: list[dict[str, Any]] = []
    try:
        restart, extension = soak(fleet, args, url, vendor, poisoned)
    finally:
        stopped_at = datetime.now(UTC)  # the chain audit's end: no claim after the drain
        unclean = fleet.stop()
    say(f"workers stopped after {time.monotonic() - started:.0f}s; recovering leases, auditing")
    after_drain = chaos_parallel.leases_held() if args.parallel else []
    recovered = settle(args.lease_seconds)
    report = audit(log_path)
    if args.poison:
        extra = audit_poison(poisoned, outdir)
        report["violations"].update(extra["violations"])
        report["examples"].update(extra["examples"])
        report["poison"] = extra["poison"]
    if args.surfaces:
        extra = chaos_surfaces.audit_surfaces(poisoned)
        report["violations"].update(
            {n: extra["violations"].get(n, 0) for n in chaos_surfaces.VIOLATIONS}
        )
        report["examples"].update(extra["examples"])
        report["surfaces"] = extra["totals"]
    if args.groups:
        extra = chaos_groups.audit_groups(
            log_path, fleet.events, fleet.children_survived_sigkill, args.lease_seconds
        )
        report["violations"].update(extra["violations"])
        report["examples"].update(extra["examples"])
        report["groups"] = extra["groups"]
        report["group_findings"] = extra["findings"]
    if args.chains:
        extra = chaos_chains.audit_chains(stopped_at)
        report["violations"].update(extra["violations"])
        report["examples"].update(extra["examples"])
        report["chains"] = extra["totals"]
    if args.parallel:
        stopped = fleet.killed_ids | {c["worker"] for c in fleet.crashes}
        extra = chaos_parallel.audit_parallel(
            log_path,
            fleet.events,
            fleet.children_survived_sigkill,
            args.lease_seconds,
            after_drain,
            stopped,
        )
        report["violations"].update(extra["violations"])
        report["examples"].update(extra["examples"])
        report["parallel"] = extra["schedules"]
    report["violations"]["unclean_worker_exits"] = len(unclean)
    report["violations"]["worker_crashes"] = len(fleet.crashes)
    if unclean:
        report["examples"]["unclean_worker_exits"] = unclean
    if fleet.crashes:
        report["examples"]["worker_crashes"] = fleet.crashes[:3]
    ok = not any(report["violations"].values())
    report = {
        "ok": ok,
        "database": {"vendor": vendor, "name": urlsplit(url).path.lstrip("/")},
        "config": {
            k: (str(v) if isinstance(v, Path) else v)
            for k, v in vars(args).items()
            if k != "database_url"
        },
        "chaos": {
            "workers_started": fleet.started,
            "sigkills": fleet.killed,
            "stalls": fleet.stalled,
            "postgres_restart": restart,
            # After --duration, the seconds run on for the liveness checks (--extend-max).
            "soak_extended": extension,
            "leases_recovered_after_stop": recovered,
        },
        **report,
        "logs": str(outdir),
    }
    connections.close_all()
    if not args.keep:
        drop_database(url, vendor)
    text = json.dumps(report, indent=2, default=str)
    print(text)
    if args.json_out:
        args.json_out.write_text(text + "\n")
    t = report["totals"]
    v = report["violations"]
    restarted = "1 PostgreSQL restart" if restart.get("done") else "no PostgreSQL restart"
    poison = ""
    if args.poison:
        rows = report["poison"]["rows_outcome"]
        poison = (
            f"poison: {len(report['poison']['rows'])} rows ({rows.get('paused_degraded', 0)} "
            f"paused degraded, {rows.get('bounded', 0)} bounded, {rows.get('refused', 0)} "
            f"refused), {args.poison_schedules} poison callbacks "
            f"({sum(report['poison']['poison_callback_receipts'].values())} receipts), "
            f"{v['healthy_stalled']} healthy stalled, {v['worker_crashes']} worker crashes; "
        )
    chains = ""
    if args.chains:
        by = report["chains"]["slots_by_status"]
        chains = (
            f"chains: {sum(by.values())} slots ({by.get('run', 0)} run, {by.get('missed', 0)} "
            f"missed), {sum(v[n] for n in chaos_chains.VIOLATIONS)} chain violations; "
        )
    parallel = ""
    if args.parallel:
        most = max((p["max_concurrent_live"] for p in report["parallel"].values()), default=0)
        at_limit = sum(p["claims_at_the_limit"] for p in report["parallel"].values())
        parallel = (
            f"allow: {sum(p['occurrences'] for p in report['parallel'].values())} occurrences, "
            f"at most {most} live at once, {at_limit} claims at the limit, "
            f"{sum(v[n] for n in chaos_parallel.VIOLATIONS)} allow violations; "
        )
    print(
        f"chaos: {'PASS' if ok else 'FAIL'} {vendor}, {args.duration:.0f}s, {args.workers} workers, "
        f"{fleet.killed} SIGKILLs, {fleet.stalled} stalls, {restarted}; "
        f"{t['attempts']} attempts, {t['receipts']} receipts; "
        f"{v['duplicate_successes'] + v['double_success_in_log']} duplicate successes, "
        f"{v['lost_occurrences']} lost occurrences, {v['open_attempts']} open attempts, "
        f"{poison}{chains}{parallel}{sum(v.values())} violations in all"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
