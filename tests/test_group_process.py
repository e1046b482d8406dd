"""Concurrency groups with real ``run_scheduler`` processes (issue #28, "Done means"), on
SQLite, PostgreSQL and MariaDB (``DATABASE_URL``): the limits are checked from the
callbacks' own start and end records (``tests.span`` appends them to a file), not from
the engine's tables.

* 200 one-shot schedules due at once in a group of ``max_running=3`` whose callback takes
  0.2 s, run by 4 workers of concurrency 8: never more than 3 at once, none lost, none
  twice; 20 ungrouped schedules due at the same instant all start within 2 s.
* A group with ``rate="5/s"``: never more than 5 starts in any one-second window.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from django_durable_schedules import state
from django_durable_schedules.models import ConcurrencyGroup, Schedule, WorkerHeartbeat

from .conftest import wait_until

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]


def once_rows(count, path, *, prefix, due, group=None, seconds=0.2):
    """Bulk-create ``count`` one-shot ``tests.span`` schedules due at ``due``."""
    Schedule.objects.bulk_create(
        Schedule(
            name=f"{prefix}-{i:04d}",
            callback="tests.span",
            kind="once",
            run_at=due,
            next_run_at=due,
            timezone="UTC",
            payload={"path": str(path), "seconds": seconds},
            concurrency_group=group,
        )
        for i in range(count)
    )


def workers_up(count):
    """Wait until ``count`` workers have written their heartbeat (they are claiming)."""
    wait_until(
        lambda: WorkerHeartbeat.objects.filter(stopped_at__isnull=True).count() >= count,
        60,
        interval=0.2,
        message=f"{count} workers up",
    )


def spans(path):
    """``name -> [(start, end), ...]`` from the callbacks' own records."""
    found: dict[str, list[tuple[float, float]]] = {}
    if not path.exists():
        return found
    for line in path.read_text().splitlines():
        name, _occurrence, _attempt, start, end, _pid = line.split()
        found.setdefault(name, []).append((float(start), float(end)))
    return found


def most_at_once(intervals):
    """The largest number of ``(start, end)`` intervals open at one instant."""
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    live = peak = 0
    for _, step in events:  # an end sorts before a start at the same instant
        live += step
        peak = max(peak, live)
    return peak


def most_starts_in(starts, window):
    """The most starts in any half-open window of ``window`` seconds."""
    starts = sorted(starts)
    return max(
        (sum(1 for t in starts[i:] if t < first + window) for i, first in enumerate(starts)),
        default=0,
    )


def test_a_group_of_three_across_four_workers_never_runs_more_than_three(tmp_path, start_worker):
    path = tmp_path / "spans.txt"
    group = ConcurrencyGroup.objects.create(name="partner-api", max_running=3)
    for n in range(4):
        start_worker("--worker-id", f"w{n}", "--concurrency", "8", "--max-idle", "0.5")
    workers_up(4)
    # A whole second (instants are stored as whole seconds) ahead: every worker idle.
    due = (state.db_now() + timedelta(seconds=2)).replace(microsecond=0)
    once_rows(200, path, prefix="grouped", due=due, group=group)
    once_rows(20, path, prefix="free", due=due, seconds=0.01)

    def finished():
        return len(spans(path)) >= 220

    wait_until(finished, 90, interval=0.1, message="220 runs")
    time.sleep(1)  # a duplicate would show up now
    found = spans(path)
    grouped = [s for name, runs in found.items() if name.startswith("grouped") for s in runs]
    free = [s for name, runs in found.items() if name.startswith("free") for s in runs]
    assert len(found) == 220 and all(len(runs) == 1 for runs in found.values())  # none twice
    assert len(grouped) == 200 and len(free) == 20  # none lost
    assert most_at_once(grouped) <= 3
    slot = Schedule.objects.filter(name="free-0000").values_list("run_at", flat=True).get()
    late = max(start for start, _ in free) - slot.timestamp()
    assert late <= 2.0, f"the last ungrouped run started {late:.2f} s after its slot"
    assert not Schedule.objects.filter(lease_token__isnull=False).exists()


def test_a_rate_of_five_a_second_is_never_exceeded(tmp_path, start_worker):
    path = tmp_path / "spans.txt"
    group = ConcurrencyGroup.objects.create(name="mailer", rate="5/s")
    for n in range(2):
        start_worker("--worker-id", f"r{n}", "--concurrency", "8", "--max-idle", "0.2")
    workers_up(2)
    due = (state.db_now() + timedelta(seconds=2)).replace(microsecond=0)
    once_rows(30, path, prefix="mail", due=due, group=group, seconds=0.05)
    wait_until(lambda: len(spans(path)) >= 30, 60, interval=0.1, message="30 runs")
    found = spans(path)
    assert len(found) == 30 and all(len(runs) == 1 for runs in found.values())
    starts = [start for runs in found.values() for start, _ in runs]
    assert most_starts_in(starts, 1.0) <= 5
