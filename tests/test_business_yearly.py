"""Yearly rules counted over business days (issue #30, gap 2): ``rrule_business_days`` on
``FREQ=YEARLY`` rules, BYMONTHDAY over each BYMONTH month's business days and BYSETPOS
over the year's.

Hand-derived (weekdays from 1 Jan: 2026 Thursday, 2027 Friday, 2028 Saturday (leap),
2029 Monday; holidays as the ``holidays`` package lists them, checked below). Paris is
CET (UTC+1) in winter and CEST (UTC+2) from the last Sunday of March to the last Sunday
of October; New York EDT (UTC-4) in May, EST (UTC-5) in December. Every expected instant
is written out in UTC.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import holidays
import pytest
from django.core.exceptions import ValidationError
from hypothesis import given, settings
from hypothesis import strategies as st

from django_durable_schedules import timing
from django_durable_schedules.models import ExclusionCalendar, Schedule
from django_durable_schedules.timing import InvalidSchedule, Spec, exclusions_of

WEEKDAYS = "BYDAY=MO,TU,WE,TH,FR"


def Z(y: int, mo: int, d: int, h: int, mi: int = 0) -> datetime:
    return datetime(y, mo, d, h, mi, tzinfo=UTC)


def spec(rule: str, zone: str, country: str | None = None, dates=(), weekend=(6, 7)) -> Spec:
    return Spec(
        kind="rrule",
        rrule=rule,
        timezone=zone,
        start_at=Z(2026, 1, 1, 0),
        exclusions=exclusions_of(
            [("c", d, "") for d in dates],
            [("c", country, "")] if country else [],
            [("c", list(weekend))],
        ),
        rrule_business_days=True,
        weekend_days=frozenset(weekend),
    )


CASES = [
    # The last business day of December at 17:00 Paris (CET): 2026-12-31 is a Thursday,
    # 2027-12-31 a Friday, 2028-12-31 a Sunday (so Friday the 29th), 2029-12-31 a Monday.
    (
        "fr-last-business-day-of-december",
        f"FREQ=YEARLY;BYMONTH=12;{WEEKDAYS};BYSETPOS=-1;BYHOUR=17;BYMINUTE=0",
        "Europe/Paris",
        "FR",
        [Z(2026, 12, 31, 16), Z(2027, 12, 31, 16), Z(2028, 12, 29, 16), Z(2029, 12, 31, 16)],
    ),
    # The same in New York (EST) on the US calendar: 2027-12-31 is New Year's Day
    # (observed: 2028-01-01 is a Saturday), so 2027's last business day is Thursday the 30th.
    (
        "us-last-business-day-of-december",
        f"FREQ=YEARLY;BYMONTH=12;{WEEKDAYS};BYSETPOS=-1;BYHOUR=17;BYMINUTE=0",
        "America/New_York",
        "US",
        [Z(2026, 12, 31, 22), Z(2027, 12, 30, 22), Z(2028, 12, 29, 22), Z(2029, 12, 31, 22)],
    ),
    # The last weekday of May is a holiday: 2027-05-31 is a Monday, Memorial Day, so the
    # last business day is Friday the 28th (EDT). 2026: Sunday the 31st, Friday the 29th;
    # 2028: Wednesday the 31st (Memorial Day is the 29th); 2029: Thursday the 31st.
    (
        "us-last-business-day-of-may",
        f"FREQ=YEARLY;BYMONTH=5;{WEEKDAYS};BYSETPOS=-1;BYHOUR=17;BYMINUTE=0",
        "America/New_York",
        "US",
        [Z(2026, 5, 29, 21), Z(2027, 5, 28, 21), Z(2028, 5, 31, 21), Z(2029, 5, 31, 21)],
    ),
    # The first business day of January at 09:00 Paris (CET): 2026-01-01 (a Thursday) and
    # 2027-01-01 (a Friday) are holidays: the 2nd and the 4th (Monday); 2028-01-01 is a
    # Saturday: Monday the 3rd; 2029-01-01 a Monday holiday: Tuesday the 2nd.
    (
        "fr-first-business-day-of-january",
        "FREQ=YEARLY;BYMONTH=1;BYMONTHDAY=1;BYHOUR=9;BYMINUTE=0",
        "Europe/Paris",
        "FR",
        [Z(2026, 1, 2, 8), Z(2027, 1, 4, 8), Z(2028, 1, 3, 8), Z(2029, 1, 2, 8)],
    ),
    # BYMONTHDAY counts within each BYMONTH month: the last business day of each quarter
    # at 18:00 Paris, 2026: Tuesday 03-31 and 06-30 (CEST), Wednesday 09-30 (CEST),
    # Thursday 12-31 (CET); 2027-03-31 a Wednesday (CEST).
    (
        "fr-quarter-ends",
        "FREQ=YEARLY;BYMONTH=3,6,9,12;BYMONTHDAY=-1;BYHOUR=18;BYMINUTE=0",
        "Europe/Paris",
        "FR",
        [
            Z(2026, 3, 31, 16),
            Z(2026, 6, 30, 16),
            Z(2026, 9, 30, 16),
            Z(2026, 12, 31, 17),
            Z(2027, 3, 31, 16),
        ],
    ),
    # BYSETPOS counts over the year: of the quarter months' business days, only the
    # year's very last (Thursday 2026-12-31, Friday 2027-12-31).
    (
        "fr-bysetpos-over-the-year",
        f"FREQ=YEARLY;BYMONTH=3,6,9,12;{WEEKDAYS};BYSETPOS=-1;BYHOUR=18;BYMINUTE=0",
        "Europe/Paris",
        "FR",
        [Z(2026, 12, 31, 17), Z(2027, 12, 31, 17)],
    ),
    # INTERVAL=2 counts years from DTSTART's (2026): 2026, 2028, 2030 (a Tuesday, 12-31).
    (
        "fr-every-other-year",
        f"FREQ=YEARLY;INTERVAL=2;BYMONTH=12;{WEEKDAYS};BYSETPOS=-1;BYHOUR=17;BYMINUTE=0",
        "Europe/Paris",
        "FR",
        [Z(2026, 12, 31, 16), Z(2028, 12, 29, 16), Z(2030, 12, 31, 16)],
    ),
]


def test_the_holidays_the_cases_were_derived_from():
    us = holidays.country_holidays("US", years=[2027, 2028])
    assert date(2027, 12, 31) in us and date(2027, 5, 31) in us and date(2028, 5, 29) in us
    fr = holidays.country_holidays("FR", years=[2026, 2027, 2028, 2029])
    assert {date(y, 1, 1) for y in (2026, 2027, 2028, 2029)} <= set(fr)
    assert not {date(2026, 12, 31), date(2027, 12, 31), date(2026, 1, 2)} & set(fr)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_upcoming_matches_the_hand_derived_instants(case):
    _, rule, zone, country, expected = case
    s = spec(rule, zone, country)
    assert timing.upcoming(s, Z(2026, 1, 1, 0), len(expected)) == expected
    # Backwards too: the latest slot at or before each one is itself.
    for at in expected:
        start = Z(2025, 1, 1, 0)
        assert timing.latest_slot_at_or_before(s, at, not_before=start) == at
        assert timing.latest_slot_at_or_before(s, at - timedelta(seconds=1), not_before=start) != at
    assert timing.count_slots(s, Z(2026, 1, 1, 0), expected[-1] + timedelta(seconds=1)) == len(
        expected
    )


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        (f"FREQ=WEEKLY;{WEEKDAYS}", "FREQ=MONTHLY or FREQ=YEARLY"),
        ("FREQ=DAILY", "FREQ=MONTHLY or FREQ=YEARLY"),
        (f"FREQ=YEARLY;{WEEKDAYS};BYSETPOS=-1", "BYMONTH"),
        ("FREQ=YEARLY;BYMONTHDAY=1", "BYMONTH"),
        ("FREQ=YEARLY;BYWEEKNO=1", "BYWEEKNO"),
    ],
)
def test_other_rules_are_refused_with_a_field_message(rule, message):
    with pytest.raises(InvalidSchedule) as exc:
        spec(rule, "UTC").validate()
    assert exc.value.field == "rrule_business_days" and message in exc.value.message


@pytest.mark.django_db(transaction=True)
def test_the_model_takes_a_yearly_rule_and_refuses_a_weekly_one_on_the_field():
    from django_durable_schedules import state

    state.save_calendar(ExclusionCalendar(name="us", holidays_country="US"))
    row = Schedule(
        name="yearend",
        callback="tests.noop",
        kind="rrule",
        timezone="America/New_York",
        rrule=f"FREQ=YEARLY;BYMONTH=12;{WEEKDAYS};BYSETPOS=-1;BYHOUR=17;BYMINUTE=0",
        start_at=Z(2027, 1, 1, 0),
        rrule_business_days=True,
    )
    row.full_clean()
    row.save()
    state.set_schedule_calendars(row.pk, ["us"])
    row.refresh_from_db()
    assert row.upcoming(2, after=Z(2027, 1, 1, 0)) == [Z(2027, 12, 30, 22), Z(2028, 12, 29, 22)]
    weekly = Schedule(
        name="weekly",
        callback="tests.noop",
        kind="rrule",
        rrule=f"FREQ=WEEKLY;{WEEKDAYS}",
        rrule_business_days=True,
    )
    with pytest.raises(ValidationError) as exc:
        weekly.full_clean()
    assert "FREQ=MONTHLY or FREQ=YEARLY" in str(exc.value.message_dict["rrule_business_days"])


@settings(max_examples=80, deadline=None)
@given(
    months=st.lists(st.integers(1, 12), min_size=1, max_size=4, unique=True),
    day=st.sampled_from([1, 2, 3, -1, -2, 5, 20, -10]),
    excluded=st.sets(st.dates(date(2026, 1, 1), date(2028, 12, 31)), max_size=40),
    weekend=st.sampled_from([(6, 7), (5, 6), (7,), ()]),
)
def test_a_yearly_rule_of_its_months_is_the_monthly_rule_of_the_same_months(
    months, day, excluded, weekend
):
    """Property: BYMONTHDAY counts within each month, so a YEARLY rule over BYMONTH months
    has the slots of the MONTHLY rule restricted to them, whatever the excluded dates and
    weekend; each slot is on a business day."""
    by = ",".join(map(str, sorted(months)))
    tail = f"BYMONTH={by};BYMONTHDAY={day};BYHOUR=9;BYMINUTE=0"
    yearly = spec(f"FREQ=YEARLY;{tail}", "Europe/Paris", dates=excluded, weekend=weekend)
    monthly = spec(f"FREQ=MONTHLY;{tail}", "Europe/Paris", dates=excluded, weekend=weekend)
    found = timing.upcoming(yearly, Z(2026, 1, 1, 0), 8)
    assert found == timing.upcoming(monthly, Z(2026, 1, 1, 0), 8)
    business = yearly.business_day_test()
    for at in found:
        assert business(at.astimezone(ZoneInfo("Europe/Paris")).date())


@settings(max_examples=60, deadline=None)
@given(
    month=st.integers(1, 12),
    excluded=st.sets(st.dates(date(2026, 1, 1), date(2029, 12, 31)), max_size=40),
)
def test_the_last_business_day_of_a_month_each_year_is_the_monthly_ones_in_that_month(
    month, excluded
):
    """Property: with one BYMONTH month, BYSETPOS over the year is BYSETPOS over that
    month: the yearly rule's slots are the monthly rule's slots that fall in it."""
    rule = f"{WEEKDAYS};BYSETPOS=-1;BYHOUR=17;BYMINUTE=0"
    yearly = spec(f"FREQ=YEARLY;BYMONTH={month};{rule}", "Europe/Paris", dates=excluded)
    monthly = spec(f"FREQ=MONTHLY;{rule}", "Europe/Paris", dates=excluded)
    found = timing.upcoming(yearly, Z(2026, 1, 1, 0), 4)
    expected = [at for at in timing.upcoming(monthly, Z(2026, 1, 1, 0), 48) if at.month == month][
        :4
    ]
    assert found == expected


@pytest.mark.django_db(transaction=True)
def test_the_form_and_the_schema_say_yearly_rules_count_too(admin_client):
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator(patterns=None).get_schema(request=None, public=True)
    prop = schema["components"]["schemas"]["Schedule"]["properties"]["rrule_business_days"]
    assert "FREQ=YEARLY with BYMONTH" in prop["description"]
    page = admin_client.get("/admin/durable_schedules/schedule/add/").content.decode()
    assert "FREQ=YEARLY with BYMONTH" in page


def test_the_model_help_text_says_yearly_rules_count_too():
    """The field's own help text (migration 0034), read wherever the model is described
    (a ModelForm, ``manage.py inspectdb``-like tools, the migrations' state): was MONTHLY
    only, with the admin's form and the API's schema overriding it."""
    from django.db.migrations.loader import MigrationLoader

    field = Schedule._meta.get_field("rrule_business_days")
    assert "FREQ=YEARLY with BYMONTH" in field.help_text
    assert "(FREQ=MONTHLY):" not in field.help_text
    loader = MigrationLoader(None, ignore_no_migrations=True)
    migrated = loader.project_state().models["durable_schedules", "schedule"]
    assert migrated.fields["rrule_business_days"].help_text == field.help_text
