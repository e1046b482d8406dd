"""The words of a schedule say its business-day rules (issue #30, gap 1): an RRULE counted
over business days (``rrule_business_days``) and an ``exclusion_policy`` that moves slots,
with the calendars that make the business days, wherever the words are shown (the API's
``cron_description`` / ``rrule_description``, the admin's cadence column, ``manage.py
schedules upcoming`` and ``show``)."""

from __future__ import annotations

from io import StringIO
from unittest.mock import patch

import pytest
from django.core.management import call_command
from django.urls import reverse
from hypothesis import given, settings
from hypothesis import strategies as st

from django_durable_schedules import state, timing
from django_durable_schedules.admin.display import cadence
from django_durable_schedules.cron_words import (
    business_in_words,
    schedule_description,
    schedule_in_words,
)
from django_durable_schedules.db.names import with_calendar_names
from django_durable_schedules.models import ExclusionCalendar, Schedule

LAST_BUSINESS = "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1;BYHOUR=18;BYMINUTE=0"
COUNTED = "on the last weekday (Monday to Friday) of every month at 18:00"
PREV_WORDS = (
    "moved to the previous business day (same time of day) when it falls on an excluded "
    "date or a weekend day"
)
NEXT_WORDS = PREV_WORDS.replace("previous", "next")


def _row(**fields) -> Schedule:
    base = {"name": "w", "callback": "tests.noop", "kind": "cron", "cron": "0 9 20 * *"}
    return Schedule(**{**base, **fields})


def test_defaults_add_nothing():
    assert schedule_in_words(_row()) == "At 09:00, on day 20 of the month"
    assert business_in_words(_row()) == ""


def test_a_policy_that_moves_is_said_after_the_words():
    assert schedule_in_words(_row(exclusion_policy="next_business_day")) == (
        f"At 09:00, on day 20 of the month, {NEXT_WORDS}"
    )
    assert schedule_in_words(_row(exclusion_policy="previous_business_day")).endswith(PREV_WORDS)


def test_a_rule_counted_over_business_days_says_so():
    row = _row(kind="rrule", cron="", rrule=LAST_BUSINESS, rrule_business_days=True)
    words = schedule_in_words(row)
    assert words.endswith(", counted over business days"), words
    assert "BYSETPOS" not in words and "rrule_business_days" not in words  # plain English


def test_the_calendars_are_named_when_the_row_holds_them():
    row = _row(exclusion_policy="previous_business_day")
    row.__dict__["_calendar_names"] = "fr,us"  # as db.names.with_calendar_names annotates
    assert schedule_in_words(row).endswith(f"{PREV_WORDS} (calendars fr, us)")
    row.__dict__["_calendar_names"] = "fr"
    assert schedule_in_words(row).endswith(f"{PREV_WORDS} (calendar fr)")
    row.__dict__["_calendar_names"] = None  # annotated: no calendar
    assert schedule_in_words(row).endswith(
        "(no exclusion calendar: business days are Monday to Friday)"
    )


@settings(max_examples=60, deadline=None)
@given(
    policy=st.sampled_from(["skip", "previous_business_day", "next_business_day"]),
    counted=st.booleans(),
    names=st.none() | st.lists(st.sampled_from(["fr", "us", "jp"]), unique=True),
)
def test_the_words_say_each_rule_and_only_those_set(policy, counted, names):
    """Property: the words name the policy iff it moves slots, "counted over business days"
    iff the rule is, and the calendars (when known) iff one of the two applies."""
    row = _row(kind="rrule", cron="", rrule=LAST_BUSINESS, rrule_business_days=counted)
    row.exclusion_policy = policy
    if names is not None:
        row.__dict__["_calendar_names"] = ",".join(names) or None
    words = schedule_in_words(row)
    assert words.startswith(COUNTED)
    assert ("counted over business days" in words) == counted
    assert ("previous business day" in words) == (policy == "previous_business_day")
    assert ("next business day" in words) == (policy == "next_business_day")
    any_rule = counted or policy != "skip"
    assert ("calendar" in words) == (any_rule and names is not None)
    for name in names or ():
        assert (f" {name}" in words) == any_rule


@pytest.mark.django_db(transaction=True)
def test_every_surface_says_the_business_days(admin_client, django_assert_max_num_queries):
    state.save_calendar(ExclusionCalendar(name="fr", holidays_country="FR"))
    made = admin_client.post(
        "/api/schedules/",
        {
            "name": "eom",
            "callback": "tests.noop",
            "kind": "rrule",
            "timezone": "Europe/Paris",
            "rrule": LAST_BUSINESS,
            "rrule_business_days": True,
            "exclusion_policy": "previous_business_day",
            "exclusion_calendars": ["fr"],
        },
        content_type="application/json",
    )
    assert made.status_code == 201, made.content
    expected = f"{COUNTED}, counted over business days, {PREV_WORDS} (calendar fr)"
    assert made.json()["rrule_description"] == expected
    pk = made.json()["id"]
    assert admin_client.get(f"/api/schedules/{pk}/").json()["rrule_description"] == expected
    listed = admin_client.get("/api/schedules/").json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert [r["rrule_description"] for r in rows] == [expected]
    page = admin_client.get(reverse("admin:durable_schedules_schedule_changelist"))
    assert expected in page.content.decode()
    for action in ("upcoming", "show"):
        out = StringIO()
        call_command("schedules", action, "eom", stdout=out)
        assert expected in out.getvalue(), (action, out.getvalue())


