"""The state machine, driven with an injected clock (no sleeping)."""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.db import OperationalError, connection
from django.test.utils import override_settings

from django_durable_schedules import state
from django_durable_schedules.db import batch
from django_durable_schedules.exceptions import StateConflict
from django_durable_schedules.models import RunAttempt, RunReceipt, Schedule
from django_durable_schedules.registry import registry
from django_durable_schedules.state import runs
from django_durable_schedules.worker.execution.runner import execute

from .factories import T0, complete_elsewhere

pytestmark = pytest.mark.django_db(transaction=True)

S = timedelta(seconds=1)


def make(name="s", **kw):
    kw.setdefault("callback", "tests.noop")
    kw.setdefault("kind", "interval")
    if kw["kind"] == "interval":
        kw.setdefault("interval_seconds", 60)
    kw.setdefault("timezone", "UTC")
    kw.setdefault("created_at", T0)
    s = Schedule(name=name, **kw)
    s.full_clean()
    s.save()
    return s


def run_at(now, worker="w1", **kw):
    """Claim what is due at ``now``, run it, complete at ``now`` (+ kw['took'])."""
    took = kw.pop("took", timedelta(0))
    claims = state.claim_due(worker=worker, now=now, **kw)
    outcomes = [execute(c) for c in claims]
    report = state.complete(outcomes, now=now + took)
    return claims, report


def test_new_interval_schedule_is_due_at_once_on_its_grid():
    s = make(created_at=T0 + timedelta(microseconds=123456))
    assert s.next_run_at == T0  # whole seconds, truncated (B31 b)
    claims, report = run_at(T0 + timedelta(milliseconds=300))
    assert [c.scheduled_for for c in claims] == [T0]
    s.refresh_from_db()
    assert s.next_run_at == T0 + 60 * S
    assert s.occurrence == 1 and s.lease_token is None
    [receipt] = report.receipts
    assert receipt.status == "succeeded" and receipt.next_run_at == T0 + 60 * S


def test_claim_is_exclusive_and_fenced_by_token():
    make()
    first = state.claim_due(worker="w1", now=T0)
    second = state.claim_due(worker="w2", now=T0 + S)
    assert len(first) == 1 and second == []
    assert RunAttempt.objects.count() == 1


def test_one_shot_claimed_by_two_workers_runs_once_b01():
    make("once", kind="once", run_at=datetime(2027, 6, 1, 9, 0, 0, 999999, tzinfo=UTC))
    s = Schedule.objects.get()
    assert s.run_at == datetime(2027, 6, 1, 9, 0, tzinfo=UTC)  # truncated, never rounded up (B31 a)
    for offset in range(50):
        now = datetime(2027, 6, 1, 8, 59, 58, tzinfo=UTC) + timedelta(milliseconds=offset * 100)
        for worker in ("w1", "w2"):
            run_at(now, worker=worker)
    assert RunAttempt.objects.count() == 1
    assert RunReceipt.objects.filter(status="succeeded").count() == 1
    s.refresh_from_db()
    assert s.status == "completed" and s.next_run_at is None


def test_no_drift_and_overlap_slots_are_skipped_b20():
    make(callback="tests.noop")
    # A: 7 s handler, 10 slots, each on the grid.
    for minute in range(10):
        run_at(T0 + minute * 60 * S, took=7 * S)
    assert list(
        RunAttempt.objects.order_by("occurrence").values_list("scheduled_for", flat=True)
    ) == [T0 + m * 60 * S for m in range(10)]


def test_overlap_skips_slots_that_pass_while_running_b20b():
    make()
    scheduled = []
    now = T0
    while now < T0 + 10 * 60 * S:
        claims, _ = run_at(now, took=90 * S, lease_seconds=120)
        scheduled += [c.scheduled_for for c in claims]
        now += (90 if claims else 30) * S  # a poll every 30 s; a run occupies 90 s
    assert scheduled == [T0 + m * 60 * S for m in (0, 2, 4, 6, 8)]
    skipped = sum(RunReceipt.objects.values_list("slots_skipped", flat=True))
    assert skipped == 5 - 1 + 1  # 01, 03, 05, 07 skipped while running, and 09 by the last run


