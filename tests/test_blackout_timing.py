"""Blackout windows as time (timing.blackouts): the window at an instant, the end of a
blackout (windows that overlap or touch followed), the windows of a range; rules read as a
schedule's rule is (zone, DTSTART, planning budget). Examples, then Hypothesis properties:
the end of a blackout is never inside a window, nor is any instant it calls runnable."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from django_durable_schedules import timing
from django_durable_schedules.timing import BlackoutRange, BlackoutRule, Blackouts

T0 = datetime(2027, 3, 1, tzinfo=UTC)
S = timedelta(seconds=1)
M = timedelta(minutes=1)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def test_no_window_means_every_instant_runs():
    none = Blackouts()
    assert not none
    assert none.window_at(T0) is None
    assert none.end_of_blackout(T0 + timedelta(microseconds=5)) == T0
    assert none.windows_between(T0, at(60)) == []


def test_a_range_covers_its_start_not_its_end():
    b = Blackouts((BlackoutRange("db", at(10), at(20)),))
    assert b.window_at(at(10)).name == "db"
    assert b.window_at(at(20) - S) is not None
    assert b.window_at(at(20)) is None  # a slot at the end runs
    assert b.window_at(at(10) - S) is None
    assert b.end_of_blackout(at(15)) == at(20)
    assert b.end_of_blackout(at(25)) == at(25)


def test_windows_that_overlap_or_touch_are_followed_to_the_last_end():
    b = Blackouts(
        (
            BlackoutRange("a", at(0), at(10)),
            BlackoutRange("b", at(10), at(15)),  # touches a
            BlackoutRange("c", at(12), at(30)),  # overlaps b
            BlackoutRange("d", at(31), at(40)),  # a gap of a minute
        )
    )
    assert b.end_of_blackout(at(1)) == at(30)
    assert b.end_of_blackout(at(30)) == at(30)
    spans = b.spans(at(0), at(60))
    assert [(w.start, w.end) for w in spans] == [(at(0), at(30)), (at(31), at(40))]
    assert [w.name for w in b.windows_between(at(14), at(32))] == ["b", "c", "d"]


def test_a_daily_rule_read_in_its_zone():
    # 02:00 Paris every day for an hour: 01:00Z in winter, 00:00Z in summer.
    rule = BlackoutRule(
        "nightly", "FREQ=DAILY;BYHOUR=2;BYMINUTE=0", "Europe/Paris", 3600, created=T0
    )
    b = Blackouts((rule,))
    winter = datetime(2027, 3, 10, 1, 30, tzinfo=UTC)
    summer = datetime(2027, 7, 10, 0, 30, tzinfo=UTC)
    assert b.window_at(winter) == timing.Window(
        "nightly", datetime(2027, 3, 10, 1, tzinfo=UTC), datetime(2027, 3, 10, 2, tzinfo=UTC)
    )
    assert b.end_of_blackout(summer) == datetime(2027, 7, 10, 1, tzinfo=UTC)
    assert b.window_at(datetime(2027, 7, 10, 1, 0, tzinfo=UTC)) is None
    days = b.windows_between(datetime(2027, 3, 10, tzinfo=UTC), datetime(2027, 3, 13, tzinfo=UTC))
    assert len(days) == 3


def test_a_rule_starts_at_its_anchor_and_none_after_its_end():
    rule = BlackoutRule(
        "every-10", "FREQ=MINUTELY;INTERVAL=10", "UTC", 120, start_at=at(5), until=at(35)
    )
    b = Blackouts((rule,))
    assert b.window_at(at(4)) is None
    assert b.window_at(at(6)).start == at(5)
    assert b.window_at(at(35) + S).start == at(35)  # the last one starts at the end
    assert b.window_at(at(45) + S) is None
    assert len(b.windows_between(at(0), at(100))) == 4


def test_windows_that_never_end_are_an_error_not_a_hang():
    rule = BlackoutRule("always", "FREQ=MINUTELY", "UTC", 120, created=T0)
    with pytest.raises(timing.InvalidSchedule) as err:
        Blackouts((rule,)).end_of_blackout(at(3))
    assert err.value.field == "blackout_windows"


@pytest.mark.parametrize(
    ("rule", "zone", "duration", "field"),
    [
        ("FREQ=FORTNIGHTLY", "UTC", 60, "rrule"),
        ("FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30", "UTC", 60, "rrule"),  # never fires
        ("FREQ=DAILY", "Mars/Olympus", 60, "timezone"),
        ("FREQ=DAILY", "UTC", 0, "duration_seconds"),
        ("FREQ=DAILY", "UTC", "60", "duration_seconds"),
    ],
)
def test_a_rule_the_engine_cannot_read_raises_naming_the_window(rule, zone, duration, field):
    bad = BlackoutRule("bad-one", rule, zone, duration, created=T0)
    with pytest.raises(timing.InvalidSchedule) as err:
        bad.check()
    assert err.value.field == field
    with pytest.raises(timing.InvalidSchedule, match="bad-one") as err:
        Blackouts((bad,)).window_at(T0)
    assert err.value.field == "blackout_windows"


def test_the_planning_budget_holds_for_a_window_rule():
    # The schedule rule's pathological case: dateutil would step every second for years.
    text = "FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO;BYHOUR=23;BYMINUTE=59;BYSECOND=59"
    with pytest.raises(timing.InvalidSchedule):
        BlackoutRule("slow", text, "UTC", 60, created=T0).check()


# -- properties ----------------------------------------------------------------------------

offsets = st.integers(min_value=0, max_value=6 * 3600)
ranges = st.builds(
    lambda name, start, length: BlackoutRange(
        name, T0 + timedelta(seconds=start), T0 + timedelta(seconds=start + length)
    ),
    st.sampled_from(["a", "b", "c"]),
    offsets,
    st.integers(min_value=1, max_value=3600),
)
rules = st.builds(
    lambda every, duration, start: BlackoutRule(
        "r",
        f"FREQ=MINUTELY;INTERVAL={every}",
        "UTC",
        min(duration, every * 60 - 1),
        start_at=T0 + timedelta(seconds=start),
    ),
    st.integers(min_value=2, max_value=120),
    st.integers(min_value=1, max_value=7200),
    st.integers(min_value=0, max_value=3600),
)
# At most one rule: two rules may cover each other's gaps for ever (an error, tested above).
window_sets = st.tuples(st.lists(ranges, max_size=3), st.lists(rules, max_size=1)).map(
    lambda ws: Blackouts(tuple(ws[0] + ws[1]))
)


@settings(max_examples=60, deadline=None)
@given(window_sets, offsets)
def test_end_of_blackout_is_never_inside_a_window(b, offset):
    instant = T0 + timedelta(seconds=offset)
    end = b.end_of_blackout(instant)
    assert end >= instant
    assert b.window_at(end) is None
    assert all(not w.covers(end) for w in b.windows_between(end - timedelta(hours=2), end + S))
    # Between the instant and that end, every second is blacked out (nothing runnable skipped).
    covered = b.spans(instant, end)
    assert sum((w.end - w.start for w in covered), timedelta()) == end - instant


@settings(max_examples=60, deadline=None)
@given(window_sets, offsets)
def test_window_at_agrees_with_the_windows_of_a_range(b, offset):
    instant = T0 + timedelta(seconds=offset)
    listed = [w for w in b.windows_between(instant, instant + S) if w.covers(instant)]
    found = b.window_at(instant)
    assert (found is None) == (not listed)
    if found is not None:
        assert found.covers(instant)


@settings(max_examples=40, deadline=None)
@given(window_sets, offsets, st.integers(min_value=30, max_value=900))
def test_upcoming_slots_never_call_a_slot_inside_a_window_runnable(b, offset, every):
    spec = timing.Spec(kind="interval", interval_seconds=every, anchor=T0)
    after = T0 + timedelta(seconds=offset)
    views = timing.upcoming_slots(spec, after, 5, b)
    assert sum(v.fires for v in views) <= 5  # fewer when the windows cover the grid
    assert [v.at for v in views] == sorted({v.at for v in views})
    for v in views:
        assert (b.window_at(v.at) is None) == v.fires
