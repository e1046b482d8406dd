"""``overlap_policy="allow"`` with real ``run_scheduler`` processes (issue #28 item 4), on
SQLite, PostgreSQL and MariaDB (``DATABASE_URL``): checked from the callbacks' own start and
end records (``tests.span``), not from the engine's tables.

An every-second schedule whose run takes 2.5 s, ``max_parallel=2``, run by two workers: two
of its occurrences run at once and never three; every slot of its grid is run once or
counted (``missed_count``), none twice; one worker SIGKILLed mid-run leaves its occurrence
receipted ``lease_expired`` (counted, not retried) and the other worker goes on.
"""

from __future__ import annotations

import signal
import time
from datetime import timedelta

import pytest

from django_durable_schedules import state
from django_durable_schedules.models import OccurrenceLease, RunAttempt, RunReceipt, Schedule

from .conftest import wait_until
from .test_group_process import most_at_once, spans, workers_up

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]


def test_two_occurrences_at_once_never_three_and_every_slot_run_or_counted(tmp_path, start_worker):
    path = tmp_path / "spans.txt"
    workers = [
        start_worker("--worker-id", f"p{n}", "--concurrency", "4", "--max-idle", "0.3",
                     "--lease-seconds", "4")
        for n in range(2)
    ]  # fmt: skip
    workers_up(2)
    start = (state.db_now() + timedelta(seconds=2)).replace(microsecond=0)
    Schedule.objects.create(
        name="par",
        callback="tests.span",
        kind="interval",
        interval_seconds=1,
        start_at=start,
        end_at=start + timedelta(seconds=11),  # 12 slots, [start_at, end_at]
        timezone="UTC",
        payload={"path": str(path), "seconds": 2.5},
        overlap_policy="allow",
        max_parallel=2,
        max_attempts=1,
    )
    wait_until(lambda: len(spans(path).get("par", [])) >= 3, 60, interval=0.3, message="3 runs")
    workers[0].proc.send_signal(signal.SIGKILL)  # most likely mid-run
    wait_until(
        lambda: (
            Schedule.objects.filter(name="par", status="completed").exists()
            and not OccurrenceLease.objects.exists()
        ),
        60,
        interval=0.3,
        message="the grid's end, every lease ended",
    )
    time.sleep(1)  # a duplicate would show up now
    runs = spans(path)["par"]
    assert most_at_once(runs) == 2  # side by side, never three
    row = Schedule.objects.get(name="par")
    occurrences = list(RunAttempt.objects.filter(schedule=row).values_list("occurrence", flat=True))
    assert len(occurrences) == len(set(occurrences))  # no occurrence claimed twice
    assert RunReceipt.objects.filter(schedule_id=row.pk).count() == len(occurrences)
    assert len(occurrences) + row.missed_count == 12  # every slot run or counted
    statuses = set(RunReceipt.objects.filter(schedule_id=row.pk).values_list("status", flat=True))
    assert statuses <= {"succeeded", "lease_expired", "released"}
