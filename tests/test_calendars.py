"""Exclusion calendars: holidays and dates kept in the database, on the grid, at claims,
in counters and events, through the state functions, the admin, the API and the command."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from django.core.exceptions import ValidationError

from django_durable_schedules import state, timing
from django_durable_schedules.models import (
    ExclusionCalendar,
    ExclusionDate,
    RunAttempt,
    RunReceipt,
    Schedule,
    ScheduleEvent,
)
from django_durable_schedules.worker.execution.runner import execute

pytestmark = pytest.mark.django_db(transaction=True)

S = timedelta(seconds=1)
PARIS_7 = "0 7 * * *"
# 07:00 Paris in July and May 2027 (CEST, UTC+2) is 05:00Z.
JUL = {d: datetime(2027, 7, d, 5, tzinfo=UTC) for d in range(10, 20)}
MAY = {d: datetime(2027, 5, d, 5, tzinfo=UTC) for d in range(1, 10)}
MAY[1] = datetime(2027, 5, 1, 5, tzinfo=UTC)
APR_30 = datetime(2027, 4, 30, 5, tzinfo=UTC)


def fr() -> ExclusionCalendar:
    return state.save_calendar(ExclusionCalendar(name="fr-holidays", holidays_country="FR"))


def make(name="daily", cron=PARIS_7, calendars=("fr-holidays",), now=None, **kw):
    """A cron schedule in Paris with calendars, planned from ``now`` (default 07-12 12:00Z)."""
    kw.setdefault("callback", "tests.noop")
    row = Schedule(
        name=name,
        kind="cron",
        cron=cron,
        timezone="Europe/Paris",
        created_at=now or datetime(2027, 7, 12, 12, tzinfo=UTC),
        **kw,
    )
    state.calendars.attach_calendars(row, state.calendars.resolve_calendars(calendars))
    row.full_clean()
    row.save()
    row.exclusion_calendars.set(state.calendars.resolve_calendars(calendars))
    # save() planned from the database clock: plan again from the test's clock.
    row.next_run_at = row.plan(row.created_at)
    row.save(update_fields=["next_run_at"])
    return Schedule.objects.get(pk=row.pk)


def run_at(now, **kw):
    claims = state.claim_due(worker="w1", now=now, **kw)
    state.complete([execute(c) for c in claims], now=now)
    return claims


def walk(start, end, step=timedelta(hours=1)):
    """Run the worker every ``step`` from ``start`` to ``end``; the slots it ran."""
    ran = []
    now = start
    while now <= end:
        ran += [c.scheduled_for for c in run_at(now)]
        now += step
    return ran


# ---------------------------------------------------------------------------------------
# The pure time math
# ---------------------------------------------------------------------------------------

FR = timing.exclusions_of([], [("fr-holidays", "FR", "")])


def spec(cron=PARIS_7, exclusions=FR, **kw):
    return timing.Spec(kind="cron", cron=cron, timezone="Europe/Paris", exclusions=exclusions, **kw)


@pytest.mark.vendor_independent  # pure time math (timing.Spec)
def test_daily_paris_skips_july_14_and_may_1():
    assert timing.upcoming(spec(), JUL[12] + S, 3) == [JUL[13], JUL[15], JUL[16]]
    assert timing.upcoming(spec(), APR_30 - S, 3) == [APR_30, MAY[2], MAY[3]]


@pytest.mark.vendor_independent  # pure time math
def test_weekday_cron_may_1_is_a_saturday_and_excludes_nothing_extra():
    weekdays = spec("0 7 * * 1-5")
    plain = spec("0 7 * * 1-5", exclusions=None)
    # 2027-05-01 is a Saturday: the weekday job has no slot there, so the holiday changes
    # nothing (May 8, Victory Day, is a Saturday too).
    assert timing.upcoming(weekdays, APR_30 - S, 4) == timing.upcoming(plain, APR_30 - S, 4)
    assert timing.excluded_days(weekdays, APR_30, MAY[5]) == []
    # 2027-07-14 is a Wednesday: excluded.
    assert timing.upcoming(weekdays, JUL[12] + S, 3) == [JUL[13], JUL[15], JUL[16]]
    [day] = timing.excluded_days(weekdays, JUL[12], JUL[16])
    assert (day.exclusion.calendar, day.exclusion.date, day.count) == (
        "fr-holidays",
        date(2027, 7, 14),
        1,
    )
    assert day.exclusion.reason == "Fête nationale" and day.first == JUL[14]


@pytest.mark.vendor_independent  # pure time math
def test_upcoming_slots_marks_the_excluded_ones():
    views = timing.upcoming_slots(spec(), JUL[12] + S, 3)
    assert [(v.at, v.excluded_by is not None) for v in views] == [
        (JUL[13], False),
        (JUL[14], True),
        (JUL[15], False),
        (JUL[16], False),
    ]
    assert str(views[1].excluded_by) == (
        "excluded by calendar fr-holidays (2027-07-14: Fête nationale)"
    )


@pytest.mark.vendor_independent  # pure time math and gettext
@pytest.mark.parametrize("locale", ["C.UTF-8", "en_US.UTF-8", "de_DE.UTF-8", ""])
def test_holiday_names_do_not_depend_on_the_process_locale(monkeypatch, locale):
    """The holidays package translates names through gettext, which reads LANGUAGE and
    LANG: the names (and so the receipts, events and upcoming views) must not change with
    the locale a worker happens to run in (Python 3.11 with LANG=C.UTF-8 gave English)."""
    from django_durable_schedules.timing import exclusions

    for name in ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.setenv(name, locale)
    exclusions._holiday_dates.cache_clear()
    try:
        views = timing.upcoming_slots(spec(), JUL[12] + S, 3)
        assert views[1].excluded_by.reason == "Fête nationale"
    finally:
        exclusions._holiday_dates.cache_clear()


@pytest.mark.vendor_independent  # pure time math
def test_count_and_latest_skip_excluded_dates():
    assert timing.count_slots(spec(), JUL[13], JUL[16]) == 2  # 13, 15
    assert timing.count_slots(spec(exclusions=None), JUL[13], JUL[16]) == 3
    assert (
        timing.latest_slot_at_or_before(spec(), JUL[14] + 3600 * S, not_before=JUL[10]) == JUL[13]
    )


@pytest.mark.vendor_independent  # pure time math (dates given, not read)
def test_dates_kept_in_the_database_and_local_dates():
    own = timing.exclusions_of([("plant", date(2027, 7, 13), "shutdown")], [])
    assert timing.upcoming(spec(exclusions=own), JUL[12] + S, 2) == [JUL[14], JUL[15]]
    # A local date: 00:30 Paris on 07-13 is 22:30Z on 07-12 and is excluded.
    late = spec("30 0 * * *", exclusions=own)
    assert timing.upcoming(late, datetime(2027, 7, 11, 23, tzinfo=UTC), 1) == [
        datetime(2027, 7, 13, 22, 30, tzinfo=UTC)
    ]


@pytest.mark.vendor_independent  # pure time math
def test_interval_and_rrule_kinds_use_the_local_date_of_the_slot():
    anchor = datetime(2027, 7, 1, 5, tzinfo=UTC)
    every_day = timing.Spec(
        kind="interval",
        interval_seconds=86400,
        anchor=anchor,
        timezone="Europe/Paris",
        exclusions=FR,
    )
    assert timing.upcoming(every_day, JUL[12] + S, 2) == [JUL[13], JUL[15]]
    rule = timing.Spec(
        kind="rrule",
        rrule="FREQ=DAILY;BYHOUR=7",
        anchor=anchor,
        timezone="Europe/Paris",
        exclusions=FR,
    )
    assert timing.upcoming(rule, JUL[12] + S, 2) == [JUL[13], JUL[15]]


@pytest.mark.vendor_independent  # pure time math
def test_an_interval_reads_its_dates_in_its_zone():
    every_6h = timing.Spec(
        kind="interval",
        interval_seconds=6 * 3600,
        anchor=datetime(2027, 6, 30, 22, tzinfo=UTC),  # midnight in Paris
        timezone="Europe/Paris",
        exclusions=FR,
    )
    # 22:00Z on 07-13 is 00:00 on 07-14 in Paris: excluded, as are 04:00Z, 10:00Z and
    # 16:00Z; 22:00Z on 07-14 is 00:00 on 07-15 in Paris.
    assert timing.upcoming(every_6h, datetime(2027, 7, 13, 12, tzinfo=UTC), 3) == [
        datetime(2027, 7, 13, 16, tzinfo=UTC),
        datetime(2027, 7, 14, 22, tzinfo=UTC),
        datetime(2027, 7, 15, 4, tzinfo=UTC),
    ]
    assert timing.count_slots(every_6h, JUL[13], JUL[15]) == 4  # 07-13 10/16Z, 07-14 22Z, 07-15 04Z


@pytest.mark.vendor_independent  # pure time math
def test_a_calendar_that_excludes_every_slot_gives_up_bounded():
    every_14th = timing.exclusions_of([("all", date(y, 7, 14), "") for y in range(2027, 2500)], [])
    yearly = spec("0 7 14 7 *", exclusions=every_14th)
    with pytest.raises(timing.InvalidSchedule) as err:
        timing.next_slot_after(yearly, JUL[10])
    assert err.value.field == "exclusion_calendars" and "400 years" in err.value.message


@pytest.mark.vendor_independent  # pure validation of a Spec
def test_unknown_holiday_codes_are_field_errors():
    with pytest.raises(timing.InvalidSchedule) as err:
        spec(exclusions=timing.exclusions_of([], [("x", "XX", "")])).validate()
    assert err.value.field == "exclusion_calendars" and "'XX'" in err.value.message
    with pytest.raises(timing.InvalidSchedule):
        spec(exclusions=timing.exclusions_of([], [("x", "DE", "ZZ")])).validate()
    timing.Spec(kind="once", run_at=JUL[14]).validate()
    with pytest.raises(timing.InvalidSchedule):
        timing.Spec(kind="once", run_at=JUL[14], exclusions=FR).validate()


# ---------------------------------------------------------------------------------------
# The worker
# ---------------------------------------------------------------------------------------


@pytest.mark.vendor_independent  # holiday rules, injected clock
def test_worker_does_not_fire_on_july_14_and_counts_it():
    fr()
    s = make()
    assert s.next_run_at == JUL[13]
    ran = walk(JUL[12] + 18 * 3600 * S, JUL[16])
    assert ran == [JUL[13], JUL[15], JUL[16]]
    s.refresh_from_db()
    assert s.excluded_count == 1 and s.missed_count == 0
    [event] = ScheduleEvent.objects.filter(schedule=s, action="excluded")
    assert event.changes == {
        "calendar": "fr-holidays",
        "date": "2027-07-14",
        "reason": "Fête nationale",
        "slots": 1,
        "first_slot": JUL[14].isoformat(),
    }
    assert event.source == "worker"
    # Every attempt has exactly one receipt; the excluded slot has neither.
    assert RunAttempt.objects.count() == RunReceipt.objects.count() == 3


@pytest.mark.vendor_independent  # holiday rules, injected clock
def test_worker_may_1_2027():
    fr()
    make(now=datetime(2027, 4, 29, 12, tzinfo=UTC))
    weekdays = make("weekdays", cron="0 7 * * 1-5", now=datetime(2027, 4, 29, 12, tzinfo=UTC))
    ran = walk(datetime(2027, 4, 29, 13, tzinfo=UTC), MAY[4])
    daily = [d for d in ran]
    assert daily.count(APR_30) == 2 and MAY[1] not in daily
    weekdays.refresh_from_db()
    assert weekdays.excluded_count == 0  # Saturday: no slot to exclude
    assert Schedule.objects.get(name="daily").excluded_count == 1


def test_a_date_added_behind_the_state_functions_is_rechecked_at_the_claim():
    cal = fr()
    s = make()
    run_at(JUL[13])
    s.refresh_from_db()
    assert s.next_run_at == JUL[15]
    # Behind the state functions: next_run_at still says 07-15; the claim re-checks.
    ExclusionDate.objects.create(calendar=cal, date=date(2027, 7, 15), reason="bridge day")
    assert run_at(JUL[15] + S) == []
    s.refresh_from_db()
    assert s.next_run_at == JUL[16] and s.excluded_count == 2
    assert RunAttempt.objects.count() == 1


def test_a_date_added_through_state_replans_at_once():
    fr()
    s = make()
    run_at(JUL[13])
    state.add_dates("fr-holidays", [(date(2027, 7, 15), "bridge day")], now=JUL[13] + S)
    s.refresh_from_db()
    assert s.next_run_at == JUL[16]
    assert [v.at for v in s.upcoming_slots(2, after=JUL[13] + S)] == [
        JUL[14],
        JUL[15],
        JUL[16],
        JUL[17],
    ]
    state.remove_dates("fr-holidays", [date(2027, 7, 15)], now=JUL[13] + 2 * S)
    s.refresh_from_db()
    assert s.next_run_at == JUL[15]


def test_calendars_set_and_dropped_through_state():
    fr()
    s = make(calendars=())
    s.next_run_at = JUL[14]
    s.save(update_fields=["next_run_at"])
    state.set_schedule_calendars(s.pk, ["fr-holidays"], now=JUL[13] + S)
    s.refresh_from_db()
    assert s.next_run_at == JUL[15]
    assert ScheduleEvent.objects.filter(schedule=s, action="calendars").count() == 1
    state.delete_calendar("fr-holidays", now=JUL[13] + 2 * S)
    s.refresh_from_db()
    assert s.next_run_at == JUL[14] and not s.exclusion_calendars.exists()


def test_once_refuses_calendars():
    fr()
    with pytest.raises(ValidationError) as err:
        state.create_schedule(
            name="one",
            callback="tests.noop",
            kind="once",
            run_at=JUL[14],
            exclusion_calendars=["fr-holidays"],
        )
    assert "exclusion_calendars" in err.value.message_dict
    with pytest.raises(ValidationError):
        state.create_schedule(
            name="two",
            callback="tests.noop",
            kind="cron",
            cron="0 7 * * *",
            exclusion_calendars=["nope"],
        )


def test_create_schedule_with_calendars_plans_past_the_holiday():
    fr()
    row = state.create_schedule(
        name="c",
        callback="tests.noop",
        kind="cron",
        cron=PARIS_7,
        timezone="Europe/Paris",
        exclusion_calendars=["fr-holidays"],
    )
    assert [c.name for c in row.exclusion_calendars.all()] == ["fr-holidays"]
    [event] = ScheduleEvent.objects.filter(schedule=row, action="created")
    assert event.changes["exclusion_calendars"] == [None, ["fr-holidays"]]


def test_unknown_country_behind_save_degrades_only_that_schedule():
    cal = fr()
    bad = make("bad")
    good = make("good", calendars=())
    ExclusionCalendar.objects.filter(pk=cal.pk).update(holidays_country="XX")
    run_at(JUL[13])
    bad.refresh_from_db()
    good.refresh_from_db()
    assert bad.status == "paused" and "exclusion_calendars" in bad.degraded_reason
    assert "'XX'" in bad.degraded_reason
    [receipt] = RunReceipt.objects.filter(schedule=bad)
    assert receipt.status == "degraded"
    assert good.status == "active" and good.occurrence == 1
    with pytest.raises(state.StateConflict):
        state.enable(bad.pk)


def test_enable_does_not_count_slots_excluded_while_paused():
    fr()
    s = make()
    run_at(JUL[13])
    state.disable(s.pk)
    state.enable(s.pk, now=JUL[14] + 3600 * S)
    run_at(JUL[15])
    s.refresh_from_db()
    assert s.excluded_count == 0 and s.occurrence == 2


def test_claim_batch_with_calendars_keeps_queries_flat(django_assert_max_num_queries):
    fr()
    for i in range(30):
        make(f"s{i}")
    run_at(JUL[13])
    with django_assert_max_num_queries(20):
        claims = state.claim_due(worker="w1", now=JUL[15], limit=100)
    assert len(claims) == 30
    assert sum(s.excluded_count for s in Schedule.objects.all()) == 30


def test_a_claim_and_a_completion_of_rows_without_calendars_read_no_calendar_table():
    """Most schedules link no calendar: the claim's and the completion's locking reads say
    so (an EXISTS in the same statement), and no query reads the links or the dates."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for i in range(5):
        make(f"plain{i}", calendars=())
    with CaptureQueriesContext(connection) as ctx:
        claims = state.claim_due(worker="w1", now=JUL[15], limit=100)
        state.complete([execute(c) for c in claims], now=JUL[15])
    assert len(claims) == 5
    through = Schedule.exclusion_calendars.through._meta.db_table
    reads = [q["sql"] for q in ctx.captured_queries if "exclusiondate" in q["sql"]]
    quoted = (f'SELECT "{through}"', f"SELECT `{through}`")
    links = [q["sql"] for q in ctx.captured_queries if q["sql"].startswith(quoted)]
    assert reads == [] and links == []