def test_downtime_is_coalesced_into_one_late_run_b17():
    make(
        kind="cron",
        interval_seconds=None,
        cron="* * * * *",
        created_at=datetime(2027, 6, 1, tzinfo=UTC),
    )
    start = datetime(2027, 6, 1, 0, 0, 30, tzinfo=UTC)
    s = Schedule.objects.get()
    s.next_run_at = datetime(2027, 6, 1, 0, 1, tzinfo=UTC)  # as left by a run at 00:00
    Schedule.objects.filter(pk=s.pk).update(next_run_at=s.next_run_at)
    restart = datetime(2027, 6, 1, 7, 59, 30, tzinfo=UTC)
    claims, _ = run_at(restart)
    assert [c.scheduled_for for c in claims] == [datetime(2027, 6, 1, 7, 59, tzinfo=UTC)]
    assert claims[0].missed_slots == 478
    assert start < restart
    for minute in (0, 1):
        t = datetime(2027, 6, 1, 8, minute, tzinfo=UTC)
        claims, _ = run_at(t)
        assert [c.scheduled_for for c in claims] == [t]
    s.refresh_from_db()
    assert s.status == "active" and s.missed_count == 478


def test_thirty_days_of_downtime_is_one_bounded_catch_up_b17b():
    make(
        kind="cron",
        interval_seconds=None,
        cron="* * * * *",
        created_at=datetime(2027, 6, 1, tzinfo=UTC),
    )
    claims, _ = run_at(datetime(2027, 7, 1, 0, 0, 30, tzinfo=UTC))
    assert len(claims) == 1 and claims[0].scheduled_for == datetime(2027, 7, 1, tzinfo=UTC)
    assert claims[0].missed_slots >= 43_000


def test_failure_backs_off_and_retries_the_same_occurrence():
    make(callback="tests.fail")
    with override_settings(DURABLE_SCHEDULES={"BACKOFF_BASE_SECONDS": 5, "MAX_ATTEMPTS": 3}):
        run_at(T0)
        s = Schedule.objects.get()
        assert (s.failure_count, s.attempt, s.retry_scheduled_for) == (1, 1, T0)
        assert s.next_run_at == T0 + 5 * S
        assert run_at(T0 + 4 * S)[0] == []  # not before the backoff
        claims, _ = run_at(T0 + 5 * S)
        assert [(c.occurrence, c.attempt, c.scheduled_for) for c in claims] == [(1, 2, T0)]
        s.refresh_from_db()
        assert s.next_run_at == T0 + 15 * S  # 5 * 2
        claims, report = run_at(T0 + 15 * S)
        assert claims[0].attempt == 3
        s.refresh_from_db()  # given up after 3 attempts: the grid moves on
        assert s.retry_scheduled_for is None and s.next_run_at == T0 + 60 * S
        assert s.failure_count == 3 and s.status == "active"
    receipt = RunReceipt.objects.order_by("-finished_at").first()
    assert receipt.error_type == "RuntimeError" and receipt.error_message == "boom"


def test_success_resets_failures_but_skip_does_not():
    s = make(callback="tests.fail")
    run_at(T0)
    Schedule.objects.filter(pk=s.pk).update(callback="tests.skip")
    run_at(T0 + 5 * S)
    s.refresh_from_db()
    assert s.failure_count == 1
    Schedule.objects.filter(pk=s.pk).update(callback="tests.noop")
    run_at(T0 + 60 * S)
    s.refresh_from_db()
    assert s.failure_count == 0


def test_fail_run_is_terminal():
    make(callback="tests.fatal")
    run_at(T0)
    s = Schedule.objects.get()
    assert s.status == "failed" and s.next_run_at is None
    assert RunReceipt.objects.get().status == "failed"


def test_retry_run_after_seconds_overrides_backoff():
    make(callback="tests.retry", payload={"after": 42})
    run_at(T0)
    assert Schedule.objects.get().next_run_at == T0 + 42 * S


def test_expired_lease_is_recovered_and_late_success_fenced_b03():
    make(kind="once", interval_seconds=None, run_at=T0)
    [claim] = state.claim_due(worker="w1", now=T0, lease_seconds=30)
    assert state.expire_leases(now=T0 + 29 * S) == 0
    assert state.expire_leases(now=T0 + 30 * S) == 1
    [retry] = state.claim_due(worker="w2", now=T0 + 30 * S)
    assert (retry.occurrence, retry.attempt) == (1, 2)
    report = state.complete([execute(claim)], now=T0 + 31 * S)  # W1 comes back late
    assert report.fenced and not report.receipts
    state.complete([execute(retry)], now=T0 + 32 * S)
    statuses = dict(RunReceipt.objects.values_list("attempt__attempt", "status"))
    assert statuses == {1: "lease_expired", 2: "succeeded"}
    assert Schedule.objects.get().status == "completed"


def test_holder_that_outlived_its_lease_cannot_commit_success():
    make()
    [claim] = state.claim_due(worker="w1", now=T0, lease_seconds=30)
    report = state.complete([execute(claim)], now=T0 + 31 * S)
    assert [r.status for r in report.receipts] == ["lease_expired"]
    assert not RunReceipt.objects.filter(status="succeeded").exists()


