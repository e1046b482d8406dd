"""The peers' side of ``bench/herd.py`` (issue #32): the same herd, run by each peer from
its published package at a pinned version, in its own venv and its own database.

For each peer and size N: the peer's venv (``--venv-dir``/<peer>, created with this
Python and ``pip install`` of the pins below, kept while the pins match); the database
``dds_bench_herd_<peer>`` dropped and recreated; ``bench/herd_peers/peer_<x>.py setup``
declares N cron jobs ``* * * * *`` the peer's documented way; the peer's worker processes
start (each ``peer_<x>.py worker`` in its own process group, as on its own host) and mark
themselves ready; the measured minutes are the next ``minutes`` boundaries at least 10 s
later; half a second after the second boundary the last worker's process group is
SIGKILLed and not restarted; ``settle`` seconds after the last boundary the others get
SIGTERM. The no-op job appends ``job slot start`` to a file of its process
(``herd_peers/herd_record.py``); the figures are herd.py's: per boundary the time from
the boundary to the last start, start lateness p50/p99 (start minus boundary, first start
of each slot), missed slots (no start) and duplicated slots (more than one start). A peer
that hands the job its scheduled instant is attributed by it; otherwise by the minute its
start falls in. What a peer cannot do (install, declare, run several schedulers) is
reported as such.
"""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import ROOT, log, recreate_database, with_dbname

HERE = ROOT / "bench" / "herd_peers"

#: name -> module, pinned requirements, worker processes, how it runs (docs/benchmarks.md)
PEERS: dict[str, dict[str, Any]] = {
    "django-q2": {
        "module": "peer_djq",
        "pins": ["django-q2==1.11.1", "Django==6.1.3", "croniter==7.0.0", "psycopg[binary]==3.3.9"],
        "workers": 4,
        "runs": "4 qcluster processes (ORM broker, defaults)",
    },
    "apscheduler": {
        "module": "peer_aps",
        "pins": ["APScheduler==3.11.3", "SQLAlchemy==2.1.9", "psycopg[binary]==3.3.9"],
        "workers": 1,
        "runs": "1 BlockingScheduler (a shared job store is unsupported with several)",
    },
    "dbos": {
        "module": "peer_dbos",
        "pins": ["dbos==3.4.0", "psycopg[binary]==3.3.9"],
        "workers": 4,
        "runs": "4 DBOS processes of one app (apply_schedules, defaults)",
    },
    "pgqueuer": {
        "module": "peer_pgq",
        "pins": ["pgqueuer==1.6.0", "psycopg[binary]==3.3.9"],
        "workers": 4,
        "runs": "4 runners (PgQueuer.run, schedules, defaults)",
    },
    "oban": {
        "module": "peer_oban",
        "pins": ["oban==0.7.0", "psycopg[binary]==3.3.9"],
        "workers": 4,
        "runs": "4 oban processes (cron on the leader, defaults)",
    },
}


def ensure_venv(peer: str, venv_dir: Path) -> tuple[Path | None, str]:
    """The peer's venv python (created and pip-installed when missing or pinned
    otherwise), or ``None`` and the reason it could not be installed."""
    venv = venv_dir / peer
    python = venv / "bin" / "python"
    pins = "\n".join(PEERS[peer]["pins"])
    marker = venv / "herd-pins.txt"
    if python.exists() and marker.exists() and marker.read_text() == pins:
        return python, "reused"
    shutil.rmtree(venv, ignore_errors=True)
    log(f"{peer}: creating {venv} and installing {PEERS[peer]['pins']}")
    steps = [
        [sys.executable, "-m", "venv", str(venv)],
        [str(python), "-m", "pip", "install", "-q", *PEERS[peer]["pins"]],
    ]
    for cmd in steps:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if done.returncode:
            return None, f"{' '.join(cmd[:4])} failed: {(done.stderr or done.stdout)[-800:]}"
    marker.write_text(pins)
    return python, "installed"


