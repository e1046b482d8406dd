"""Issue #32 goal 1: the herd at the top of the minute.

    .venv/bin/python bench/herd.py [--schedules 1000,10000] [--workers 4] [--minutes 3]
        [--no-kill] [--settle 45] [--lead 8] [--floor-p99-ms 1000] [--check] [--json-out PATH]
        [--peers django-q2,apscheduler,dbos,pgqueuer,oban] [--skip-self] [--venv-dir DIR]

For each size N: ``N`` cron schedules ``* * * * *`` (UTC, ``tests.noop``) all due at the
same minute boundaries; ``--workers`` real ``run_scheduler`` processes started as a user
starts them (no options: the settings' defaults); PostgreSQL as configured (fsync on by
default; the report prints the server's settings). The workers run for ``--minutes``
whole minutes (boundaries ``m1 .. mK``); in the second minute, half a second after its
boundary (while that minute's herd is being run), one worker is killed with SIGKILL and
not restarted (``--no-kill``: none is): its leases expire and the others recover its runs.

Per minute boundary, from the database (both instants on the database clock):

* ``last_start_s``: from the boundary to the last callback start (the receipt's
  ``started_at``) of that boundary's slots;
* start lateness p50 / p99 (``started_at - scheduled_for`` of the first successful
  receipt of each slot) and claim lateness p50 / p99 (``claimed_at - scheduled_for`` of
  each slot's first attempt);
* ``missed``: slots of the boundary with no successful receipt (plus every slot the engine
  counted as missed: ``missed_slots``), ``duplicated``: slots with more than one
  successful receipt;
* ``claimed_again``: slots claimed more than once (a claim handed back unrun after waiting
  over ``HAND_BACK_SECONDS`` in line, or recovered at lease expiry: the killed worker's);
* ``claims_per_s`` / ``starts_per_s``: the herd's pace, slots claimed / started per second
  up to the 99th percentile of the claim / start lateness;
* ``cpu_s``: CPU seconds from a second before the boundary to a second before the next:
  the workers', their PostgreSQL backends' (watched during the herd, from /proc: the
  server must run on this machine), the rest of the machine's, and the engine's (workers
  plus backends) milliseconds per run;
* ``herd_cpu_s``: the same from a second before the boundary to the last of its slots'
  succeeded receipts (polled every 0.1 s), as ``herd_floor.py`` measures the raw SQL
  floor: the herd's own cost, without the rest of the minute (in the minute of the kill,
  up to the lease expiry of the killed worker's runs).

The p99 is over every slot of the run (``--minutes`` x N): at N = 10,000 over 3 minutes
the 300 latest starts are above it. A killed worker holds at most about ``BATCH_SIZE`` +
``CONCURRENCY`` claims not receipted (the claim room), which are started again only at
their lease expiry (``LEASE_SECONDS``, 30 s): they stay under the p99 at 10,000 (about
104 of 300) but not at 1,000 (30 of 3,000) when the kill lands in the herd.

Floor (issue #32): at 10,000 schedules, start lateness p99 <= 1 s over the whole run, 0
missed, 0 duplicated. Every size is judged against the same floor. Uses the database
``dds_bench_herd`` (dropped and recreated for each size).

The peers (``--peers``, default all: django-q2, apscheduler, dbos, pgqueuer, oban; ``''``
for none) then run the same herd at the same size, one after the other, each from its
published package at a pinned version in its own venv (``--venv-dir``) and its own
database ``dds_bench_herd_<peer>``, declared and run its own documented way, with the same
kill and the same figures (``herd_peer_run.py``, ``herd_peers/``; ``--skip-self`` runs the
peers only). A peer that cannot install, declare or run is reported as such. Prints JSON,
then one summary line per size and per peer; ``--check`` exits 1 when a size of ours
misses the floor.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from common import (
    ROOT,
    T_ATTEMPT,
    T_RECEIPT,
    code_version,
    connect,
    cpu_seconds,
    dbname_of,
    django_env,
    emit,
    fresh_database,
    log,
    machine_busy_seconds,
    python_loop_ms,
    scalar,
    server_info,
    start_workers,
    stop_workers,
    wait_for_heartbeats,
    worker_backends,
)
from herd_peer_run import PEERS, run_peer, summary

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/dds_bench_herd"
#: Seconds the first boundary must leave after the seeding (workers started, rows loaded).
LEAD_SECONDS = 8

SEED = r"""
import sys, django
django.setup()
from datetime import datetime
from django_durable_schedules.models import Kind, Schedule, Status

