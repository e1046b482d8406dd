"""Business days (issue #30, item 3): ``ExclusionCalendar.weekend_days``,
``Schedule.exclusion_policy`` and ``Schedule.rrule_business_days``.

The held-out case set below was derived by hand from the 2026 public holidays of France,
Germany, the US and Japan (as the ``holidays`` package lists them; checked by
``test_the_holidays_the_cases_were_derived_from``) and the zones' offsets: Paris and
Berlin CET (UTC+1) until 2026-03-29 02:00, CEST (UTC+2) until 2026-10-25 03:00; New York
EST (UTC-5) until 2026-03-08 02:00, EDT (UTC-4) until 2026-11-01 02:00; Tokyo UTC+9. Every
expected instant is written out in UTC, not computed.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import holidays
import pytest
from django.core.exceptions import ValidationError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_durable_schedules import state, timing
from django_durable_schedules.models import ExclusionCalendar, RunAttempt, Schedule, ScheduleEvent
from django_durable_schedules.timing import Spec, exclusions_of
from django_durable_schedules.worker.execution.runner import execute


def Z(y: int, mo: int, d: int, h: int, mi: int = 0) -> datetime:
    return datetime(y, mo, d, h, mi, tzinfo=UTC)


PREV, NEXT, SKIP = "previous_business_day", "next_business_day", "skip"
MONTH_END_18 = "FREQ=MONTHLY;BYMONTHDAY=-1;BYHOUR=18;BYMINUTE=0"
LAST_BUSINESS_17 = "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1;BYHOUR=17;BYMINUTE=0"
FIRST_BUSINESS_9 = "FREQ=MONTHLY;BYMONTHDAY=1;BYHOUR=9;BYMINUTE=0"

# (id, country, zone, kind, definition, policy, rrule_business_days, weekend, after, expected)
CASES = [
    # France: the last calendar day of the month at 18:00 Paris. Jan 31, Feb 28 and Oct 31
    # are Saturdays, May 31 a Sunday; Nov 1 (the Monday after Oct 31's weekend... a Sunday
    # holiday) is passed over too.
    (
        "fr-month-end-prev",
        "FR",
        "Europe/Paris",
        "rrule",
        MONTH_END_18,
        PREV,
        False,
        None,
        Z(2026, 1, 1, 0),
        [
            Z(2026, 1, 30, 17),
            Z(2026, 2, 27, 17),
            Z(2026, 3, 31, 16),
            Z(2026, 4, 30, 16),
            Z(2026, 5, 29, 16),
            Z(2026, 6, 30, 16),
            Z(2026, 7, 31, 16),
            Z(2026, 8, 31, 16),
            Z(2026, 9, 30, 16),
            Z(2026, 10, 30, 17),
            Z(2026, 11, 30, 17),
            Z(2026, 12, 31, 17),
        ],
    ),
    (
        "fr-month-end-next",
        "FR",
        "Europe/Paris",
        "rrule",
        MONTH_END_18,
        NEXT,
        False,
        None,
        Z(2026, 1, 1, 0),
        [
            Z(2026, 2, 2, 17),
            Z(2026, 3, 2, 17),
            Z(2026, 3, 31, 16),
            Z(2026, 4, 30, 16),
            Z(2026, 6, 1, 16),
            Z(2026, 6, 30, 16),
            Z(2026, 7, 31, 16),
            Z(2026, 8, 31, 16),
            Z(2026, 9, 30, 16),
            Z(2026, 11, 2, 17),
            Z(2026, 11, 30, 17),
            Z(2026, 12, 31, 17),
        ],
    ),
    (
        "fr-month-end-skip",
        "FR",
        "Europe/Paris",
        "rrule",
        MONTH_END_18,
        SKIP,
        False,
        None,
        Z(2026, 1, 1, 0),
        [
            Z(2026, 1, 31, 17),
            Z(2026, 2, 28, 17),
            Z(2026, 3, 31, 16),
            Z(2026, 4, 30, 16),
            Z(2026, 5, 31, 16),
            Z(2026, 6, 30, 16),
        ],
    ),
    # France: the last business day (rrule_business_days): the same days as PREV above.
    (
        "fr-last-business-day",
        "FR",
        "Europe/Paris",
        "rrule",
        "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1;BYHOUR=18;BYMINUTE=0",
        SKIP,
        True,
        None,
        Z(2026, 1, 1, 0),
        [
            Z(2026, 1, 30, 17),
            Z(2026, 2, 27, 17),
            Z(2026, 3, 31, 16),
            Z(2026, 4, 30, 16),
            Z(2026, 5, 29, 16),
            Z(2026, 6, 30, 16),
            Z(2026, 7, 31, 16),
            Z(2026, 8, 31, 16),
            Z(2026, 9, 30, 16),
            Z(2026, 10, 30, 17),
            Z(2026, 11, 30, 17),
            Z(2026, 12, 31, 17),
        ],
    ),
    # France: the first business day at 09:00 (Jan 1 and May 1 are holidays, Feb 1, Mar 1
    # and Nov 1 Sundays, Aug 1 a Saturday).
    (
        "fr-first-business-day",
        "FR",
        "Europe/Paris",
        "rrule",
        "FREQ=MONTHLY;BYMONTHDAY=1;BYHOUR=9;BYMINUTE=0",
        SKIP,
        True,
        None,
        Z(2026, 1, 1, 0),
        [
            Z(2026, 1, 2, 8),
            Z(2026, 2, 2, 8),
            Z(2026, 3, 2, 8),
            Z(2026, 4, 1, 7),
            Z(2026, 5, 4, 7),
            Z(2026, 6, 1, 7),
            Z(2026, 7, 1, 7),
            Z(2026, 8, 3, 7),
            Z(2026, 9, 1, 7),
            Z(2026, 10, 1, 7),
            Z(2026, 11, 2, 8),
            Z(2026, 12, 1, 8),
        ],
    ),
    # Germany: the 1st of the month at 09:00 Berlin (Jan 1 and May 1 holidays, Feb 1 and
    # Mar 1 Sundays).
    (
        "de-first-next",
        "DE",
        "Europe/Berlin",
        "cron",
        "0 9 1 * *",
        NEXT,
        False,
        None,
        Z(2026, 1, 1, 0),
        [
            Z(2026, 1, 2, 8),
            Z(2026, 2, 2, 8),
            Z(2026, 3, 2, 8),
            Z(2026, 4, 1, 7),
            Z(2026, 5, 4, 7),
            Z(2026, 6, 1, 7),
        ],
    ),
    (
        "de-first-prev",
        "DE",
        "Europe/Berlin",
        "cron",
        "0 9 1 * *",
        PREV,
        False,
        None,
        Z(2026, 1, 1, 0),
        [
            Z(2026, 1, 30, 8),
            Z(2026, 2, 27, 8),
            Z(2026, 4, 1, 7),
            Z(2026, 4, 30, 7),
            Z(2026, 6, 1, 7),
            Z(2026, 7, 1, 7),
        ],
    ),
    # Germany: Good Friday (Apr 3) then Easter Monday (Apr 6) around a weekend; Oct 3 (a
    # Saturday holiday); Christmas Dec 25 and 26 (Friday and Saturday).
    (
        "de-3rd-next",
        "DE",
        "Europe/Berlin",
        "cron",
        "30 7 3 * *",
        NEXT,
        False,
        None,
        Z(2026, 3, 1, 0),
        [
            Z(2026, 3, 3, 6, 30),
            Z(2026, 4, 7, 5, 30),
            Z(2026, 5, 4, 5, 30),
            Z(2026, 6, 3, 5, 30),
            Z(2026, 7, 3, 5, 30),
            Z(2026, 8, 3, 5, 30),
            Z(2026, 9, 3, 5, 30),
            Z(2026, 10, 5, 5, 30),
        ],
    ),
    (
        "de-christmas-prev",
        "DE",
        "Europe/Berlin",
        "cron",
        "0 12 25,26 12 *",
        PREV,
        False,
        None,
        Z(2026, 12, 1, 0),
        [Z(2026, 12, 24, 11)],
    ),
    # The US: the last business day at 17:00 New York (EST 22:00Z, EDT 21:00Z).
    (
        "us-last-business-day",
        "US",
        "America/New_York",
        "rrule",
        LAST_BUSINESS_17,
        SKIP,
        True,
        None,
        Z(2026, 1, 1, 5),
        [
            Z(2026, 1, 30, 22),
            Z(2026, 2, 27, 22),
            Z(2026, 3, 31, 21),
            Z(2026, 4, 30, 21),
            Z(2026, 5, 29, 21),
            Z(2026, 6, 30, 21),
            Z(2026, 7, 31, 21),
            Z(2026, 8, 31, 21),
            Z(2026, 9, 30, 21),
            Z(2026, 10, 30, 21),
            Z(2026, 11, 30, 22),
            Z(2026, 12, 31, 22),
        ],
    ),
    # The US: the first business day at 09:00 (Jan 1 a holiday; Nov 1 a Sunday and the
    # first day of EST).
    (
        "us-first-business-day",
        "US",
        "America/New_York",
        "rrule",
        FIRST_BUSINESS_9,
        SKIP,
        True,
        None,
        Z(2026, 1, 1, 5),
        [
            Z(2026, 1, 2, 14),
            Z(2026, 2, 2, 14),
            Z(2026, 3, 2, 14),
            Z(2026, 4, 1, 13),
            Z(2026, 5, 1, 13),
            Z(2026, 6, 1, 13),
            Z(2026, 7, 1, 13),
            Z(2026, 8, 3, 13),
            Z(2026, 9, 1, 13),
            Z(2026, 10, 1, 13),
            Z(2026, 11, 2, 14),
            Z(2026, 12, 1, 14),
        ],
    ),
    # The US: Juneteenth (Friday Jun 19) and Independence Day (Saturday Jul 4, observed
    # Friday Jul 3) at 12:00 EDT.
    (
        "us-holidays-next",
        "US",
        "America/New_York",
        "cron",
        "0 12 19 6 *|0 12 4 7 *",
        NEXT,
        False,
        None,
        Z(2026, 6, 1, 0),
        [Z(2026, 6, 22, 16), Z(2026, 7, 6, 16)],
    ),
    (
        "us-holidays-prev",
        "US",
        "America/New_York",
        "cron",
        "0 12 19 6 *|0 12 4 7 *",
        PREV,
        False,
        None,
        Z(2026, 6, 1, 0),
        [Z(2026, 6, 18, 16), Z(2026, 7, 2, 16)],
    ),
    # Japan: the 20th at 09:00 Tokyo (00:00Z): Mar 20 a holiday (Friday), Jun 20 a Saturday,
    # Jul 20 a holiday (Monday), Sep 20 a Sunday before Sep 21-23's three holidays.
    (
        "jp-20th-next",
        "JP",
        "Asia/Tokyo",
        "cron",
        "0 9 20 * *",
        NEXT,
        False,
        None,
        Z(2026, 1, 1, 0),
        [
            Z(2026, 1, 20, 0),
            Z(2026, 2, 20, 0),
            Z(2026, 3, 23, 0),
            Z(2026, 4, 20, 0),
            Z(2026, 5, 20, 0),
            Z(2026, 6, 22, 0),
            Z(2026, 7, 21, 0),
            Z(2026, 8, 20, 0),
            Z(2026, 9, 24, 0),
        ],
    ),
    (
        "jp-20th-prev",
        "JP",
        "Asia/Tokyo",
        "cron",
        "0 9 20 * *",
        PREV,
        False,
        None,
        Z(2026, 1, 1, 0),
        [
            Z(2026, 1, 20, 0),
            Z(2026, 2, 20, 0),
            Z(2026, 3, 19, 0),
            Z(2026, 4, 20, 0),
            Z(2026, 5, 20, 0),
            Z(2026, 6, 19, 0),
            Z(2026, 7, 17, 0),
            Z(2026, 8, 20, 0),
            Z(2026, 9, 18, 0),
        ],
    ),
    # Japan, Golden Week: weekdays at 09:00; Apr 29 and May 4-6 are holidays, their slots
    # coalesce into the runs of the business days they move to.
    (
        "jp-golden-week-next",
        "JP",
        "Asia/Tokyo",
        "cron",
        "0 9 * * 1-5",
        NEXT,
        False,
        None,
        Z(2026, 4, 27, 12),
        [
            Z(2026, 4, 28, 0),
            Z(2026, 4, 30, 0),
            Z(2026, 5, 1, 0),
            Z(2026, 5, 7, 0),
            Z(2026, 5, 8, 0),
        ],
    ),
    # DST days as targets: a weekend of Friday and Saturday makes the Sunday of a change a
    # business day. A Saturday 02:30 slot moved to Sunday 2026-03-29 in Paris: 02:30 does
    # not exist; a cron job runs at the first instant after the gap (03:00 CEST = 01:00Z),
    # a rule reads it with the offset before the gap (03:30 CEST = 01:30Z).
    (
        "paris-spring-cron",
        "FR",
        "Europe/Paris",
        "cron",
        "30 2 * * 6",
        NEXT,
        False,
        [5, 6],
        Z(2026, 3, 20, 0),
        [Z(2026, 3, 22, 1, 30), Z(2026, 3, 29, 1), Z(2026, 4, 5, 0, 30)],
    ),
    (
        "paris-spring-rrule",
        "FR",
        "Europe/Paris",
        "rrule",
        "FREQ=WEEKLY;BYDAY=SA;BYHOUR=2;BYMINUTE=30",
        NEXT,
        False,
        [5, 6],
        Z(2026, 3, 20, 0),
        [Z(2026, 3, 22, 1, 30), Z(2026, 3, 29, 1, 30), Z(2026, 4, 5, 0, 30)],
    ),
    # ... and to Sunday 2026-10-25: 02:30 happens twice, the first reading (CEST) runs.
    # Saturday Oct 31's slot cannot go to Sunday Nov 1 (All Saints' Day): Monday Nov 2.
    (
        "paris-fall-cron",
        "FR",
        "Europe/Paris",
        "cron",
        "30 2 * * 6",
        NEXT,
        False,
        [5, 6],
        Z(2026, 10, 17, 0),
        [Z(2026, 10, 18, 0, 30), Z(2026, 10, 25, 0, 30), Z(2026, 11, 2, 1, 30)],
    ),
    # New York: Saturday 02:30 to Sunday 2026-03-08 (a gap: 03:00 EDT = 07:00Z), Saturday
    # 01:30 to Sunday 2026-11-01 (twice that day: the first reading, EDT = 05:30Z).
    (
        "ny-spring-cron",
        "US",
        "America/New_York",
        "cron",
        "30 2 * * 6",
        NEXT,
        False,
        [5, 6],
        Z(2026, 3, 1, 0),
        [Z(2026, 3, 1, 7, 30), Z(2026, 3, 8, 7), Z(2026, 3, 15, 6, 30)],
    ),
    (
        "ny-fall-cron",
        "US",
        "America/New_York",
        "cron",
        "30 1 * * 6",
        NEXT,
        False,
        [5, 6],
        Z(2026, 10, 24, 0),
        [Z(2026, 10, 25, 5, 30), Z(2026, 11, 1, 5, 30), Z(2026, 11, 8, 6, 30)],
    ),
]


def test_the_case_set_holds_at_least_30_instants_per_policy_kind():
    assert sum(len(c[-1]) for c in CASES) >= 120
    for policy in (PREV, NEXT):
        assert sum(len(c[-1]) for c in CASES if c[5] == policy) >= 30


def test_the_holidays_the_cases_were_derived_from():
    listed = {
        "FR": [
            "01-01",
            "04-06",
            "05-01",
            "05-08",
            "05-14",
            "05-25",
            "07-14",
            "08-15",
            "11-01",
            "11-11",
            "12-25",
        ],
        "DE": ["01-01", "04-03", "04-06", "05-01", "05-14", "05-25", "10-03", "12-25", "12-26"],
        "US": [
            "01-01",
            "01-19",
            "02-16",
            "05-25",
            "06-19",
            "07-03",
            "07-04",
            "09-07",
            "10-12",
            "11-11",
            "11-26",
            "12-25",
        ],
        "JP": [
            "01-01",
            "01-12",
            "02-11",
            "02-23",
            "03-20",
            "04-29",
            "05-03",
            "05-04",
            "05-05",
            "05-06",
            "07-20",
            "08-11",
            "09-21",
            "09-22",
            "09-23",
            "10-12",
            "11-03",
            "11-23",
        ],
    }
    for country, days in listed.items():
        found = sorted(d.strftime("%m-%d") for d in holidays.country_holidays(country, years=2026))
        assert found == days, country


def _spec(country, zone, kind, definition, policy, business, weekend) -> Spec:
    specs = definition.split("|") if kind == "cron" else [definition]
    return Spec(
        kind=kind,
        cron=specs[0] if kind == "cron" else None,
        rrule=definition if kind == "rrule" else None,
        extra=tuple(specs[1:]),
        timezone=zone,
        start_at=Z(2025, 12, 1, 0) if kind == "rrule" else None,
        exclusions=exclusions_of([], [("h", country, "")], [("h", weekend or [6, 7])]),
        exclusion_policy=policy,
        rrule_business_days=business,
        weekend_days=frozenset(weekend or [6, 7]),
    )


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_upcoming_matches_the_hand_derived_instants(case):
    _, country, zone, kind, definition, policy, business, weekend, after, expected = case
    spec = _spec(country, zone, kind, definition, policy, business, weekend)
    assert timing.upcoming(spec, after, len(expected)) == expected
    # The views say why a slot moved, and show the moved instant.
    views = timing.upcoming_slots(spec, after, len(expected))
    assert [v.at for v in views if v.fires] == expected
    for view in views:
        if view.moved_by is not None:
            assert view.nominal != view.at and view.why_moved.startswith("moved from ")
            assert view.at.astimezone(spec_zone(zone)).date().isoweekday() not in (
                weekend or [6, 7]
            )


def spec_zone(zone):
    from zoneinfo import ZoneInfo

    return ZoneInfo(zone)


@pytest.mark.vendor_independent  # holiday arithmetic (columns per vendor: test_calendar_edges)
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "case", [c for c in CASES if "|" not in c[4]], ids=[c[0] for c in CASES if "|" not in c[4]]
)
def test_the_model_upcoming_matches_the_case_set(case):
    """The same cases through the models: a calendar row, a schedule row, ``upcoming()``."""
    _, country, zone, kind, definition, policy, business, weekend, after, expected = case
    cal = state.save_calendar(
        ExclusionCalendar(
            name=f"h-{country.lower()}",
            holidays_country=country,
            weekend_days=weekend or ["saturday", "sunday"],
        )
    )
    assert cal.weekend_days == sorted(weekend or [6, 7])
    row = Schedule(
        name="bd",
        callback="tests.noop",
        kind=kind,
        timezone=zone,
        cron=definition if kind == "cron" else "",
        rrule=definition if kind == "rrule" else "",
        start_at=Z(2025, 12, 1, 0) if kind == "rrule" else None,
        exclusion_policy=policy,
        rrule_business_days=business,
    )
    row.full_clean()
    row.save()
    row.exclusion_calendars.set([cal])
    row = Schedule.objects.get(pk=row.pk)
    assert row.upcoming(len(expected), after=after) == expected


# ---------------------------------------------------------------------------------------
# Counting: every nominal slot runs (in place or moved) or is counted
# ---------------------------------------------------------------------------------------


def test_coalesced_slots_are_counted_and_moved_ones_say_where():
    spec = _spec("JP", "Asia/Tokyo", "cron", "0 9 * * *", NEXT, False, None)
    days = timing.excluded_days(spec, Z(2026, 5, 2, 0), Z(2026, 5, 7, 1))
    # May 2-3 (weekend), 4-6 (holidays): all move to Thursday May 7 at 09:00, where May 7's
    # own slot runs: five slots coalesced, none run moved.
    assert [(d.exclusion.date, d.count, d.moved) for d in days] == [
        (date(2026, 5, d), 1, 0) for d in (2, 3, 4, 5, 6)
    ]
    monthly = _spec("JP", "Asia/Tokyo", "cron", "0 9 20 * *", NEXT, False, None)
    [day] = timing.excluded_days(monthly, Z(2026, 3, 1, 0), Z(2026, 3, 31, 0))
    assert (day.exclusion.date, day.count, day.moved, day.moved_to) == (
        date(2026, 3, 20),
        0,
        1,
        Z(2026, 3, 23, 0),
    )
    assert "Vernal Equinox" in day.exclusion.reason or day.exclusion.reason


CRONS = ["0 9 * * *", "30 2 * * *", "0 18 28-31 * *", "15 */6 * * *", "0 9 1,15 * *"]
ZONES = ["Europe/Paris", "America/New_York", "Asia/Tokyo"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cron=st.sampled_from(CRONS),
    zone=st.sampled_from(ZONES),
    policy=st.sampled_from([PREV, NEXT]),
    weekend=st.sets(st.integers(1, 7), max_size=3),
    excluded=st.sets(st.integers(0, 120), max_size=25),
    start=st.integers(0, 300),
)
def test_every_nominal_slot_runs_or_is_counted(cron, zone, policy, weekend, excluded, start):
    base = date(2026, 1, 1)
    dates = [("c", base + timedelta(days=d), "closed") for d in excluded]
    spec = Spec(
        kind="cron",
        cron=cron,
        timezone=zone,
        exclusions=exclusions_of(dates, [], [("c", sorted(weekend))]),
        exclusion_policy=policy,
        weekend_days=frozenset(weekend),
    )
    lo = Z(2026, 1, 1, 0) + timedelta(days=start % 60)
    hi = lo + timedelta(days=30)
    plain = Spec(kind="cron", cron=cron, timezone=zone)
    nominal = timing.count_slots(plain, lo, hi + timedelta(seconds=1))
    from django_durable_schedules.timing.moved_slots import moved_grid

    grid = moved_grid(spec)
    test = spec.business_day_test()
    fired, previous = 0, None
    cursor = lo - timedelta(days=40)
    while True:
        move = grid.first_from(cursor)
        if move is None or move.at > hi + timedelta(days=40):
            break
        local = move.at.astimezone(spec_zone(zone)).date()
        assert test(local)  # a slot always runs on a business day
        assert previous is None or move.at > previous  # never before the previous run
        if lo <= move.nominal <= hi:
            fired += 1
        previous = move.at
        cursor = move.at + timedelta(seconds=1)
    counted = sum(d.count for d in timing.excluded_days(spec, lo, hi + timedelta(seconds=1)))
    assert fired + counted == nominal


# ---------------------------------------------------------------------------------------
# Validation and totality
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, ok",
    [
        ([6, 7], (6, 7)),
        (["Saturday", "sun"], (6, 7)),
        ([], ()),
        (["FR", 5], (5,)),
        ([7, 6, 6], (6, 7)),
    ],
)
def test_weekend_days_read_numbers_and_names(value, ok):
    assert timing.weekend_days(value) == ok


@pytest.mark.parametrize(
    "value", [[0], [8], ["someday"], "6,7", {"a": 1}, [1, 2, 3, 4, 5, 6, 7], [True]]
)
def test_weekend_days_refuse_what_is_no_weekday(value):
    with pytest.raises(timing.InvalidSchedule) as exc:
        timing.weekend_days(value)
    assert exc.value.field == "weekend_days"


@pytest.mark.django_db(transaction=True)
def test_the_calendar_refuses_bad_weekend_days_with_a_field_message():
    with pytest.raises(ValidationError) as exc:
        state.save_calendar(ExclusionCalendar(name="bad", weekend_days=[0, "xx"]))
    assert "weekend_days" in exc.value.message_dict


@pytest.mark.django_db(transaction=True)
def test_the_schedule_refuses_a_bad_policy_and_business_days_on_other_kinds():
    row = Schedule(
        name="x", callback="tests.noop", kind="interval", interval_seconds=60, exclusion_policy=NEXT
    )
    with pytest.raises(ValidationError) as exc:
        row.full_clean()
    assert "exclusion_policy" in exc.value.message_dict
    row = Schedule(
        name="y", callback="tests.noop", kind="cron", cron="0 9 * * *", rrule_business_days=True
    )
    with pytest.raises(ValidationError) as exc:
        row.full_clean()
    assert "rrule_business_days" in exc.value.message_dict
    row = Schedule(
        name="z",
        callback="tests.noop",
        kind="rrule",
        rrule="FREQ=WEEKLY;BYDAY=MO",
        rrule_business_days=True,
    )
    with pytest.raises(ValidationError) as exc:
        row.full_clean()
    assert "rrule_business_days" in exc.value.message_dict


@pytest.mark.django_db(transaction=True)
def test_the_api_takes_the_fields_and_answers_400_with_field_messages(admin_client):
    ok = admin_client.post(
        "/api/calendars/",
        {"name": "fr", "holidays_country": "FR", "weekend_days": ["fri", "sat"]},
        content_type="application/json",
    )
    assert ok.status_code == 201, ok.content
    assert ok.json()["weekend_days"] == [5, 6]
    bad = admin_client.post(
        "/api/calendars/", {"name": "b", "weekend_days": [9]}, content_type="application/json"
    )
    assert bad.status_code == 400 and "weekend_days" in bad.json()
    made = admin_client.post(
        "/api/schedules/",
        {
            "name": "eom",
            "callback": "tests.noop",
            "kind": "rrule",
            "timezone": "Europe/Paris",
            "rrule": "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1;BYHOUR=18;BYMINUTE=0",
            "rrule_business_days": True,
            "exclusion_policy": PREV,
            "exclusion_calendars": ["fr"],
        },
        content_type="application/json",
    )
    assert made.status_code == 201, made.content
    assert made.json()["rrule_business_days"] is True
    assert made.json()["exclusion_policy"] == PREV
    bad = admin_client.post(
        "/api/schedules/",
        {
            "name": "b2",
            "callback": "tests.noop",
            "kind": "cron",
            "cron": "0 9 * * *",
            "exclusion_policy": "sometimes",
        },
        content_type="application/json",
    )
    assert bad.status_code == 400 and "exclusion_policy" in bad.json()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "column, value",
    [("exclusion_policy", "sometimes"), ("exclusion_policy", "")],
)
def test_a_bad_policy_written_behind_save_degrades_the_row_not_the_worker(column, value):
    good = Schedule.objects.create(
        name="good", callback="tests.noop", kind="interval", interval_seconds=60
    )
    bad = Schedule.objects.create(name="bad", callback="tests.noop", kind="cron", cron="* * * * *")
    Schedule.objects.filter(pk=bad.pk).update(**{column: value})
    now = Z(2031, 1, 1, 0)
    Schedule.objects.update(next_run_at=now - timedelta(seconds=5))
    claims = state.claim_due(worker="w1", now=now)
    state.complete([execute(c) for c in claims], now=now)
    bad.refresh_from_db()
    good.refresh_from_db()
    assert bad.status == "paused" and column in (bad.degraded_reason or "")
    assert good.occurrence == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("value", [[0, 9], "weekend", {"x": 1}, [1, 2, 3, 4, 5, 6, 7]])
def test_bad_weekend_days_written_behind_save_degrade_the_row_not_the_worker(value):
    cal = state.save_calendar(ExclusionCalendar(name="c"))
    ExclusionCalendar.objects.filter(pk=cal.pk).update(weekend_days=value)
    good = Schedule.objects.create(
        name="good", callback="tests.noop", kind="interval", interval_seconds=60
    )
    bad = Schedule.objects.create(
        name="bad", callback="tests.noop", kind="cron", cron="* * * * *", exclusion_policy=NEXT
    )
    bad.exclusion_calendars.set([cal])
    now = Z(2031, 1, 1, 0)
    Schedule.objects.update(next_run_at=now - timedelta(seconds=5))
    claims = state.claim_due(worker="w1", now=now)
    state.complete([execute(c) for c in claims], now=now)
    bad.refresh_from_db()
    good.refresh_from_db()
    assert bad.status == "paused" and "weekend" in (bad.degraded_reason or "")
    assert good.occurrence == 1


# ---------------------------------------------------------------------------------------
# With a worker: a moved run, and the event that says why
# ---------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_worker_runs_the_moved_slot_and_an_event_says_why():
    state.save_calendar(ExclusionCalendar(name="jp", holidays_country="JP"))
    row = Schedule(
        name="20th",
        callback="tests.noop",
        kind="cron",
        cron="0 9 20 * *",
        timezone="Asia/Tokyo",
        exclusion_policy=NEXT,
        created_at=Z(2026, 3, 1, 0),
    )
    row.full_clean()
    row.save()
    row.exclusion_calendars.set(state.calendars.resolve_calendars(["jp"]))
    row = Schedule.objects.get(pk=row.pk)
    row.next_run_at = row.plan(Z(2026, 3, 1, 0))
    row.save(update_fields=["next_run_at"])
    assert row.next_run_at == Z(2026, 3, 23, 0)
    now = Z(2026, 3, 23, 0, 0)
    claims = state.claim_due(worker="w1", now=now)
    assert [c.scheduled_for for c in claims] == [Z(2026, 3, 23, 0)]
    state.complete([execute(c) for c in claims], now=now)
    [attempt] = RunAttempt.objects.filter(schedule_id=row.pk)
    assert attempt.nominal_for == Z(2026, 3, 20, 0)  # the nominal slot, kept
    assert attempt.receipt.status == "succeeded"
    row.refresh_from_db()
    assert row.occurrence == 1 and row.next_run_at == Z(2026, 4, 20, 0)
    [event] = ScheduleEvent.objects.filter(schedule_id=row.pk, action="excluded")
    assert event.changes["date"] == "2026-03-20"
    assert event.changes["policy"] == NEXT
    assert event.changes["moved_to"] == Z(2026, 3, 23, 0).isoformat()
    assert event.changes["slots"] == 0 and event.changes["moved"] == 1
    assert row.excluded_count == 0


@pytest.mark.django_db(transaction=True)
def test_the_api_upcoming_lists_the_moved_fire_times_with_why(admin_client):
    state.save_calendar(ExclusionCalendar(name="jp", holidays_country="JP"))
    made = admin_client.post(
        "/api/schedules/",
        {
            "name": "20th",
            "callback": "tests.noop",
            "kind": "cron",
            "cron": "0 9 20 * *",
            "timezone": "Asia/Tokyo",
            "exclusion_policy": NEXT,
            "exclusion_calendars": ["jp"],
        },
        content_type="application/json",
    )
    assert made.status_code == 201, made.content
    pk = made.json()["id"]
    body = admin_client.get(
        f"/api/schedules/{pk}/upcoming/?count=3&after=2026-03-01T00:00:00Z"
    ).json()
    assert [t["utc"] for t in body["upcoming"]] == [
        "2026-03-23T00:00:00Z",
        "2026-04-20T00:00:00Z",
        "2026-05-20T00:00:00Z",
    ]
    [moved] = body["moved"]
    assert moved["utc"] == "2026-03-23T00:00:00Z"
    assert moved["nominal_utc"] == "2026-03-20T00:00:00Z"
    assert "next business day" in moved["reason"] and "2026-03-20" in moved["reason"]
    assert "excluded" not in body
    row = Schedule.objects.get(pk=pk)
    assert "moved to the next business day" in timing.describe(row.spec())


def test_register_declares_the_fields():
    from django_durable_schedules.declarations import build_declaration

    d = build_declaration(
        "eom",
        None,
        None,
        None,
        "Europe/Paris",
        None,
        None,
        None,
        None,
        rrule="FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1",
        exclusion_policy=PREV,
        rrule_business_days=True,
    )
    assert d is not None and d.exclusion_policy == PREV and d.rrule_business_days is True
    with pytest.raises(ValueError):
        build_declaration(
            "x", 60, None, None, None, None, None, None, None, exclusion_policy="sometimes"
        )
    with pytest.raises(TypeError):
        build_declaration(
            "x", None, "0 9 * * *", None, None, None, None, None, None, rrule_business_days="yes"
        )
    with pytest.raises(ValueError):
        build_declaration(
            "x", None, None, None, None, None, None, None, None, exclusion_policy=PREV
        )


@pytest.mark.django_db(transaction=True)
def test_a_worker_counts_the_weekend_slots_coalesced_into_a_business_day_run():
    """Daily at 09:00 Tokyo, next_business_day, no calendar (Saturday and Sunday): the
    weekend's slots move to Monday 09:00, which runs once; the two are counted."""
    row = Schedule(
        name="daily",
        callback="tests.noop",
        kind="cron",
        cron="0 9 * * *",
        timezone="Asia/Tokyo",
        exclusion_policy=NEXT,
        created_at=Z(2026, 3, 5, 12),
    )
    row.full_clean()
    row.save()
    row.next_run_at = row.plan(Z(2026, 3, 5, 12))
    row.save(update_fields=["next_run_at"])
    assert row.next_run_at == Z(2026, 3, 6, 0)  # Friday
    seen = []
    for now in (Z(2026, 3, 6, 0), Z(2026, 3, 9, 0), Z(2026, 3, 10, 0)):
        claims = state.claim_due(worker="w1", now=now)
        seen += [c.scheduled_for for c in claims]
        state.complete([execute(c) for c in claims], now=now)
    assert seen == [Z(2026, 3, 6, 0), Z(2026, 3, 9, 0), Z(2026, 3, 10, 0)]
    # Monday's run is Monday's own slot: it did not move (the weekend's were coalesced).
    assert set(
        RunAttempt.objects.filter(schedule_id=row.pk).values_list("nominal_for", flat=True)
    ) == {None}
    row.refresh_from_db()
    assert row.occurrence == 3 and row.missed_count == 0
    assert row.excluded_count == 2  # Saturday's and Sunday's slots, coalesced into Monday's
    events = ScheduleEvent.objects.filter(schedule_id=row.pk, action="excluded").order_by("at")
    dates = sorted((e.changes["date"], e.changes["slots"], e.changes["calendar"]) for e in events)
    assert dates == [("2026-03-07", 1, "weekend"), ("2026-03-08", 1, "weekend")]


