"""The worker loop in-process (``--once``), with hostile and async callbacks."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from django_durable_schedules.models import RunAttempt, RunReceipt, Schedule, WorkerHeartbeat
from django_durable_schedules.worker import Worker, WorkerOptions

pytestmark = pytest.mark.django_db(transaction=True)


def mk(name, callback, **kw):
    return Schedule.objects.create(
        name=name, callback=callback, kind="interval", interval_seconds=3600, **kw
    )


def test_once_runs_everything_due_and_records_a_heartbeat():
    for i in range(12):
        mk(f"s{i}", "tests.echo", payload={"i": i})
    code = Worker(WorkerOptions(worker_id="w-once", once=True, concurrency=4, batch_size=50)).run()
    assert code == 0
    assert RunReceipt.objects.filter(status="succeeded").count() == 12
    assert RunAttempt.objects.filter(worker="w-once").count() == 12
    beat = WorkerHeartbeat.objects.get(worker_id="w-once")
    assert beat.stopped_at is not None and beat.runs_finished == 12
    receipt = RunReceipt.objects.get(schedule__name="s3")
    assert receipt.result == {"payload": {"i": 3}, "occurrence": 1, "attempt": 1}


def test_hostile_callbacks_cannot_crash_the_worker():
    for cb in (
        "tests.hostile_cycle",
        "tests.hostile_big",
        "tests.hostile_object",
        "tests.hostile_error",
        "tests.async_echo",
    ):
        mk(cb.replace("tests.", "h-"), cb)
    assert Worker(WorkerOptions(once=True, concurrency=2)).run() == 0
    receipts = {r.schedule.name: r for r in RunReceipt.objects.select_related("schedule")}
    assert len(receipts) == 5
    for r in receipts.values():
        assert len(json.dumps(r.result)) <= 8192
        assert len(r.error_message) <= 1000
    assert receipts["h-hostile_cycle"].result["self"] == "<cycle>"
    assert receipts["h-hostile_big"].result["truncated"] is True
    assert receipts["h-hostile_object"].result["obj"] == {"type": "tests.testapp.schedules.Hostile"}
    assert receipts["h-hostile_error"].status == "failed"
    assert receipts["h-hostile_error"].error_type == "tests.testapp.schedules.HostileError"
    assert receipts["h-async_echo"].result == {"async": True, "occurrence": 1}


def test_run_scheduler_command_once():
    mk("cmd", "tests.noop")
    call_command(
        "run_scheduler", "--once", "--worker-id", "cmd-worker", verbosity=0, stdout=StringIO()
    )
    assert RunReceipt.objects.get().status == "succeeded"
    assert RunAttempt.objects.get().worker == "cmd-worker"


def test_idle_worker_issues_a_few_queries_per_tick():
    """Idle, a worker reads the clock, looks for due rows and for its next wake-up; the
    lease-recovery query runs only when a known lease has expired (G7)."""
    from datetime import timedelta

    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    Schedule.objects.create(
        name="later",
        callback="tests.noop",
        kind="interval",
        interval_seconds=3600,
        start_at=timezone.now() + timedelta(hours=1),
    )
    worker = Worker(WorkerOptions(once=False, poll_max_seconds=0.01))
    ticks = []

    def on_idle():
        ticks.append(1)
        if len(ticks) == 1:
            ctx.__enter__()
        if len(ticks) == 11:
            ctx.__exit__(None, None, None)
            worker.request_stop()

    ctx = CaptureQueriesContext(connection)
    worker.on_idle = on_idle
    worker.run()
    per_tick = len(ctx.captured_queries) / 10
    # the clock, and the next wake-up (2 reads); no claim transaction while nothing is due
    assert per_tick <= 3, [q["sql"][:80] for q in ctx.captured_queries[:12]]


@pytest.mark.django_db(transaction=True)
def test_a_forced_stop_waits_for_its_last_heartbeat_at_most_the_bound(monkeypatch):
    """A database that does not answer never holds a forced exit: the last heartbeat is
    written on a thread of its own and waited for at most ``FORCED_STOP_REPORT_SECONDS``."""
    import threading
    import time

    from django_durable_schedules.worker import beats

    release = threading.Event()
    monkeypatch.setattr(beats.Heartbeats, "final", lambda self, *a: release.wait(10))
    heartbeats = beats.Heartbeats("stuck", "default", clock=None)  # type: ignore[arg-type]
    started = time.monotonic()
    assert heartbeats.final_bounded(1, 0, seconds=0.3) is False
    assert time.monotonic() - started < 2
    release.set()

    monkeypatch.undo()
    assert beats.Heartbeats("answers", "default", clock=None).final_bounded(2, 5) is True  # type: ignore[arg-type]
    beat = WorkerHeartbeat.objects.get(worker_id="answers")
    assert beat.stopped_at is not None and beat.in_flight == 2 and beat.runs_finished == 5
