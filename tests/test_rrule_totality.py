"""Totality for calendar rules (issue 15): no rule text stops the fleet.

A rule written behind ``save()`` (``QuerySet.update()`` or raw SQL, with or without the
matching definition hash) is whatever Hypothesis makes of RFC 5545's parts: unknown parts,
values out of range, COUNT, DTSTART, rules that never fire or fire once in decades, huge
intervals, text that is not a rule at all. Claimed in one batch with healthy rows of every
kind, it affects that schedule only: a rule the engine cannot evaluate gets one attempt
receipted ``degraded`` naming ``rrule`` and is paused (health counts it); a valid one is
re-planned or claimed; every healthy row is claimed; nothing raises and nothing loops (the
whole claim is bounded in time). Same profile as ``tests/test_totality_properties.py``
(``DDS_HYPOTHESIS_EXAMPLES``), at most 10 examples on PostgreSQL and MariaDB
(``POISON_PROFILE``: the same strategies on every vendor; SQLite runs them all).
"""

from __future__ import annotations

import time
import uuid

import pytest
from hypothesis import assume, given, note
from hypothesis import strategies as st

from django_durable_schedules import health, state
from django_durable_schedules.models import RunAttempt, RunReceipt, Schedule

from .test_totality_properties import (
    POISON_PROFILE,
    db_now,
    edited_behind_save,
    row_problem,
    wipe,
    write_behind_save,
)

pytestmark = pytest.mark.django_db(transaction=True)

#: Seconds one claim of a small batch may take, whatever the rules (a rule that can never
#: fire is decided by a bounded search, well under a second).
CLAIM_BUDGET_SECONDS = 20.0

NAMES = (
    "FREQ",
    "INTERVAL",
    "UNTIL",
    "WKST",
    "BYMONTH",
    "BYWEEKNO",
    "BYYEARDAY",
    "BYMONTHDAY",
    "BYDAY",
    "BYHOUR",
    "BYMINUTE",
    "BYSECOND",
    "BYSETPOS",
    "COUNT",
    "BYEASTER",
    "DTSTART",
    "X-NAME",
)
FREQS = ("YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY", "MINUTELY", "SECONDLY", "NEVER")
DAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU", "XX")
BAD_RULES = [
    "FREQ=MONTHLY;BYMONTHDAY=31;BYMONTH=2",
    "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30",
    "FREQ=MINUTELY;BYMONTH=4;BYMONTHDAY=31",
    "FREQ=DAILY;INTERVAL=7;BYDAY=MO",
    "FREQ=MINUTELY;INTERVAL=1440;BYHOUR=1",
    "FREQ=SECONDLY;INTERVAL=2;BYSECOND=1",
    "FREQ=DAILY;COUNT=3",
    "DTSTART:20270101T000000Z\nRRULE:FREQ=DAILY",
    "FREQ=DAILY;BYSECOND=60",
    "FREQ=DAILY;INTERVAL=99999999999",
    "FREQ=DAILY;UNTIL=19991231T000000Z",
    "FREQ=WEEKLY;BYDAY=1MO",
    "FREQ=DAILY;;",
    "RRULE:",
    "\x00",
    "\ud800",
    "FREQ=YEARLY;BYDAY=-53SU;BYWEEKNO=53;BYSETPOS=366",
    "FREQ=DAILY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO",  # valid: a Monday 29 February
]


def values() -> st.SearchStrategy[str]:
    number = st.one_of(st.integers(-400, 400), st.sampled_from([0, 60, 10**6, -(10**9)]))
    token = st.one_of(
        number.map(str),
        st.sampled_from(FREQS),
        st.builds(lambda n, d: f"{n or ''}{d}", st.integers(-60, 60), st.sampled_from(DAYS)),
        st.sampled_from(["20271231T235959Z", "20271231", "99991231T235959Z", "x", ""]),
    )
    return st.lists(token, min_size=1, max_size=4).map(",".join)


