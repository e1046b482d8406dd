"""Exclusion calendars written behind ``save()`` (issue 24): the values of every calendar
column the worker reads, at their edges, on every database.

A date the database holds but the engine cannot read (year 10000 by raw SQL on SQLite and
PostgreSQL; text that is no date on SQLite) pauses the schedules that name its calendar,
with a reason in words; an edge date (0001-01-01, 9999-12-31) is an ordinary date. The
property tests of every worker pass are in ``tests/test_calendar_columns.py``.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import DatabaseError, connection, transaction

from django_durable_schedules import health, state, timing
from django_durable_schedules.models import (
    ExclusionCalendar,
    ExclusionDate,
    RunAttempt,
    RunReceipt,
    Schedule,
)

from .test_totality_properties import db_now

pytestmark = pytest.mark.django_db(transaction=True)

DATES_TABLE = ExclusionDate._meta.db_table


def raw_date(calendar: ExclusionCalendar, text: str, reason: str = "") -> bool:
    """Insert ``text`` into the date column by raw SQL; False when the database refuses
    it (MariaDB's strict mode refuses year 10000; PostgreSQL refuses text that is no
    date)."""
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {DATES_TABLE} (calendar_id, date, reason) VALUES (%s, %s, %s)",
                [calendar.pk, text, reason],
            )
    except DatabaseError:
        return False
    return True


def due(name: str, now, **fields) -> Schedule:
    fields.setdefault("interval_seconds", 60)
    row = Schedule.objects.create(name=name, callback="tests.noop", kind="interval", **fields)
    Schedule.objects.filter(pk=row.pk).update(next_run_at=now.replace(microsecond=0))
    return row


@pytest.mark.parametrize("text", ["10000-01-01", "garbage", "2024-02-30", "99999-12-31"])
def test_a_date_the_engine_cannot_read_pauses_its_schedules_in_words(text):
    now = db_now()
    cal = ExclusionCalendar.objects.create(name="plant")
    # A readable date too: a calendar of one bad date is not the only case.
    ExclusionDate.objects.create(calendar=cal, date=timing.local_date(now, "UTC") + timedelta(3))
    if not raw_date(cal, text):
        pytest.skip(f"{connection.vendor} refuses the date {text!r}")
    innocent = due("innocent", now)
    poisoned = due("poisoned", now)
    poisoned.exclusion_calendars.add(cal)

    claims = state.claim_due(worker="edges", now=now)

    assert {c.schedule_id for c in claims} == {innocent.pk}
    row = Schedule.objects.get(pk=poisoned.pk)
    assert row.status == "paused"
    assert row.degraded_reason == (
        "cannot evaluate the schedule: exclusion_calendars: calendar 'plant' holds a date "
        f"the engine cannot read: {text!r}"
    )
    [attempt] = RunAttempt.objects.filter(schedule=row)
    receipt = RunReceipt.objects.get(attempt=attempt)
    assert receipt.status == "degraded" and receipt.error_message == row.degraded_reason
    assert health.snapshot(now=now).degraded == 1


@pytest.mark.parametrize("day", ["0001-01-01", "9999-12-31"])
def test_an_edge_date_is_an_ordinary_date(day):
    now = db_now()
    cal = ExclusionCalendar.objects.create(name="edges")
    assert raw_date(cal, day, "the edge")
    row = due("edged", now)
    row.exclusion_calendars.add(cal)

    [claim] = state.claim_due(worker="edges", now=now)
    assert claim.schedule_id == row.pk
    assert not Schedule.objects.get(pk=row.pk).degraded_reason
    assert len(row.upcoming(3)) == 3


@pytest.mark.parametrize("path", ["late outcome", "lease expiry"])
def test_a_calendar_broken_after_the_claim_never_aborts_a_finishing_batch(path):
    """A calendar made invalid between the claim and the end of the run, on a row with no
    attempt left whose lease expired: the row moves on (and so reads its calendar) in the
    completion's lease-expired branch or in the lease recovery; that row alone is paused,
    its attempt still receipted, and the rest of the batch finishes."""
    now = db_now()
    cal = ExclusionCalendar.objects.create(name="fr", holidays_country="FR")
    innocent = due("innocent", now, max_attempts=1)
    victim = due("victim", now, max_attempts=1)
    victim.exclusion_calendars.add(cal)
    claims = state.claim_due(worker="edges", now=now, lease_seconds=30)
    assert {c.schedule_id for c in claims} == {innocent.pk, victim.pk}
    ExclusionCalendar.objects.filter(pk=cal.pk).update(holidays_country="XX")
    later = now + timedelta(hours=1)  # past the lease and past the next slot

    if path == "late outcome":
        report = state.complete([state.Outcome(c, "succeeded") for c in claims], now=later)
        assert len(report.fenced) == 2 and not report.dropped
    else:
        assert state.expire_leases(now=later) == 2

    for claim in claims:
        assert RunReceipt.objects.get(attempt_id=claim.attempt_id).status == "lease_expired"
    row = Schedule.objects.get(pk=innocent.pk)
    assert row.status == "active" and row.next_run_at > later and row.lease_token is None
    row = Schedule.objects.get(pk=victim.pk)
    assert row.status == "paused" and row.lease_token is None and row.next_run_at is None
    assert row.degraded_reason.startswith(
        "cannot evaluate the schedule: exclusion_calendars: calendar 'fr': the holidays "
        "package has no country 'XX'"
    )
    assert health.snapshot(now=later).degraded == 1
