"""Bad input in the admin gets the API's field messages, never a 500 (operators' traps:
a payload holding NaN, NUL or 100,000 levels of nesting; ``max_attempts=0``; a name with a
trailing newline). Each case is posted through the real add form and through the API."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from rest_framework.test import APIClient

from django_durable_schedules.models import Schedule
from django_durable_schedules.registry import register

from .test_admin import _form_data

pytestmark = pytest.mark.django_db

ADD = "admin:durable_schedules_schedule_add"


@pytest.fixture
def api(django_user_model):
    client = APIClient()
    client.force_authenticate(django_user_model.objects.create_user("staff", is_staff=True))
    return client


def admin_errors(admin_client, **fields) -> dict[str, list[str]]:
    response = admin_client.post(reverse(ADD), _form_data(**fields))
    assert response.status_code == 200  # the form again, with its errors: not a 500
    assert not Schedule.objects.exists()
    return {k: list(v) for k, v in response.context["adminform"].form.errors.items()}


def api_errors(api, body: str) -> dict:
    response = api.generic("POST", "/api/schedules/", body, content_type="application/json")
    assert response.status_code == 400, response.content
    assert not Schedule.objects.exists()
    return response.json()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"x": NaN}', "The payload contains a non-finite number."),
        ('{"x": Infinity}', "The payload contains a non-finite number."),
        ('{"x": "a\\u0000b"}', "The payload contains a NUL character."),
        ('{"x": "\\ud800"}', "The payload contains an unpaired surrogate."),
        ("[" * 40 + "]" * 40, "The payload nested deeper than 32 levels."),
        ("[" * 100_000 + "]" * 100_000, "The JSON is nested deeper than 32 levels."),
    ],
)
@pytest.mark.vendor_independent  # validation message; refused before any write
def test_a_payload_no_backend_can_store_is_a_field_error(admin_client, text, message):
    assert admin_errors(admin_client, payload=text) == {"payload": [message]}


@pytest.mark.vendor_independent  # validation messages compared
def test_the_admin_and_the_api_give_the_same_payload_message(admin_client, api):
    admin = admin_errors(admin_client, payload='{"x": "a\\u0000b"}')
    body = '{"name": "n", "callback": "tests.noop", "kind": "interval", "interval_seconds": 60, '
    assert api_errors(api, body + '"payload": {"x": "a\\u0000b"}}')["payload"] == admin["payload"]


@pytest.mark.vendor_independent  # validation message
def test_a_huge_json_text_is_refused_before_it_is_parsed(admin_client):
    errors = admin_errors(admin_client, payload='"' + "x" * 300_000 + '"')
    assert errors == {"payload": ["At most 262144 characters of JSON are accepted."]}


@pytest.mark.vendor_independent  # validation messages
@pytest.mark.parametrize("field", ["max_attempts", "max_runs"])
def test_zero_attempts_or_runs_is_refused_as_by_the_api(admin_client, api, field):
    errors = admin_errors(admin_client, **{field: "0"})
    assert errors == {field: ["Ensure this value is greater than or equal to 1."]}
    body = '{"name": "n", "callback": "tests.noop", "kind": "interval", "interval_seconds": 60, '
    assert field in api_errors(api, body + f'"{field}": 0}}')


@pytest.mark.vendor_independent  # name validation of the form, the API and the model
def test_a_name_with_a_trailing_newline_is_refused_everywhere(admin_client, api):
    # The admin's form trims what is typed (Django's CharField): "daily" is stored.
    admin_client.post(reverse(ADD), _form_data(name="daily\n"))
    assert list(Schedule.objects.values_list("name", flat=True)) == ["daily"]
    Schedule.objects.all().delete()
    body = '{"name": "daily\\n", "callback": "tests.noop", "kind": "interval", '
    response = api.generic(
        "POST", "/api/schedules/", body + '"interval_seconds": 60}', content_type="application/json"
    )
    assert response.status_code == 201 and response.json()["name"] == "daily"  # trimmed too
    # The model's own validator: a full match, so a trailing newline is not a name.
    with pytest.raises(ValidationError) as info:
        Schedule(name="daily\n", callback="tests.noop", interval_seconds=60).full_clean()
    assert "name" in info.value.message_dict
    with pytest.raises(ValueError, match="invalid callback name"):
        register("daily\n")


# -- instants are entered and shown in the schedule's own zone -----------------------------

CHANGE = "admin:durable_schedules_schedule_change"


def once(**fields) -> dict:
    return _form_data(kind="once", cron="", name="one-shot", **fields)


@pytest.mark.vendor_independent  # the form reads wall time in the schedule's zone; the page's HTML
def test_run_at_is_read_in_the_schedule_zone_not_the_site_zone(admin_client):
    response = admin_client.post(
        reverse(ADD), once(timezone="Asia/Tokyo", run_at="2027-06-01T09:00"), follow=True
    )
    assert response.status_code == 200
    s = Schedule.objects.get(name="one-shot")
    assert s.run_at.isoformat() == "2027-06-01T00:00:00+00:00"  # 09:00 JST
    html = admin_client.get(reverse(CHANGE, args=[s.pk])).content.decode()
    assert 'value="2027-06-01T09:00:00"' in html  # shown as entered, in Tokyo
    assert "(in the schedule&#x27;s zone)" in html or "(in the schedule's zone)" in html
    assert "2027-06-01 09:00:00 JST</b> = 2027-06-01 00:00:00 UTC" in html


@pytest.mark.vendor_independent  # validation message (zone arithmetic)
def test_a_wall_time_the_zone_skips_is_refused_with_the_reason(admin_client):
    errors = admin_errors(admin_client, **once(timezone="Europe/Paris", run_at="2027-03-28T02:30"))
    assert errors == {
        "run_at": [
            "2027-03-28 02:30:00 does not exist in Europe/Paris: the clocks skip it that night "
            "(daylight saving time). Give a time before or after the gap."
        ]
    }


@pytest.mark.vendor_independent  # zone arithmetic of the form; the row only stores it
def test_a_repeated_wall_time_is_its_first_occurrence(admin_client):
    admin_client.post(reverse(ADD), once(timezone="Europe/Paris", run_at="2027-10-31T02:30"))
    s = Schedule.objects.get(name="one-shot")
    assert s.run_at.isoformat() == "2027-10-31T00:30:00+00:00"  # 02:30 CEST, not CET


@pytest.mark.vendor_independent  # zone arithmetic of the form; the row only stores it
def test_changing_the_zone_reads_the_same_wall_time_in_the_new_zone(admin_client):
    admin_client.post(reverse(ADD), once(timezone="Europe/Paris", run_at="2027-06-01T09:00"))
    s = Schedule.objects.get(name="one-shot")
    assert s.run_at.isoformat() == "2027-06-01T07:00:00+00:00"
    data = once(timezone="Asia/Tokyo", run_at="2027-06-01T09:00:00")
    response = admin_client.post(reverse(CHANGE, args=[s.pk]), data, follow=True)
    assert response.status_code == 200
    s.refresh_from_db()
    assert (s.timezone, s.run_at.isoformat()) == ("Asia/Tokyo", "2027-06-01T00:00:00+00:00")


@pytest.mark.vendor_independent  # the form's parsing; the row only stores it
def test_a_time_typed_with_an_offset_is_that_instant(admin_client):
    admin_client.post(reverse(ADD), once(timezone="Asia/Tokyo", run_at="2027-06-01T09:00:00+02:00"))
    assert Schedule.objects.get(name="one-shot").run_at.isoformat() == "2027-06-01T07:00:00+00:00"


# -- time zone input ------------------------------------------------------------------------


@pytest.mark.vendor_independent  # the form's HTML and zone-name validation
def test_the_zone_field_offers_every_zone_and_accepts_any_case(admin_client, api):
    html = admin_client.get(reverse(ADD)).content.decode()
    assert 'list="dds-zones-timezone"' in html
    assert '<option value="Europe/Paris">' in html and '<option value="localtime">' not in html
    response = admin_client.post(reverse(ADD), _form_data(timezone=" europe/paris"), follow=True)
    assert response.status_code == 200
    assert Schedule.objects.get(name="made-in-admin").timezone == "Europe/Paris"

    body = '{"name": "n", "callback": "tests.noop", "kind": "cron", "cron": "0 9 * * *", '
    response = api.generic(
        "POST",
        "/api/schedules/",
        body + '"timezone": "asia/TOKYO"}',
        content_type="application/json",
    )
    assert response.status_code == 201 and response.json()["timezone"] == "Asia/Tokyo"
    s = Schedule(name="m", callback="tests.noop", kind="cron", cron="0 9 * * *", timezone="utc")
    s.full_clean()
    assert s.timezone == "UTC"


@pytest.mark.vendor_independent  # the form's HTML
def test_cron_and_zone_fields_have_help_with_examples(admin_client):
    html = admin_client.get(reverse(ADD)).content.decode()
    assert "'0 9 * * 1-5' (09:00 on weekdays)" in html
    assert "'America/New_York'" in html


# -- a save while another writer holds SQLite's lock ----------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_save_waits_for_a_concurrent_writer_on_sqlite_instead_of_a_500(admin_client):
    """On SQLite a transaction that has read cannot wait for the write lock (the upgrade
    fails at once with "database is locked"). The admin's pages read before they write, so
    they take the lock first and wait for a worker's write instead."""
    import sqlite3
    import threading
    import time

    from django.db import connection

    if connection.vendor != "sqlite":
        pytest.skip("SQLite's write lock")
    other = sqlite3.connect(connection.settings_dict["NAME"], timeout=5, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")  # a worker in the middle of a write transaction
    releaser = threading.Timer(1.0, other.commit)
    releaser.start()
    try:
        started = time.monotonic()
        response = admin_client.post(reverse(ADD), _form_data(name="while-locked"))
        assert response.status_code == 302, response.content[:500]
        assert time.monotonic() - started >= 0.5  # it waited for the other writer
        assert Schedule.objects.filter(name="while-locked").exists()
    finally:
        releaser.join()
        other.close()


@pytest.mark.vendor_independent  # JSON parsing refuses before any write
def test_a_number_too_long_for_python_is_a_field_error_not_a_500(admin_client, api):
    huge = "1" * 5000
    errors = admin_errors(admin_client, payload=huge)
    assert errors == {"payload": ["A number in the JSON has more than 4300 digits."]}
    body = '{"name": "n", "callback": "tests.noop", "kind": "interval", "interval_seconds": 60, '
    response = api.generic(
        "POST", "/api/schedules/", body + f'"payload": {huge}}}', content_type="application/json"
    )
    assert response.status_code == 400
    assert response.json() == {"detail": "JSON parse error - a number has more than 4300 digits"}


@pytest.mark.vendor_independent  # validation message
def test_an_instant_past_the_engines_horizon_is_refused_as_by_the_api(admin_client):
    errors = admin_errors(admin_client, **once(timezone="UTC", run_at="9999-12-31T23:59:59"))
    assert errors == {"run_at": ["Must be between the years 1000 and 9000."]}


@pytest.mark.vendor_independent  # validation message
def test_duration_bounds_say_at_least_0(admin_client):
    errors = admin_errors(admin_client, backoff_base_seconds="1e12")
    assert errors == {"backoff_base_seconds": ["Must be at least 0 and at most 86400 seconds."]}


@pytest.mark.parametrize(
    ("zone", "text"),
    [("Asia/Tokyo", "0001-01-01T00:00:00"), ("America/New_York", "9999-12-31T23:00:00")],
)
@pytest.mark.vendor_independent  # validation message (zone arithmetic)
def test_a_wall_time_at_the_edge_of_the_calendar_is_a_field_error(admin_client, zone, text):
    """Read in the schedule's zone, such a time has no UTC instant (it over- or underflows):
    a field error, not a 500."""
    errors = admin_errors(admin_client, **once(timezone=zone, run_at=text))
    assert errors == {"run_at": ["Must be between the years 1000 and 9000."]}