n, first = int(sys.argv[1]), datetime.fromisoformat(sys.argv[2])
# cron "* * * * *", or (bench/herd_floor.py, whose floor plans intervals only) the same grid
# as an interval of 60 s whose first run is a boundary.
timing = (
    {"kind": Kind.CRON, "cron": "* * * * *"} if sys.argv[3] == "cron"
    else {"kind": Kind.INTERVAL, "interval_seconds": 60}
)
digest = Schedule(timezone="UTC", **timing).compute_definition_hash()
rows = [
    Schedule(
        name=f"herd-{i:05d}", callback="tests.noop", timezone="UTC", status=Status.ACTIVE,
        next_run_at=first, definition_hash=digest, **timing,
    )
    for i in range(n)
]
Schedule.objects.bulk_create(rows, batch_size=2000)
print(Schedule.objects.count())
"""


def seed_herd(conn: Any, env: dict[str, str], n: int, lead: float, kind: str = "cron") -> datetime:
    """Seed ``n`` schedules (``kind``: ``cron`` or ``interval``, see :data:`SEED`) due at the
    first minute boundary at least ``lead + n / 2000`` seconds ahead; returns it."""
    first = next_boundary(conn, lead + n / 2000)
    seeded = subprocess.run(
        [sys.executable, "-c", SEED, str(n), first.isoformat(), kind],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    log(f"{seeded.stdout.strip()} schedules due at {first:%H:%M:%S}")
    return first


def lateness(starts: list[float]) -> dict[str, float | None]:
    """p50, p99 and max of the sorted start lateness ``starts`` (seconds)."""
    return {
        "p50": rounded(statistics.median(starts) if starts else None),
        "p99": rounded(percentile(starts, 0.99)),
        "max": rounded(starts[-1] if starts else None),
    }


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    return values[min(len(values) - 1, int(len(values) * q))]


def rate(lateness: list[float]) -> int | None:
    """Slots per second up to the 99th percentile of ``lateness`` (sorted seconds after
    the boundary): the herd's pace, not counting the runs recovered at lease expiry."""
    p99 = percentile(lateness, 0.99)
    return None if not p99 else round(0.99 * len(lateness) / p99)