def test_renewal_keeps_a_long_run_alive_b21():
    make()
    [claim] = state.claim_due(worker="w1", now=T0, lease_seconds=30)
    for t in range(10, 70, 10):
        assert state.renew_leases([claim.lease_token], lease_seconds=30, now=T0 + t * S) == {
            claim.lease_token
        }
        assert state.expire_leases(now=T0 + t * S) == 0
        assert state.claim_due(worker="w2", now=T0 + t * S) == []
    report = state.complete([execute(claim)], now=T0 + 65 * S)
    assert [r.status for r in report.receipts] == ["succeeded"]


def test_lost_lease_is_reported_by_renewal():
    make()
    [claim] = state.claim_due(worker="w1", now=T0, lease_seconds=30)
    state.expire_leases(now=T0 + 31 * S)
    assert state.renew_leases([claim.lease_token], now=T0 + 31 * S) == set()


def test_unregistered_callback_degrades_and_recovers():
    make(callback="tests.noop")
    Schedule.objects.update(callback="tests.gone")
    claims = state.claim_due(worker="w1", now=T0)
    assert claims == []
    s = Schedule.objects.get()
    assert s.status == "paused" and "tests.gone" in s.degraded_reason
    assert RunReceipt.objects.get().status == "degraded"
    registry.add(registry.get("tests.noop").__class__(name="tests.gone", func=lambda ctx: "back"))
    try:
        state.recover_degraded(now=T0 + 10 * S)
        s.refresh_from_db()
        # The degraded occurrence runs at once (its next attempt), then the grid goes on.
        assert s.status == "active" and s.degraded_reason == "" and s.next_run_at == T0 + 10 * S
        assert s.retry_scheduled_for == T0
    finally:
        registry.remove("tests.gone")


def test_edit_via_save_replans_without_firing_b27a():
    s = make(interval_seconds=600)
    run_at(T0)
    s.refresh_from_db()
    with pytest.MonkeyPatch.context() as mp:
        # save() plans by the database clock: stand it at T0 + 120 s.
        mp.setattr("django_durable_schedules.db.clock.db_now", lambda using: T0 + 120 * S)
        s.interval_seconds = 60
        s.save()
    assert s.next_run_at == T0 + 180 * S
    assert run_at(T0 + 150 * S)[0] == []
    assert [c.scheduled_for for c in run_at(T0 + 180 * S)[0]] == [T0 + 180 * S]


def test_edit_behind_save_is_noticed_and_never_fires_b27c():
    s = make(kind="cron", interval_seconds=None, cron="30 13 * * *")
    Schedule.objects.filter(pk=s.pk).update(next_run_at=datetime(2027, 6, 1, 13, 30, tzinfo=UTC))
    Schedule.objects.filter(pk=s.pk).update(cron="0 16 * * *")  # at 12:20, behind save()
    assert run_at(datetime(2027, 6, 1, 13, 30, 1, tzinfo=UTC))[0] == []
    s.refresh_from_db()
    assert s.next_run_at == datetime(2027, 6, 1, 16, 0, tzinfo=UTC)
    claims, _ = run_at(datetime(2027, 6, 1, 16, 0, tzinfo=UTC))
    assert [c.scheduled_for for c in claims] == [datetime(2027, 6, 1, 16, 0, tzinfo=UTC)]


def test_enable_after_pause_has_no_catch_up():
    s = make()
    state.disable(s.pk)
    assert run_at(T0 + 3600 * S)[0] == []
    state.enable(s.pk, now=T0 + 3600 * S + 500 * 1000 * timedelta(microseconds=1))
    s.refresh_from_db()
    assert s.next_run_at == T0 + 3660 * S


def test_conflicts():
    s = make()
    state.cancel(s.pk)
    with pytest.raises(StateConflict):
        state.enable(s.pk)
    with pytest.raises(StateConflict):
        state.cancel(s.pk)
    t = make("t")
    state.claim_due(worker="w", now=T0)
    with pytest.raises(StateConflict):
        state.delete_schedule(t.pk)


def test_delete_keeps_the_audit_trail():
    s = make()
    run_at(T0)
    state.delete_schedule(s.pk)
    assert not Schedule.objects.exists()
    assert RunAttempt.objects.count() == 1 and RunReceipt.objects.count() == 1


