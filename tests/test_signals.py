"""The worker's signals: sent after commit, with the claim/receipt, robust to receivers."""

from __future__ import annotations

import logging
from contextlib import contextmanager

import pytest
from django.db import connection, transaction

from django_durable_schedules import signals, state
from django_durable_schedules.models import RunAttempt, RunReceipt, Schedule, ScheduleEvent
from django_durable_schedules.worker import Worker, WorkerOptions
from django_durable_schedules.worker.notify import Notifier

pytestmark = pytest.mark.django_db(transaction=True)


def mk(name, callback, **kw):
    return Schedule.objects.create(
        name=name, callback=callback, kind="interval", interval_seconds=3600, **kw
    )


@contextmanager
def connected(signal, receiver):
    signal.connect(receiver, weak=False)
    try:
        yield
    finally:
        signal.disconnect(receiver)


def run_once(**kw):
    kw.setdefault("worker_id", "w-sig")
    return Worker(WorkerOptions(once=True, concurrency=2, **kw)).run()


def test_run_claimed_and_run_finished_are_sent_after_commit():
    mk("ok", "tests.echo", payload={"x": 1})
    mk("bad", "tests.fail")
    claimed, finished = [], []

    def on_claimed(sender, claim, worker_id, **kw):
        # committed: not inside a transaction, and the attempt is visible
        assert not connection.in_atomic_block
        assert RunAttempt.objects.filter(id=claim.attempt_id).exists()
        claimed.append((sender, claim, worker_id))

    def on_finished(sender, receipt, claim, schedule_name, duration, worker_id, **kw):
        assert not connection.in_atomic_block
        assert RunReceipt.objects.filter(id=receipt.id, status=receipt.status).exists()
        finished.append((sender, receipt, claim, schedule_name, duration, worker_id))

    with connected(signals.run_claimed, on_claimed), connected(signals.run_finished, on_finished):
        assert run_once() == 0

    assert sorted(c.schedule_name for _, c, _ in claimed) == ["bad", "ok"]
    for sender, claim, worker_id in claimed:
        assert sender is Worker and worker_id == "w-sig"
        assert claim.occurrence == 1 and claim.attempt == 1
        assert claim.lateness >= 0 and claim.scheduled_for.tzinfo is not None
    by_name = {f[3]: f for f in finished}
    assert set(by_name) == {"ok", "bad"}
    assert by_name["ok"][1].status == "succeeded" and by_name["ok"][1].result["payload"] == {"x": 1}
    assert by_name["bad"][1].status == "failed" and by_name["bad"][1].error_type == "RuntimeError"
    for sender, receipt, claim, name, duration, worker_id in finished:
        assert sender is Worker and worker_id == "w-sig"
        assert receipt.attempt_id == claim.attempt_id and claim.schedule_name == name
        assert duration is not None and 0 <= duration < 10


def test_duration_is_the_callback_run_time():
    mk("slow", "tests.sleep", payload={"seconds": 0.3})
    durations = []

    def on_finished(sender, duration, **kw):
        durations.append(duration)

    with connected(signals.run_finished, on_finished):
        run_once()
    assert len(durations) == 1 and 0.3 <= durations[0] < 5


def test_a_raising_receiver_neither_crashes_the_worker_nor_loses_receipts(caplog):
    for i in range(3):
        mk(f"s{i}", "tests.noop")
    calls = []

    def boom(sender, **kw):
        calls.append(kw.get("receipt", kw.get("claim")))
        raise RuntimeError("receiver bug")

    caplog.set_level(logging.ERROR, logger="django_durable_schedules.signals")
    with connected(signals.run_claimed, boom), connected(signals.run_finished, boom):
        assert run_once() == 0
    assert len(calls) == 6
    assert RunReceipt.objects.filter(status="succeeded").count() == 3
    assert Schedule.objects.filter(lease_token__isnull=True).count() == 3
    assert "receiver bug" in caplog.text


def test_nothing_is_built_when_no_receiver_is_connected(monkeypatch):
    mk("quiet", "tests.noop")

    def fail(*args, **kwargs):
        raise AssertionError("signal payload built without receivers")

    monkeypatch.setattr(Notifier, "send_claimed", fail)
    monkeypatch.setattr(Notifier, "send_finished", fail)
    assert not signals.run_claimed.has_listeners(Worker)
    assert run_once() == 0
    assert RunReceipt.objects.get().status == "succeeded"


def test_schedule_changed_is_sent_on_commit_only():
    events = []

    def on_changed(sender, event, **kw):
        assert not connection.in_atomic_block
        events.append(event)

    with connected(signals.schedule_changed, on_changed):
        row = state.create_schedule(
            name="c1", callback="tests.noop", kind="interval", interval_seconds=60, source="api"
        )
        state.disable(row.id, source="admin")
        with pytest.raises(RuntimeError), transaction.atomic():
            state.enable(row.id)
            raise RuntimeError("rolled back")
    assert [(e.action, e.source) for e in events] == [("created", "api"), ("disabled", "admin")]
    assert all(isinstance(e, ScheduleEvent) and e.schedule_name == "c1" for e in events)
