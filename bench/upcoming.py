"""How long ``Schedule.upcoming()`` takes for 10,000 cron schedules (issue 3: < 2 s total).

    python bench/upcoming.py [--schedules 10000] [--count 5] [--check]

Pure computation (no database): unsaved ``Schedule`` instances over the real expressions
in tests/data/cron-corpus.tsv with their zones, cycled to the requested number. Prints JSON
and a one-line summary.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=10_000)
    parser.add_argument("--count", type=int, default=5)
    parser.add_argument("--limit-seconds", type=float, default=2.0)
    parser.add_argument("--check", action="store_true", help="exit 1 above the limit")
    args = parser.parse_args()

    import django

    django.setup()
    from django_durable_schedules.models import Schedule

    corpus = []
    for line in (REPO / "tests" / "data" / "cron-corpus.tsv").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            expr, _, zone = line.partition("\t")
            corpus.append((expr.strip(), zone.strip() or "UTC"))
    after = datetime(2027, 3, 1, tzinfo=UTC)
    schedules = [
        Schedule(
            name=f"b{i}",
            callback="tests.noop",
            kind="cron",
            cron=corpus[i % len(corpus)][0],
            timezone=corpus[i % len(corpus)][1],
        )
        for i in range(args.schedules)
    ]
    started = time.perf_counter()
    total = sum(len(s.upcoming(args.count, after=after)) for s in schedules)
    elapsed = time.perf_counter() - started
    ok = elapsed < args.limit_seconds
    print(
        json.dumps(
            {
                "schedules": args.schedules,
                "count": args.count,
                "fire_times": total,
                "seconds": round(elapsed, 3),
                "distinct_expressions": len(corpus),
            }
        )
    )
    print(
        f"upcoming: {args.schedules} cron schedules x {args.count} fire times in "
        f"{elapsed:.2f}s (limit {args.limit_seconds:g}s: {'PASS' if ok else 'FAIL'})"
    )
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    raise SystemExit(main())
