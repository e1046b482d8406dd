"""Pure time math (``django_durable_schedules.timing``): no Django, no database.

The scenarios tagged [dst], [tz] and [cron-syntax] in ``shared/field-reports.md`` (and the
pure parts of B17, B19, B20, B24, B27, B30, B31) are here with the right values from the
reports as assertions. ``tests/test_cron_corpus.py`` cross-checks cron evaluation against an
independent brute force.
"""

from __future__ import annotations

import hashlib
import itertools
import pickle
import time as clock
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from django_durable_schedules import timing
from django_durable_schedules.timing import InvalidSchedule, Spec


def Z(text: str) -> datetime:
    """An aware UTC instant from ``YYYY-MM-DDTHH:MM[:SS[.ffffff]]``."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def cron(expr: str, zone: str = "UTC", **kwargs) -> Spec:
    return Spec(kind="cron", cron=expr, timezone=zone, **kwargs)


def every(seconds: int, anchor: datetime, **kwargs) -> Spec:
    return Spec(kind="interval", interval_seconds=seconds, anchor=anchor, **kwargs)


def once(run_at: datetime, **kwargs) -> Spec:
    return Spec(kind="once", run_at=run_at, **kwargs)


def slots_between(spec: Spec, start: datetime, end: datetime) -> list[datetime]:
    """Every slot s with start <= s < end, one next_slot_after at a time."""
    found = []
    slot = timing.next_slot_after(spec, start, inclusive=True)
    while slot is not None and slot < end:
        found.append(slot)
        slot = timing.next_slot_after(spec, slot)
    return found


def wall(instant: datetime, zone: str) -> str:
    return instant.astimezone(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M")


# ---------------------------------------------------------------------------------------
# InvalidSchedule, instants
# ---------------------------------------------------------------------------------------


def test_invalid_schedule_carries_field_and_message():
    error = InvalidSchedule("cron", "minute: '60' is out of range 0-59")
    assert isinstance(error, ValueError)
    assert (error.field, error.message) == ("cron", "minute: '60' is out of range 0-59")
    assert str(error) == "minute: '60' is out of range 0-59"
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.field, copy.message) == ("cron", error.message)


@pytest.mark.parametrize(
    "value", [datetime(2027, 6, 1, 9, 0), date(2027, 6, 1), "2027-06-01T09:00:00Z", None]
)
def test_require_aware_refuses_naive_and_non_datetimes(value):
    """B10 C: a naive run_at is neither UTC nor local time."""
    with pytest.raises(InvalidSchedule) as caught:
        timing.require_aware(value, "run_at")
    assert caught.value.field == "run_at"
    assert caught.value.message.startswith("aware datetime required")


def test_require_aware_converts_to_utc_and_keeps_microseconds():
    value = datetime(2027, 6, 1, 11, 0, 0, 250000, tzinfo=ZoneInfo("Europe/Berlin"))
    result = timing.require_aware(value, "start_at")
    assert result == Z("2027-06-01T09:00:00.250000")
    assert result.tzinfo is UTC


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (Z("2027-06-01T09:00:00.999999"), Z("2027-06-01T09:00:00")),  # B31 (a): never 09:00:01
        (Z("2027-06-01T10:00:00.123456"), Z("2027-06-01T10:00:00")),
        (
            datetime(2027, 6, 1, 14, 30, 59, 999999, tzinfo=ZoneInfo("Asia/Kolkata")),
            Z("2027-06-01T09:00:59"),
        ),
        (Z("2027-06-01T09:00:00"), Z("2027-06-01T09:00:00")),
    ],
)
def test_truncate_to_second_truncates_never_rounds(value, expected):
    result = timing.truncate_to_second(value)
    assert result == expected and result.microsecond == 0 and result.tzinfo is UTC


def test_truncate_to_second_refuses_naive():
    with pytest.raises(InvalidSchedule, match="aware datetime required"):
        timing.truncate_to_second(datetime(2027, 6, 1, 9, 0, 0, 999999))


def test_out_of_range_instant_is_invalid_not_overflow():
    earliest = datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5)))
    with pytest.raises(InvalidSchedule, match="out of range"):
        timing.require_aware(earliest, "start_at")


# ---------------------------------------------------------------------------------------
# Time zones and intervals
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "America/New_York",
        "Europe/Berlin",
        "Australia/Sydney",
        "Australia/Lord_Howe",
        "America/Havana",
        "America/Santiago",
        "Asia/Jakarta",
        "America/Bogota",
        "UTC",
        "Etc/UTC",
    ],
)
def test_validate_timezone_accepts_iana_names(name):
    assert timing.validate_timezone(name) == name


def test_validate_timezone_names_the_typo():
    """B11 D."""
    with pytest.raises(InvalidSchedule) as caught:
        timing.validate_timezone("America/New_Yrok")
    assert caught.value.field == "timezone"
    assert caught.value.message == "unknown IANA time zone 'America/New_Yrok'"


@pytest.mark.parametrize(
    "name",
    [
        "",
        " UTC",
        "utc",
        "localtime",
        "posixrules",
        "/etc/localtime",
        "../etc/passwd",
        "/usr/share/zoneinfo/UTC",
        "Europe/",
        "Europe/Berlin ",
        "EST+5",
        None,
        5,
    ],
)
def test_validate_timezone_refuses_non_iana_names(name):
    with pytest.raises(InvalidSchedule) as caught:
        timing.validate_timezone(name)
    assert caught.value.field == "timezone"
    assert caught.value.message.startswith("unknown IANA time zone")


@pytest.mark.parametrize("seconds", [1, 60, 3650 * 86400, timing.MAX_INTERVAL_SECONDS])
def test_validate_interval_accepts(seconds):
    """B30: every=3650d is a valid (if long) interval."""
    assert timing.validate_interval(seconds) == seconds


@pytest.mark.parametrize(
    ("seconds", "words"),
    [
        (0, "at least 1 second"),  # B30 every=0s
        (-5, "at least 1 second"),  # B30 every=-5s
        (10**10 * 86400, "at most"),  # B30 every=10**10 days
        (timing.MAX_INTERVAL_SECONDS + 1, "at most"),
        (True, "whole number"),
        (1.5, "whole number"),
        ("60", "whole number"),
        (None, "whole number"),
    ],
)
def test_validate_interval_refuses(seconds, words):
    with pytest.raises(InvalidSchedule) as caught:
        timing.validate_interval(seconds)
    assert caught.value.field == "interval_seconds"
    assert words in caught.value.message


# ---------------------------------------------------------------------------------------
# Cron syntax
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "normalized"),
    [
        ("0  3 * *  *", "0 3 * * *"),
        ("\t*/15 * * * *\n", "*/15 * * * *"),
        ("@daily", "@daily"),
        ("@HOURLY", "@hourly"),
        ("  @weekly ", "@weekly"),
        ("@midnight", "@midnight"),
        ("@monthly", "@monthly"),
        ("@yearly", "@yearly"),
        ("@annually", "@annually"),
        ("0 0 * * mon-fri", "0 0 * * mon-fri"),
        ("0 0 1 JAN,jul *", "0 0 1 JAN,jul *"),
        ("0 0 * * 7", "0 0 * * 7"),
        ("0 0 * * 0-7", "0 0 * * 0-7"),
        ("0/5 * * * *", "0/5 * * * *"),  # from the corpus: 0,5,...,55
        ("0 1/3 * * *", "0 1/3 * * *"),  # from the corpus: 1,4,...,22
        ("*/60 * * * *", "*/60 * * * *"),  # the step equals the range: only :00
        ("20 */24 * * *", "20 */24 * * *"),  # from the corpus
        ("55 7-23/24 * * *", "55 7-23/24 * * *"),
        ("0 0 */31 * *", "0 0 */31 * *"),
        ("0 0 * */12 *", "0 0 * */12 *"),
        ("0 0 * * */7", "0 0 * * */7"),
        ("0 9 * * 5#5", "0 9 * * 5#5"),  # B16 (a)
        ("0 9 * * FRI#1", "0 9 * * FRI#1"),
        ("0 9 * * 5L", "0 9 * * 5L"),  # B16 (b)
        ("0 9 L * *", "0 9 L * *"),  # B16 (c)
        ("0 9 LW * *", "0 9 LW * *"),  # B16 (d)
        ("0 9 1,L * *", "0 9 1,L * *"),
        ("0 0 31 * *", "0 0 31 * *"),  # B14 controls
        ("0 0 29 2 *", "0 0 29 2 *"),
        ("0 0 31 2,3 *", "0 0 31 2,3 *"),
        ("0 0 30 2 1", "0 0 30 2 1"),
        ("0 0 * 2 1#5", "0 0 * 2 1#5"),  # fifth Monday of February: leap years only
    ],
)
def test_validate_cron_accepts_and_normalizes(expr, normalized):
    assert timing.validate_cron(expr) == normalized
    assert timing.validate_cron(expr, "Australia/Lord_Howe") == normalized


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("0 0 32 * *", "day-of-month: '32' is out of range 1-31"),
        ("60 * * * *", "minute: '60' is out of range 0-59"),
        ("0 24 * * *", "hour: '24' is out of range 0-23"),
        ("0 0 0 * *", "day-of-month: '0' is out of range 1-31"),
        ("0 0 * 13 *", "month: '13' is out of range 1-12"),
        ("0 0 * * 8", "day-of-week: '8' is out of range 0-7"),
        ("0 0 * foo *", "month: 'foo' is not a number or a name such as JAN"),
        ("H 0 * * *", "minute: 'H' is not a number"),
        ("*/0 * * * *", "minute: step 0 in '*/0' is not allowed"),  # B15 (c)
        (
            "*/90 * * * *",  # B15 (d)
            "minute: step 90 in '*/90' is larger than the field range 0-59",
        ),
        ("0 */25 * * *", "hour: step 25 in '*/25' is larger than the field range 0-23"),
        ("0 0 */32 * *", "day-of-month: step 32"),
        ("0 0 * */13 *", "month: step 13"),
        ("0 0 * * */8", "day-of-week: step 8 in '*/8' is larger than the field range 0-6"),
        ("*/x * * * *", "minute: step 'x' in '*/x' is not a number"),
        ("0 9 15W * *", "day-of-month: '15W' (nearest weekday) is not supported"),  # B16 (e)
        ("0 9 W * *", "day-of-month: 'W' (nearest weekday) is not supported"),
        ("0 9 L-3 * *", "day-of-month: 'L-3' is not supported"),
        ("0 9 L/2 * *", "day-of-month: 'L/2' is not supported"),  # cronsim reads it as L
        ("0 9 5L * *", "day-of-month: '5L' is not supported"),
        ("0 9 * * L", "day-of-week: 'L' is not supported"),
        ("0 9 * * FRIL", "day-of-week: 'FRIL' is not supported"),
        ("0 9 * * 5#6", "day-of-week: '5#6': the occurrence after '#' must be 1-5"),
        ("0 9 * * 5#0", "day-of-week: '5#0'"),
        ("0 9 * * 9#1", "day-of-week: '9' is out of range 0-7"),
        ("0 9 ? * 1", "day-of-month: '?': '?' is not supported; use '*'"),
        ("5-1 * * * *", "minute: range '5-1' runs backwards"),
        ("0 22-2 * * *", "hour: range '22-2' runs backwards"),
        ("1,,2 * * * *", "minute: empty list item"),
        ("0 0 1 * * *", "a cron expression has 5 fields"),  # 6 fields (seconds) refused
        ("0 0 * *", "a cron expression has 5 fields"),
        ("", "cron expression is empty"),
        ("   ", "cron expression is empty"),
        ("@reboot", "'@reboot' is not supported"),
        ("@every 5m", "unknown cron macro"),
        ("@daily 0", "unknown cron macro"),
        # B14: expressions that can never fire
        ("0 0 31 2 *", "can never fire: day-of-month '31' never occurs in month '2'"),
        ("0 0 30 2 *", "can never fire: day-of-month '30' never occurs in month '2'"),
        ("0 0 31 4 *", "can never fire: day-of-month '31' never occurs in month '4'"),
        ("0 0 31 2,4 *", "can never fire: day-of-month '31' never occurs in month '2,4'"),
        (
            "0 0 */20 * 1#5",  # days 1 and 21 are never a 5th Monday
            "can never fire: no date matches day-of-month '*/20' and day-of-week '1#5'",
        ),
        ("0 0 LW * */6", "can never fire"),  # the last weekday is never Sat/Sun
        ("0 0 30 2 */7", "can never fire"),  # AND rule: February 30 on a Sunday
    ],
)
def test_validate_cron_refuses_with_field_and_token(expr, message):
    with pytest.raises(InvalidSchedule) as caught:
        timing.validate_cron(expr)
    assert caught.value.field == "cron"
    assert caught.value.message.startswith(message), caught.value.message


def test_validate_cron_message_for_out_of_range_is_exact():
    with pytest.raises(InvalidSchedule) as caught:
        timing.validate_cron("0 0 32 * *")
    assert str(caught.value) == "day-of-month: '32' is out of range 1-31"


def test_validate_cron_checks_the_zone():
    with pytest.raises(InvalidSchedule) as caught:
        timing.validate_cron("0 3 * * *", "America/New_Yrok")
    assert caught.value.field == "timezone"


@pytest.mark.parametrize(
    ("expr", "wildcard"),
    [
        ("*/15 * * * *", True),
        ("30 * * * *", True),
        ("*/15 1 * * *", True),
        ("0 */2 * * *", True),
        ("* 0 * * *", True),
        ("*/5 9-17 * * 1-5", True),
        ("@hourly", True),
        ("0 3 * * *", False),
        ("0-59 1 * * *", False),
        ("0,30 2 * * *", False),
        ("5 0 L * *", False),
        ("@daily", False),
        ("@midnight", False),
        ("@weekly", False),
        ("@monthly", False),
        ("@yearly", False),
        ("@annually", False),
    ],
)
def test_is_wildcard_cron(expr, wildcard):
    """R3: the minute or the hour field starts with '*'."""
    assert timing.is_wildcard_cron(expr) is wildcard


# ---------------------------------------------------------------------------------------
# Spec.validate
# ---------------------------------------------------------------------------------------

A = Z("2027-06-01T09:00")


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (Spec(kind="daily"), "kind"),
        (Spec(kind="interval", anchor=A), "interval_seconds"),
        (Spec(kind="interval", interval_seconds=0, anchor=A), "interval_seconds"),
        (Spec(kind="interval", interval_seconds=True, anchor=A), "interval_seconds"),
        (Spec(kind="interval", interval_seconds=60), "anchor"),
        (Spec(kind="interval", interval_seconds=60, anchor=A, cron="* * * * *"), "cron"),
        (Spec(kind="interval", interval_seconds=60, anchor=A, run_at=A), "run_at"),
        (Spec(kind="interval", interval_seconds=60, anchor=datetime(2027, 6, 1)), "anchor"),
        (Spec(kind="cron"), "cron"),
        (Spec(kind="cron", cron=""), "cron"),
        (Spec(kind="cron", cron="0 0 30 2 *"), "cron"),
        (Spec(kind="cron", cron="0 3 * * *", timezone="America/New_Yrok"), "timezone"),
        (Spec(kind="cron", cron="0 3 * * *", timezone=""), "timezone"),
        (Spec(kind="cron", cron="0 3 * * *", interval_seconds=60), "interval_seconds"),
        (Spec(kind="cron", cron="0 3 * * *", run_at=A), "run_at"),
        (Spec(kind="cron", cron="0 3 * * *", start_at=datetime(2027, 6, 1)), "start_at"),
        (Spec(kind="cron", cron="0 3 * * *", end_at=datetime(2027, 6, 1)), "end_at"),
        (
            Spec(kind="cron", cron="0 3 * * *", start_at=A, end_at=A - timedelta(seconds=1)),
            "end_at",
        ),
        (Spec(kind="once"), "run_at"),
        (Spec(kind="once", run_at=datetime(2027, 6, 1, 9, 0)), "run_at"),  # B10 C
        (Spec(kind="once", run_at=A, cron="0 3 * * *"), "cron"),
        (Spec(kind="once", run_at=A, interval_seconds=60), "interval_seconds"),
        (Spec(kind="once", run_at=A, start_at=A + timedelta(hours=1)), "run_at"),
        (Spec(kind="once", run_at=A, end_at=A - timedelta(hours=1)), "run_at"),
    ],
)
def test_spec_validate_names_the_field(spec, field):
    with pytest.raises(InvalidSchedule) as caught:
        spec.validate()
    assert caught.value.field == field


def test_spec_validate_naive_run_at_says_aware_required():
    """B10 C: ValidationError ('aware datetime required'), never read as UTC or local."""
    with pytest.raises(InvalidSchedule, match="^aware datetime required"):
        once(datetime(2027, 6, 1, 9, 0)).validate()


@pytest.mark.parametrize(
    "spec",
    [
        every(60, A),
        Spec(kind="interval", interval_seconds=60, start_at=A),
        every(60, A, start_at=A + timedelta(hours=1), end_at=A + timedelta(hours=2)),
        cron("0 3 * * *", "Europe/Paris"),
        cron("@daily", start_at=A, end_at=A),
        once(A),
        once(A, start_at=A, end_at=A),
        Spec(kind="cron", cron="0 3 * * *", interval_seconds=None, run_at=None),
    ],
)
def test_spec_validate_accepts(spec):
    spec.validate()


def test_public_functions_refuse_an_invalid_spec():
    with pytest.raises(InvalidSchedule):
        timing.next_slot_after(cron("0 0 30 2 *"), A)
    with pytest.raises(InvalidSchedule):
        timing.upcoming(every(0, A), A, 3)
    with pytest.raises(InvalidSchedule):
        timing.count_slots(Spec(kind="once"), A, A)
    with pytest.raises(InvalidSchedule):
        timing.latest_slot_at_or_before(cron("* * * * *", "Mars/Olympus"), A, not_before=A)
    with pytest.raises(InvalidSchedule) as caught:
        timing.next_slot_after(cron("* * * * *"), datetime(2027, 6, 1))
    assert caught.value.field == "after"


# ---------------------------------------------------------------------------------------
# [dst] [tz] field reports
# ---------------------------------------------------------------------------------------


def test_b05_a_spring_forward_fixed_time_keeps_local_time():
    spec = cron("4 16 * * *", "America/New_York")
    start = datetime.fromisoformat("2027-03-13T12:00-05:00")
    end = datetime.fromisoformat("2027-03-15T18:00-04:00")
    runs = slots_between(spec, start, end)
    assert runs == [Z("2027-03-13T21:04"), Z("2027-03-14T20:04"), Z("2027-03-15T20:04")]
    assert {wall(r, "America/New_York")[-5:] for r in runs} == {"16:04"}


def test_b05_b_fall_back_weekly_noon_runs_once():
    spec = cron("0 12 * * 1", "Europe/Berlin")
    start = datetime.fromisoformat("2027-10-25T12:30+02:00")
    end = datetime.fromisoformat("2027-11-02T00:00+01:00")
    assert slots_between(spec, start, end) == [Z("2027-11-01T11:00")]


def test_b07_every_15_minutes_fires_in_both_passes_of_the_repeated_hour():
    spec = cron("*/15 * * * *", "America/New_York")
    runs = slots_between(spec, Z("2027-11-07T04:00"), Z("2027-11-07T08:00"))
    assert len(runs) == 16
    assert runs == [Z("2027-11-07T04:00") + timedelta(minutes=15 * i) for i in range(16)]
    assert max(b - a for a, b in itertools.pairwise(runs)) == timedelta(minutes=15)
    readings = [wall(r, "America/New_York")[-5:] for r in runs]
    assert readings.count("01:00") == 2 and readings.count("01:45") == 2


def test_b07_thirty_past_every_hour_across_fall_back():
    spec = cron("30 * * * *", "America/New_York")
    runs = slots_between(spec, Z("2027-11-07T04:00"), Z("2027-11-07T08:00"))
    assert runs == [
        Z("2027-11-07T04:30"),
        Z("2027-11-07T05:30"),
        Z("2027-11-07T06:30"),
        Z("2027-11-07T07:30"),
    ]
    assert [r for r in runs if r >= Z("2027-11-07T05:00")] == [
        Z("2027-11-07T05:30"),
        Z("2027-11-07T06:30"),
        Z("2027-11-07T07:30"),
    ]


def test_b07_every_15_minutes_of_hour_one_fires_eight_times():
    spec = cron("*/15 1 * * *", "America/New_York")
    runs = slots_between(spec, Z("2027-11-07T04:00"), Z("2027-11-07T08:00"))
    assert runs == [Z("2027-11-07T05:00") + timedelta(minutes=15 * i) for i in range(8)]


def test_b08_a_interval_through_the_repeated_hour():
    spec = every(600, Z("2027-11-07T05:00"), timezone="America/New_York")
    assert timing.next_slot_after(spec, Z("2027-11-07T05:50")) == Z("2027-11-07T06:00")
    runs = [
        s for s in timing.upcoming(spec, Z("2027-11-07T05:50:30"), 10) if s <= Z("2027-11-07T06:45")
    ]
    assert runs == [
        Z("2027-11-07T06:00"),
        Z("2027-11-07T06:10"),
        Z("2027-11-07T06:20"),
        Z("2027-11-07T06:30"),
        Z("2027-11-07T06:40"),
    ]
    assert {(b - a).total_seconds() for a, b in itertools.pairwise(runs)} == {600}
    assert timing.latest_slot_at_or_before(
        spec, Z("2027-11-07T06:45"), not_before=Z("2027-11-07T05:50:30")
    ) == Z("2027-11-07T06:40")


@pytest.mark.parametrize(
    ("anchor", "expected", "local_clock_answer"),
    [
        (Z("2027-03-14T06:00"), Z("2027-03-14T08:00"), Z("2027-03-14T07:00")),  # B08 B
        (Z("2027-11-07T04:30"), Z("2027-11-07T06:30"), Z("2027-11-07T07:30")),  # B08 C
    ],
)
def test_b08_b_c_two_hour_interval_is_two_real_hours(anchor, expected, local_clock_answer):
    spec = every(7200, anchor, timezone="America/New_York")
    result = timing.next_slot_after(spec, anchor)
    assert result == expected != local_clock_answer
    assert result - anchor == timedelta(hours=2)


def test_b09_daily_cron_keeps_six_oclock_berlin():
    spec = cron("0 6 * * *", "Europe/Berlin")
    runs = slots_between(spec, Z("2027-10-01T00:00"), Z("2027-11-01T12:00"))
    assert len(runs) == 32
    assert runs[-3:] == [Z("2027-10-30T04:00"), Z("2027-10-31T05:00"), Z("2027-11-01T05:00")]
    assert {wall(r, "Europe/Berlin")[-5:] for r in runs} == {"06:00"}


def test_b09_daily_interval_is_elapsed_time_and_drifts_in_local_time():
    spec = every(86400, Z("2027-10-30T04:00"), timezone="Europe/Berlin")
    runs = timing.upcoming(spec, Z("2027-10-30T04:00"), 2)
    assert runs == [Z("2027-10-31T04:00"), Z("2027-11-01T04:00")]
    assert [wall(r, "Europe/Berlin")[-5:] for r in runs] == ["05:00", "05:00"]


def test_b10_b_bogota_daily_runs_twice():
    spec = cron("0 14 * * *", "America/Bogota")
    start = datetime.fromisoformat("2027-06-01T13:59:00-05:00")
    end = datetime.fromisoformat("2027-06-02T15:00:00-05:00")
    assert slots_between(spec, start, end) == [Z("2027-06-01T19:00"), Z("2027-06-02T19:00")]


@pytest.mark.parametrize(
    ("zone", "day_start", "first"),
    [
        ("Asia/Jakarta", datetime.fromisoformat("2027-06-01T00:00+07:00"), Z("2027-06-01T01:25")),
        ("UTC", Z("2027-06-01T00:00"), Z("2027-06-01T08:25")),
    ],
)
def test_b11_cron_fields_are_read_in_the_schedule_zone(zone, day_start, first):
    runs = slots_between(cron("25 8-16 * * *", zone), day_start, day_start + timedelta(days=1))
    assert runs == [first + timedelta(hours=h) for h in range(9)]


# Each zone: a fixed-time job in the gap, one in the overlap, a wildcard job across both.
DST_CASES = [
    # America/New_York: 2027-03-14 02:00->03:00 (07:00Z); 2027-11-07 02:00->01:00 (06:00Z)
    (
        "America/New_York",
        "30 2 * * *",
        "2027-03-13T12:00",
        ["2027-03-14T07:00", "2027-03-15T06:30"],
    ),
    (
        "America/New_York",
        "30 1 * * *",
        "2027-11-06T12:00",
        ["2027-11-07T05:30", "2027-11-08T06:30"],
    ),
    (
        "America/New_York",
        "*/30 1-2 * * *",
        "2027-03-14T05:00",
        ["2027-03-14T06:00", "2027-03-14T06:30", "2027-03-15T05:00"],
    ),
    (
        "America/New_York",
        "*/30 1-2 * * *",
        "2027-11-07T04:00",
        [
            "2027-11-07T05:00",
            "2027-11-07T05:30",
            "2027-11-07T06:00",
            "2027-11-07T06:30",
            "2027-11-07T07:00",
            "2027-11-07T07:30",
            "2027-11-08T06:00",
        ],
    ),
    # Europe/Berlin: 2027-03-28 02:00->03:00 (01:00Z); 2027-10-31 03:00->02:00 (01:00Z)
    ("Europe/Berlin", "30 2 * * *", "2027-03-27T12:00", ["2027-03-28T01:00", "2027-03-29T00:30"]),
    ("Europe/Berlin", "30 2 * * *", "2027-10-30T12:00", ["2027-10-31T00:30", "2027-11-01T01:30"]),
    (
        "Europe/Berlin",
        "*/30 2 * * *",
        "2027-03-27T00:00",
        ["2027-03-27T01:00", "2027-03-27T01:30", "2027-03-29T00:00", "2027-03-29T00:30"],
    ),
    (
        "Europe/Berlin",
        "*/30 2 * * *",
        "2027-10-30T12:00",
        [
            "2027-10-31T00:00",
            "2027-10-31T00:30",
            "2027-10-31T01:00",
            "2027-10-31T01:30",
            "2027-11-01T01:00",
        ],
    ),
    # Australia/Sydney (southern hemisphere): 2027-04-04 03:00->02:00 (03/16:00Z);
    # 2027-10-03 02:00->03:00 (10-02T16:00Z)
    (
        "Australia/Sydney",
        "30 2 * * *",
        "2027-10-02T00:00",
        ["2027-10-02T16:00", "2027-10-03T15:30"],
    ),
    (
        "Australia/Sydney",
        "30 2 * * *",
        "2027-04-03T00:00",
        ["2027-04-03T15:30", "2027-04-04T16:30"],
    ),
    (
        "Australia/Sydney",
        "*/30 2 * * *",
        "2027-10-01T00:00",
        ["2027-10-01T16:00", "2027-10-01T16:30", "2027-10-03T15:00", "2027-10-03T15:30"],
    ),
    (
        "Australia/Sydney",
        "*/30 2 * * *",
        "2027-04-03T00:00",
        [
            "2027-04-03T15:00",
            "2027-04-03T15:30",
            "2027-04-03T16:00",
            "2027-04-03T16:30",
            "2027-04-04T16:00",
        ],
    ),
    # Australia/Lord_Howe (30-minute shift): 2027-10-03 02:00->02:30 (10-02T15:30Z);
    # 2027-04-04 02:00->01:30 (04-03T15:00Z)
    (
        "Australia/Lord_Howe",
        "15 2 * * *",
        "2027-10-02T00:00",
        ["2027-10-02T15:30", "2027-10-03T15:15"],
    ),
    (
        "Australia/Lord_Howe",
        "45 1 * * *",
        "2027-04-03T00:00",
        ["2027-04-03T14:45", "2027-04-04T15:15"],
    ),
    (
        "Australia/Lord_Howe",
        "*/15 2 * * *",
        "2027-10-02T00:00",
        ["2027-10-02T15:30", "2027-10-02T15:45", "2027-10-03T15:00"],
    ),
    (
        "Australia/Lord_Howe",
        "*/15 1 * * *",
        "2027-04-03T00:00",
        [
            "2027-04-03T14:00",
            "2027-04-03T14:15",
            "2027-04-03T14:30",
            "2027-04-03T14:45",
            "2027-04-03T15:00",
            "2027-04-03T15:15",
            "2027-04-04T14:30",
        ],
    ),
    # America/Havana (midnight transitions): 2027-03-14 00:00->01:00 (05:00Z);
    # 2027-11-07 01:00->00:00 (05:00Z), so 00:00-00:59 happens twice
    ("America/Havana", "30 0 * * *", "2027-03-13T12:00", ["2027-03-14T05:00", "2027-03-15T04:30"]),
    ("America/Havana", "0 0 * * *", "2027-03-13T12:00", ["2027-03-14T05:00", "2027-03-15T04:00"]),
    ("America/Havana", "30 0 * * *", "2027-11-06T12:00", ["2027-11-07T04:30", "2027-11-08T05:30"]),
    (
        "America/Havana",
        "*/30 0 * * *",
        "2027-03-13T12:00",
        ["2027-03-15T04:00", "2027-03-15T04:30"],
    ),
    (
        "America/Havana",
        "*/30 0 * * *",
        "2027-11-06T12:00",
        [
            "2027-11-07T04:00",
            "2027-11-07T04:30",
            "2027-11-07T05:00",
            "2027-11-07T05:30",
            "2027-11-08T05:00",
        ],
    ),
    # America/Santiago: 2027-04-04 00:00->23:00 on 04-03 (03:00Z), 2027-09-05 00:00->01:00 (04:00Z)
    (
        "America/Santiago",
        "30 0 * * *",
        "2027-09-04T12:00",
        ["2027-09-05T04:00", "2027-09-06T03:30"],
    ),
    (
        "America/Santiago",
        "30 23 * * *",
        "2027-04-03T12:00",
        ["2027-04-04T02:30", "2027-04-05T03:30"],
    ),
    (
        "America/Santiago",
        "*/30 0 * * *",
        "2027-09-04T12:00",
        ["2027-09-06T03:00", "2027-09-06T03:30"],
    ),
    (
        "America/Santiago",
        "*/30 23 * * *",
        "2027-04-03T12:00",
        [
            "2027-04-04T02:00",
            "2027-04-04T02:30",
            "2027-04-04T03:00",
            "2027-04-04T03:30",
            "2027-04-05T03:00",
        ],
    ),
    # America/Moncton in 2006 (historic rules): 04-02 00:01 AST -> 01:01 ADT (04:01Z), and
    # 10-29 00:01 ADT -> 23:01 AST on 10-28 (03:01Z): the repeated hour straddles midnight,
    # so 10-29 00:00 ADT (03:00Z) comes before the second 10-28 23:30 (03:30Z).
    ("America/Moncton", "30 0 * * *", "2006-04-01T12:00", ["2006-04-02T04:01", "2006-04-03T03:30"]),
    (
        "America/Moncton",
        "30 23 * * *",
        "2006-10-28T12:00",
        ["2006-10-29T02:30", "2006-10-30T03:30"],
    ),
    (
        "America/Moncton",
        "*/30 0,23 * * *",
        "2006-10-29T02:45",
        ["2006-10-29T03:00", "2006-10-29T03:30", "2006-10-29T04:00", "2006-10-29T04:30"],
    ),
    (
        "America/Moncton",
        "*/30 0,23 * * *",
        "2006-10-29T03:00",
        ["2006-10-29T03:30", "2006-10-29T04:00", "2006-10-29T04:30"],
    ),
    # America/Nuuk: 2027-03-27 23:00 -02 -> 03-28 00:00 -01 (01:00Z): a wall time in the gap
    # runs at local midnight, and merges with the midnight slot
    ("America/Nuuk", "30 23 * * *", "2027-03-27T12:00", ["2027-03-28T01:00", "2027-03-29T00:30"]),
    (
        "America/Nuuk",
        "0 0,23 * * *",
        "2027-03-27T00:00",
        ["2027-03-27T01:00", "2027-03-27T02:00", "2027-03-28T01:00", "2027-03-29T00:00"],
    ),
    # UTC: nothing moves
    ("UTC", "30 2 * * *", "2027-03-13T12:00", ["2027-03-14T02:30", "2027-03-15T02:30"]),
    ("UTC", "30 1 * * *", "2027-11-06T12:00", ["2027-11-07T01:30", "2027-11-08T01:30"]),
    (
        "UTC",
        "*/30 1-2 * * *",
        "2027-11-07T00:00",
        [
            "2027-11-07T01:00",
            "2027-11-07T01:30",
            "2027-11-07T02:00",
            "2027-11-07T02:30",
            "2027-11-08T01:00",
        ],
    ),
]


@pytest.mark.parametrize(
    ("zone", "expr", "after", "expected"),
    DST_CASES,
    ids=[f"{z}|{e}|{a}" for z, e, a, _ in DST_CASES],
)
def test_dst_rules_per_zone(zone, expr, after, expected):
    """R1 (gap: once, first instant after), R2 (overlap: once, first reading), R3
    (wildcard: every real matching instant)."""
    spec = cron(expr, zone)
    assert timing.upcoming(spec, Z(after), len(expected)) == [Z(e) for e in expected]


def test_r1_gap_runs_at_first_instant_after_not_at_extrapolated_time():
    """R1: 02:30 New York on 2027-03-14 -> 03:00 EDT = 07:00Z; never 03:30, never skipped."""
    spec = cron("30 2 * * *", "America/New_York")
    result = timing.next_slot_after(spec, Z("2027-03-14T06:59:59"))
    assert result == Z("2027-03-14T07:00")
    assert wall(result, "America/New_York") == "2027-03-14 03:00"
    assert timing.next_slot_after(spec, Z("2027-03-14T07:00"), inclusive=True) == result
    assert timing.next_slot_after(spec, result) == Z("2027-03-15T06:30")


def test_r1_several_gap_slots_collapse_into_one_run():
    spec = cron("0,30 2,3 * * *", "America/New_York")
    assert timing.upcoming(spec, Z("2027-03-14T06:00"), 3) == [
        Z("2027-03-14T07:00"),
        Z("2027-03-14T07:30"),
        Z("2027-03-15T06:00"),
    ]


def test_r1_gap_slot_merging_with_the_next_days_midnight_is_counted_once():
    spec = cron("0 0,23 * * *", "America/Nuuk")
    # 03-26 23:00 (01:00Z), 03-27 00:00 (02:00Z), 03-27 23:00 and 03-28 00:00 (both 01:00Z)
    assert timing.count_slots(spec, Z("2027-03-27T00:00"), Z("2027-03-29T00:00")) == 3
    assert timing.count_slots(spec, Z("2027-03-27T00:00"), Z("2027-03-29T00:00:01")) == 4


def test_r2_search_from_the_second_pass_does_not_go_back_in_time():
    """cronsim alone returns 05:50Z here (before the start); croniter returns 06:50Z (a
    second run of the same wall time). The slot already ran at 05:50Z (first pass)."""
    spec = cron("50 1 * * *", "America/New_York")
    assert timing.next_slot_after(spec, Z("2027-11-07T06:40")) == Z("2027-11-08T06:50")
    assert timing.next_slot_after(spec, Z("2027-11-07T05:40")) == Z("2027-11-07T05:50")


def test_r2_fixed_time_every_minute_skips_the_second_pass():
    spec = cron("0-59 1 * * *", "America/New_York")
    assert timing.next_slot_after(spec, Z("2027-11-07T05:59")) == Z("2027-11-08T06:00")
    assert timing.count_slots(spec, Z("2027-11-07T04:00"), Z("2027-11-07T08:00")) == 60


def test_r3_wildcard_hour_zero_never_fires_at_one_oclock_on_a_midnight_gap_day():
    """cronsim alone returns 2027-03-14T05:00Z (01:00 CDT) for ``*/30 0 * * *`` in Havana."""
    spec = cron("*/30 0 14 3 *", "America/Havana")
    assert timing.next_slot_after(spec, Z("2027-03-10T00:00")) == Z("2028-03-14T04:00")


def test_r3_wildcard_keeps_its_minutes_across_a_half_hour_shift():
    """cronsim alone skips 2027-04-05 00:00 +10:30 (04-04T13:30Z) in Lord Howe."""
    spec = cron("*/30 0 * * *", "Australia/Lord_Howe")
    assert timing.upcoming(spec, Z("2027-04-03T12:00"), 4) == [
        Z("2027-04-03T13:00"),
        Z("2027-04-03T13:30"),
        Z("2027-04-04T13:30"),
        Z("2027-04-04T14:00"),
    ]


@pytest.mark.parametrize(
    ("zone", "start", "end", "wildcard_count", "fixed_count"),
    [
        # Berlin fall back: 49 real hours of minutes; the fixed job skips the second pass.
        ("Europe/Berlin", "2027-10-30T00:00", "2027-11-01T00:00", 48 * 60, 48 * 60 - 60),
        # Berlin spring forward: 47 real hours; the fixed job's 60 skipped wall minutes
        # collapse onto 03:00, which is a slot anyway.
        ("Europe/Berlin", "2027-03-27T00:00", "2027-03-29T00:00", 48 * 60, 48 * 60),
        ("Australia/Lord_Howe", "2027-04-02T00:00", "2027-04-05T00:00", 72 * 60, 72 * 60 - 30),
        ("UTC", "2027-04-02T00:00", "2027-04-05T00:00", 72 * 60, 72 * 60),
    ],
)
def test_count_slots_across_dst(zone, start, end, wildcard_count, fixed_count):
    assert timing.count_slots(cron("* * * * *", zone), Z(start), Z(end)) == wildcard_count
    assert timing.count_slots(cron("0-59 0-23 * * *", zone), Z(start), Z(end)) == fixed_count


# ---------------------------------------------------------------------------------------
# [cron-syntax] field reports
# ---------------------------------------------------------------------------------------


def test_b12_a_restricted_day_fields_are_or():
    runs = timing.upcoming(cron("0 22 1-7 * 6"), Z("2027-06-01T00:00"), 12)
    days = [
        "06-01",
        "06-02",
        "06-03",
        "06-04",
        "06-05",
        "06-06",
        "06-07",
        "06-12",
        "06-19",
        "06-26",
        "07-01",
        "07-02",
    ]
    assert runs == [Z(f"2027-{d}T22:00") for d in days]


def test_b12_b_star_step_day_of_month_is_and():
    runs = timing.upcoming(cron("0 7 */2 * 1"), Z("2027-06-01T00:00"), 6)
    days = ["06-07", "06-21", "07-05", "07-19", "08-09", "08-23"]
    assert runs == [Z(f"2027-{d}T07:00") for d in days]


def test_b13_february_29():
    spec = cron("0 9 29 2 *")
    assert timing.next_slot_after(spec, Z("2027-03-01T00:00")) == Z("2028-02-29T09:00")
    assert timing.next_slot_after(spec, Z("2028-02-29T09:00:30")) == Z("2032-02-29T09:00")
    assert timing.next_slot_after(spec, Z("2097-03-01T00:00")) == Z("2104-02-29T09:00")  # 2100
    assert timing.next_slot_after(cron("0 9 L * *"), Z("2028-02-01T00:00")) == Z("2028-02-29T09:00")


def test_b14_controls_fire_where_expected():
    start = Z("2027-06-01T00:00")
    assert timing.next_slot_after(cron("0 0 31 2,3 *"), start) == Z("2028-03-31T00:00")
    assert timing.next_slot_after(cron("0 0 30 2 1"), start) == Z("2028-02-07T00:00")
    assert timing.next_slot_after(cron("0 0 31 * *"), start) == Z("2027-07-31T00:00")
    assert timing.next_slot_after(cron("0 0 29 2 *"), start) == Z("2028-02-29T00:00")


@pytest.mark.parametrize("expr", ["0 0 31 2 *", "0 0 30 2 *", "0 0 31 4 *", "0 0 31 2,4 *"])
def test_b14_never_firing_is_refused_at_creation(expr):
    with pytest.raises(InvalidSchedule, match="^can never fire") as caught:
        cron(expr).validate()
    assert caught.value.field == "cron"


def test_b15_a_day_step_starts_at_one_and_resets_each_month():
    runs = timing.upcoming(cron("0 0 */3 * *"), Z("2027-01-25T00:00"), 6)
    days = ["01-28", "01-31", "02-01", "02-04", "02-07", "02-10"]
    assert runs == [Z(f"2027-{d}T00:00") for d in days]


def test_b15_b_every_59_minutes_is_00_and_59():
    runs = timing.upcoming(cron("*/59 * * * *"), Z("2027-06-01T10:00:30"), 4)
    assert runs == [
        Z("2027-06-01T10:59"),
        Z("2027-06-01T11:00"),
        Z("2027-06-01T11:59"),
        Z("2027-06-01T12:00"),
    ]


@pytest.mark.parametrize(
    ("expr", "start", "expected"),
    [
        (
            "0 9 * * 5#5",
            "2027-01-01T00:00",
            ["2027-01-29", "2027-04-30", "2027-07-30", "2027-10-29", "2027-12-31"],
        ),  # B16 (a)
        ("0 9 * * 5L", "2027-01-01T00:00", ["2027-01-29", "2027-02-26", "2027-03-26"]),  # (b)
        ("0 9 L * *", "2027-01-01T00:00", ["2027-01-31", "2027-02-28", "2027-03-31"]),  # (c)
        ("0 9 LW * *", "2027-01-01T00:00", ["2027-01-29", "2027-02-26", "2027-03-31"]),  # (d)
    ],
)
def test_b16_nth_and_last_forms(expr, start, expected):
    runs = timing.upcoming(cron(expr), Z(start), len(expected))
    assert runs == [Z(f"{d}T09:00") for d in expected]


def test_b16_e_nearest_weekday_is_refused_not_misread():
    with pytest.raises(InvalidSchedule, match=r"day-of-month: '15W'") as caught:
        cron("0 9 15W * *").validate()
    assert caught.value.field == "cron"


def test_names_and_sunday_as_seven():
    start = Z("2027-06-01T00:00")  # a Tuesday
    sunday = Z("2027-06-06T00:00")
    for expr in ("0 0 * * 0", "0 0 * * 7", "0 0 * * SUN", "0 0 * * sun", "@weekly"):
        assert timing.next_slot_after(cron(expr), start) == sunday, expr
    assert timing.next_slot_after(cron("0 0 1 jul *"), start) == Z("2027-07-01T00:00")


# ---------------------------------------------------------------------------------------
# Missed runs, drift, edits, far future, precision (pure parts)
# ---------------------------------------------------------------------------------------


def test_b17_a_coalesce_after_eight_hours():
    spec = cron("* * * * *")
    now = Z("2027-06-01T07:59:30")
    latest = timing.latest_slot_at_or_before(spec, now, not_before=Z("2027-06-01T00:01"))
    assert latest == Z("2027-06-01T07:59")
    assert timing.count_slots(spec, Z("2027-06-01T00:01"), latest) == 478
    assert timing.upcoming(spec, now, 2) == [Z("2027-06-01T08:00"), Z("2027-06-01T08:01")]


@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin"])
def test_b17_b_thirty_days_is_bounded(zone):
    spec = cron("* * * * *", zone)
    started = clock.perf_counter()
    latest = timing.latest_slot_at_or_before(
        spec, Z("2027-07-01T07:59:30"), not_before=Z("2027-06-01T00:01")
    )
    missed = timing.count_slots(spec, Z("2027-06-01T00:01"), latest)
    elapsed = clock.perf_counter() - started
    assert latest == Z("2027-07-01T07:59")
    assert missed == 30 * 1440 + 478
    assert elapsed < 1.0


def test_b17_count_stops_at_cap():
    spec = cron("* * * * *")
    assert timing.count_slots(spec, Z("2027-01-01T00:00"), Z("2028-01-01T00:00")) == 100_000
    assert timing.count_slots(spec, Z("2027-01-01T00:00"), Z("2028-01-01T00:00"), cap=7) == 7
    assert (
        timing.count_slots(spec, Z("2027-01-01T00:00"), Z("2028-01-01T00:00"), cap=10**6) == 525_600
    )


def test_b17_interval_latest_is_arithmetic_over_years():
    spec = every(60, Z("2027-06-01T00:00"))
    now = Z("2037-06-01T07:59:30")
    assert timing.latest_slot_at_or_before(spec, now, not_before=Z("2027-06-01T00:01")) == Z(
        "2037-06-01T07:59"
    )
    assert timing.count_slots(spec, Z("2027-06-01T00:01"), Z("2027-06-01T07:59")) == 478
    assert timing.count_slots(spec, Z("2027-06-01T00:00"), now, cap=10**9) == (
        (now - Z("2027-06-01T00:00")) // timedelta(minutes=1) + 1
    )


def test_b19_weekly_interval_follows_its_anchor():
    spec = every(7 * 86400, Z("2027-06-01T00:00"))
    assert timing.upcoming(spec, Z("2027-06-01T00:00"), 2) == [
        Z("2027-06-08T00:00"),
        Z("2027-06-15T00:00"),
    ]
    for day in range(1, 8):  # a restart at noon on any day gives the same next slot
        assert timing.next_slot_after(spec, Z(f"2027-06-0{day}T12:00")) == Z("2027-06-08T00:00")


def test_b20_a_interval_slots_do_not_drift_with_run_time():
    spec = every(60, Z("2027-06-01T00:00"))
    runs = slots_between(spec, Z("2027-06-01T00:00"), Z("2027-06-01T00:10"))
    assert runs == [Z("2027-06-01T00:00") + timedelta(minutes=i) for i in range(10)]
    for slot in runs:  # next from the finish time (7 s later) is still on the grid
        assert timing.next_slot_after(spec, slot + timedelta(seconds=7)) == slot + timedelta(
            minutes=1
        )


def test_b20_b_slow_handler_skips_overlapped_slots_and_stays_on_grid():
    spec = every(60, Z("2027-06-01T00:00"))
    runs, skipped = [], 0
    slot = Z("2027-06-01T00:00")
    while slot <= Z("2027-06-01T00:09:59"):
        runs.append(slot)
        finished = slot + timedelta(seconds=90)
        skipped += timing.count_slots(
            spec, slot + timedelta(seconds=1), finished + timedelta(seconds=1)
        )
        slot = timing.next_slot_after(spec, finished)
    assert runs == [Z(f"2027-06-01T00:0{m}") for m in (0, 2, 4, 6, 8)]
    assert skipped == 5
    assert all(r.second == 0 for r in runs)


def test_b24_hourly_cron_pure_part():
    runs = slots_between(cron("0 * * * *"), Z("2027-06-01T08:30"), Z("2027-06-01T11:30"))
    assert runs == [Z("2027-06-01T09:00"), Z("2027-06-01T10:00"), Z("2027-06-01T11:00")]


def test_b27_edits_take_the_first_slot_after_the_edit():
    assert timing.next_slot_after(every(60, Z("2027-06-01T10:00")), Z("2027-06-01T10:02")) == Z(
        "2027-06-01T10:03"
    )
    assert timing.next_slot_after(cron("0 16 * * *"), Z("2027-06-01T12:20")) == Z(
        "2027-06-01T16:00"
    )


def test_b30_far_future_values():
    assert timing.next_slot_after(cron("0 0 1 1 *"), Z("2027-01-02T00:00")) == Z("2028-01-01T00:00")
    far = Z("2099-12-31T23:59:59")
    assert timing.next_slot_after(once(far), Z("2027-01-02T00:00")) == far
    ten_years = every(3650 * 86400, Z("2027-01-02T00:00"))
    # 3650 days later: 2028, 2032 and 2036 have a February 29
    assert timing.next_slot_after(ten_years, Z("2027-01-02T00:00")) == Z("2036-12-30T00:00")


@pytest.mark.parametrize("seconds", [0, -5, 10**10 * 86400])
def test_b30_bad_intervals_are_refused(seconds):
    with pytest.raises(InvalidSchedule) as caught:
        every(seconds, Z("2027-01-02T00:00")).validate()
    assert caught.value.field == "interval_seconds"


def test_beyond_max_year_is_never_not_overflow():
    end_of_time = datetime.max.replace(tzinfo=UTC)
    assert timing.next_slot_after(cron("* * * * *"), end_of_time) is None
    assert timing.next_slot_after(cron("* * * * *"), Z("9000-12-31T23:59:00")) is None
    assert timing.next_slot_after(cron("0 0 29 2 *"), Z("8999-03-01T00:00")) is None  # 9000
    assert timing.next_slot_after(once(Z("9500-01-01T00:00")), Z("2027-01-01T00:00")) is None
    huge = every(timing.MAX_INTERVAL_SECONDS, Z("8999-06-01T00:00"))
    assert timing.next_slot_after(huge, Z("8999-06-01T00:00")) is None
    assert timing.upcoming(every(60, Z("9000-12-31T23:58:00")), end_of_time, 3) == []
    assert timing.upcoming(every(60, Z("9000-12-31T23:58:00")), Z("9000-12-31T23:58"), 3) == [
        Z("9000-12-31T23:59")
    ]
    first_day = datetime.min.replace(tzinfo=UTC)
    # cron searches start at year 2 (no underflow near datetime.min)
    assert timing.next_slot_after(cron("0 0 1 1 *"), first_day) == Z("0002-01-01T00:00")
    assert timing.latest_slot_at_or_before(
        cron("0 0 1 1 *"), Z("2027-06-01T00:00"), not_before=first_day
    ) == Z("2027-01-01T00:00")
    assert timing.count_slots(every(60, first_day), first_day, first_day) == 0


def test_b31_a_once_with_microseconds_fires_at_the_truncated_second():
    spec = once(Z("2027-06-01T09:00:00.999999"))
    slot = timing.next_slot_after(spec, Z("2027-06-01T08:59:59"))
    assert slot == Z("2027-06-01T09:00:00") and slot.microsecond == 0
    assert timing.next_slot_after(spec, Z("2027-06-01T09:00:00.500000"), inclusive=True) == slot
    assert timing.next_slot_after(spec, slot) is None
    assert timing.describe(spec) == "once at 2027-06-01 09:00:00 UTC"


def test_b31_b_interval_created_with_microseconds_stays_on_whole_seconds():
    created = Z("2027-06-01T10:00:00.123456")
    spec = every(60, timing.truncate_to_second(created))
    assert timing.next_slot_after(spec, created, inclusive=True) == Z("2027-06-01T10:00")  # due
    assert timing.upcoming(spec, created, 3) == [
        Z("2027-06-01T10:01"),
        Z("2027-06-01T10:02"),
        Z("2027-06-01T10:03"),
    ]
    untruncated = every(60, created)
    assert timing.upcoming(untruncated, created, 1) == [Z("2027-06-01T10:01")]


def test_b31_c_cron_next_from_fractional_now():
    slot = timing.next_slot_after(cron("* * * * *"), Z("2027-06-01T10:00:00.700000"))
    assert slot == Z("2027-06-01T10:01:00") and slot.microsecond == 0


# ---------------------------------------------------------------------------------------
# Windows, once, latest/count edge cases
# ---------------------------------------------------------------------------------------


def test_interval_grid_never_before_start_at():
    anchor = Z("2027-06-01T10:00")
    assert timing.next_slot_after(
        every(600, anchor, start_at=Z("2027-06-01T10:30")), anchor, inclusive=True
    ) == Z("2027-06-01T10:30")
    assert timing.next_slot_after(
        every(600, anchor, start_at=Z("2027-06-01T10:35")), anchor, inclusive=True
    ) == Z("2027-06-01T10:40")
    start_only = Spec(kind="interval", interval_seconds=600, start_at=Z("2027-06-01T10:35"))
    assert timing.next_slot_after(start_only, anchor) == Z("2027-06-01T10:35")


def test_end_at_is_inclusive():
    spec = cron("0 * * * *", end_at=Z("2027-06-01T12:00"))
    assert timing.upcoming(spec, Z("2027-06-01T10:30"), 5) == [
        Z("2027-06-01T11:00"),
        Z("2027-06-01T12:00"),
    ]
    assert timing.next_slot_after(spec, Z("2027-06-01T12:00")) is None
    assert timing.count_slots(spec, Z("2027-06-01T00:00"), Z("2027-06-02T00:00")) == 13
    latest = timing.latest_slot_at_or_before(
        spec, Z("2027-06-05T00:00"), not_before=Z("2027-06-01T00:00")
    )
    assert latest == Z("2027-06-01T12:00")


def test_once():
    spec = once(Z("2027-06-01T09:00"))
    assert timing.next_slot_after(spec, Z("2027-06-01T08:00")) == Z("2027-06-01T09:00")
    assert timing.next_slot_after(spec, Z("2027-06-01T09:00")) is None
    assert timing.next_slot_after(spec, Z("2027-06-01T09:00"), inclusive=True) == Z(
        "2027-06-01T09:00"
    )
    assert timing.upcoming(spec, Z("2027-01-01T00:00"), 5) == [Z("2027-06-01T09:00")]
    assert timing.count_slots(spec, Z("2027-06-01T09:00"), Z("2027-06-01T09:00:01")) == 1
    assert timing.count_slots(spec, Z("2027-06-01T08:00"), Z("2027-06-01T09:00")) == 0
    latest = timing.latest_slot_at_or_before(
        spec, Z("2027-06-02T00:00"), not_before=Z("2027-06-01T09:00")
    )
    assert latest == Z("2027-06-01T09:00")
    assert (
        timing.latest_slot_at_or_before(
            spec, Z("2027-06-02T00:00"), not_before=Z("2027-06-01T09:00:01")
        )
        is None
    )


@pytest.mark.parametrize(
    "spec",
    [
        every(3600, Z("2027-03-01T00:00")),
        every(700, Z("2027-03-01T00:00:03")),
        cron("*/7 * * * *", "Australia/Lord_Howe"),
        cron("0 9 * * 1-5", "Europe/Berlin"),
        cron("30 2 * * *", "America/New_York"),
    ],
    ids=["hourly", "700s", "*/7 Lord_Howe", "weekdays Berlin", "02:30 New York"],
)
def test_latest_and_count_agree_with_upcoming(spec):
    start = Z("2027-03-12T00:00")
    listed = slots_between(spec, start, Z("2027-03-16T00:00"))
    assert listed  # the window has slots
    for now in (start + timedelta(hours=h, seconds=13) for h in range(0, 96, 5)):
        expected = [s for s in listed if s <= now]
        assert timing.latest_slot_at_or_before(spec, now, not_before=start) == (
            expected[-1] if expected else None
        )
        assert timing.count_slots(spec, start, now) == len([s for s in listed if s < now])
    later = start + timedelta(hours=1)
    assert timing.latest_slot_at_or_before(spec, start, not_before=later) is None
    assert timing.count_slots(spec, start + timedelta(hours=1), start) == 0


def test_upcoming_count_zero_and_negative():
    assert timing.upcoming(cron("* * * * *"), A, 0) == []
    with pytest.raises(ValueError):
        timing.upcoming(cron("* * * * *"), A, -1)
    with pytest.raises(ValueError):
        timing.count_slots(cron("* * * * *"), A, A, cap=-1)


def test_results_are_aware_utc_whole_seconds():
    for spec in (
        cron("*/15 * * * *", "Asia/Kolkata"),
        every(90, Z("2027-06-01T00:00:00.5")),
        once(Z("2027-06-01T09:00:00.5")),
    ):
        for slot in timing.upcoming(spec, Z("2027-05-31T23:59:59.9"), 3):
            assert slot.tzinfo is UTC and slot.microsecond == 0


# ---------------------------------------------------------------------------------------
# Backoff, jitter, describe
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attempt", "base", "cap", "expected"),
    [
        (1, 2, 60, 2),
        (2, 2, 60, 4),
        (3, 2, 60, 8),
        (6, 2, 60, 60),
        (10, 2, 60, 60),
        (10**6, 2, 60, 60),
        (2000, 1e300, 3600, 3600),
        (1, 0, 60, 0),
        (1, 5, 3, 3),
        (3, 0.5, 100, 2.0),
    ],
)
def test_backoff_seconds(attempt, base, cap, expected):
    result = timing.backoff_seconds(attempt, base, cap)
    assert result == expected and isinstance(result, float)


@pytest.mark.parametrize(
    ("attempt", "base", "cap"), [(0, 2, 60), (-1, 2, 60), (1, -2, 60), (1, 2, -60)]
)
def test_backoff_seconds_refuses(attempt, base, cap):
    with pytest.raises(ValueError):
        timing.backoff_seconds(attempt, base, cap)


def test_jitter_offset_is_deterministic_sha256():
    key = "cleanup:42"
    expected = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") % 31
    assert timing.jitter_offset(key, 30) == expected
    assert timing.jitter_offset(key, 30) == timing.jitter_offset(key, 30)
    assert timing.jitter_offset(key, 0) == 0
    values = {timing.jitter_offset(f"schedule-{i}", 10) for i in range(200)}
    assert values == set(range(11))  # spreads over the whole range, both ends included
    with pytest.raises(ValueError):
        timing.jitter_offset(key, -1)


@pytest.mark.parametrize(
    ("spec", "text"),
    [
        (every(300, A), "every 5 minutes"),
        (every(3600, A), "every 1 hour"),
        (every(60, A), "every 1 minute"),
        (every(90, A), "every 90 seconds"),
        (every(1, A), "every 1 second"),
        (every(7200, A), "every 2 hours"),
        (every(86400, A), "every 1 day"),
        (every(7 * 86400, A), "every 7 days"),
        (cron("0 3 * * *", "Europe/Paris"), "cron '0 3 * * *' (Europe/Paris)"),
        (once(Z("2027-06-01T09:00")), "once at 2027-06-01 09:00:00 UTC"),
        (once(datetime.fromisoformat("2027-06-01T11:00+02:00")), "once at 2027-06-01 09:00:00 UTC"),
    ],
)
def test_describe(spec, text):
    assert timing.describe(spec) == text


def test_module_is_pure():
    """No Django, no database, no second cron library: cronsim and zoneinfo only (in every
    module of the package); python-dateutil's ``rrule`` (and nothing else of dateutil, not
    its time zones) only in ``rrule.py`` and ``rrule_grid.py``, the modules of calendar
    rules."""
    modules = sorted(Path(timing.__file__).parent.glob("*.py"))
    assert len(modules) > 1
    for module in modules:
        text = module.read_text(encoding="utf-8")
        for forbidden in ("import django", "from django", "croniter", "pytz"):
            assert forbidden not in text, (module.name, forbidden)
        imports = [line for line in text.splitlines() if "dateutil" in line and "import" in line]
        rule_modules = ("rrule.py", "rrule_grid.py")
        allowed = ["from dateutil import rrule as du"] if module.name in rule_modules else []
        assert imports == allowed, (module.name, imports)
