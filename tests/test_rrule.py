"""Calendar-rule schedules (kind ``rrule``), the pure time math: DST instants derived by
hand from RFC 5545 §3.3.5 (a gap: the offset before it; an overlap: the first occurrence),
the two rules of the issue, DTSTART defaults, validation messages, bounds, words.
Expected values are written out, never computed by the code under test."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from django_durable_schedules import timing
from django_durable_schedules.models import Schedule

S = timedelta(seconds=1)


def z(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def spec(rule: str, zone: str = "UTC", **kw) -> timing.Spec:
    kw.setdefault("start_at", z(2027, 1, 1) if zone == "UTC" else None)
    if kw["start_at"] is None:
        kw["anchor"] = z(2027, 1, 1, 12)
    return timing.Spec(kind="rrule", rrule=rule, timezone=zone, **kw)


def rule(text: str, zone: str, **kw) -> Schedule:
    return Schedule(name="r", callback="tests.noop", kind="rrule", rrule=text, timezone=zone, **kw)


# --------------------------------------------------------------------------------------
# DST: RFC 5545 §3.3.5, by hand
# --------------------------------------------------------------------------------------


def test_paris_0230_in_the_spring_forward_gap_is_read_with_the_offset_before_it():
    # 2027-03-28: 02:00 CET (+01) jumps to 03:00 CEST (+02) at 01:00Z. 02:30 does not
    # exist; read with +01 it is 01:30Z, i.e. 03:30 CEST. The days around it: 02:30 CET =
    # 01:30Z, 02:30 CEST = 00:30Z.
    runs = rule("FREQ=DAILY;BYHOUR=2;BYMINUTE=30", "Europe/Paris").upcoming(
        3, after=z(2027, 3, 27, 0)
    )
    assert runs == [z(2027, 3, 27, 1, 30), z(2027, 3, 28, 1, 30), z(2027, 3, 29, 0, 30)]


def test_new_york_0230_in_the_spring_forward_gap_is_0330_edt():
    # 2027-03-14: 02:00 EST (-05) jumps to 03:00 EDT (-04) at 07:00Z. 02:30 read with -05
    # is 07:30Z = 03:30 EDT (cron's fixed-time rule gives 03:00 EDT = 07:00Z instead).
    runs = rule("FREQ=DAILY;BYHOUR=2;BYMINUTE=30", "America/New_York").upcoming(
        3, after=z(2027, 3, 13, 0)
    )
    assert runs == [z(2027, 3, 13, 7, 30), z(2027, 3, 14, 7, 30), z(2027, 3, 15, 6, 30)]


def test_new_york_0130_in_the_fall_back_overlap_runs_once_at_the_first_occurrence():
    # 2027-11-07: 01:00-01:59 happens twice, EDT (05:00-05:59Z) then EST (06:00-06:59Z):
    # 01:30 is its first occurrence, 05:30Z, once. Then 01:30 EST = 06:30Z.
    runs = rule("FREQ=DAILY;BYHOUR=1;BYMINUTE=30", "America/New_York").upcoming(
        3, after=z(2027, 11, 6, 0)
    )
    assert runs == [z(2027, 11, 6, 5, 30), z(2027, 11, 7, 5, 30), z(2027, 11, 8, 6, 30)]


def test_paris_fall_back_0130_is_not_ambiguous_and_0230_runs_at_its_first_occurrence():
    # 2027-10-31: 03:00 CEST (+02) falls back to 02:00 CET (+01) at 01:00Z, so 02:00-02:59
    # happens twice (00:00-00:59Z, then 01:00-01:59Z); 01:30 happens once (+02: 23:30Z).
    daily_0130 = rule("FREQ=DAILY;BYHOUR=1;BYMINUTE=30", "Europe/Paris")
    assert daily_0130.upcoming(3, after=z(2027, 10, 29, 12)) == [
        z(2027, 10, 29, 23, 30),
        z(2027, 10, 30, 23, 30),
        z(2027, 11, 1, 0, 30),
    ]
    daily_0230 = rule("FREQ=DAILY;BYHOUR=2;BYMINUTE=30", "Europe/Paris")
    assert daily_0230.upcoming(3, after=z(2027, 10, 30, 0)) == [
        z(2027, 10, 30, 0, 30),
        z(2027, 10, 31, 0, 30),  # 02:30 CEST, the first of the two
        z(2027, 11, 1, 1, 30),
    ]


def test_a_search_from_inside_the_second_pass_of_the_overlap_goes_to_the_next_day():
    s = spec("FREQ=DAILY;BYHOUR=1;BYMINUTE=50", "America/New_York")
    # 06:40Z on 2027-11-07 is 01:40 EST (second pass); 01:50 EDT (05:50Z) is behind us
    assert timing.next_slot_after(s, z(2027, 11, 7, 6, 40)) == z(2027, 11, 8, 6, 50)


def test_hourly_across_the_gap_counts_each_instant_once():
    s = spec("FREQ=HOURLY;BYMINUTE=0", "America/New_York")
    # local 00:00, 01:00, 02:00 (gap: read -05 = 07:00Z = 03:00 EDT), 03:00 EDT = 07:00Z
    # again: one slot; then 04:00 EDT
    assert timing.upcoming(s, z(2027, 3, 14, 4, 59), 4) == [
        z(2027, 3, 14, 5),
        z(2027, 3, 14, 6),
        z(2027, 3, 14, 7),
        z(2027, 3, 14, 8),
    ]
    assert timing.count_slots(s, z(2027, 3, 14, 5), z(2027, 3, 14, 9)) == 4


def test_a_gap_slot_that_lands_after_a_later_local_time_is_still_found_in_order():
    s = spec("FREQ=MINUTELY;INTERVAL=30", "America/New_York")
    # 02:00 and 02:30 are in the gap: 07:00Z and 07:30Z, the same as 03:00 and 03:30 EDT
    assert timing.upcoming(s, z(2027, 3, 14, 6, 15), 4) == [
        z(2027, 3, 14, 6, 30),
        z(2027, 3, 14, 7),
        z(2027, 3, 14, 7, 30),
        z(2027, 3, 14, 8),
    ]
    assert timing.next_slot_after(s, z(2027, 3, 14, 7, 10)) == z(2027, 3, 14, 7, 30)


# --------------------------------------------------------------------------------------
# The rules of the issue
# --------------------------------------------------------------------------------------


def test_last_business_day_of_the_month():
    s = spec("FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1;BYHOUR=18;BYMINUTE=0", "Europe/Paris")
    # Jan 2027 ends on a Sunday: Friday 29th; Feb: Friday 26th; Mar: Wednesday 31st (CEST);
    # Apr: Friday 30th; Oct 2027 ends on a Sunday: Friday 29th (CEST, +02)
    assert timing.upcoming(s, z(2027, 1, 2), 4) == [
        z(2027, 1, 29, 17),
        z(2027, 2, 26, 17),
        z(2027, 3, 31, 16),
        z(2027, 4, 30, 16),
    ]
    assert timing.next_slot_after(s, z(2027, 10, 1)) == z(2027, 10, 29, 16)


def test_every_second_tuesday_at_0900():
    s = spec(
        "FREQ=WEEKLY;INTERVAL=2;BYDAY=TU;BYHOUR=9;BYMINUTE=0",
        "Europe/Paris",
        start_at=z(2027, 1, 4, 8),
    )  # Monday 2027-01-04 09:00 CET: weeks of Jan 4, 18, ...
    assert timing.upcoming(s, z(2027, 1, 1), 4) == [
        z(2027, 1, 5, 8),
        z(2027, 1, 19, 8),
        z(2027, 2, 2, 8),
        z(2027, 2, 16, 8),
    ]
    # far ahead, still on the same two-week grid: 2027-06-01 is 21 weeks after Jan 5 (odd),
    # so the next run is 2027-06-08 09:00 CEST = 07:00Z
    assert timing.next_slot_after(s, z(2027, 6, 1)) == z(2027, 6, 8, 7)


# --------------------------------------------------------------------------------------
# DTSTART
# --------------------------------------------------------------------------------------


def test_without_start_at_dtstart_is_midnight_of_the_creation_day_in_the_zone():
    # created 2027-05-12 15:37:42Z (17:37 in Paris); no BYHOUR: midnight; weekly: Wednesdays
    row = rule("FREQ=WEEKLY", "Europe/Paris", created_at=z(2027, 5, 12, 15, 37, 42))
    assert row.upcoming(2, after=z(2027, 5, 12, 16)) == [z(2027, 5, 18, 22), z(2027, 5, 25, 22)]
    daily = rule("FREQ=DAILY;BYHOUR=9", "Europe/Paris", created_at=z(2027, 5, 12, 15, 37, 42))
    assert daily.upcoming(1, after=z(2027, 5, 12, 16)) == [z(2027, 5, 13, 7)]  # 09:00:00


def test_with_start_at_the_rule_takes_its_time_of_day_and_never_runs_before_it():
    row = rule("FREQ=DAILY", "Europe/Paris", start_at=z(2027, 5, 12, 6, 15, 30))
    assert row.upcoming(2, after=z(2027, 5, 1)) == [
        z(2027, 5, 12, 6, 15, 30),
        z(2027, 5, 13, 6, 15, 30),
    ]


def test_dtstart_itself_is_not_a_run_unless_the_rule_matches_it():
    row = rule("FREQ=WEEKLY;BYDAY=FR;BYHOUR=9;BYMINUTE=0", "UTC", start_at=z(2027, 5, 12, 10))
    assert row.upcoming(1, after=z(2027, 5, 1)) == [z(2027, 5, 14, 9)]


def test_until_is_inclusive_and_ends_the_schedule():
    s = spec("FREQ=DAILY;BYHOUR=9;UNTIL=20270103T090000Z")
    assert timing.upcoming(s, z(2027, 1, 1), 5) == [
        z(2027, 1, 1, 9),
        z(2027, 1, 2, 9),
        z(2027, 1, 3, 9),
    ]
    assert timing.next_slot_after(s, z(2027, 1, 3, 9)) is None


def test_latest_slot_and_count_for_catch_up():
    s = spec("FREQ=HOURLY;BYMINUTE=15")
    assert timing.latest_slot_at_or_before(s, z(2027, 2, 1, 10, 14), not_before=z(2027, 1, 1)) == z(
        2027, 2, 1, 9, 15
    )
    assert timing.count_slots(s, z(2027, 2, 1), z(2027, 2, 2)) == 24
    assert timing.count_slots(s, z(2027, 2, 1), z(2027, 3, 1), cap=100) == 100


# --------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("FREQ=DAILY;BYFOO=1", "unknown rule part 'BYFOO'"),
        ("BYHOUR=9", "FREQ is required"),
        ("FREQ=FORTNIGHTLY", "FREQ: 'FORTNIGHTLY' is not one of YEARLY"),
        ("FREQ=DAILY;BYHOUR=24", "BYHOUR: '24' is out of range 0 to 23"),
        ("FREQ=YEARLY;BYMONTH=13", "BYMONTH: '13' is out of range 1 to 12"),
        ("FREQ=MONTHLY;BYMONTHDAY=0", "BYMONTHDAY: '0' is out of range -31 to 31, not 0"),
        ("FREQ=DAILY;BYHOUR=nine", "BYHOUR: 'nine' is not a whole number"),
        ("FREQ=DAILY;;BYHOUR=9", "is not a NAME=VALUE rule part"),
        ("FREQ=DAILY;COUNT=10", "COUNT is not accepted: set the schedule's max_runs"),
        ("DTSTART:20270101T090000\nRRULE:FREQ=DAILY", "DTSTART and TZID are not accepted"),
        ("FREQ=DAILY;UNTIL=20271231", "UNTIL: '20271231' must be a UTC date-time"),
        ("FREQ=DAILY;UNTIL=20271231T235959", "must be a UTC date-time"),
        ("FREQ=WEEKLY;BYDAY=1MO", "BYDAY with an ordinal (1MO, -1FR) needs FREQ=MONTHLY"),
        ("FREQ=MONTHLY;BYDAY=XX", "BYDAY: 'XX' is not a weekday"),
        ("FREQ=DAILY;BYSETPOS=1", "BYSETPOS needs another BYxxx part"),
        ("FREQ=DAILY;INTERVAL=0", "INTERVAL: '0' must be a whole number from 1 to 3660"),
        ("FREQ=DAILY;BYHOUR=9;BYHOUR=10", "BYHOUR is given twice"),
        ("FREQ=YEARLY;BYEASTER=0", "unknown rule part 'BYEASTER'"),
        (
            "FREQ=MONTHLY;BYMONTHDAY=31;BYMONTH=2",
            "can never fire: no date matches BYMONTH=2;BYMONTHDAY=31",
        ),
        ("FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30", "can never fire: no date matches"),
        ("FREQ=DAILY;INTERVAL=7;BYDAY=MO", "can never fire: no occurrence in the 400 years"),
        ("FREQ=DAILY;UNTIL=20261231T000000Z", "can never fire: no occurrence between its start"),
        ("FREQ=DAILY;UNTIL=99991231T235959Z", "UNTIL: 9999-12-31 is outside the years 1000"),
        ("FREQ=DAILY;UNTIL=00010101T000000Z", "UNTIL: 0001-01-01 is outside the years 1000"),
        (
            "FREQ=DAILY;BYHOUR="
            + ",".join(map(str, range(24)))
            + ";BYMINUTE="
            + ",".join(map(str, range(60)))
            + ";BYSECOND=0,30",
            "give 2880 times of day; at most 1440",
        ),
    ],
)
def test_refused_rules_name_the_part(text, message):
    # DTSTART 2027-01-01 (a Friday) for the never-fires cases
    with pytest.raises(timing.InvalidSchedule) as exc:
        timing.Spec(kind="rrule", rrule=text, start_at=z(2027, 1, 1)).validate()
    assert exc.value.field == "rrule"
    assert message in exc.value.message


@pytest.mark.parametrize("zone", ["Europe/Paris", "America/New_York", "UTC", "Pacific/Kiritimati"])
@pytest.mark.parametrize("until", ["99991231T235959Z", "00010101T000000Z", "90001231T235959Z"])
def test_an_until_at_the_edge_of_the_calendar_is_a_field_error_in_every_zone(zone, until):
    """UNTIL read in a zone east or west of UTC must never overflow a datetime (it did
    at 9999-12-31 in Paris and 0001-01-01 in New York: an OverflowError, a 500)."""
    s = timing.Spec(
        kind="rrule", rrule=f"FREQ=DAILY;UNTIL={until}", timezone=zone, start_at=z(2027, 1, 1)
    )
    try:
        s.validate()
    except timing.InvalidSchedule as exc:
        assert exc.field == "rrule", exc
    else:
        assert timing.upcoming(s, z(8999, 1, 1), 2)


def test_until_and_end_at_together_are_refused_and_fields_of_other_kinds_too():
    with pytest.raises(timing.InvalidSchedule, match="UNTIL in the rule or end_at, not both"):
        spec("FREQ=DAILY;UNTIL=20280101T000000Z", end_at=z(2028, 1, 1)).validate()
    with pytest.raises(timing.InvalidSchedule) as exc:
        timing.Spec(
            kind="rrule", rrule="FREQ=DAILY", cron="0 0 * * *", start_at=z(2027, 1, 1)
        ).validate()
    assert exc.value.field == "cron"
    with pytest.raises(timing.InvalidSchedule) as exc:
        timing.Spec(kind="rrule", start_at=z(2027, 1, 1)).validate()
    assert exc.value.field == "rrule"


def test_validate_rrule_returns_the_normalized_rule_case_and_prefix_accepted():
    assert (
        timing.validate_rrule("rrule:freq=weekly;byday=tu;interval=2")
        == "FREQ=WEEKLY;INTERVAL=2;BYDAY=TU"
    )


def test_never_fires_and_sparse_rules_are_decided_within_a_bound():
    started = time.perf_counter()
    for text in ("FREQ=MINUTELY;BYMONTH=2;BYMONTHDAY=30", "FREQ=SECONDLY;BYMONTH=4;BYMONTHDAY=31"):
        with pytest.raises(timing.InvalidSchedule, match="can never fire"):
            spec(text, start_at=z(2031, 5, 5)).validate()
    # a rule that fires every 28 years or so (a Monday 29 February): found, not refused
    sparse = spec("FREQ=DAILY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO", start_at=z(2031, 5, 5))
    assert timing.next_slot_after(sparse, z(2031, 5, 5)) == z(2044, 2, 29)
    assert time.perf_counter() - started < 5


def test_a_search_gives_up_after_the_horizon_and_never_overflows():
    s = spec("FREQ=YEARLY;INTERVAL=10;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO", start_at=z(2044, 2, 29))
    # every 10 years from 2044, only Monday 29 Februaries: 2044 itself, then none in 400 years
    # (2044 + 10k is a leap year only for even k... whatever it is, nothing raises)
    timing.next_slot_after(s, z(2044, 3, 1))
    late = spec("FREQ=DAILY", start_at=z(8999, 12, 30))
    assert timing.upcoming(late, z(9000, 12, 30), 5) == [z(9000, 12, 31)]


# --------------------------------------------------------------------------------------
# Words
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (
            "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1",
            "on the last weekday (Monday to Friday) of every month at 00:00",
        ),
        (
            "FREQ=WEEKLY;INTERVAL=2;BYDAY=TU;BYHOUR=9;BYMINUTE=0",
            "every 2 weeks on Tuesday at 09:00",
        ),
        ("FREQ=DAILY;BYHOUR=2;BYMINUTE=30", "every day at 02:30"),
        ("FREQ=YEARLY", "every year on March 1 at 00:00"),
        ("FREQ=MINUTELY;INTERVAL=15", "every 15 minutes"),
        ("FREQ=MONTHLY;BYDAY=-1FR;BYHOUR=17", "on the last Friday of every month at 17:00"),
        ("FREQ=YEARLY;BYWEEKNO=1", ""),
        ("FREQ=DAILY;BYHOUR=25", ""),
    ],
)
def test_rules_in_words(text, words):
    assert timing.rrule_in_words(text, datetime(2027, 3, 1)) == words


def test_describe_names_the_rule_and_zone():
    assert (
        timing.describe(spec("FREQ=DAILY", "Europe/Paris")) == "rrule 'FREQ=DAILY' (Europe/Paris)"
    )


def test_words_of_a_row_the_engine_cannot_evaluate_are_empty_never_an_error():
    for zone, text in (
        ("Mars/Olympus", "FREQ=DAILY"),
        ("UTC", "FREQ=DAILY;BYHOUR=99"),
        ("UTC", "\x00"),
    ):
        assert timing.rrule_description(spec(text, zone, start_at=z(2027, 1, 1))) == ""
    assert timing.rrule_description(spec("FREQ=YEARLY;BYWEEKNO=1")) == "FREQ=YEARLY;BYWEEKNO=1"