@st.composite
def rules(draw: st.DrawFn) -> str:
    """A rule text: mostly part soup built from RFC 5545's names, sometimes a known bad one."""
    if draw(st.booleans()):
        return draw(st.sampled_from(BAD_RULES))
    parts = draw(st.lists(st.tuples(st.sampled_from(NAMES), values()), min_size=1, max_size=5))
    if draw(st.booleans()):
        parts.insert(0, ("FREQ", draw(st.sampled_from(FREQS[:-1]))))
    return ";".join(f"{name}={value}" for name, value in parts)


def healthy(name: str, kind: str, now, rule: str | None = None) -> Schedule:
    fields = {"interval": {"interval_seconds": 60}, "cron": {"cron": "*/5 * * * *"}}.get(kind, {})
    if kind == "rrule":
        fields = {"rrule": rule or "FREQ=MINUTELY;INTERVAL=5"}
    elif kind == "once":
        fields = {"run_at": now}
    row = Schedule(name=name, callback="tests.noop", kind=kind, timezone="Europe/Paris", **fields)
    row.full_clean()
    row.save()
    Schedule.objects.filter(pk=row.pk).update(next_run_at=now.replace(microsecond=0))
    row.refresh_from_db()
    return row


@POISON_PROFILE
@given(
    kinds=st.lists(st.sampled_from(["interval", "cron", "once", "rrule"]), min_size=1, max_size=4),
    poisoned=st.lists(
        st.tuples(rules(), st.sampled_from(["update", "sql"]), st.booleans()),
        min_size=1,
        max_size=3,
    ),
)
def test_claim_contains_poison_rules(kinds, poisoned):
    """One claim batch of healthy rows and rrule rows whose rule was rewritten behind
    ``save()``: the claim returns within its budget and never raises; healthy rows are
    claimed; a rule the engine cannot evaluate is receipted ``degraded`` naming ``rrule``
    and paused; a valid rewritten rule is re-planned without a run."""
    note(f"kinds={kinds!r} poisoned={poisoned!r}")
    wipe()
    now = db_now()
    rows = [healthy(f"ok-{i}", kind, now) for i, kind in enumerate(kinds)]
    for i, (rule, via, rehash) in enumerate(poisoned):
        row = healthy(f"poison-{i}", "rrule", now)
        write_behind_save(row, "rrule", rule, via=via, rehash=rehash)
        rows.append(row)
    now = max(now, db_now())
    expected: dict[uuid.UUID, str] = {}
    for row in rows:
        row.refresh_from_db()
        problem = row_problem(row)
        if problem is not None:
            expected[row.pk] = f"degraded:{problem}"
        elif edited_behind_save(row):
            expected[row.pk] = "replanned"
        else:
            expected[row.pk] = "claimed"
        note(f"{row.name}: {expected[row.pk]} rrule={row.rrule!r}")
    assume(any(e.startswith("degraded") for e in expected.values()))

    started = time.perf_counter()
    claims = state.claim_due(worker="totality", now=now)
    assert time.perf_counter() - started < CLAIM_BUDGET_SECONDS

    claimed = {c.schedule_id for c in claims}
    assert claimed == {pk for pk, e in expected.items() if e == "claimed"}
    degraded = {pk: e.split(":", 1)[1] for pk, e in expected.items() if e.startswith("degraded")}
    for pk, field in degraded.items():
        row = Schedule.objects.get(pk=pk)
        assert row.status == "paused" and field in row.degraded_reason, row.degraded_reason
        [attempt] = RunAttempt.objects.filter(schedule_id=pk)
        receipt = RunReceipt.objects.get(attempt=attempt)
        assert receipt.status == "degraded" and field in receipt.error_message
    for pk, e in expected.items():
        if e == "replanned":
            assert not RunAttempt.objects.filter(schedule_id=pk).exists()
    assert health.snapshot(now=now).degraded == len(degraded)
    # The paused rows are left alone by the next claim; upcoming() on them raises the
    # field error (InvalidSchedule) rather than hanging or overflowing.
    assert not [c for c in state.claim_due(worker="totality", now=now) if c.schedule_id in degraded]
