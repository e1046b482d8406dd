"""How long ``Schedule.upcoming()`` takes for 10,000 cron schedules (issue 3: < 2 s total)
and for 10,000 calendar-rule (rrule) schedules (issue 15: < 2 s total).

    python bench/upcoming.py [--schedules 10000] [--count 5] [--kind cron|rrule|both] [--check]

Pure computation (no database): unsaved ``Schedule`` instances over the real expressions
in tests/data/cron-corpus.tsv with their zones, and over the RFC 5545 rules in ``RULES``
below in five zones, cycled to the requested number. Rrule schedules are measured twice:
without ``start_at`` (DTSTART is midnight of the creation day: schedules with one rule and
zone share it, as a fleet created the same day does; the figure the limit applies to) and
with a different ``start_at`` for each (every schedule its own DTSTART, so nothing is
shared; printed for information). Prints JSON and one-line summaries.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")


#: Calendar rules a fleet uses (issue 15's two among them), each in every zone of ZONES.
RULES = (
    "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1",
    "FREQ=WEEKLY;INTERVAL=2;BYDAY=TU;BYHOUR=9;BYMINUTE=0",
    "FREQ=DAILY;BYHOUR=2;BYMINUTE=30",
    "FREQ=DAILY;BYHOUR=1;BYMINUTE=30",
    "FREQ=HOURLY;BYMINUTE=0,30",
    "FREQ=MINUTELY;INTERVAL=15",
    "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=7;BYMINUTE=0",
    "FREQ=MONTHLY;BYMONTHDAY=1;BYHOUR=3",
    "FREQ=MONTHLY;BYMONTHDAY=-1;BYHOUR=23;BYMINUTE=55",
    "FREQ=MONTHLY;BYDAY=2TU;BYHOUR=10",
    "FREQ=YEARLY;BYMONTH=1;BYMONTHDAY=1",
    "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29",
    "FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17",
    "FREQ=DAILY;BYHOUR=9,12,18;BYMINUTE=0",
    "FREQ=WEEKLY;BYDAY=SA,SU;BYHOUR=8",
    "FREQ=MONTHLY;BYMONTHDAY=13;BYDAY=FR",
)
ZONES = ("Europe/Paris", "America/New_York", "Asia/Tokyo", "UTC", "Australia/Sydney")


def _timed(schedules: list, count: int, after: datetime) -> tuple[int, float]:
    started = time.perf_counter()
    total = sum(len(s.upcoming(count, after=after)) for s in schedules)
    return total, time.perf_counter() - started


def _report(label: str, args: argparse.Namespace, total: int, elapsed: float, **extra) -> bool:
    ok = elapsed < args.limit_seconds
    print(
        json.dumps(
            {
                "kind": label,
                "schedules": args.schedules,
                "count": args.count,
                "fire_times": total,
                "seconds": round(elapsed, 3),
                **extra,
            }
        )
    )
    print(
        f"upcoming: {args.schedules} {label} schedules x {args.count} fire times in "
        f"{elapsed:.2f}s (limit {args.limit_seconds:g}s: {'PASS' if ok else 'FAIL'})"
    )
    return ok


def _rrule(args: argparse.Namespace, after: datetime) -> bool:
    from django_durable_schedules.models import Schedule

    def fleet(distinct_start: bool) -> list:
        return [
            Schedule(
                name=f"r{i}",
                callback="tests.noop",
                kind="rrule",
                rrule=RULES[i % len(RULES)],
                timezone=ZONES[i % len(ZONES)],
                start_at=datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=7 * i)
                if distinct_start
                else None,
            )
            for i in range(args.schedules)
        ]

    distinct = len(RULES) * len(ZONES)
    total, elapsed = _timed(fleet(False), args.count, after)
    ok = _report("rrule", args, total, elapsed, distinct_rules=distinct)
    total, elapsed = _timed(fleet(True), args.count, after)
    print(
        json.dumps(
            {"kind": "rrule, own start_at each", "fire_times": total, "seconds": round(elapsed, 3)}
        )
    )
    print(
        f"upcoming: {args.schedules} rrule schedules x {args.count} fire times, each with its "
        f"own start_at (nothing shared): {elapsed:.2f}s (for information)"
    )
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=10_000)
    parser.add_argument("--count", type=int, default=5)
    parser.add_argument("--limit-seconds", type=float, default=2.0)
    parser.add_argument("--kind", choices=("cron", "rrule", "both"), default="both")
    parser.add_argument("--check", action="store_true", help="exit 1 above the limit")
    args = parser.parse_args()

    import django

    django.setup()
    after = datetime(2027, 3, 1, tzinfo=UTC)
    ok = True
    if args.kind in ("cron", "both"):
        ok = _cron(args, after) and ok
    if args.kind in ("rrule", "both"):
        ok = _rrule(args, after) and ok
    return 0 if ok or not args.check else 1


def _cron(args: argparse.Namespace, after: datetime) -> bool:
    from django_durable_schedules.models import Schedule

    corpus = []
    for line in (REPO / "tests" / "data" / "cron-corpus.tsv").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            expr, _, zone = line.partition("\t")
            corpus.append((expr.strip(), zone.strip() or "UTC"))
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
    total, elapsed = _timed(schedules, args.count, after)
    return _report("cron", args, total, elapsed, distinct_expressions=len(corpus))


if __name__ == "__main__":
    raise SystemExit(main())