@pytest.mark.django_db(transaction=True)
def test_a_worker_runs_a_month_end_early_with_previous_business_day():
    """The last day of the month at 18:00 Paris, previous_business_day: May 31 2026 is a
    Sunday, so it runs on Friday May 29 at 18:00 CEST (16:00Z); the event follows when
    the nominal slot passes."""
    state.save_calendar(ExclusionCalendar(name="fr", holidays_country="FR"))
    row = Schedule(
        name="eom",
        callback="tests.noop",
        kind="rrule",
        rrule=MONTH_END_18,
        timezone="Europe/Paris",
        start_at=Z(2026, 1, 1, 0),
        exclusion_policy=PREV,
    )
    row.full_clean()
    row.save()
    row.exclusion_calendars.set(state.calendars.resolve_calendars(["fr"]))
    row = Schedule.objects.get(pk=row.pk)
    row.next_run_at = row.plan(Z(2026, 5, 1, 0))
    row.save(update_fields=["next_run_at"])
    assert row.next_run_at == Z(2026, 5, 29, 16)
    claims = state.claim_due(worker="w1", now=Z(2026, 5, 29, 16))
    assert [c.scheduled_for for c in claims] == [Z(2026, 5, 29, 16)]
    state.complete([execute(c) for c in claims], now=Z(2026, 5, 29, 16))
    [attempt] = RunAttempt.objects.filter(schedule_id=row.pk)
    assert (attempt.scheduled_for, attempt.nominal_for) == (Z(2026, 5, 29, 16), Z(2026, 5, 31, 16))
    row.refresh_from_db()
    assert row.next_run_at == Z(2026, 6, 30, 16)
    claims = state.claim_due(worker="w1", now=Z(2026, 6, 30, 16))
    state.complete([execute(c) for c in claims], now=Z(2026, 6, 30, 16))
    row.refresh_from_db()
    assert row.occurrence == 2 and row.excluded_count == 0 and row.missed_count == 0
    [event] = ScheduleEvent.objects.filter(schedule_id=row.pk, action="excluded")
    assert event.changes["date"] == "2026-05-31" and event.changes["moved_to"] == (
        Z(2026, 5, 29, 16).isoformat()
    )