# ---------------------------------------------------------------------------------------
# The admin, the API and the command
# ---------------------------------------------------------------------------------------


def test_command_lists_calendars_edits_dates_and_marks_excluded_slots(capsys):
    from django.core.management import call_command

    fr()
    make()
    call_command("schedules", "calendars", "list")
    out = capsys.readouterr().out
    assert "fr-holidays" in out and "FR" in out and "daily" in out
    call_command(
        "schedules", "calendars", "add-date", "fr-holidays", "2027-07-16", "--reason", "bridge"
    )
    assert ExclusionDate.objects.filter(date=date(2027, 7, 16), reason="bridge").exists()
    call_command("schedules", "upcoming", "daily", "--count", "3")
    out = capsys.readouterr().out
    assert "exclusion calendars: fr-holidays" in out
    call_command("schedules", "calendars", "remove-date", "fr-holidays", "2027-07-16")
    assert not ExclusionDate.objects.exists()


def test_command_upcoming_marks_july_14(capsys, monkeypatch):
    from django.core.management import call_command
    from django.utils import timezone as dj_timezone

    fr()
    make()
    monkeypatch.setattr(dj_timezone, "now", lambda: JUL[12] + S)
    call_command("schedules", "upcoming", "daily", "--count", "2")
    lines = capsys.readouterr().out.splitlines()
    [marked] = [line for line in lines if line.startswith("x ")]
    assert "2027-07-14 07:00:00 CEST" in marked and "Fête nationale" in marked
    assert any("2027-07-15 07:00:00 CEST" in line for line in lines)


