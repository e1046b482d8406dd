"""What loading a row costs the worker: the claim's and the completion's compiled reads of
100 schedule rows, with the row-loading shortcuts of ``db/fast_orm.py`` and without them
(Django's own ``timestamptz`` loader, every JSON text parsed), alternately in one process.

    DJANGO_SETTINGS_MODULE=tests.settings \\
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/dds_bench \\
        .venv/bin/python bench/row_reads.py [--rows 100] [--reads 300] [--rounds 4]

Needs a seeded bench database (``bench/throughput.py`` leaves one). Reads in a transaction
that is rolled back (no lock is kept); prints client CPU per read and per row, and the
saving, for each round and their medians.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import django

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=100)
    p.add_argument("--reads", type=int, default=300, help="reads timed per round and kind")
    p.add_argument("--rounds", type=int, default=4)
    args = p.parse_args()
    django.setup()
    from django.db import connection, transaction

    from django_durable_schedules.db import fast_orm
    from django_durable_schedules.models import Schedule
    from django_durable_schedules.state.columns import CLAIM_UNREAD, FINISH_UNREAD

    shortcuts = (fast_orm.native_timestamps, fast_orm._quick)
    plain = (lambda cursor, conn: None, lambda convs: convs)

    def use(pair: tuple) -> None:
        fast_orm.native_timestamps, fast_orm._quick = pair
        fast_orm.clear()  # converters are chosen when a statement is compiled

    reads = {
        "claim": lambda: Schedule.objects.defer(*CLAIM_UNREAD).order_by("pk")[: args.rows],
        "completion": lambda: Schedule.objects.defer(*FINISH_UNREAD).order_by("pk")[: args.rows],
    }

    def timed(build) -> float:
        with transaction.atomic():
            fast_orm.read_rows(Schedule, "bench", "default", build)  # compiled, warm
            start = time.process_time()
            for _ in range(args.reads):
                got = fast_orm.read_rows(Schedule, "bench", "default", build)
            spent = time.process_time() - start
            transaction.set_rollback(True)
        if len(got) != args.rows:
            sys.exit(f"the bench database holds {len(got)} schedules, not {args.rows}")
        return spent / args.reads * 1000

    print(f"{connection.vendor}, {args.rows} rows a read, {args.reads} reads a round")
    results: dict[tuple[str, str], list[float]] = {}
    for n in range(args.rounds):
        for name, pair in (("django", plain), ("shortcuts", shortcuts)):
            use(pair)
            for kind, build in reads.items():
                results.setdefault((kind, name), []).append(timed(build))
        line = ", ".join(
            f"{kind} {results[(kind, 'django')][-1]:.3f} -> {results[(kind, 'shortcuts')][-1]:.3f} ms"
            for kind in reads
        )
        print(f"round {n + 1}: {line}")
    use(shortcuts)
    for kind in reads:
        before = statistics.median(results[(kind, "django")])
        after = statistics.median(results[(kind, "shortcuts")])
        print(
            f"{kind} read: {before:.3f} -> {after:.3f} ms client CPU a read of {args.rows} rows "
            f"(median of {args.rounds}): {(before - after) / args.rows * 1000:.1f} us a row less"
        )


if __name__ == "__main__":
    main()
