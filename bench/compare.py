"""Ours against a peer on the same machine in one go: ``throughput.py`` (run_scheduler,
runs/s) and ``peer_procrastinate.py`` (procrastinate workers, no-op jobs/s), then the
ratio ours / procrastinate per worker count and a PNG plot of both against workers.

    .venv/bin/pip install procrastinate matplotlib     # or: pip install -e '.[bench]'
    .venv/bin/python bench/compare.py [--schedules 5000] [--workers 1,2,4] [--repeat 1]

The two benchmarks run interleaved, one worker count at a time (ours with N workers, then
procrastinate with N workers, then the next N), so both see about the same load from the
rest of the machine; each runs as a subprocess with the same number of runs, worker
counts and per-worker concurrency. Each keeps its own database (``dds_bench`` and
``dds_bench_procrastinate``, dropped and recreated before the first round) and its own
method and verification (see their docstrings); their reports are embedded unchanged.

Prints one JSON object on stdout, then both benchmarks' summary lines and
``ratio ours/procrastinate: 1 worker Ax, 2 workers Bx, 4 workers Cx (target >= 4x at 4
workers: PASS|FAIL)``. Writes the plot to ``--plot`` (default
docs/img/throughput-vs-workers.png). Exit status: 2 if a round of either failed its
verification or a benchmark failed to run; 1 with ``--check`` if the ratio target is
missed; else 0.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from common import (  # bench/ is on sys.path: scripts run as files
    DEFAULT_URL,
    ROOT,
    code_version,
    dbname_of,
    emit,
    log,
    with_dbname,
)

BENCH = Path(__file__).resolve().parent
TARGET_WORKERS = 4


def run_bench(script: str, args: list[str]) -> tuple[dict[str, Any] | None, str, int]:
    """Run ``bench/<script>`` with ``args`` (stderr passed through); returns its JSON
    report (None if it wrote none), its summary line and its exit status."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        cmd = [sys.executable, str(BENCH / script), *args, "--json-out", str(out)]
        log(f"running {' '.join(cmd[1:])}")
        proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True, check=False)
        lines = proc.stdout.strip().splitlines()
        summary = lines[-1] if lines else ""
        report = json.loads(out.read_text()) if out.exists() else None
    return report, summary, proc.returncode


def ratios(ours: dict[str, float | None], peer: dict[str, float | None]) -> dict[str, float | None]:
    """ours / peer per worker count (None where either is missing or the peer is 0)."""
    return {n: round(ours[n] / peer[n], 2) if ours.get(n) and peer.get(n) else None for n in ours}


def cpu_ms(report: dict[str, Any] | None, n: int, unit: str) -> float | None:
    """Median over the rounds at ``n`` workers of worker + backend CPU ms per run (``unit``
    "run") or per job ("job"): a load-independent cost to set beside the rates."""
    rounds = ((report or {}).get("rounds") or {}).get(str(n)) or []
    values = [
        r[f"worker_cpu_ms_per_{unit}"] + r[f"db_backend_cpu_ms_per_{unit}"]
        for r in rounds
        if r.get(f"worker_cpu_ms_per_{unit}") is not None
    ]
    return round(statistics.median(values), 2) if values else None


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--schedules", type=int, default=5000, help="runs / jobs per round")
    p.add_argument("--workers", default="1,2,4", help="comma-separated worker counts")
    p.add_argument("--repeat", type=int, default=1, help="rounds per worker count (median)")
    p.add_argument("--concurrency", type=int, default=32, help="per worker, both benchmarks")
    p.add_argument("--floor", type=float, default=1500.0, help="our runs/s floor (plotted)")
    p.add_argument("--target-ratio", type=float, default=4.0, help="ours/peer at 4 workers")
    p.add_argument("--check", action="store_true", help="exit 1 if the ratio target is missed")
    p.add_argument(
        "--plot",
        type=Path,
        default=ROOT / "docs" / "img" / "throughput-vs-workers.png",
        help="PNG to write (default docs/img/throughput-vs-workers.png); '' for none",
    )
    p.add_argument(
        "--database-url",
        default=with_dbname(DEFAULT_URL, "dds_bench_compare"),
        help="our bench database, dropped and recreated (default dds_bench_compare: not the "
        "dds_bench other throughput.py runs may be using); name must start with dds_bench",
    )
    p.add_argument(
        "--peer-database-url",
        default=with_dbname(DEFAULT_URL, "dds_bench_procrastinate"),
        help="procrastinate's database, dropped and recreated",
    )
    p.add_argument("--json-out", type=Path, help="also write the JSON report to this file")
    p.add_argument(
        "--replot",
        type=Path,
        metavar="JSON",
        help="run nothing: redraw --plot from a report written by --json-out",
    )
    args = p.parse_args(argv)
    for url in (args.database_url, args.peer_database_url):
        if not dbname_of(url).startswith("dds_bench"):
            p.error("refusing to drop a database whose name does not start with dds_bench")
    args.worker_counts = [int(w) for w in args.workers.split(",") if w.strip()]
    if not args.worker_counts or min(args.worker_counts) < 1:
        p.error("--workers needs positive integers")
    return args


