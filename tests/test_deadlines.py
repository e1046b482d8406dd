"""Deadlines and the engine's alert events (issue #26): the pure rules, their properties,
and the state functions on the database (SQLite by default; PostgreSQL and MariaDB with
``DATABASE_URL``), with an injected clock."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.test.utils import override_settings
from hypothesis import given, settings
from hypothesis import strategies as st

from django_durable_schedules import state
from django_durable_schedules.models import RunAttempt, Schedule, ScheduleEvent, ScheduleQuerySet
from django_durable_schedules.registry import registry
from django_durable_schedules.state.alert_rules import (
    Owed,
    alerts_of,
    miss_deadline,
    owed_occurrence,
    take_events,
    with_alert,
)
from django_durable_schedules.worker.execution.runner import execute

from .factories import T0

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
    Schedule.objects.filter(pk=s.pk).update(next_run_at=T0)
    s.refresh_from_db()
    return s


def events(action=None):
    """The engine's events (not the ``created`` one ``make()``'s ``save()`` writes)."""
    qs = ScheduleEvent.objects.exclude(action="created").order_by("at", "action")
    if action:
        qs = qs.filter(action=action)
    return list(qs.values_list("action", "occurrence", "source"))


def run(now, worker="w1", took=timedelta(0)):
    claims = state.claim_due(worker=worker, now=now)
    return claims, state.complete([execute(c) for c in claims], now=now + took)


# -- pure rules ----------------------------------------------------------------------------


def row(**kw):
    kw.setdefault("status", "active")
    kw.setdefault("occurrence", 4)
    kw.setdefault("deadline_seconds", 30)
    return Schedule(name="r", **kw)


@pytest.mark.vendor_independent  # a pure rule on unsaved rows
def test_owed_occurrence_follows_how_a_claim_numbers_occurrences():
    waiting = row(next_run_at=T0)
    assert owed_occurrence(waiting) == Owed(5, T0)
    retry = row(next_run_at=T0 + 100 * S, retry_scheduled_for=T0 - 60 * S)
    assert owed_occurrence(retry) == Owed(4, T0 - 60 * S)
    triggered = row(next_run_at=T0 + 100 * S, triggered_at=T0 + 3 * S)
    assert owed_occurrence(triggered) == Owed(5, T0 + 3 * S)
    buffered = row(next_run_at=T0 + 9 * S, buffered_for=T0)
    assert owed_occurrence(buffered) == Owed(5, T0)
    leased = row(next_run_at=T0 + 60 * S, lease_token=uuid.uuid4())
    attempt = RunAttempt(occurrence=4, scheduled_for=T0, origin="scheduled")
    assert owed_occurrence(leased, attempt) == Owed(4, T0)
    assert owed_occurrence(leased) is None  # the attempt is needed
    assert (
        owed_occurrence(leased, RunAttempt(occurrence=9, scheduled_for=T0, origin="backfill"))
        is None
    )
    assert owed_occurrence(row(status="paused", next_run_at=T0)) is None
    assert owed_occurrence(row(next_run_at=None)) is None


@pytest.mark.vendor_independent  # a pure rule on an unsaved row
def test_a_missed_deadline_is_reported_once_and_opens_late():
    r = row(next_run_at=T0)
    owed = owed_occurrence(r)
    assert not miss_deadline(r, owed, T0 + 30 * S)  # at the deadline: not yet
    assert miss_deadline(r, owed, T0 + 31 * S)
    assert r.deadline_missed_occurrence == 5 and r.open_alerts == "late"
    [event] = take_events(r)
    assert event.action == "deadline_missed" and event.occurrence == 5
    assert event.changes["slot"] == T0.isoformat()
    assert event.changes["deadline"] == (T0 + 30 * S).isoformat()
    assert not miss_deadline(r, owed, T0 + 99 * S) and take_events(r) == []
    assert not miss_deadline(row(next_run_at=T0, deadline_seconds=None), owed, T0 + 99 * S)


@pytest.mark.vendor_independent  # a pure text rule
def test_open_alerts_are_read_totally():
    assert alerts_of("degraded  late junk late") == ["late", "degraded"]
    assert alerts_of(None) == [] and alerts_of(7) == []
    assert with_alert("failing", "late") == "late failing"
    assert with_alert("late", "late") == "late"


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.integers(0, 3),  # occurrences moved on (successes) before this look
            st.booleans(),  # a retry pending
            st.integers(0, 200),  # seconds after the slot of the look
        ),
        min_size=1,
        max_size=30,
    ),
    deadline=st.integers(1, 120),
)
@pytest.mark.vendor_independent  # a pure rule on an unsaved row, searched by Hypothesis
def test_property_never_twice_never_a_succeeded_one(steps, deadline):
    """Whatever the sequence of looks (workers sweeping in any order, runs succeeding in
    between), an occurrence is reported at most once, only once its deadline passed, and
    never one that already succeeded (the row moved past it)."""
    r = row(occurrence=0, next_run_at=T0, deadline_seconds=deadline)
    reported: list[int] = []
    for moved, retry, seconds in steps:
        r.occurrence += moved
        retry = retry and r.occurrence > 0
        # occurrences 1..succeeded have succeeded (a pending retry's has not)
        succeeded = r.occurrence - 1 if retry else r.occurrence
        r.retry_scheduled_for = T0 if retry else None
        owed = owed_occurrence(r)
        assert owed is not None
        if miss_deadline(r, owed, owed.slot + seconds * S):
            assert seconds > deadline
            assert owed.occurrence > succeeded
            reported.append(owed.occurrence)
        assert all(e.action == "deadline_missed" for e in take_events(r))
    assert len(reported) == len(set(reported))


@pytest.mark.vendor_independent  # a pure rule on an unsaved row; values written behind save() on each vendor: test_property_rows_written_behind_save_never_break_the_sweep_or_health
@settings(max_examples=100, deadline=None)
@given(st.one_of(st.none(), st.integers(), st.text(max_size=20), st.booleans()))
def test_property_a_deadline_written_behind_save_never_raises(value):
    r = row(next_run_at=T0)
    r.deadline_seconds = value
    owed = owed_occurrence(r)
    reported = miss_deadline(r, owed, T0 + 400 * 86400 * S)  # past any bounded deadline
    assert reported == (isinstance(value, int) and not isinstance(value, bool))


# -- on the database -----------------------------------------------------------------------

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_waiting_occurrence_is_reported_once_by_the_sweep():
    s = make(deadline_seconds=30)
    assert state.sweep_deadlines(now=T0 + 30 * S) == []
    assert Schedule.objects.overdue_deadline(T0 + 31 * S).count() == 1
    [event] = state.sweep_deadlines(now=T0 + 31 * S)
    assert event.action == "deadline_missed" and event.occurrence == 1
    assert event.source == "worker" and event.changes["slot"] == T0.isoformat()
    assert state.sweep_deadlines(now=T0 + 50 * S) == []
    s.refresh_from_db()
    assert s.deadline_missed_occurrence == 1 and s.open_alerts == "late"
    # still late on read (health, the API), though reported
    assert Schedule.objects.overdue_deadline(T0 + 50 * S).count() == 1
    assert Schedule.objects.filter(ScheduleQuerySet.late_q(T0 + 50 * S)).count() == 0
    # the worker comes: it runs occurrence 1 and succeeds: recovered, once
    run(T0 + 60 * S)
    assert events() == [("deadline_missed", 1, "worker"), ("recovered", 1, "worker")]
    s.refresh_from_db()
    assert s.open_alerts == "" and s.occurrence == 1
    assert ScheduleEvent.objects.get(action="recovered").changes == {"closed": ["late"]}
    assert Schedule.objects.overdue_deadline(T0 + 61 * S).count() == 0


def test_a_run_past_its_deadline_is_reported_while_it_runs():
    make(deadline_seconds=30)
    [claim] = state.claim_due(worker="w1", now=T0, lease_seconds=120)
    assert state.sweep_deadlines(now=T0 + 29 * S) == []
    [event] = state.sweep_deadlines(now=T0 + 31 * S)
    assert event.occurrence == claim.occurrence == 1
    assert state.sweep_deadlines(now=T0 + 40 * S) == []
    state.complete([execute(claim)], now=T0 + 45 * S)
    assert events() == [("deadline_missed", 1, "worker"), ("recovered", 1, "worker")]
    # the next occurrence (slot T0 + 60 s) is on time: nothing more
    run(T0 + 60 * S)
    assert state.sweep_deadlines(now=T0 + 70 * S) == []
    assert len(events()) == 2


def test_a_retry_waiting_past_the_deadline_is_reported():
    make(deadline_seconds=30, callback="tests.fail", backoff_base_seconds=120, max_attempts=3)
    run(T0)  # fails; its retry waits 120 s
    s = Schedule.objects.get()
    assert s.retry_scheduled_for == T0 and s.next_run_at > T0 + 60 * S
    [event] = state.sweep_deadlines(now=T0 + 31 * S)
    assert event.occurrence == 1
    assert state.sweep_deadlines(now=T0 + 200 * S) == []


def test_no_deadline_no_alert_and_a_success_writes_nothing_more():
    make()
    run(T0)
    assert state.sweep_deadlines(now=T0 + 3600 * S) == []
    assert events() == []


@override_settings(DURABLE_SCHEDULES={"FAILING_AFTER": 2, "BACKOFF_BASE_SECONDS": 1})
def test_failing_opens_once_per_episode_and_recovers():
    make(callback="tests.fail", max_attempts=10)
    for i in range(4):
        run(T0 + 10 * i * S)
    assert events() == [("failing", 1, "worker")]
    assert ScheduleEvent.objects.exclude(action="created").get().changes == {
        "failure_count": 2,
        "threshold": 2,
    }
    Schedule.objects.update(callback="tests.noop")
    run(T0 + 100 * S)
    assert events() == [("failing", 1, "worker"), ("recovered", 1, "worker")]
    assert Schedule.objects.get().open_alerts == ""


@override_settings(DURABLE_SCHEDULES={"FAILING_AFTER": 100})
def test_paused_after_failures_writes_one_paused_event():
    make(callback="tests.fail", max_attempts=1, pause_after_failures=2)
    run(T0)
    run(T0 + 60 * S)
    s = Schedule.objects.get()
    assert s.status == "paused"
    assert events() == [("paused", 2, "worker")]
    assert state.claim_due(worker="w", now=T0 + 600 * S) == []
    assert events("paused") == [("paused", 2, "worker")]


def test_degraded_by_the_engine_writes_one_degraded_event():
    make()
    Schedule.objects.update(callback="tests.gone")
    assert state.claim_due(worker="w1", now=T0) == []
    assert events() == [("degraded", 1, "worker")]
    assert Schedule.objects.get().open_alerts == "degraded"
    registry.add(registry.get("tests.noop").__class__(name="tests.gone", func=lambda ctx: "ok"))
    try:
        state.recover_degraded(now=T0 + 10 * S)
        run(T0 + 10 * S)
    finally:
        registry.remove("tests.gone")
    assert events("degraded") == [("degraded", 1, "worker")]
    assert events("recovered") == [("recovered", 1, "worker")]


def test_sweep_is_bounded_and_takes_the_rest_next():
    for i in range(5):
        make(f"s{i}", deadline_seconds=10)
    assert len(state.sweep_deadlines(now=T0 + 11 * S, limit=2)) == 2
    assert len(state.sweep_deadlines(now=T0 + 11 * S, limit=10)) == 3
    assert state.sweep_deadlines(now=T0 + 11 * S) == []


def test_a_success_with_no_alert_open_costs_no_statement_more():
    make(deadline_seconds=3600)
    [claim] = state.claim_due(worker="w1", now=T0)
    outcome = execute(claim)
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx:
        state.complete([outcome], now=T0 + S)
    sqls = [q["sql"] for q in ctx.captured_queries]
    assert not any(ScheduleEvent._meta.db_table in sql for sql in sqls)
    assert not any(sql.lstrip().startswith("UPDATE") and "open_alerts" in sql for sql in sqls)


def test_a_quarantine_by_update_opens_degraded_once():
    from django_durable_schedules.state.quarantine import quarantine_refused

    s = make()
    Schedule.objects.update(open_alerts="failing")
    quarantine_refused(s.pk, ValueError("refused"), "default")
    Schedule.objects.update(status="active", degraded_reason="")
    quarantine_refused(s.pk, ValueError("refused again"), "default")
    assert events() == [("degraded", None, "worker")]
    s.refresh_from_db()
    assert s.open_alerts == "failing degraded" and s.status == "paused"
    assert ScheduleEvent.objects.exclude(action="created").get().changes["kind"] == "claim"


@settings(max_examples=25, deadline=None)
@given(
    seconds=st.integers(1, 2**31 - 1),
    slot=st.datetimes(
        min_value=datetime(1000, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59)
    ).map(lambda d: d.replace(microsecond=0, tzinfo=UTC)),
    leased=st.booleans(),
)
def test_property_rows_written_behind_save_never_break_the_sweep_or_health(seconds, slot, leased):
    """Any deadline the column holds and any slot a datetime holds, written behind
    ``save()``: the sweep, health's late list and the deadline state never raise, and a
    report is only ever made past the deadline (bounded to DEADLINE_MAX_SECONDS)."""
    from django_durable_schedules.deadlines import deadline_state, late_schedules
    from django_durable_schedules.limits import DEADLINE_MAX_SECONDS

    s = make(f"odd-{uuid.uuid4().hex[:12]}", deadline_seconds=60)  # events are append-only
    fields = {"deadline_seconds": seconds, "next_run_at": slot}
    if leased:
        token = uuid.uuid4()
        RunAttempt.objects.create(
            schedule=s,
            schedule_name=s.name,
            occurrence=1,
            attempt=1,
            scheduled_for=slot,
            claimed_at=slot,
            lease_token=token,
            lease_expires_at=T0 + 3600 * S,
            worker="w",
            idempotency_key=f"{s.pk}:1",
        )
        fields.update(lease_token=token, lease_expires_at=T0 + 3600 * S, occurrence=1)
    Schedule.objects.filter(pk=s.pk).update(**fields)
    now = T0 + 10 * S
    written = state.sweep_deadlines(now=now)
    late_schedules(now)
    found = deadline_state(Schedule.objects.get(pk=s.pk), now)
    bounded = min(seconds, DEADLINE_MAX_SECONDS)
    should = slot.year < 9000 and slot + bounded * S < now
    assert [e.occurrence for e in written if e.schedule_id == s.pk] == ([1] if should else [])
    assert found.late == (slot + bounded * S < now if found.deadline_at else False)


def test_without_partial_indexes_a_worker_reads_waiting_retries_less_often(monkeypatch):
    from django.db import connection

    from django_durable_schedules.state import alerts

    make(deadline_seconds=30, callback="tests.fail", backoff_base_seconds=3000, max_attempts=3)
    run(T0)  # fails; its retry waits far beyond the deadline
    assert state.sweep_deadlines(now=T0 + 31 * S, retries=False) == []
    monkeypatch.setattr(connection.features, "supports_partial_indexes", False)
    clock = [1000.0]
    monkeypatch.setattr(alerts.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(alerts, "resolve_now", lambda now, using: T0 + 40 * S)
    sweep = state.DeadlineSweep()
    first = sweep.run()  # the first sweep reads everything
    assert [e.action for e in first] == ["deadline_missed"]
    clock[0] = 1010.0
    sweep.run()  # 10 s later: not the retries
    assert sweep.last_retry_scan == 1000.0
    clock[0] = 1100.0
    sweep.run()  # 100 s later: them again
    assert sweep.last_retry_scan == 1100.0


@pytest.mark.vendor_independent  # a settings check: no query
@pytest.mark.parametrize("value", [0, -1, 1.5, "3", True, None, 10**7])
def test_failing_after_is_checked_and_bounded(value):
    from django_durable_schedules import checks
    from django_durable_schedules.conf import app_settings

    with override_settings(DURABLE_SCHEDULES={"FAILING_AFTER": value}):
        ids = [m.id for m in checks.check_setting_types()]
        assert "durable_schedules.E006" in ids
        assert 1 <= app_settings.FAILING_AFTER <= 10**6
    with override_settings(DURABLE_SCHEDULES={"FAILING_AFTER": 5}):
        assert checks.check_setting_types() == [] and app_settings.FAILING_AFTER == 5


STEP = st.one_of(
    st.tuples(st.just("tick"), st.integers(1, 90)),
    st.tuples(st.just("claim"), st.sampled_from(["w1", "w2"])),
    st.tuples(st.just("complete"), st.booleans()),
    st.tuples(st.just("sweep"), st.just(0)),
)


@settings(max_examples=30, deadline=None)
@given(steps=st.lists(STEP, min_size=1, max_size=25))
def test_property_interleaved_workers_never_report_twice_or_a_success(steps):
    """Claims, successes, failures and sweeps by two workers in any order, the clock
    moving on: at most one ``deadline_missed`` per occurrence, never one for an occurrence
    that had already succeeded, and every success with an alert open closes it with one
    ``recovered``."""
    from django_durable_schedules.state import Outcome, OutcomeStatus

    s = make(f"p-{uuid.uuid4().hex[:12]}", deadline_seconds=30, max_attempts=2)
    now, held = T0, []
    for kind, arg in steps:
        if kind == "tick":
            now += arg * S
        elif kind == "claim":
            claims = state.claim_due(worker=arg, now=now, lease_seconds=600)
            held += [c for c in claims if c.schedule_id == s.pk]  # earlier examples' rows too
        elif kind == "complete" and held:
            claim = held.pop(0)
            status = OutcomeStatus.SUCCEEDED if arg else OutcomeStatus.FAILED
            report = state.complete([Outcome(claim, status, error_type="E")], now=now)
            if [r.status for r in report.receipts] == ["succeeded"]:
                s.refresh_from_db()
                assert s.open_alerts == ""  # a success closes every episode
        elif kind == "sweep":
            state.sweep_deadlines(now=now)
    missed = list(
        ScheduleEvent.objects.filter(schedule_id=s.pk, action="deadline_missed").values_list(
            "occurrence", "at"
        )
    )
    assert len({n for n, _ in missed}) == len(missed)
    for occurrence, at in missed:
        assert not s.receipts.filter(
            occurrence=occurrence, status="succeeded", finished_at__lt=at
        ).exists()
    recovered = ScheduleEvent.objects.filter(schedule_id=s.pk, action="recovered").count()
    opened = ScheduleEvent.objects.filter(
        schedule_id=s.pk, action__in=["deadline_missed", "failing"]
    ).count()
    assert recovered <= opened
