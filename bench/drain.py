"""G4: 10,000 schedules due in the same second: how long until every one has run?

    .venv/bin/python bench/drain.py [--schedules 10000] [--workers 4] [--repeat 1] [--check]

Runs ``bench/throughput.py``'s round (real ``run_scheduler`` processes on PostgreSQL, idle
and heartbeating before anything is due; then every schedule made due in one ``UPDATE``)
with 10,000 schedules, and reports the drain time: from the moment they became due to the
moment the last receipt exists, measured by the bench's clock; plus the verification
(one attempt and one ``succeeded`` receipt per schedule, i.e. 0 duplicates, 0 lost).

Floor (issue #5, G4): drained <= 20 s with 0 duplicates; target <= 8 s. Uses the database
``dds_bench_drain`` (dropped and recreated). Prints JSON, then one summary line;
``--check`` exits 1 when the floor is missed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
from pathlib import Path

import throughput
from common import emit


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--schedules", type=int, default=10_000)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--floor-seconds", type=float, default=20.0)
    p.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/dds_bench_drain")
    p.add_argument("--check", action="store_true")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "throughput.json"
        with contextlib.redirect_stdout(sys.stderr):  # its own report goes into ours
            code = throughput.main(
                [
                    "--schedules",
                    str(args.schedules),
                    "--workers",
                    str(args.workers),
                    "--repeat",
                    str(args.repeat),
                    "--database-url",
                    args.database_url,
                    "--floor",
                    "0",
                    "--json-out",
                    str(out),
                ]
            )
        inner = json.loads(out.read_text())
    rounds = inner["rounds"][str(args.workers)]
    drains = [r["wall_seconds_due_to_done"] for r in rounds if r.get("verified")]
    duplicates = sum(r.get("schedules_with_two_attempts") or 0 for r in rounds)
    verified = code == 0 and len(drains) == len(rounds)
    drain = round(statistics.median(drains), 2) if drains else None
    passed = verified and drain is not None and drain <= args.floor_seconds and not duplicates
    report = {
        "benchmark": "drain",
        "schedules": args.schedules,
        "workers": args.workers,
        "drain_seconds": drain,
        "drain_seconds_rounds": drains,
        "duplicates": duplicates,
        "verified": verified,
        "floor": {"seconds": args.floor_seconds, "passed": passed},
        "throughput_report": inner,
    }
    emit(
        report,
        f"drain: {args.schedules:,} due at once drained in {drain} s by {args.workers} workers, "
        f"{duplicates} duplicates, verified={verified} "
        f"(floor {args.floor_seconds:g} s: {'PASS' if passed else 'FAIL'})",
    )
    return 1 if args.check and not passed else (2 if not verified else 0)


if __name__ == "__main__":
    sys.exit(main())
