"""Insert the benchmark's schedules (run by ``throughput.py`` in a Django subprocess).

    DJANGO_SETTINGS_MODULE=tests.settings DATABASE_URL=postgres://.../dds_bench \\
        python bench/seed.py 5000 [CALLBACK [PAYLOAD_JSON]]

``bulk_create`` skips ``Schedule.save()``, which normally fills ``next_run_at`` and
``definition_hash``; both are set here by hand (``next_run_at`` due now, whole seconds, on
the interval grid anchored at ``created_at``), otherwise the worker would take the rows
for edits made behind ``save()`` and re-plan them instead of running them.

``DDS_BENCH_GROUP_MAX_RUNNING=N`` puts every schedule in one concurrency group ``bench``
of ``max_running`` N (``throughput.py --group-max-running``: what a group costs a claim);
with ``DDS_BENCH_GROUPS=G`` (``--groups``) in G such groups (``bench-0`` ... ``bench-G-1``),
schedule ``i`` in group ``i % G``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import django

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests package


def main(count: int, callback: str = "tests.noop", payload: object = None) -> None:
    django.setup()
    from django.utils import timezone

    from django_durable_schedules.models import ConcurrencyGroup, Kind, Schedule, Status

    groups: list[ConcurrencyGroup | None] = [None]
    if os.environ.get("DDS_BENCH_GROUP_MAX_RUNNING"):
        max_running = int(os.environ["DDS_BENCH_GROUP_MAX_RUNNING"])
        spread = int(os.environ.get("DDS_BENCH_GROUPS") or 0)
        names = [f"bench-{g}" for g in range(spread)] if spread else ["bench"]
        groups = [ConcurrencyGroup.objects.create(name=n, max_running=max_running) for n in names]

    now = timezone.now().replace(microsecond=0)
    template = Schedule(kind=Kind.INTERVAL, interval_seconds=3600, timezone="UTC")
    definition_hash = template.compute_definition_hash()
    rows = [
        Schedule(
            name=f"bench-{i:06d}",
            callback=callback,
            **({} if payload is None else {"payload": payload}),
            kind=Kind.INTERVAL,
            interval_seconds=3600,
            timezone="UTC",
            status=Status.ACTIVE,
            created_at=now,
            next_run_at=now,
            definition_hash=definition_hash,
            concurrency_group=groups[i % len(groups)],
        )
        for i in range(count)
    ]
    Schedule.objects.bulk_create(rows, batch_size=1000)
    print(f"seeded {Schedule.objects.count()} schedules (definition_hash {definition_hash})")


if __name__ == "__main__":
    main(
        int(sys.argv[1]),
        sys.argv[2] if len(sys.argv) > 2 else "tests.noop",
        json.loads(sys.argv[3]) if len(sys.argv) > 3 else None,
    )
