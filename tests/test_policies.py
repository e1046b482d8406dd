"""Per-schedule policies: catch-up window, backoff, pause after failures, timeouts."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError

from django_durable_schedules import state
from django_durable_schedules.models import RunReceipt, Schedule
from django_durable_schedules.worker import Worker, WorkerOptions
from django_durable_schedules.worker.execution.runner import execute

from .factories import T0

pytestmark = pytest.mark.django_db(transaction=True)
S = timedelta(seconds=1)


def make(name="p", **kw):
    kw.setdefault("callback", "tests.noop")
    kw.setdefault("kind", "interval")
    if kw["kind"] == "interval":
        kw.setdefault("interval_seconds", 60)
    kw.setdefault("created_at", T0)
    s = Schedule(name=name, timezone="UTC", **kw)
    s.full_clean()
    s.save()
    return s


def run_at(now, **kw):
    claims = state.claim_due(worker="w", now=now, **kw)
    state.complete([execute(c) for c in claims], now=now)
    return claims


def test_catch_up_window_receipts_a_stale_slot_missed():
    make(misfire_grace_seconds=30)
    assert run_at(T0 + 10 * S)  # 10 s late: within the window
    assert run_at(T0 + 60 * S + 45 * S) == []  # 45 s late: missed
    r = RunReceipt.objects.get(status="missed")
    assert r.occurrence == 2 and "misfire_grace_seconds=30" in r.error_message
    s = Schedule.objects.get()
    assert s.next_run_at == T0 + 120 * S and s.status == "active"
    assert [c.scheduled_for for c in run_at(T0 + 120 * S)] == [T0 + 120 * S]


def test_stale_once_is_missed_and_completed():
    make(kind="once", run_at=T0, misfire_grace_seconds=60)
    assert run_at(T0 + 3600 * S) == []
    s = Schedule.objects.get()
    assert s.status == "completed" and RunReceipt.objects.get().status == "missed"


def test_per_schedule_backoff():
    make(callback="tests.fail", backoff_base_seconds=2, backoff_cap_seconds=3, max_attempts=4)
    run_at(T0)
    assert Schedule.objects.get().next_run_at == T0 + 2 * S
    run_at(T0 + 2 * S)
    assert Schedule.objects.get().next_run_at == T0 + 5 * S  # 4 s capped at 3


def test_pause_after_consecutive_failed_occurrences():
    make(callback="tests.fail", max_attempts=1, pause_after_failures=2)
    run_at(T0)
    assert Schedule.objects.get().status == "active"
    run_at(T0 + 60 * S)
    s = Schedule.objects.get()
    assert s.status == "paused" and "2 consecutive failed occurrences" in s.pause_reason
    assert s.next_run_at is None
    state.enable(s.pk, now=T0 + 100 * S)
    s.refresh_from_db()
    assert (s.status, s.pause_reason, s.failed_occurrences) == ("active", "", 0)


def test_success_resets_failed_occurrences():
    s = make(callback="tests.fail", max_attempts=1, pause_after_failures=2)
    run_at(T0)
    Schedule.objects.filter(pk=s.pk).update(callback="tests.noop")
    run_at(T0 + 60 * S)
    Schedule.objects.filter(pk=s.pk).update(callback="tests.fail")
    run_at(T0 + 120 * S)
    s.refresh_from_db()
    assert s.status == "active" and s.failed_occurrences == 1


@pytest.mark.parametrize(
    "field, value",
    [
        ("timeout_seconds", 0),
        ("timeout_seconds", float("nan")),
        ("backoff_base_seconds", -1),
        ("misfire_grace_seconds", 10**9),
    ],
)
def test_durations_are_validated(field, value):
    with pytest.raises(ValidationError) as exc:
        make("bad", **{field: value})
    assert field in exc.value.message_dict


def test_metadata_must_be_flat_and_bounded():
    with pytest.raises(ValidationError):
        make("m1", metadata={"nested": {"a": 1}})
    with pytest.raises(ValidationError):
        make("m2", metadata={str(i): i for i in range(51)})
    make("m3", metadata={"team": "data", "tier": 2})


def test_async_callback_is_cancelled_at_its_timeout():
    make(
        callback="tests.async_sleep", payload={"seconds": 30}, timeout_seconds=0.2, created_at=None
    )
    assert Worker(WorkerOptions(once=True)).run() == 0
    r = RunReceipt.objects.get()
    assert r.status == "failed" and r.error_type == "Timeout"


def test_sync_callback_past_its_timeout_is_receipted_failed():
    make(
        callback="tests.sleep",
        payload={"seconds": 3},
        timeout_seconds=0.5,
        max_attempts=1,
        created_at=None,
    )
    assert Worker(WorkerOptions(once=True)).run() == 0
    r = RunReceipt.objects.get()
    assert r.status == "failed" and r.error_type == "Timeout"
    assert Schedule.objects.get().lease_token is None


def test_jitter_is_deterministic_within_bounds_and_keeps_nominal_slots():
    s = make("j", interval_seconds=600, jitter_seconds=120)
    offsets = set()
    for _ in range(12):
        due = Schedule.objects.get(pk=s.pk).next_run_at
        assert state.claim_due(worker="w", now=due - S) == []  # not before its jittered instant
        [claim] = state.claim_due(worker="w", now=due)
        nominal = claim.scheduled_for
        assert (nominal - T0).total_seconds() % 600 == 0  # scheduled_for stays on the grid
        offsets.add((due - nominal).total_seconds())
        assert 0 <= (due - nominal).total_seconds() <= 120
        state.complete([execute(claim)], now=due)
    assert len(offsets) > 3  # spread, not constant
    again = Schedule.objects.get(pk=s.pk)
    assert again.due_at(T0) == again.due_at(T0)


def test_jitter_larger_than_half_the_gap_is_rejected():
    with pytest.raises(ValidationError) as exc:
        make("j2", interval_seconds=60, jitter_seconds=45)
    assert "jitter_seconds" in exc.value.message_dict


def test_a_failed_run_is_logged_with_its_error(caplog):
    Schedule.objects.create(
        name="logged", callback="tests.fail", kind="interval", interval_seconds=60, created_at=T0
    )
    [claim] = state.claim_due(worker="w", now=T0)
    with caplog.at_level("INFO", logger="django_durable_schedules.runner"):
        execute(claim)
    started, record = [r for r in caplog.records if r.name == "django_durable_schedules.runner"]
    assert (started.levelname, started.getMessage()) == (
        "INFO",
        "run logged #1.1 started (late 0.000s)",
    )
    assert record.levelname == "WARNING"
    assert record.getMessage().startswith("run logged #1.1 failed in ")
    assert record.getMessage().endswith(": RuntimeError: boom")


def test_a_retry_delay_of_any_type_is_logged_without_breaking_the_run(caplog):
    from django_durable_schedules.registry import register, registry

    def odd(ctx):
        from django_durable_schedules import RetryRun

        raise RetryRun("later", after_seconds="soon")  # not a number: bounded later

    register("tests.odd_retry", odd)
    try:
        Schedule.objects.create(
            name="odd",
            callback="tests.odd_retry",
            kind="interval",
            interval_seconds=60,
            created_at=T0,
        )
        [claim] = state.claim_due(worker="w", now=T0)
        with caplog.at_level("INFO", logger="django_durable_schedules.runner"):
            outcome = execute(claim)
        assert outcome.status == "failed" and outcome.retry_after == "soon"
        assert "retry asked after 'soon' s: RetryRun: later" in caplog.text
    finally:
        registry.remove("tests.odd_retry")


def test_a_skipped_run_is_logged_with_its_reason(caplog):
    Schedule.objects.create(
        name="skips", callback="tests.skip", kind="interval", interval_seconds=60, created_at=T0
    )
    [claim] = state.claim_due(worker="w", now=T0)
    with caplog.at_level("INFO", logger="django_durable_schedules.runner"):
        execute(claim)
    started, record = [r for r in caplog.records if r.name == "django_durable_schedules.runner"]
    assert started.getMessage() == "run skips #1.1 started (late 0.000s)"
    assert " skipped in " in record.getMessage()
    assert record.getMessage().endswith(": nothing to do")