def draw(args: argparse.Namespace, ours: dict[str, Any], peer: dict[str, Any]) -> Path:
    """Write the throughput-vs-workers PNG to ``args.plot`` and return its path."""
    from plots import throughput_vs_workers  # matplotlib only when plotting

    plot = throughput_vs_workers(
        {
            "django-durable-schedules (run_scheduler, runs/s)": {
                int(n): r for n, r in ours.items()
            },
            "procrastinate (no-op jobs/s)": {int(n): r for n, r in peer.items()},
        },
        args.plot,
        f"Throughput vs workers ({args.schedules:,} runs, concurrency {args.concurrency}, "
        f"median of {args.repeat})",
        floor=args.floor,
        unit="runs (jobs) per second",
    )
    log(f"plot written to {plot}")
    return plot


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.replot:
        saved = json.loads(args.replot.read_text())
        args.schedules = saved["runs_per_round"]
        args.repeat = saved.get("repeat", args.repeat)
        args.concurrency = saved.get("concurrency", args.concurrency)
        draw(args, saved["ours_runs_per_second"], saved["procrastinate_jobs_per_second"])
        return 0
    common_args = ["--repeat", str(args.repeat), "--concurrency", str(args.concurrency)]
    ours: dict[str, float | None] = {}
    peer: dict[str, float | None] = {}
    cpu: dict[str, dict[str, float | None]] = {"ours": {}, "procrastinate": {}}
    reports: dict[str, list[Any]] = {"ours": [], "procrastinate": []}
    summaries: dict[str, list[str]] = {"ours": [], "procrastinate": []}
    failed = False
    for i, n in enumerate(args.worker_counts):
        setup = [] if i == 0 else ["--skip-setup"]  # databases built once, by the first N
        log(f"{n} worker(s): ours, load {os.getloadavg()[0]:.2f}")
        report, summary, code = run_bench(
            "throughput.py",
            [
                "--workers",
                str(n),
                "--schedules",
                str(args.schedules),
                "--floor",
                str(args.floor),
                "--database-url",
                args.database_url,
                *common_args,
                *setup,
            ],
        )
        ours[str(n)] = (report or {}).get("runs_per_second", {}).get(str(n))
        reports["ours"].append(report)
        cpu["ours"][str(n)] = cpu_ms(report, n, "run")
        summaries["ours"].append(summary)
        failed |= code == 2 or report is None
        log(f"{n} worker(s): procrastinate, load {os.getloadavg()[0]:.2f}")
        report, summary, code = run_bench(
            "peer_procrastinate.py",
            [
                "--workers",
                str(n),
                "--jobs",
                str(args.schedules),
                "--database-url",
                args.peer_database_url,
                *common_args,
                *setup,
            ],
        )
        peer[str(n)] = (report or {}).get("jobs_per_second", {}).get(str(n))
        reports["procrastinate"].append(report)
        cpu["procrastinate"][str(n)] = cpu_ms(report, n, "job")
        summaries["procrastinate"].append(summary)
        failed |= code != 0 or report is None

    ratio = ratios(ours, peer)
    plot = draw(args, ours, peer) if str(args.plot) else None
    target_n = str(TARGET_WORKERS if TARGET_WORKERS in args.worker_counts else max(ours, key=int))
    at_target = ratio.get(target_n)
    passed = at_target is not None and at_target >= args.target_ratio and not failed
    report = {
        "benchmark": "compare",
        "runs_per_round": args.schedules,
        "repeat": args.repeat,
        "concurrency": args.concurrency,
        "workers": args.worker_counts,
        "ours_runs_per_second": ours,
        "procrastinate_jobs_per_second": peer,
        "ratio_ours_to_procrastinate": ratio,
        # CPU (worker processes + their PostgreSQL backends) per run / job, and its ratio
        # procrastinate / ours: less sensitive than the rates to the rest of the machine.
        "cpu_ms_per_run": cpu,
        "cpu_ratio_procrastinate_to_ours": ratios(cpu["procrastinate"], cpu["ours"]),
        "target": {"workers": int(target_n), "ratio": args.target_ratio, "passed": passed},
        "verified": not failed,
        "plot": str(plot) if plot else None,
        "code": code_version(),
        "summaries": summaries,
        "reports": reports,
    }
    parts = [
        f"{n} worker{'s' if n != '1' else ''} {r}x" if r is not None else f"{n}: n/a"
        for n, r in ratio.items()
    ]
    lines = [
        "ours: " + ", ".join(f"{n}w {r} runs/s" for n, r in ours.items()),
        "procrastinate: " + ", ".join(f"{n}w {r} jobs/s" for n, r in peer.items()),
        "CPU ms per run (workers + backends): "
        + ", ".join(
            f"{n}w ours {cpu['ours'][n]} / procrastinate {cpu['procrastinate'][n]}" for n in ours
        ),
        f"ratio ours/procrastinate: {', '.join(parts)} (target >= {args.target_ratio:g}x at "
        f"{target_n} workers: {'PASS' if passed else 'FAIL'})"
        + (" - VERIFICATION FAILED" if failed else ""),
    ]
    emit(report, "\n".join(lines), args.json_out)
    if failed:
        return 2
    return 1 if args.check and not passed else 0


if __name__ == "__main__":
    sys.exit(main())