@pytest.fixture
def api(admin_user):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(admin_user)
    return client


def test_api_calendars_crud_and_schedule_field(api):
    made = api.post(
        "/api/calendars/",
        {
            "name": "de-by",
            "holidays_country": "de",
            "holidays_subdivision": "by",
            "dates": [{"date": "2027-07-13", "reason": "plant shutdown"}],
        },
        format="json",
    )
    assert made.status_code == 201, made.json()
    body = made.json()
    assert body["holidays_country"] == "DE" and body["holidays_subdivision"] == "BY"
    assert body["dates"] == [{"date": "2027-07-13", "reason": "plant shutdown"}]
    bad = api.post("/api/calendars/", {"name": "x", "holidays_country": "XX"}, format="json")
    assert bad.status_code == 400 and "holidays_country" in bad.json()
    bad = api.post(
        "/api/calendars/",
        {"name": "y", "holidays_country": "DE", "holidays_subdivision": "ZZ"},
        format="json",
    )
    assert bad.status_code == 400 and "holidays_subdivision" in bad.json()
    created = api.post(
        "/api/schedules/",
        {
            "name": "daily",
            "callback": "tests.noop",
            "kind": "cron",
            "cron": PARIS_7,
            "timezone": "Europe/Paris",
            "exclusion_calendars": ["de-by"],
        },
        format="json",
    )
    assert created.status_code == 201, created.json()
    assert created.json()["exclusion_calendars"] == ["de-by"]
    assert created.json()["excluded_count"] == 0
    once = api.post(
        "/api/schedules/",
        {
            "name": "one",
            "callback": "tests.noop",
            "kind": "once",
            "run_at": "2027-07-14T05:00:00Z",
            "exclusion_calendars": ["de-by"],
        },
        format="json",
    )
    assert once.status_code == 400 and "exclusion_calendars" in once.json()
    unknown = api.post(
        "/api/schedules/",
        {
            "name": "two",
            "callback": "tests.noop",
            "kind": "cron",
            "cron": PARIS_7,
            "exclusion_calendars": ["nope"],
        },
        format="json",
    )
    assert unknown.status_code == 400 and "exclusion_calendars" in unknown.json()
    cal_id = body["id"]
    assert api.get(f"/api/calendars/{cal_id}/").json()["schedules"] == ["daily"]
    changed = api.patch(f"/api/calendars/{cal_id}/", {"dates": []}, format="json")
    assert changed.status_code == 200 and changed.json()["dates"] == []
    assert api.delete(f"/api/calendars/{cal_id}/").status_code == 204
    assert not ExclusionCalendar.objects.exists()


