"""Totality of the worker's other paths (issue #24): the backfill claim, lease expiry and
the wake-up read rows too, and a value written behind ``save()`` in one of them (a
backfill's slots or counters, a lease expiry no datetime holds, a counter that is not a
number) affects that one backfill or schedule, never the worker or its neighbours.
Driven with an injected clock; a real worker beside a poisoned backfill is in
``tests/test_bad_values_worker.py``."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db import connection

from django_durable_schedules import state
from django_durable_schedules.health import snapshot
from django_durable_schedules.models import (
    Backfill,
    ExclusionCalendar,
    RunAttempt,
    RunReceipt,
    Schedule,
    ScheduleEvent,
)
from django_durable_schedules.worker.execution.runner import execute

from .factories import T0

pytestmark = pytest.mark.django_db(transaction=True)

S = timedelta(seconds=1)
M = 60 * S
NOW = T0 + 3601 * S  # one live run at T0 + 3600 happened; the next live slot is T0 + 3660

only_sqlite = pytest.mark.skipif(
    "connection.vendor != 'sqlite'", reason="only SQLite stores any value in any column"
)
only_postgresql = pytest.mark.skipif(
    "connection.vendor != 'postgresql'", reason="infinite and year-10000 instants: PostgreSQL"
)


def live(name, **kw):
    """An every-minute schedule created at T0 whose live grid ran once at T0 + 3600."""
    kw.setdefault("callback", "tests.echo")
    s = Schedule(
        name=name, kind="interval", interval_seconds=60, timezone="UTC", created_at=T0, **kw
    )
    s.full_clean()
    s.save()
    claims = state.claim_due(worker="w", now=T0 + 3600 * S, lease_seconds=60)
    state.complete([execute(c) for c in claims], now=T0 + 3600 * S)
    s.refresh_from_db()
    return s


def run(now):
    claims = state.claim_due(worker="w", now=now, lease_seconds=60)
    state.complete([execute(c) for c in claims], now=now)
    return claims


def raw_update(model, pk, **columns):
    """``UPDATE`` by raw SQL: ``columns`` as SQL text (``"'-infinity'"``, ``"'abc'"``)."""
    qn = connection.ops.quote_name
    sets = ", ".join(f"{qn(model._meta.get_field(f).column)} = {v}" for f, v in columns.items())
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {qn(model._meta.db_table)} SET {sets} WHERE {qn(model._meta.pk.column)} = %s",
            [model._meta.pk.get_db_prep_value(pk, connection)],
        )


def cancel_reason(s):
    event = ScheduleEvent.objects.get(schedule_id=s.pk, action="backfill_cancel")
    return event.changes["reason"]


# ---------------------------------------------------------------------------------------
# The backfill claim
# ---------------------------------------------------------------------------------------


def test_a_backfill_slot_that_overflows_in_utc_cancels_that_backfill_only():
    """Item 1: a stored slot that is an ISO instant whose UTC value is before year 1."""
    s = live("bf-overflow")
    other = live("bf-innocent")
    b = state.request_backfill(s.pk, T0, T0 + 2 * M, now=NOW)
    good = state.request_backfill(other.pk, T0, T0 + 2 * M, now=NOW)
    Backfill.objects.filter(pk=b.pk).update(
        slots=["0001-01-01T00:00:00+23:59", "0001-01-01T00:00:00+23:59"]
    )
    claims = run(NOW)
    assert [(c.schedule_name, c.origin) for c in claims] == [("bf-innocent", "backfill")]
    b.refresh_from_db()
    assert b.status == "cancelled" and b.finished_at is not None
    assert "slot 1" in cancel_reason(s)
    assert [c.schedule_name for c in run(NOW + S)] == ["bf-innocent"]
    good.refresh_from_db()
    assert good.status == "completed"


def test_a_refused_backfill_claim_cancels_that_backfill_and_the_others_run():
    """Item 2: the backfill's occurrence clashes with an attempt that exists: the database
    refuses its attempt. That backfill is cancelled with the reason, the other backfill and
    the live rows of the batch are claimed, and the wake-up no longer says "due"."""
    s = live("bf-clash")
    other = live("bf-innocent")
    b = state.request_backfill(s.pk, T0, T0 + 2 * M, now=NOW)
    state.request_backfill(other.pk, T0, T0 + 2 * M, now=NOW)
    Backfill.objects.filter(pk=b.pk).update(occurrence=1, attempt=0)
    claims = run(NOW)
    assert [(c.schedule_name, c.origin) for c in claims] == [("bf-innocent", "backfill")]
    b.refresh_from_db()
    assert b.status == "cancelled"
    # Seen before the database is asked: occurrence 1 is no slot of this backfill.
    assert "stored occurrence 1 (attempt 0) is not the last attempt" in cancel_reason(s)
    assert not RunAttempt.objects.filter(schedule_id=s.pk, origin="backfill").exists()
    assert [c.schedule_name for c in run(NOW + S)] == ["bf-innocent"]
    # Nothing left that can be claimed before the live grid's next slot.
    assert state.next_wakeup().due == T0 + 3660 * S


@pytest.mark.parametrize("attempt", [1, 2])
def test_a_backfill_retry_of_an_occurrence_not_its_own_is_cancelled_never_run(attempt):
    """Found by the chaos soak: a backfill slot whose lease expired stores its occurrence
    for the next attempt; written behind ``save()`` to an occurrence that already succeeded
    (``occurrence=1, attempt=1``), the next attempt (1.2) no attempt clashes with was
    claimed and its callback run again, its success receipt refused (one success per
    occurrence) and its outcome dropped, at every retry. Only the slot's own last attempt
    is retried: anything else cancels the backfill with the reason, before any run."""
    s, own = live("bf-retry"), live("bf-retry-own")
    b = state.request_backfill(s.pk, T0, T0 + 2 * M, now=NOW)
    b_own = state.request_backfill(own.pk, T0, T0 + 2 * M, now=NOW)
    claims = state.claim_due(worker="gone", now=NOW, lease_seconds=60)
    assert {(c.origin, c.occurrence) for c in claims} == {("backfill", 2)}
    assert state.expire_leases(now=NOW + 61 * S) == 2  # the worker died: retried next
    b.refresh_from_db()
    assert (b.occurrence, b.attempt) == (2, 1)
    Backfill.objects.filter(pk=b.pk).update(occurrence=1, attempt=attempt)
    # The live grid's slot (T0 + 3660) first: a backfill never runs beside its own.
    assert {c.origin for c in run(NOW + 62 * S)} == {"scheduled"}
    [again] = run(NOW + 63 * S)  # the untouched backfill retries its own slot
    assert (again.schedule_name, again.origin, again.occurrence, again.attempt) == (
        "bf-retry-own",
        "backfill",
        2,
        2,
    )
    b.refresh_from_db()
    assert b.status == "cancelled"
    assert "stored occurrence 1" in cancel_reason(s)
    assert RunAttempt.objects.filter(schedule_id=s.pk, occurrence=1).count() == 1
    b_own.refresh_from_db()
    assert b_own.status == "active"


@pytest.mark.parametrize(
    "values",
    [{"position": 2**31 - 1}, {"occurrence": 2**31 - 1, "attempt": 2**31 - 1}],
    ids=["position", "counters"],
)
def test_backfill_counters_at_their_bounds_never_stop_the_claim(values):
    s = live("bf-bounds")
    other = live("bf-innocent")
    b = state.request_backfill(s.pk, T0, T0 + 2 * M, now=NOW)
    state.request_backfill(other.pk, T0, T0 + 2 * M, now=NOW)
    Backfill.objects.filter(pk=b.pk).update(**values)
    claims = run(NOW)
    assert ("bf-innocent", "backfill") in [(c.schedule_name, c.origin) for c in claims]
    run(NOW + S)
    run(NOW + 2 * S)
    assert Backfill.objects.get(pk=b.pk).status != "active"


@only_sqlite
@pytest.mark.parametrize(
    "column,value",
    [
        ("position", "'abc'"),
        ("position", "1.5"),
        ("occurrence", "'abc'"),
        ("attempt", "x'00ff'"),
    ],
)
def test_backfill_columns_of_another_type_cancel_that_backfill_only(column, value):
    s = live("bf-typed")
    other = live("bf-innocent")
    b = state.request_backfill(s.pk, T0, T0 + 2 * M, now=NOW)
    state.request_backfill(other.pk, T0, T0 + 2 * M, now=NOW)
    raw_update(Backfill, b.pk, **{column: value})
    claims = run(NOW)
    assert ("bf-innocent", "backfill") in [(c.schedule_name, c.origin) for c in claims]
    run(NOW + S)
    assert Backfill.objects.filter(pk=b.pk, status="active").count() == 0
    state.next_wakeup()


# ---------------------------------------------------------------------------------------
# Counters of another type on the schedule row (SQLite stores them)
# ---------------------------------------------------------------------------------------


@only_sqlite
@pytest.mark.parametrize("column", ["occurrence", "attempt", "failure_count", "missed_count"])
def test_a_counter_that_is_not_a_number_is_degraded_and_the_batch_runs(column):
    """Item 4: ``occurrence = 'abc'`` behind ``save()``: that row is receipted degraded and
    paused with the field in its reason, its neighbour is claimed."""
    bad = live("typed")
    innocent = live("innocent")
    raw_update(Schedule, bad.pk, **{column: "'abc'"})
    claims = state.claim_due(worker="w", now=T0 + 3660 * S)
    assert [c.schedule_name for c in claims] == ["innocent"]
    bad.refresh_from_db()
    assert bad.status == "paused" and column in bad.degraded_reason
    assert RunReceipt.objects.filter(schedule_id=bad.pk, status="degraded").count() == 1
    assert snapshot(now=T0 + 3660 * S).degraded == 1
    state.complete([execute(c) for c in claims], now=T0 + 3661 * S)
    assert innocent.pk in {c.schedule_id for c in state.claim_due(worker="w", now=T0 + 3720 * S)}


@only_sqlite
def test_a_backfill_on_a_schedule_whose_occurrence_is_not_a_number_is_cancelled():
    s = live("bf-row-typed")
    other = live("bf-innocent")
    b = state.request_backfill(s.pk, T0, T0 + 2 * M, now=NOW)
    state.request_backfill(other.pk, T0, T0 + 2 * M, now=NOW)
    raw_update(Schedule, s.pk, occurrence="'abc'")
    claims = run(NOW)
    assert [(c.schedule_name, c.origin) for c in claims] == [("bf-innocent", "backfill")]
    b.refresh_from_db()
    assert b.status == "cancelled" and "occurrence" in cancel_reason(s)


# ---------------------------------------------------------------------------------------
# Lease expiry and the wake-up
# ---------------------------------------------------------------------------------------


def held(name, now):
    """A schedule claimed at ``now`` (its lease: 10 s) whose worker then vanished."""
    s = Schedule.objects.create(
        name=name,
        callback="tests.noop",
        kind="interval",
        interval_seconds=60,
        timezone="UTC",
        created_at=now - 60 * S,
    )
    Schedule.objects.filter(pk=s.pk).update(next_run_at=now)
    [claim] = state.claim_due(worker="gone", now=now, lease_seconds=10)
    assert claim.schedule_id == s.pk
    return s, claim


def assert_poison_lease_contained(bad, bad_claim, innocent, innocent_claim, now, *, unreadable):
    """``expire_leases`` recovers the innocent lease and the poisoned row's: as any other
    when its value is never needed (``lease_expired``), else quarantined (``unreadable``):
    paused with a reason naming the lease, its attempt receipted ``lease_expired`` all the
    same (the pause noted), health counting it. The wake-up answers; the innocent schedule
    runs again."""
    recovered = state.expire_leases(now=now)
    assert recovered == 2
    assert RunReceipt.objects.get(attempt_id=innocent_claim.attempt_id).status == "lease_expired"
    bad.refresh_from_db()
    assert bad.lease_token is None and bad.lease_expires_at is None
    receipt = RunReceipt.objects.get(attempt_id=bad_claim.attempt_id)
    assert receipt.status == "lease_expired", (receipt.status, receipt.error_message)
    if unreadable is None:
        unreadable = "could not be recovered" in receipt.error_message
    if unreadable:
        assert bad.status == "paused" and "lease" in bad.degraded_reason, bad.degraded_reason
        assert "the schedule was paused: its expired lease" in receipt.error_message
        assert snapshot(now=now).degraded == 1
    else:
        assert bad.status == "active"
    state.next_wakeup()
    state.next_wakeup(worker_id="w")
    again = {c.schedule_id: c for c in state.claim_due(worker="w", now=now + S)}
    assert again[innocent.pk].attempt == 2


@only_postgresql
@pytest.mark.parametrize("value", ["'-infinity'", "'infinity'", "'10000-01-01 00:00:00+00'"])
def test_a_lease_expiry_no_datetime_holds_is_recovered(value, admin_client):
    """Item 3: ``lease_expires_at = '-infinity'`` by raw SQL. The recovery never reads
    the expiry (the filter chose the row), so the lease is recovered as any other."""
    bad, bad_claim = held("bad", T0)
    innocent, innocent_claim = held("innocent", T0)
    raw_update(Schedule, bad.pk, lease_expires_at=value)
    # The wake-up and the API read the row before any worker recovers it.
    state.next_wakeup()
    assert admin_client.get("/api/schedules/").status_code == 200
    if "-" not in value:  # a lease that never expires by SQL: made to expire by hand
        raw_update(Schedule, bad.pk, lease_expires_at="'-infinity'")
    assert_poison_lease_contained(
        bad, bad_claim, innocent, innocent_claim, T0 + 11 * S, unreadable=False
    )
    listed = admin_client.get("/api/schedules/")
    assert listed.status_code == 200
    assert {r["name"] for r in listed.json()["results"]} == {"bad", "innocent"}


@only_postgresql
def test_an_exclusion_date_in_the_year_10000_is_quarantined_at_lease_expiry():
    bad, bad_claim = held("bad", T0)
    innocent, innocent_claim = held("innocent", T0)
    cal = ExclusionCalendar.objects.create(name="far")
    bad.exclusion_calendars.add(cal)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO durable_schedules_exclusiondate (calendar_id, date, reason) "
            "VALUES (%s, '10000-01-01', 'far')",
            [cal.pk],
        )
    # The calendar's dates are read as text where a date cannot be (the engine names it):
    # recovering the lease needs no slot, so it is recovered as any other (a retry at
    # once); the retry's claim, which evaluates the calendar, pauses the row with the reason.
    assert_poison_lease_contained(
        bad, bad_claim, innocent, innocent_claim, T0 + 11 * S, unreadable=None
    )
    bad.refresh_from_db()
    assert bad.status == "paused"
    assert "cannot read: '10000-01-01'" in bad.degraded_reason, bad.degraded_reason


@only_sqlite
@pytest.mark.parametrize(
    "value", ["'0000-99-99 garbage'", "'2027-02-30 10:00:00'", "'zzz'", "1234", "x'00'"]
)
def test_a_lease_expiry_of_another_type_is_quarantined(value, admin_client):
    """Item 4: a malformed ``lease_expires_at`` text on SQLite."""
    bad, bad_claim = held("bad", T0)
    innocent, innocent_claim = held("innocent", T0)
    raw_update(Schedule, bad.pk, lease_expires_at=value)
    state.next_wakeup()
    state.next_wakeup(worker_id="w")
    assert admin_client.get("/api/schedules/").status_code == 200
    # Whether SQL compares it as expired or not, a lease that no datetime holds is recovered.
    assert_poison_lease_contained(
        bad, bad_claim, innocent, innocent_claim, T0 + 11 * S, unreadable=None
    )


def test_a_stray_lease_token_of_another_row_is_untouched():
    """The quarantine of a lease writes only its own row (``uuid`` of nothing: no attempt)."""
    s, _ = held("held", T0)
    Schedule.objects.filter(pk=s.pk).update(lease_token=uuid.uuid4())
    assert state.expire_leases(now=T0 + 11 * S) == 1
    s.refresh_from_db()
    assert s.lease_token is None and s.status == "active"