@pytest.mark.django_db(transaction=True)
def test_a_cron_with_a_policy_and_no_calendar_says_monday_to_friday(admin_client):
    made = admin_client.post(
        "/api/schedules/",
        {
            "name": "20th",
            "callback": "tests.noop",
            "kind": "cron",
            "cron": "0 9 20 * *",
            "exclusion_policy": "next_business_day",
        },
        content_type="application/json",
    )
    assert made.status_code == 201, made.content
    assert made.json()["cron_description"] == (
        f"At 09:00, on day 20 of the month, {NEXT_WORDS} "
        "(no exclusion calendar: business days are Monday to Friday)"
    )
    assert Schedule.objects.get(name="20th").exclusion_policy == "next_business_day"


@pytest.mark.django_db(transaction=True)
def test_the_admin_cadence_says_the_policy_once(admin_client):
    state.save_calendar(ExclusionCalendar(name="jp", holidays_country="JP"))
    made = admin_client.post(
        "/api/schedules/",
        {
            "name": "20th",
            "callback": "tests.noop",
            "kind": "cron",
            "cron": "0 9 20 * *",
            "timezone": "Asia/Tokyo",
            "exclusion_policy": "next_business_day",
            "exclusion_calendars": ["jp"],
        },
        content_type="application/json",
    )
    assert made.status_code == 201, made.content
    page = admin_client.get(reverse("admin:durable_schedules_schedule_changelist"))
    html = page.content.decode()
    assert html.count("next business day") == 1
    assert f"At 09:00, on day 20 of the month, {NEXT_WORDS} (calendar jp)" in html
    assert "cron &#x27;0 9 20 * *&#x27; (Asia/Tokyo)" in html or "cron '0 9 20 * *'" in html


def _eom(client, name: str, calendars: list[str]) -> dict:
    made = client.post(
        "/api/schedules/",
        {
            "name": name,
            "callback": "tests.noop",
            "kind": "cron",
            "cron": "0 9 20 * *",
            "timezone": "Asia/Jerusalem",
            "exclusion_policy": "next_business_day",
            "exclusion_calendars": calendars,
        },
        content_type="application/json",
    )
    assert made.status_code == 201, made.content
    return made.json()


@pytest.mark.django_db(transaction=True)
def test_the_description_names_the_calendars_weekend_days(
    admin_client, django_assert_max_num_queries
):
    """The ``description`` (and ``manage.py schedules`` lines) name the weekend days the
    engine uses: a calendar's own, the union of several calendars' (a day any of them
    calls a weekend day), Saturday and Sunday without calendars; was always "Saturday and
    Sunday"."""
    state.save_calendar(ExclusionCalendar(name="il", weekend_days=[5, 6]))
    state.save_calendar(ExclusionCalendar(name="fr"))  # default: Saturday and Sunday
    state.save_calendar(ExclusionCalendar(name="none", weekend_days=[]))
    cases = {
        "one": (["il"], "Friday and Saturday"),
        "two": (["il", "fr"], "Friday, Saturday and Sunday"),
        "empty": (["none"], "no weekend"),
        "bare": ([], "Saturday and Sunday"),
    }
    pks = {}
    for name, (calendars, weekend) in cases.items():
        body = _eom(admin_client, name, calendars)
        pks[name] = body["id"]
        assert body["description"].endswith(f"(weekend: {weekend})"), (name, body)
        detail = admin_client.get(f"/api/schedules/{body['id']}/").json()
        assert detail["description"] == body["description"], name
        row = Schedule.objects.get(name=name)
        spec = row.spec()  # what the engine plans with
        assert timing.weekend_words(spec.weekend_days) == weekend, name
    with django_assert_max_num_queries(3):  # session, user; the weekends in the page's one
        listed = admin_client.get("/api/schedules/").json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    got = {r["name"]: r["description"] for r in rows}
    for name, (_, weekend) in cases.items():
        assert got[name].endswith(f"(weekend: {weekend})"), (name, got[name])
    words = {r["name"]: r["cron_description"] for r in rows}
    assert words["one"].endswith(f"{NEXT_WORDS} (calendar il; weekend: Friday and Saturday)")
    assert words["two"].endswith("(calendars fr, il; weekend: Friday, Saturday and Sunday)")
    assert words["empty"].endswith("(calendar none; no weekend)")
    assert words["bare"].endswith("(no exclusion calendar: business days are Monday to Friday)")
    page = admin_client.get(reverse("admin:durable_schedules_schedule_changelist"))
    assert "(calendar il; weekend: Friday and Saturday)" in page.content.decode()
    out = StringIO()
    call_command("schedules", "list", stdout=out)
    for action in ("upcoming", "show"):
        call_command("schedules", action, "two", stdout=out)
    assert "(weekend: Friday, Saturday and Sunday)" in out.getvalue()
    assert "(calendars fr, il; weekend: Friday, Saturday and Sunday)" in out.getvalue()
    assert "(weekend: Saturday and Sunday)" not in out.getvalue().split("two:")[1]


@pytest.mark.django_db(transaction=True)
def test_every_surface_describes_with_one_function(admin_client):
    """The admin's cadence, the API's ``description`` and ``manage.py schedules`` give the
    same words (:func:`cron_words.schedule_description`)."""
    state.save_calendar(ExclusionCalendar(name="il", weekend_days=[5, 6]))
    body = _eom(admin_client, "il-20th", ["il"])
    row = Schedule.objects.get(name="il-20th")  # no annotation: one query reads them
    expected = schedule_description(row)
    assert expected.endswith("(weekend: Friday and Saturday)")
    assert expected == body["description"]
    with_names = with_calendar_names(Schedule.objects.filter(pk=row.pk)).get()
    assert schedule_description(with_names) == expected
    with patch("django_durable_schedules.admin.display.schedule_in_words", return_value=""):
        assert str(cadence(with_names)) == body["description"]  # no words: the description