def test_api_upcoming_lists_excluded_slots_on_request(api):
    fr()
    s = make()
    plain = api.get(
        f"/api/schedules/{s.pk}/upcoming/", {"after": "2027-07-12T06:00:00Z", "count": 2}
    )
    assert plain.status_code == 200
    assert "excluded" not in plain.json()  # the shape is unchanged without the flag
    assert [t["utc"] for t in plain.json()["upcoming"]] == [
        "2027-07-13T05:00:00Z",
        "2027-07-15T05:00:00Z",
    ]
    full = api.get(
        f"/api/schedules/{s.pk}/upcoming/",
        {"after": "2027-07-12T06:00:00Z", "count": 2, "include_excluded": "1"},
    ).json()
    assert full["upcoming"] == plain.json()["upcoming"]
    assert full["excluded"] == [
        {
            "utc": "2027-07-14T05:00:00Z",
            "local": "2027-07-14T07:00:00+02:00",
            "calendar": "fr-holidays",
            "date": "2027-07-14",
            "reason": "Fête nationale",
        }
    ]


@pytest.mark.vendor_independent  # the OpenAPI document
def test_api_schema_has_the_calendars():
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator(patterns=None).get_schema(request=None, public=True)
    assert any(path.endswith("/calendars/") for path in schema["paths"])
    props = schema["components"]["schemas"]["Schedule"]["properties"]
    assert "exclusion_calendars" in props and "excluded_count" in props


