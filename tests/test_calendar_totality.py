"""Totality for exclusion calendars (issue 15): no calendar stops the fleet.

A calendar written behind its checks (``QuerySet.update()``: a country code the ``holidays``
package does not know, or no longer knows, a subdivision it removed, lower case) and
dates by the hundred, named by schedules of every recurring kind, claimed in one batch with
healthy rows: a calendar the engine cannot evaluate affects the schedules that name it only
(one attempt receipted ``degraded`` naming ``exclusion_calendars``, paused, counted by
health); a valid one lets its schedule be claimed, or passes over a due slot whose date it
excludes (counted, no attempt); every healthy row is claimed; the claim is bounded in time.
Same profile as ``tests/test_totality_properties.py`` (``DDS_HYPOTHESIS_EXAMPLES``), at most
10 examples on PostgreSQL and MariaDB (``POISON_PROFILE``: the same strategies on every
vendor; SQLite runs them all).
"""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from django_durable_schedules import health, state, timing
from django_durable_schedules.models import (
    ExclusionCalendar,
    ExclusionDate,
    RunAttempt,
    RunReceipt,
    Schedule,
)

from .test_totality_properties import POISON_PROFILE, db_now, wipe

pytestmark = pytest.mark.django_db(transaction=True)

CLAIM_BUDGET_SECONDS = 20.0
COUNTRIES = ("FR", "DE", "US", "XX", "", "fr", "ZZZ", "F-R", "GB")
SUBDIVISIONS = ("", "BY", "ZZ", "CA", "ENG")
KINDS = {
    "interval": {"interval_seconds": 300},
    "cron": {"cron": "*/5 * * * *"},
    "rrule": {"rrule": "FREQ=MINUTELY;INTERVAL=5"},
}


def due_row(name: str, kind: str, now) -> Schedule:
    row = Schedule(
        name=name, callback="tests.noop", kind=kind, timezone="Europe/Paris", **KINDS[kind]
    )
    row.full_clean()
    row.save()
    Schedule.objects.filter(pk=row.pk).update(next_run_at=now.replace(microsecond=0))
    return Schedule.objects.get(pk=row.pk)


def calendar_problem(country: str, subdivision: str) -> bool:
    try:
        timing.check_holidays(country, subdivision) if country else None
    except timing.InvalidSchedule:
        return True
    return False


@POISON_PROFILE
@given(
    kinds=st.lists(st.sampled_from(sorted(KINDS)), min_size=1, max_size=3),
    calendars=st.lists(
        st.tuples(
            st.sampled_from(COUNTRIES),
            st.sampled_from(SUBDIVISIONS),
            st.lists(st.integers(-3, 500), max_size=40, unique=True),
            st.sampled_from(sorted(KINDS)),
            st.booleans(),  # every day of the next 500 too (a calendar that leaves little)
        ),
        min_size=1,
        max_size=3,
    ),
)
def test_claim_contains_poison_calendars(kinds, calendars):
    note(f"kinds={kinds!r} calendars={calendars!r}")
    wipe()
    ExclusionCalendar.objects.all().delete()
    now = db_now()
    today = timing.local_date(now, "Europe/Paris")
    healthy = [due_row(f"ok-{i}", kind, now).pk for i, kind in enumerate(kinds)]
    broken: set[uuid.UUID] = set()
    named: set[uuid.UUID] = set()
    for i, (country, sub, offsets, kind, every_day) in enumerate(calendars):
        cal = ExclusionCalendar.objects.create(name=f"cal-{i}")
        sub = sub if country else ""  # a subdivision needs a country (a constraint)
        ExclusionCalendar.objects.filter(pk=cal.pk).update(
            holidays_country=country, holidays_subdivision=sub
        )
        days = set(offsets) | (set(range(500)) if every_day else set())
        ExclusionDate.objects.bulk_create(
            [ExclusionDate(calendar=cal, date=today + timedelta(days=d)) for d in sorted(days)]
        )
        row = due_row(f"cal-{i}", kind, now)
        row.exclusion_calendars.add(cal)
        (broken if calendar_problem(country, sub) else named).add(row.pk)
    now = max(now, db_now())

    started = time.perf_counter()
    claims = state.claim_due(worker="totality", now=now)
    assert time.perf_counter() - started < CLAIM_BUDGET_SECONDS

    claimed = {c.schedule_id for c in claims}
    assert set(healthy) <= claimed
    for pk in broken:
        row = Schedule.objects.get(pk=pk)
        assert row.status == "paused" and "exclusion_calendars" in row.degraded_reason
        [attempt] = RunAttempt.objects.filter(schedule_id=pk)
        assert RunReceipt.objects.get(attempt=attempt).status == "degraded"
    for pk in named:
        row = Schedule.objects.get(pk=pk)
        if pk in claimed:
            assert row.lease_token is not None
        else:  # its due slot fell on an excluded date: nothing run (counted when a slot)
            assert not RunAttempt.objects.filter(schedule_id=pk)
            assert row.status == "active" and row.next_run_at and row.next_run_at > now
    assert health.snapshot(now=now).degraded == len(broken)
    # Every attempt has a receipt, or is one of the live claims.
    open_attempts = RunAttempt.objects.filter(receipt__isnull=True)
    assert {a.schedule_id for a in open_attempts} == claimed