def test_failed_claim_commit_runs_nothing_and_is_retried_b26(monkeypatch):
    make(interval_seconds=3600)
    calls = []
    registry.add(
        registry.get("tests.noop").__class__(name="tests.count", func=lambda ctx: calls.append(ctx))
    )
    Schedule.objects.update(callback="tests.count")

    def boom():
        monkeypatch.setattr(runs, "_claim_committing", lambda: None)
        raise OperationalError("connection lost at commit")

    monkeypatch.setattr(runs, "_claim_committing", boom)
    try:
        with pytest.raises(OperationalError):
            run_at(T0)
        assert calls == [] and RunAttempt.objects.count() == 0
        for seconds in (1, 30, 60, 300):
            run_at(T0 + seconds * S)
        assert len(calls) == 1
        assert Schedule.objects.get().next_run_at == T0 + 3600 * S
    finally:
        registry.remove("tests.count")


def test_release_hands_the_occurrence_back():
    make()
    [claim] = state.claim_due(worker="w1", now=T0)
    state.complete([state.Outcome(claim, "released")], now=T0 + S)
    [again] = state.claim_due(worker="w2", now=T0 + 2 * S)
    assert (again.occurrence, again.attempt, again.scheduled_for) == (1, 2, T0)


def test_max_runs_completes():
    make(max_runs=2)
    run_at(T0)
    run_at(T0 + 60 * S)
    s = Schedule.objects.get()
    assert s.status == "completed" and s.next_run_at is None and s.occurrence == 2


def test_idempotency_key_is_stable_across_attempts():
    make(callback="tests.fail")
    [a] = run_at(T0)[0]
    [b] = run_at(T0 + 5 * S)[0]
    assert a.idempotency_key == b.idempotency_key == f"{a.schedule_id}:1"
    assert a.lease_token != b.lease_token
    assert isinstance(a.lease_token, uuid.UUID)


def test_queries_per_run_amortized_over_a_batch(django_assert_max_num_queries):
    for i in range(100):
        make(f"s{i}")
    with django_assert_max_num_queries(600):
        run_at(T0, limit=100)
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx:
        claims, _ = run_at(T0 + 60 * S, limit=100)
    assert len(claims) == 100
    per_run = len(ctx.captured_queries) / 100
    assert per_run <= 6, per_run
    assert len(ctx.captured_queries) <= 16  # a batch, whatever its size (SQLite logs BEGIN/COMMIT)


def test_trigger_runs_now_as_its_own_occurrence_without_moving_the_grid():
    s = make(interval_seconds=3600)
    run_at(T0)
    state.trigger(s.pk, now=T0 + 600 * S)
    claims, _ = run_at(T0 + 601 * S)
    assert [(c.occurrence, c.scheduled_for) for c in claims] == [(2, T0 + 600 * S)]
    s.refresh_from_db()
    assert s.next_run_at == T0 + 3600 * S and s.triggered_at is None
    assert [c.occurrence for c in run_at(T0 + 3600 * S)[0]] == [3]


def test_paused_schedule_runs_only_when_triggered():
    s = make(interval_seconds=60)
    state.disable(s.pk)
    assert run_at(T0 + 600 * S)[0] == []
    state.trigger(s.pk, now=T0 + 601 * S)
    assert len(run_at(T0 + 602 * S)[0]) == 1
    s.refresh_from_db()
    assert s.status == "paused" and s.next_run_at is None
    assert run_at(T0 + 3600 * S)[0] == []


def test_trigger_conflicts():
    s = make()
    state.claim_due(worker="w", now=T0)
    with pytest.raises(StateConflict, match="running"):
        state.trigger(s.pk, now=T0 + S)
    c = make("c")
    state.cancel(c.pk)
    with pytest.raises(StateConflict):
        state.trigger(c.pk)


def test_enable_a_failed_schedule_resets_failures():
    make(callback="tests.fatal")
    run_at(T0)
    s = Schedule.objects.get()
    assert s.status == "failed"
    state.enable(s.pk, now=T0 + 10 * S)
    s.refresh_from_db()
    assert (s.status, s.failure_count, s.next_run_at) == ("active", 0, T0 + 60 * S)


@pytest.mark.skipif(
    not connection.features.has_select_for_update,
    reason="SQLite serialises writers before reading its clock",
)
def test_reclaim_after_a_concurrent_release_never_starts_before_it_ended(monkeypatch):
    # CI found it on MariaDB: worker B read its clock, worker A released the same schedule
    # and committed, then B's locking SELECT saw the row and claimed it with the older clock,
    # so attempt 2 "began" 7 ms before attempt 1 ended. The claim time must follow the read.
    make("released", kind="once", run_at=datetime.now(UTC) - timedelta(minutes=5))
    [first] = state.claim_due(worker="a")
    real_read, raced = runs._read_due, []

    def release_meanwhile(*args, **kwargs):
        if not raced:
            raced.append(True)
            complete_elsewhere([state.Outcome(first, "released")])
        return real_read(*args, **kwargs)

    monkeypatch.setattr(runs, "_read_due", release_meanwhile)
    time.sleep(0.01)  # a clock read before the release is then measurably earlier
    [second] = state.claim_due(worker="b")
    released = RunReceipt.objects.get(attempt_id=first.attempt_id)
    assert released.status == "released"
    assert (second.occurrence, second.attempt) == (first.occurrence, first.attempt + 1)
    assert second.claimed_at >= released.finished_at


