"""Backfills on a saturated fleet (issue #24 item 15): a claim batch keeps a share of its
capacity for backfill slots (``BACKFILL_SHARE``), and health lists a backfill that makes no
progress."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test.utils import override_settings
from hypothesis import given
from hypothesis import strategies as st

from django_durable_schedules import state
from django_durable_schedules.models import Backfill, Schedule
from django_durable_schedules.state import Outcome
from django_durable_schedules.state.backfill_share import backfill_reserve, reset_carry

from .factories import T0

pytestmark = pytest.mark.django_db(transaction=True)

S = timedelta(seconds=1)
M = 60 * S
D = 86400 * S
NOW = T0 + 60 * D + S


@pytest.fixture(autouse=True)
def _no_carry():
    reset_carry()
    yield
    reset_carry()


def daily_with_backfill(name="bf", slots=3):
    """A daily schedule whose live slot ran at ``NOW`` (next one a day later), with an open
    backfill of its first ``slots`` days."""
    s = Schedule(name=name, kind="interval", interval_seconds=86400, timezone="UTC", created_at=T0)
    s.callback = "tests.noop"
    s.full_clean()
    s.save()
    claims = state.claim_due(worker="setup", now=NOW)
    state.complete([Outcome(c, "succeeded") for c in claims], now=NOW)
    s.refresh_from_db()
    assert s.next_run_at > NOW + D / 2
    state.request_backfill(s.pk, T0, T0 + slots * D, now=NOW)
    return s


def busy(n):
    """``n`` every-minute schedules, all due at ``NOW`` and again every minute."""
    Schedule.objects.bulk_create(
        Schedule(
            name=f"busy-{i:03d}",
            callback="tests.noop",
            kind="interval",
            interval_seconds=60,
            timezone="UTC",
            created_at=T0,
        )
        for i in range(n)
    )


def saturated_passes(passes, limit, worker="w"):
    """``passes`` claims of ``limit``, one a minute from ``NOW``, each completed at once;
    returns the origins claimed per pass."""
    seen = []
    for k in range(passes):
        at = NOW + k * M + S
        claims = state.claim_due(worker=worker, limit=limit, now=at, lease_seconds=30)
        seen.append([c.origin for c in claims])
        state.complete([Outcome(c, "succeeded") for c in claims], now=at + S)
    return seen


def test_a_saturated_claim_still_runs_the_backfill_slots_within_bounded_passes():
    s = daily_with_backfill(slots=3)
    busy(10)  # 10 live schedules due at every pass, batches of 4: saturated
    seen = saturated_passes(4, limit=4)
    assert all(len(batch) == 4 for batch in seen), seen  # every batch full
    assert [batch.count("backfill") for batch in seen[:3]] == [1, 1, 1], seen
    b = Backfill.objects.get(schedule=s)
    assert (b.status, b.position) == ("completed", 3)
    # The live grid lost one slot of four per pass to the backfill, no more.
    assert all(batch.count("scheduled") >= 3 for batch in seen)


def test_capacity_a_share_does_not_use_goes_to_live_slots():
    daily_with_backfill(slots=1)
    busy(10)
    seen = saturated_passes(3, limit=4)
    assert [batch.count("backfill") for batch in seen] == [1, 0, 0]
    assert [len(batch) for batch in seen] == [4, 4, 4]  # the backfill is done: all live


def test_a_backfill_slot_never_runs_while_its_own_live_slot_is_due():
    s = daily_with_backfill(slots=2)
    busy(10)
    Schedule.objects.filter(pk=s.pk).update(next_run_at=NOW - M)  # its live slot is due
    claims = state.claim_due(worker="w", limit=4, now=NOW + S, lease_seconds=30)
    assert [c.origin for c in claims] == ["scheduled"] * 4
    assert Backfill.objects.get(schedule=s).position == 0


def test_open_backfills_take_the_reserve_in_turns_least_recently_run_first():
    # Three schedules with open backfills and a reserve of one place a batch: each pass
    # gives the place to the schedule run least recently, so none waits for the others'
    # backfills to end (before: primary key order, the same schedule every pass while
    # its backfill lasted; the chaos soak's victim backfill never ran in 50 s).
    rows = [daily_with_backfill(name=f"bf-{i}", slots=20) for i in range(3)]
    busy(10)
    before = dict(Backfill.objects.values_list("schedule_name", "position"))
    served = []
    for k in range(6):
        at = NOW + k * M + S
        claims = state.claim_due(worker="w", limit=4, now=at, lease_seconds=30)
        served += [c.schedule_name for c in claims if c.origin == "backfill"]
        state.complete([Outcome(c, "succeeded") for c in claims], now=at + S)
    assert len(served) == 6, served
    assert sorted(served[:3]) == sorted(r.name for r in rows), served
    assert sorted(served[3:]) == sorted(r.name for r in rows), served
    after = dict(Backfill.objects.values_list("schedule_name", "position"))
    assert {name: after[name] - before[name] for name in after} == {r.name: 2 for r in rows}


@override_settings(DURABLE_SCHEDULES={"BACKFILL_SHARE": 0})
def test_a_share_of_zero_keeps_the_old_rule_live_slots_first():
    daily_with_backfill(slots=1)
    busy(10)
    seen = saturated_passes(2, limit=4)
    assert [batch.count("backfill") for batch in seen] == [0, 0]


def test_batches_of_one_give_backfills_their_share_over_time():
    s = daily_with_backfill(slots=50)
    busy(10)
    seen = saturated_passes(12, limit=1)
    assert sum(batch.count("backfill") for batch in seen) == 3  # 12 x 0.25
    assert all(len(batch) == 1 for batch in seen)
    assert Backfill.objects.get(schedule=s).position == 3


@pytest.mark.parametrize(
    ("limit", "share", "carry", "want"),
    [
        (4, 0.25, 0.0, (1, 0.0)),
        (96, 0.25, 0.0, (24, 0.0)),
        (10, 0.25, 0.0, (2, 0.5)),
        (10, 0.25, 0.5, (3, 0.0)),
        (1, 0.25, 0.0, (0, 0.25)),
        (1, 0.25, 0.75, (1, 0.0)),
        (5, 0.0, 0.9, (0, 0.0)),
        (5, 1.0, 0.0, (5, 0.0)),
        (4, 0.25, float("nan"), (1, 0.0)),
        (4, float("inf"), 0.0, (4, 0.0)),
        (4, float("nan"), 0.0, (0, 0.0)),
        (4, 0.25, float("inf"), (1, 0.0)),
    ],
)
@pytest.mark.vendor_independent  # a pure rule
def test_the_reserve_rule(limit, share, carry, want):
    assert backfill_reserve(limit, share, carry) == want


def _backfill_statements(captured):
    table = Backfill._meta.db_table
    return [q["sql"] for q in captured if table in q["sql"]]


@pytest.mark.parametrize("due", [3, 10])  # a batch of 5: left room, and saturated
def test_with_no_open_backfill_the_claim_reads_nothing_more_for_backfills(due):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    busy(due)
    with CaptureQueriesContext(connection) as ctx:
        claims = state.claim_due(worker="w", limit=5, now=NOW, lease_seconds=30)
    assert len(claims) == min(due, 5)
    # Only the live read names the backfill table (its one EXISTS): no read of its own.
    [live_read] = _backfill_statements(ctx.captured_queries)
    assert "FOR UPDATE" in live_read or connection.vendor == "sqlite"


def test_a_saturated_claim_with_an_open_backfill_reads_it_in_the_same_transaction():
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    daily_with_backfill(slots=2)
    busy(10)
    with CaptureQueriesContext(connection) as ctx:
        claims = state.claim_due(worker="w", limit=4, now=NOW + S, lease_seconds=30)
    assert sorted(c.origin for c in claims) == ["backfill"] + ["scheduled"] * 3
    # The live read, the ready schedules' locking read, the open backfills, the write.
    assert len(_backfill_statements(ctx.captured_queries)) == 4, ctx.captured_queries


@given(
    limit=st.integers(min_value=-3, max_value=500),
    share=st.floats(allow_nan=True, allow_infinity=True),
    carry=st.floats(allow_nan=True, allow_infinity=True),
)
@pytest.mark.vendor_independent  # a pure rule searched by Hypothesis
def test_the_reserve_is_bounded_whatever_it_is_given(limit, share, carry):
    reserve, left = backfill_reserve(limit, share, carry)
    assert 0 <= reserve <= max(limit, 0) and 0.0 <= left < 1.0


@given(
    limit=st.integers(min_value=1, max_value=200),
    share=st.floats(min_value=0.0, max_value=1.0),
    batches=st.integers(min_value=1, max_value=50),
)
@pytest.mark.vendor_independent  # a pure rule searched by Hypothesis
def test_over_batches_the_backfills_get_their_share(limit, share, batches):
    carry, total = 0.0, 0
    for _ in range(batches):
        reserve, carry = backfill_reserve(limit, share, carry)
        total += reserve
    assert abs(total - batches * limit * share) <= 1.0 + 1e-6


@pytest.mark.parametrize("bad", ["a quarter", float("nan"), None, True, [0.5]])
def test_a_share_that_is_no_number_is_the_default_and_a_check_error(bad):
    from django_durable_schedules.checks import check_setting_types
    from django_durable_schedules.conf import app_settings

    with override_settings(DURABLE_SCHEDULES={"BACKFILL_SHARE": bad}):
        assert app_settings.BACKFILL_SHARE == 0.25
        assert any("BACKFILL_SHARE" in e.msg for e in check_setting_types())
        daily_with_backfill(slots=1)
        busy(10)
        assert [b.count("backfill") for b in saturated_passes(1, limit=4)] == [1]


@pytest.mark.vendor_independent  # a settings check: no query
@pytest.mark.parametrize(("value", "bounded"), [(-1, 0.0), (7, 1.0), (float("inf"), 1.0)])
def test_a_share_out_of_range_is_clamped_and_a_check_error(value, bounded):
    from django_durable_schedules.checks import check_setting_types
    from django_durable_schedules.conf import app_settings

    with override_settings(DURABLE_SCHEDULES={"BACKFILL_SHARE": value}):
        assert app_settings.BACKFILL_SHARE == bounded
        assert any("BACKFILL_SHARE" in e.msg for e in check_setting_types())


@pytest.mark.vendor_independent  # a settings check: no query
@pytest.mark.parametrize("bad", ["ten minutes", 0, -5, float("nan")])
def test_a_stall_threshold_that_is_no_positive_number_is_a_check_error(bad):
    from django_durable_schedules.checks import check_setting_types
    from django_durable_schedules.conf import app_settings

    with override_settings(DURABLE_SCHEDULES={"BACKFILL_STALL_SECONDS": bad}):
        assert 1 <= app_settings.BACKFILL_STALL_SECONDS <= 3650 * 86400
        assert any("BACKFILL_STALL_SECONDS" in e.msg for e in check_setting_types())