def rounded(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def next_boundary(conn: Any, lead: float) -> datetime:
    """The first minute boundary (database clock) at least ``lead`` seconds ahead."""
    now: datetime = scalar(conn, "SELECT now()")
    boundary = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
    while (boundary - now).total_seconds() < lead:
        boundary += timedelta(minutes=1)
    return boundary


def sleep_until(conn: Any, at: datetime) -> None:
    """Sleep until the database clock reads ``at``."""
    while (left := (at - scalar(conn, "SELECT now()")).total_seconds()) > 0:
        time.sleep(min(left, 1.0))


def minute_figures(conn: Any, boundary: datetime, n: int) -> dict[str, Any]:
    """The figures of the slots at ``boundary`` (see the module's docstring)."""
    starts = conn.execute(
        f"SELECT DISTINCT ON (a.schedule_id) extract(epoch FROM r.started_at - a.scheduled_for) "
        f"FROM {T_ATTEMPT} a JOIN {T_RECEIPT} r ON r.attempt_id = a.id "
        f"WHERE a.scheduled_for = %s AND r.status = 'succeeded' "
        f"ORDER BY a.schedule_id, r.started_at",
        (boundary,),
    ).fetchall()
    claims = conn.execute(
        f"SELECT DISTINCT ON (schedule_id) extract(epoch FROM claimed_at - scheduled_for) "
        f"FROM {T_ATTEMPT} WHERE scheduled_for = %s ORDER BY schedule_id, claimed_at",
        (boundary,),
    ).fetchall()
    duplicated = scalar(
        conn,
        f"SELECT count(*) FROM (SELECT a.schedule_id FROM {T_ATTEMPT} a "
        f"JOIN {T_RECEIPT} r ON r.attempt_id = a.id WHERE a.scheduled_for = %s "
        f"AND r.status = 'succeeded' GROUP BY a.schedule_id HAVING count(*) > 1) d",
        (boundary,),
    )
    # Slots claimed more than once: recovered at lease expiry (the killed worker's runs not
    # receipted) or handed back unrun (a claim that waited over HAND_BACK_SECONDS in line).
    reclaimed = scalar(
        conn,
        f"SELECT count(*) FROM (SELECT schedule_id FROM {T_ATTEMPT} WHERE scheduled_for = %s "
        f"GROUP BY schedule_id HAVING count(*) > 1) d",
        (boundary,),
    )
    start = sorted(float(r[0]) for r in starts)
    claim = sorted(float(r[0]) for r in claims)
    return {
        "boundary": boundary.isoformat(),
        "succeeded": len(start),
        "missed": n - len(start),
        "duplicated": duplicated,
        "claimed_again": reclaimed,
        "last_start_s": rounded(start[-1] if start else None),
        "start_p50_s": rounded(statistics.median(start) if start else None),
        "start_p99_s": rounded(percentile(start, 0.99)),
        "claim_p50_s": rounded(statistics.median(claim) if claim else None),
        "claim_p99_s": rounded(percentile(claim, 0.99)),
        # The herd's pace: slots claimed / started per second up to the 99th percentile.
        "claims_per_s": rate(claim),
        "starts_per_s": rate(start),
        "_starts": start,
    }


def cpu_sample(procs: list[Any]) -> tuple[dict[int, float], float]:
    """CPU seconds so far of each live worker (pid -> seconds) and of the whole machine
    (/proc)."""
    live = {p.pid: cpu_seconds([p.pid]) for p, _ in procs if p.poll() is None}
    return live, machine_busy_seconds()


def watch_backends(
    conn: Any,
    until: datetime,
    seen: dict[int, float],
    every: float = 0.2,
    done: Callable[[], bool] = lambda: False,
) -> None:
    """Until the database clock reads ``until`` (or ``done()``), note every ``every``
    seconds the CPU seconds of this database's backends (the local PostgreSQL, /proc) into
    ``seen`` (pid -> the most seen), and once more at the end. An idle worker closes its
    connection, so its backend lives for one busy spell: the most seen of each is about
    what it cost (its last ``every`` seconds may be missed)."""
    while not done() and scalar(conn, "SELECT now()") < until:
        note_backends(conn, seen)
        time.sleep(every)
    note_backends(conn, seen)


#: Succeeded receipts finished since a boundary: its herd is done when they number N (the
#: herd before it is done by then). A range of the (status, finished_at) index: polling it
#: costs the machine next to nothing, where a join of the run tables by ``scheduled_for``
#: took 46 ms a poll at 40,000 runs (half a core at 10 polls a second).
RECEIPTED = f"SELECT count(*) FROM {T_RECEIPT} WHERE status = 'succeeded' AND finished_at >= %s"


def watch_herd(
    conn: Any, boundary: datetime, n: int, until: datetime, seen: dict[int, float], every: float
) -> None:
    """:func:`watch_backends` until ``n`` succeeded receipts have finished since
    ``boundary`` (its slots'), or the database clock reads ``until``."""
    watch_backends(conn, until, seen, every, lambda: scalar(conn, RECEIPTED, (boundary,)) >= n)


def note_backends(conn: Any, seen: dict[int, float]) -> None:
    """Note in ``seen`` (pid -> the most seen) the CPU seconds of this database's backends."""
    for pid in worker_backends(conn):
        seen[pid] = max(seen.get(pid, 0.0), cpu_seconds([pid]))


def cpu_fields(
    before: tuple[dict[int, float], float],
    after: tuple[dict[int, float], float],
    backends: dict[int, float],
    n: int,
) -> dict[str, Any]:
    """What one minute's herd cost in CPU from the ``before`` sample to the ``after`` one
    (a second before its boundary to a second before the next, or to its last receipt):
    the workers' (not a worker killed meanwhile), their backends' (as
    :func:`watch_backends` saw them), the rest of the machine's, and the workers' plus
    backends' per run (ms)."""
    workers = sum(cpu - before[0][pid] for pid, cpu in after[0].items() if pid in before[0])
    backend = sum(backends.values())
    busy = after[1] - before[1]
    return {
        "workers": round(workers, 2),
        "db_backends": round(backend, 2),
        "rest_of_machine": round(busy - workers - backend, 2),
        "engine_ms_per_run": round(1000 * (workers + backend) / n, 3),
    }


def run_size(args: argparse.Namespace, n: int) -> dict[str, Any]:
    env = django_env(args.database_url)
    fresh_database(args.database_url, env)
    with connect(args.database_url) as conn:
        first = seed_herd(conn, env, n, args.lead)
        procs = start_workers(args.workers, env, ROOT / "bench" / "out", f"herd{n}")
        killed: dict[str, Any] = {"done": False}
        try:
            wait_for_heartbeats(conn, args.workers, procs)
            if scalar(conn, "SELECT now()") >= first:
                raise RuntimeError("the workers started after the first boundary: raise the lead")
            boundaries = [first + timedelta(minutes=i) for i in range(args.minutes)]
            samples = []  # CPU (workers, machine) a second before each boundary
            done_samples = []  # ... and at each herd's last receipt
            done_backends: list[dict[int, float]] = []  # backend CPU seen by then
            backend_cpu: list[dict[int, float]] = []  # per minute: backend pid -> CPU seen
            backend_base: list[dict[int, float]] = []  # ... and its CPU before the boundary
            for i, boundary in enumerate(boundaries):
                sleep_until(conn, boundary - timedelta(seconds=1))
                samples.append(cpu_sample(procs))
                # A backend already open before the boundary counts from here on.
                backend_cpu.append({})
                backend_base.append({pid: cpu_seconds([pid]) for pid in worker_backends(conn)})
                if i == 1 and args.kill:
                    watch_backends(conn, boundary + timedelta(seconds=0.5), backend_cpu[-1])
                    victim, _ = procs[-1]
                    victim.kill()
                    killed = {"done": True, "pid": victim.pid, "at": scalar(conn, "SELECT now()")}
                    log(f"SIGKILL worker {victim.pid}")
                watch_end = boundary + timedelta(seconds=min(args.settle, 50))
                watch_herd(conn, boundary, n, watch_end, backend_cpu[-1], 0.1)
                done_samples.append(cpu_sample(procs))
                done_backends.append(dict(backend_cpu[-1]))
                watch_backends(conn, watch_end, backend_cpu[-1])
            # The last minute's slots, then time for the killed worker's leases to expire.
            sleep_until(conn, boundaries[-1] + timedelta(seconds=args.settle))
            samples.append(cpu_sample(procs))
        finally:
            codes = stop_workers([p for p in procs if p[0].poll() is None])
        minutes = [minute_figures(conn, b, n) for b in boundaries]
        for i, m in enumerate(minutes):
            spent = {p: c - backend_base[i].get(p, 0.0) for p, c in backend_cpu[i].items()}
            m["cpu_s"] = cpu_fields(samples[i], samples[i + 1], spent, n)
            spent = {p: c - backend_base[i].get(p, 0.0) for p, c in done_backends[i].items()}
            m["herd_cpu_s"] = cpu_fields(samples[i], done_samples[i], spent, n)
        engine_missed = scalar(
            conn,
            f"SELECT coalesce(sum(missed_slots), 0) FROM {T_ATTEMPT} WHERE scheduled_for <= %s",
            (boundaries[-1],),
        )
        info = server_info(conn)
    starts = sorted(t for m in minutes for t in m.pop("_starts"))
    missed = sum(m["missed"] for m in minutes) + int(engine_missed)
    duplicated = sum(m["duplicated"] for m in minutes)
    p99 = percentile(starts, 0.99)
    problems = []
    if missed:
        problems.append(f"{missed} slots missed")
    if duplicated:
        problems.append(f"{duplicated} slots run twice")
    if any(codes):
        problems.append(f"worker exit codes {codes}")
    passed = not problems and p99 is not None and p99 * 1000 <= args.floor_p99_ms
    return {
        "schedules": n,
        "workers": args.workers,
        "worker_options": "none (the settings' defaults)",
        "killed": killed,
        "minutes": minutes,
        "start_lateness_s": lateness(starts),
        "missed": missed,
        "duplicated": duplicated,
        "problems": problems,
        "floor": {"p99_ms": args.floor_p99_ms, "passed": passed},
        "database": {k: info.get(k) for k in ("server_version", "fsync", "synchronous_commit")},
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--schedules", default="1000,10000", help="sizes, comma-separated")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--minutes", type=int, default=3)
    p.add_argument("--kill", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument(
        "--settle",
        type=float,
        default=45.0,
        help="seconds after the last boundary before the workers stop (leases expire)",
    )
    p.add_argument(
        "--lead",
        type=float,
        default=LEAD_SECONDS,
        help="least seconds before the first boundary for seeding and starting the workers "
        "(plus N/2000)",
    )
    p.add_argument("--floor-p99-ms", type=float, default=1000.0)
    p.add_argument("--database-url", default=DEFAULT_URL)
    p.add_argument(
        "--peers",
        default=",".join(PEERS),
        help=f"peers to run after ours, comma-separated, '' for none (default {','.join(PEERS)})",
    )
    p.add_argument("--skip-self", action="store_true", help="run the peers only")
    p.add_argument(
        "--venv-dir",
        type=Path,
        default=ROOT / "bench" / "out" / "herd-venvs",
        help="where the peers' venvs are created (one per peer, kept while its pins match)",
    )
    p.add_argument("--check", action="store_true")
    p.add_argument("--json-out", type=Path)
    args = p.parse_args(argv)
    if not dbname_of(args.database_url).startswith("dds_bench"):
        p.error("refusing to drop a database whose name does not start with dds_bench")
    sizes = [int(s) for s in args.schedules.split(",") if s.strip()]
    loop_ms = python_loop_ms()
    peers = [x.strip() for x in args.peers.split(",") if x.strip()]
    if unknown := set(peers) - set(PEERS):
        p.error(f"unknown peers {sorted(unknown)}; known: {', '.join(PEERS)}")
    results, peer_results = [], []
    for n in sizes:
        if not args.skip_self:
            results.append(run_size(args, n))
        for peer in peers:
            peer_results.append(run_peer(peer, n, args))
            log(summary(peer_results[-1]))  # as it comes: a peer's run takes minutes
    report = {
        "benchmark": "herd",
        "machine_python_loop_ms": round(loop_ms, 1),
        "sizes": results,
        "peers": peer_results,
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "code": code_version(),
    }
    emit(report, "", args.json_out)
    for r in results:
        lat = r["start_lateness_s"]
        print(
            f"herd: {r['schedules']:,} schedules, {r['workers']} workers (defaults"
            f"{', one SIGKILLed' if r['killed']['done'] else ''}): start lateness p50 "
            f"{lat['p50']} s, p99 {lat['p99']} s, max {lat['max']} s; last start per minute "
            f"{[m['last_start_s'] for m in r['minutes']]} s; starts/s "
            f"{[m['starts_per_s'] for m in r['minutes']]}; engine CPU ms/run "
            f"{[m['cpu_s']['engine_ms_per_run'] for m in r['minutes']]} (to the last receipt "
            f"{[m['herd_cpu_s']['engine_ms_per_run'] for m in r['minutes']]}); claimed again "
            f"{sum(m['claimed_again'] for m in r['minutes'])}; {r['missed']} missed, "
            f"{r['duplicated']} duplicated (floor p99 {r['floor']['p99_ms']:g} ms, 0 missed, "
            f"0 duplicated: {'PASS' if r['floor']['passed'] else 'FAIL'}; machine loop "
            f"{loop_ms:.0f} ms)",
            flush=True,
        )
    for r in peer_results:
        print(summary(r), flush=True)
    return 1 if args.check and not all(r["floor"]["passed"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