def peer_env(url: str, n: int, out: Path, worker: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(HERD_URL=url, HERD_N=str(n), HERD_OUT=str(out), HERD_WORKER=worker)
    env.pop("PYTHONPATH", None)
    env.pop("DJANGO_SETTINGS_MODULE", None)
    return env


def read_starts(out: Path) -> list[tuple[int, float, float]]:
    rows = []
    for path in out.glob("starts-*.txt"):
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 3:
                rows.append((int(parts[0]), float(parts[1]), float(parts[2])))
    return rows


def pct(values: list[float], q: float) -> float | None:
    return values[min(len(values) - 1, int(len(values) * q))] if values else None


def rnd(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def figures(rows: list[tuple[int, float, float]], boundaries: list[float], n: int) -> dict:
    """herd.py's figures from the start records (see the module's docstring)."""
    by_slot: dict[float, dict[int, list[float]]] = {b: {} for b in boundaries}
    for job, slot, start in rows:
        at = slot if slot >= 0 else start - start % 60
        at = float(round(at))
        if at in by_slot:
            by_slot[at].setdefault(job, []).append(start)
    minutes, all_starts = [], []
    for b in boundaries:
        late = sorted(min(s) - b for s in by_slot[b].values())
        all_starts += late
        minutes.append(
            {
                "boundary": time.strftime("%H:%M:%S", time.gmtime(b)),
                "succeeded": len(late),
                "missed": n - len(late),
                "duplicated": sum(1 for s in by_slot[b].values() if len(s) > 1),
                "last_start_s": rnd(late[-1] if late else None),
                "start_p50_s": rnd(statistics.median(late) if late else None),
                "start_p99_s": rnd(pct(late, 0.99)),
            }
        )
    all_starts.sort()
    return {
        "minutes": minutes,
        "start_lateness_s": {
            "p50": rnd(statistics.median(all_starts) if all_starts else None),
            "p99": rnd(pct(all_starts, 0.99)),
            "max": rnd(all_starts[-1] if all_starts else None),
        },
        "missed": sum(m["missed"] for m in minutes),
        "duplicated": sum(m["duplicated"] for m in minutes),
    }


def sleep_until(at: float, procs: list[subprocess.Popen[bytes]]) -> None:
    """Sleep until ``at`` (epoch s); RuntimeError if one of ``procs`` exits meanwhile."""
    while (left := at - time.time()) > 0:
        if any(p.poll() is not None for p in procs):
            raise RuntimeError("a worker exited")
        time.sleep(min(left, 1.0))


def stop(procs: list[subprocess.Popen[bytes]], grace: float = 20.0) -> list[int | None]:
    """SIGTERM each live worker's process group; SIGKILL it after ``grace`` seconds."""
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        try:  # children left behind by a killed parent
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return [p.returncode for p in procs]


def run_peer(peer: str, n: int, args: Any) -> dict[str, Any]:
    """One peer at one size: its figures, or what it could not do and why."""
    spec = PEERS[peer]
    result: dict[str, Any] = {"peer": peer, "schedules": n, "pins": spec["pins"]}
    result["runs"] = spec["runs"]
    python, how = ensure_venv(peer, args.venv_dir)
    if python is None:
        return {**result, "status": "not installed", "reason": how}
    url = with_dbname(args.database_url, f"dds_bench_herd_{peer.replace('-', '_')}")
    recreate_database(url)
    out = ROOT / "bench" / "out" / f"herd-{peer}-{n}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    script = str(HERE / f"{spec['module']}.py")
    t0 = time.monotonic()
    setup = subprocess.run(
        [str(python), script, "setup"],
        env=peer_env(url, n, out, "setup"),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if setup.returncode:
        tail = (setup.stderr or setup.stdout)[-1200:]
        return {**result, "status": "setup failed", "reason": tail}
    result["setup_s"] = round(time.monotonic() - t0, 1)
    log(f"{peer}: {setup.stdout.strip().splitlines()[-1:]} jobs declared in {result['setup_s']} s")
    procs = []
    for i in range(spec["workers"]):
        with (out / f"worker{i}.log").open("wb") as logf:
            procs.append(
                subprocess.Popen(
                    [str(python), script, "worker"],
                    env=peer_env(url, n, out, str(i)),
                    stdout=logf,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
    killed: dict[str, Any] = {"done": False}
    load_start = os.getloadavg()
    try:
        deadline = time.monotonic() + 180
        while len(list(out.glob("ready-*"))) < len(procs):
            if any(p.poll() is not None for p in procs) or time.monotonic() > deadline:
                raise RuntimeError("a worker exited or did not start")
            time.sleep(0.2)
        now = time.time()
        first = now - now % 60 + 60
        while first - now < 10:
            first += 60
        boundaries = [first + 60 * i for i in range(args.minutes)]
        log(
            f"{peer}: {len(procs)} workers ready; minutes from {time.strftime('%H:%M:%S', time.gmtime(first))}"
        )
        if args.kill and args.minutes >= 2:
            sleep_until(boundaries[1] + 0.5, procs)
            victim = procs[-1]
            if victim.poll() is None:
                os.killpg(victim.pid, signal.SIGKILL)
            killed = {"done": True, "pid": victim.pid, "worker": len(procs) - 1}
            log(f"{peer}: SIGKILL process group {victim.pid}")
        sleep_until(boundaries[-1] + args.settle, procs[:-1] if killed["done"] else procs)
        alive = [p.poll() is None for p in procs]
    except RuntimeError as exc:
        dead = next((i for i, p in enumerate(procs) if p.poll() not in (None, -9)), 0)
        tail = (out / f"worker{dead}.log").read_text(errors="replace")[-1200:]
        return {**result, "status": "workers failed", "reason": f"{exc}: {tail}"}
    finally:
        codes = stop(procs)
    rows = read_starts(out)
    result.update(
        status="measured",
        workers=len(procs),
        killed=killed,
        workers_alive_at_end=alive,
        exit_codes=codes,
        loadavg_start=[round(x, 2) for x in load_start],
        loadavg_end=[round(x, 2) for x in os.getloadavg()],
        slot_from="the job's scheduled instant" if any(r[1] >= 0 for r in rows) else "start minute",
        **figures(rows, boundaries, n),
    )
    return result


def summary(r: dict[str, Any]) -> str:
    """One line per peer and size, as herd.py prints its own."""
    if r["status"] != "measured":
        return f"herd peer {r['peer']}: {r['schedules']:,} schedules: {r['status']}: {r['reason'][:300]!r}"
    lat = r["start_lateness_s"]
    return (
        f"herd peer {r['peer']}: {r['schedules']:,} schedules, {r['runs']}"
        f"{', one SIGKILLed' if r['killed']['done'] else ''}: start lateness p50 {lat['p50']} s, "
        f"p99 {lat['p99']} s, max {lat['max']} s; last start per minute "
        f"{[m['last_start_s'] for m in r['minutes']]} s; {r['missed']} missed, "
        f"{r['duplicated']} duplicated (load {r['loadavg_start'][0]} -> {r['loadavg_end'][0]})"
    )