def test_admin_calendar_pages_and_struck_through_upcoming(admin_client):
    from django.urls import reverse

    cal = fr()
    s = make(cron="0 7 13-15 7 *")  # the next slots after today: 2027-07-13, 14 and 15
    page = admin_client.get(reverse("admin:durable_schedules_exclusioncalendar_changelist"))
    assert page.status_code == 200 and b"fr-holidays" in page.content
    page = admin_client.get(
        reverse("admin:durable_schedules_exclusioncalendar_change", args=[cal.pk])
    )
    assert page.status_code == 200
    page = admin_client.get(reverse("admin:durable_schedules_schedule_change", args=[s.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    assert "<del>" in html and "Fête nationale" in html and "Excluded count" in html


def test_api_list_shows_calendar_names_in_one_query(api, django_assert_max_num_queries):
    fr()
    state.save_calendar(ExclusionCalendar(name="plant"))
    make("a", calendars=("fr-holidays", "plant"))
    make("b", calendars=())
    with django_assert_max_num_queries(1):
        rows = api.get("/api/schedules/").json()["results"]
    assert {r["name"]: r["exclusion_calendars"] for r in rows} == {
        "a": ["fr-holidays", "plant"],
        "b": [],
    }


def test_admin_adds_a_schedule_with_calendars_and_refuses_them_on_a_once(admin_client):
    from django.urls import reverse

    from .test_admin import _form_data

    cal = fr()
    add = reverse("admin:durable_schedules_schedule_add")
    data = _form_data(cron=PARIS_7, exclusion_calendars=[str(cal.pk)])
    response = admin_client.post(add, data, follow=True)
    assert response.status_code == 200
    row = Schedule.objects.get(name="made-in-admin")
    assert [c.name for c in row.exclusion_calendars.all()] == ["fr-holidays"]
    assert timing.local_date(row.next_run_at, "Europe/Paris") not in {
        date(2027, 5, 1),
        date(2027, 7, 14),
    }
    once = _form_data(
        name="one",
        kind="once",
        cron="",
        run_at="2027-07-14 09:00:00",
        exclusion_calendars=[str(cal.pk)],
    )
    response = admin_client.post(add, once)
    assert response.status_code == 200
    assert "exclusion_calendars" in response.context["adminform"].form.errors
    assert not Schedule.objects.filter(name="one").exists()


def test_admin_calendar_dates_inline_replans_its_schedules(admin_client):
    from django.urls import reverse

    cal = state.save_calendar(ExclusionCalendar(name="plant"))
    s = make(calendars=("plant",))
    s.next_run_at = JUL[14]
    s.save(update_fields=["next_run_at"])
    url = reverse("admin:durable_schedules_exclusioncalendar_change", args=[cal.pk])
    data = {
        "name": "plant",
        "description": "",
        "holidays_country": "",
        "holidays_subdivision": "",
        "dates-TOTAL_FORMS": "1",
        "dates-INITIAL_FORMS": "0",
        "dates-MIN_NUM_FORMS": "0",
        "dates-MAX_NUM_FORMS": "1000",
        "dates-0-date": "2027-07-14",
        "dates-0-reason": "inventory",
    }
    response = admin_client.post(url, data, follow=True)
    assert response.status_code == 200
    s.refresh_from_db()
    # Re-planned from the database's now (2026): the first slot after it that is not excluded.
    assert ExclusionDate.objects.get().reason == "inventory"
    assert s.next_run_at != JUL[14] and s.next_run_at < JUL[14]
    bad = {**data, "holidays_country": "XX", "dates-TOTAL_FORMS": "0"}
    response = admin_client.post(url, bad)
    assert "holidays_country" in response.context["adminform"].form.errors


def test_once_with_calendars_behind_the_checks_is_degraded_at_its_claim():
    cal = fr()
    one = state.create_schedule(name="one", callback="tests.noop", kind="once", run_at=JUL[13])
    one.exclusion_calendars.add(cal)  # behind the checks
    run_at(JUL[13])
    one.refresh_from_db()
    assert one.status == "paused" and "exclusion_calendars" in one.degraded_reason
    assert RunReceipt.objects.get(schedule=one).status == "degraded"


def test_downtime_over_a_holiday_counts_it_excluded_not_missed():
    fr()
    s = make()
    run_at(JUL[12] + 18 * 3600 * S)  # nothing due yet
    # The workers are down from before 07-13 07:00 to 07-15 12:00.
    [claim] = state.claim_due(worker="w1", now=JUL[15] + 7 * 3600 * S)
    assert claim.scheduled_for == JUL[15]  # coalesced into the latest slot that fires
    s.refresh_from_db()
    assert s.missed_count == 1  # 07-13
    assert s.excluded_count == 1  # 07-14, apart
    assert ScheduleEvent.objects.filter(schedule=s, action="excluded").count() == 1
