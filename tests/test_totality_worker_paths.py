"""Totality of the worker's other paths (issue #24): Hypothesis writes bad values behind
``save()`` into the columns the backfill claim, lease expiry and the wake-up read - a
backfill's ``slots``, ``position``, ``occurrence``, ``attempt`` and ``status``, a
schedule's ``lease_expires_at`` and ``occurrence`` - by ``QuerySet.update()`` or raw SQL
(SQLite keeps any value in any column; PostgreSQL keeps ``-infinity`` and years beyond
9999), and runs worker passes: ``claim_due``, ``complete``, ``expire_leases`` and
``next_wakeup`` never raise, every attempt gets one receipt, the innocent schedule and the
innocent backfill run, and the wake-up never says "due" for what no claim takes.

Examples per property: ``DDS_HYPOTHESIS_EXAMPLES`` (default 25), as
``tests/test_totality_properties.py``, whose helpers these reuse; at most 10 on PostgreSQL
and MariaDB (``POISON_PROFILE``: what each database lets in behind ``save()``, from the
same strategies on every vendor; SQLite runs them all).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import DatabaseError, connection, transaction
from hypothesis import given, note
from hypothesis import strategies as st

from django_durable_schedules import state
from django_durable_schedules.conf import app_settings
from django_durable_schedules.models import Backfill, RunAttempt, RunReceipt, Schedule

from .test_totality_properties import (
    HUGE_INTS,
    JSON_VALUES,
    POISON_PROFILE,
    SHORT_TEXT,
    assert_one_receipt_each,
    db_now,
    healthy,
    wipe,
)

pytestmark = pytest.mark.django_db(transaction=True)

S = timedelta(seconds=1)
HOUR = 3600 * S


# ---------------------------------------------------------------------------------------
# Writing behind save()
# ---------------------------------------------------------------------------------------


def write(model: Any, pk: Any, column: str, value: Any) -> bool:
    """Write ``column = value`` on one row behind ``save()``: ``("sql", text)`` is an SQL
    literal written by raw SQL, anything else goes through ``QuerySet.update()``. Returns
    False when the database (or its driver) refused it: the row is unchanged."""
    try:
        with transaction.atomic():
            if isinstance(value, tuple) and value[0] == "sql":
                qn = connection.ops.quote_name
                field = model._meta.get_field(column)
                with connection.cursor() as cursor:
                    cursor.execute(
                        f"UPDATE {qn(model._meta.db_table)} SET {qn(field.column)} = {value[1]} "
                        f"WHERE {qn(model._meta.pk.column)} = %s",
                        [model._meta.pk.get_db_prep_value(pk, connection)],
                    )
            else:
                model.objects.filter(pk=pk).update(**{column: value})
    except (DatabaseError, UnicodeError, ValueError, OverflowError, TypeError) as exc:
        note(f"{model.__name__}.{column}={value!r} refused on write: {type(exc).__name__}")
        return False
    note(f"{model.__name__}.{column}={value!r} written")
    return True


#: SQL literals of another type than the column's (SQLite keeps them all; the others
#: refuse most, and a refused write is simply skipped).
FOREIGN_LITERALS = [
    "'abc'",
    "''",
    "1.5",
    "-1",
    "x'00ff'",
    "'2027-02-30 10:00:00'",
    "'zzz'",
    "'0000-99-99 garbage'",
    "1234",
    "9223372036854775807",
]
#: Instants no Python datetime holds, or at the edges of what the databases hold.
ODD_INSTANTS = [
    "'-infinity'",
    "'infinity'",
    "'10000-01-01 00:00:00+00'",
    "'0001-01-01 00:00:00+00'",
    "'4713-01-01 00:00:00+00 BC'",
    "'0000-00-00 00:00:00'",
    "'1000-01-01 00:00:00'",
    "'9999-12-31 23:59:59'",
]
ISO_SLOTS = st.one_of(
    st.sampled_from(
        [
            "0001-01-01T00:00:00+23:59",
            "9999-12-31T23:59:59-23:59",
            "2027-06-01T10:00:00",
            "2027-06-01T10:00:00+00:00",
            "not a date",
            "",
        ]
    ),
    st.datetimes(timezones=st.just(UTC)).map(lambda d: d.isoformat()),
    SHORT_TEXT,
)
SLOTS = st.one_of(
    st.lists(st.one_of(ISO_SLOTS, JSON_VALUES), max_size=4),
    JSON_VALUES,
)
COUNTS = st.one_of(
    st.none(),
    st.integers(min_value=0, max_value=3),
    HUGE_INTS,
    st.sampled_from([2**31 - 2, 2**31 - 1, 2**32, 2**63 - 1]),
)


@st.composite
def backfill_poisons(draw: st.DrawFn) -> tuple[str, Any]:
    """``(column, value)`` for a backfill row."""
    column = draw(st.sampled_from(["slots", "position", "occurrence", "attempt", "status"]))
    raw = st.sampled_from(FOREIGN_LITERALS).map(lambda v: ("sql", v))
    if column == "slots":
        value = draw(st.one_of(SLOTS, raw))
    elif column == "status":
        value = draw(st.one_of(SHORT_TEXT, st.sampled_from(["active", "completed", "x"]), raw))
    else:
        value = draw(st.one_of(COUNTS, raw))
    return column, value


@st.composite
def row_poisons(draw: st.DrawFn) -> tuple[str, Any]:
    """``(column, value)`` for a schedule whose lease expired or that is due."""
    column = draw(st.sampled_from(["lease_expires_at", "occurrence"]))
    raw = st.sampled_from(FOREIGN_LITERALS).map(lambda v: ("sql", v))
    if column == "lease_expires_at":
        value = draw(
            st.one_of(
                st.datetimes(timezones=st.just(UTC)),
                st.sampled_from(ODD_INSTANTS).map(lambda v: ("sql", v)),
                raw,
            )
        )
    else:
        value = draw(st.one_of(COUNTS.filter(lambda v: v is not None), raw))
    return column, value


# ---------------------------------------------------------------------------------------
# A worker pass
# ---------------------------------------------------------------------------------------


def worker_pass(now: datetime | None = None) -> list[state.Claim]:
    """What a worker does in one turn of its loop, with the database clock (or ``now``):
    recover expired leases, claim, run and complete, then ask when to wake up. None of it
    may raise."""
    state.expire_leases(now=now)
    claims = state.claim_due(worker="totality", now=now, lease_seconds=60)
    state.complete([state.Outcome(c, "succeeded") for c in claims], now=now)
    state.next_wakeup()
    state.next_wakeup(worker_id="totality")
    return claims


def settle(passes: int = 8) -> None:
    """Worker passes until one claims nothing; then the wake-up must not say "due now"
    (what it says is due, a claim takes: no hot loop)."""
    for _ in range(passes):
        if not worker_pass():
            break
    wakeup = state.next_wakeup(worker_id="totality")
    now = state.db_now()
    if wakeup.due is not None and wakeup.due <= now:
        assert worker_pass(), f"the wake-up says due ({wakeup.due}) and nothing is claimed"


def yearly(name: str, now: datetime) -> Schedule:
    row = Schedule(
        name=name,
        callback="tests.noop",
        kind="cron",
        cron="0 0 1 1 *",
        timezone="UTC",
        created_at=now - timedelta(days=4 * 366),
    )
    row.full_clean()
    row.save()
    return row


# ---------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------


@POISON_PROFILE
@given(poisoned=st.lists(st.lists(backfill_poisons(), min_size=1, max_size=2), max_size=3))
def test_worker_passes_contain_poisoned_backfills(poisoned):
    """Backfills with bad values behind ``save()`` beside an innocent backfill and an
    innocent due schedule: no pass raises, the innocent schedule is claimed in the first
    pass and the innocent backfill completes; every attempt ends in one receipt."""
    wipe()
    now = db_now()
    state.heartbeat("totality")
    end = now.replace(month=1, day=2, hour=0, minute=0, second=0, microsecond=0)
    start = end.replace(year=end.year - 3)
    for i, columns in enumerate(poisoned):
        row = yearly(f"bf-poison-{i}", now)
        backfill = state.request_backfill(row.pk, start, end)
        if i % 2:  # a slot ran: its occurrence is one a clash may name
            claims = state.claim_due(worker="setup", now=now)
            assert row.pk in {c.schedule_id for c in claims}
            state.complete([state.Outcome(c, "succeeded") for c in claims], now=now)
        for column, value in columns:
            write(Backfill, backfill.pk, column, value)
    innocent_row = healthy("innocent", "interval", now)
    innocent_bf = state.request_backfill(yearly("bf-innocent", now).pk, start, end)

    first = worker_pass()
    assert innocent_row.pk in {c.schedule_id for c in first}
    settle()

    assert Backfill.objects.get(pk=innocent_bf.pk).status == "completed"
    assert RunReceipt.objects.filter(schedule_id=innocent_bf.schedule_id).count() == 3
    assert_one_receipt_each(list(RunAttempt.objects.values_list("id", flat=True)))
    assert not Schedule.objects.filter(lease_token__isnull=False).exists()


@POISON_PROFILE
@given(
    leases=st.lists(row_poisons().filter(lambda p: p[0] == "lease_expires_at"), max_size=3),
    counters=st.lists(row_poisons().filter(lambda p: p[0] == "occurrence"), max_size=2),
)
def test_worker_passes_contain_poisoned_leases_and_counters(leases, counters):
    """Claimed schedules whose ``lease_expires_at`` was then written behind ``save()``, due
    schedules whose ``occurrence`` was, beside an innocent claim whose worker died and an
    innocent due schedule: no pass raises; the innocent lease is recovered and the innocent
    schedules run; a poisoned row ends recovered, quarantined (paused with a reason, its
    attempt receipted) or still leased; every attempt without a live lease has one
    receipt."""
    wipe()
    now = db_now()
    state.heartbeat("totality")
    innocent_held = healthy("held", "interval", now)
    held = [healthy(f"lease-{i}", "interval", now) for i in range(len(leases))]
    claims = {c.schedule_id: c for c in state.claim_due(worker="gone", now=now, lease_seconds=1)}
    assert set(claims) == {r.pk for r in [innocent_held, *held]}
    for row, (column, value) in zip(held, leases, strict=True):
        write(Schedule, row.pk, column, value)
    innocent_due = healthy("due", "interval", now)
    for i, (column, value) in enumerate(counters):
        write(Schedule, healthy(f"counter-{i}", "interval", now).pk, column, value)

    later = now + timedelta(seconds=app_settings.LEASE_SECONDS + 2)
    worker_pass(now=later)
    receipt = RunReceipt.objects.get(attempt_id=claims[innocent_held.pk].attempt_id)
    assert receipt.status == "lease_expired"
    assert RunAttempt.objects.filter(schedule_id=innocent_due.pk, claimed_at=later).exists()
    for step in range(1, 4):
        worker_pass(now=later + step * S)
    settle()
    # The lost occurrence was retried (at the next whole second) and ran.
    retry = RunAttempt.objects.get(schedule_id=innocent_held.pk, occurrence=1, attempt=2)
    assert RunReceipt.objects.get(attempt_id=retry.pk).status == "succeeded"

    live = set(
        Schedule.objects.filter(lease_token__isnull=False).values_list("lease_token", flat=True)
    )
    assert_one_receipt_each(
        list(RunAttempt.objects.exclude(lease_token__in=live).values_list("id", flat=True))
    )
    for row in Schedule.objects.filter(name__startswith="lease-", lease_token__isnull=True):
        if row.status == "paused":
            assert row.degraded_reason, row.name