def new_attempt(s, *, worker, claimed_at=T0):
    """An unsaved first attempt of ``s``'s first occurrence, for the batched-write tests."""
    return RunAttempt(
        id=uuid.uuid4(),
        schedule_id=s.id,
        schedule_name=s.name,
        occurrence=1,
        attempt=1,
        scheduled_for=T0,
        claimed_at=claimed_at,
        lease_token=uuid.uuid4(),
        lease_expires_at=T0 + 30 * S,
        worker=worker,
        idempotency_key=f"{s.id}:1",
    )


AWKWARD_TEXT = [
    'quote " and backslash \\ and \\"',
    "{braces}, commas, NULL",
    "NULL",
    "",
    "  spaced  ",
    "line\nbreak\ttab, ünïcödé ✓ 'single'",
]


@pytest.mark.parametrize("text", AWKWARD_TEXT)
def test_batched_writes_keep_any_text_and_null_exactly(text):
    # PostgreSQL writes batches as array literals (db.batch._pg_array); other databases use
    # bulk_create/executemany. Every value must come back as it went in.
    s = make("awkward")
    attempt = new_attempt(s, worker=text, claimed_at=T0 + timedelta(microseconds=123456))
    batch.insert_rows(RunAttempt, [attempt], "default")
    receipt = RunReceipt(
        attempt_id=attempt.id,
        schedule_id=s.id,
        occurrence=1,
        status="failed",
        finished_at=T0 + S,
        error_type=text,
        error_message=text,
        result={"text": text, "none": None, "list": [1, "two"]},
        next_run_at=None,
    )
    batch.insert_rows(RunReceipt, [receipt], "default")
    s.degraded_reason, s.last_run_at, s.lease_token = text, None, None
    batch.update_rows([s], ["degraded_reason", "last_run_at", "lease_token"], "default")

    got = RunAttempt.objects.get(pk=attempt.pk)
    assert got.worker == text and got.claimed_at == attempt.claimed_at
    got_receipt = RunReceipt.objects.get(attempt_id=attempt.id)
    assert got_receipt.error_type == text and got_receipt.error_message == text
    assert got_receipt.result == {"text": text, "none": None, "list": [1, "two"]}
    assert got_receipt.next_run_at is None and got_receipt.succeeded_occurrence is None
    row = Schedule.objects.get(pk=s.pk)
    assert (row.degraded_reason, row.last_run_at, row.lease_token) == (text, None, None)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the array path is PostgreSQL's")
def test_batched_insert_rejects_a_too_long_value_instead_of_cutting_it():
    from django.db import DataError

    attempt = new_attempt(make("long"), worker="w" * 201)  # max_length 200
    with pytest.raises(DataError):
        batch.insert_rows(RunAttempt, [attempt], "default")


def test_a_pending_trigger_survives_disable_and_enable():
    """Trigger, then disable (or disable, trigger, enable) before a worker pass: the
    triggered run still happens, once (it used to be dropped while the audit said
    "triggered")."""
    s = make(interval_seconds=3600)
    run_at(T0)
    state.trigger(s.pk, now=T0 + 10 * S)
    state.disable(s.pk)
    s.refresh_from_db()
    assert s.status == "paused" and s.triggered_at == T0 + 10 * S
    claims, _ = run_at(T0 + 11 * S)
    assert [c.scheduled_for for c in claims] == [T0 + 10 * S]

    other = make(name="other", interval_seconds=3600)
    run_at(T0)
    state.disable(other.pk)
    state.trigger(other.pk, now=T0 + 20 * S)
    state.enable(other.pk, now=T0 + 21 * S)
    other.refresh_from_db()
    assert other.status == "active" and other.next_run_at == T0 + 20 * S
    claims, _ = run_at(T0 + 22 * S)
    assert [(c.schedule_name, c.scheduled_for) for c in claims] == [("other", T0 + 20 * S)]
    other.refresh_from_db()
    assert other.next_run_at == T0 + 3600 * S  # then the grid goes on
