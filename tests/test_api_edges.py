"""REST API edges (issue #31, item 5): unknown body fields are a 400 naming them on every
write endpoint, the API root lists the endpoints, and the schema's create examples are
real bodies that succeed."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse
from hypothesis import given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from django_durable_schedules import state
from django_durable_schedules.api.strict import unknown_field_errors
from django_durable_schedules.models import (
    BlackoutWindow,
    ConcurrencyGroup,
    ExclusionCalendar,
    Schedule,
)

from .factories import ScheduleFactory

pytestmark = pytest.mark.django_db

SCHEDULE = {"name": "job", "callback": "tests.noop", "kind": "interval", "interval_seconds": 60}


def url(name, *args):
    return reverse(f"durable_schedules_api:{name}", args=args)


@pytest.fixture
def api(django_user_model):
    client = APIClient()
    client.force_authenticate(django_user_model.objects.create_user("staff", is_staff=True))
    return client


@pytest.mark.vendor_independent  # validation message; nothing is written
def test_a_typo_in_a_schedule_is_a_400_naming_it_and_nothing_is_created(api):
    body = {**SCHEDULE, "intreval_seconds": 120}
    answer = api.post(url("schedule-list"), body, format="json")
    assert answer.status_code == 400
    assert answer.json() == {"intreval_seconds": ["Unknown field. Did you mean interval_seconds?"]}
    assert not Schedule.objects.exists()


@pytest.mark.vendor_independent  # validation messages
def test_unknown_fields_are_reported_with_the_other_field_errors(api):
    body = {"name": "job", "kind": "interval", "interval_seconds": 0, "zzz": 1}
    errors = api.post(url("schedule-list"), body, format="json").json()
    assert errors["zzz"] == ["Unknown field."]  # nothing near it: no suggestion
    assert "callback" in errors and "interval_seconds" in errors


@pytest.mark.vendor_independent  # validation messages
def test_unknown_fields_on_update_and_partial_update(api):
    pk = api.post(url("schedule-list"), SCHEDULE, format="json").json()["id"]
    full = {**SCHEDULE, "interval_seconds": 120, "pyload": {}}
    answer = api.put(url("schedule-detail", pk), full, format="json")
    assert answer.status_code == 400 and "pyload" in answer.json()
    answer = api.patch(url("schedule-detail", pk), {"interval_second": 120}, format="json")
    assert answer.status_code == 400
    assert answer.json() == {"interval_second": ["Unknown field. Did you mean interval_seconds?"]}
    assert Schedule.objects.get(pk=pk).interval_seconds == 60


def test_read_only_fields_in_a_body_are_ignored(api):
    """The decision documented in docs/api.md: what a GET answered may be sent back."""
    body = {**SCHEDULE, "id": 999_999, "status": "paused", "next_run_at": None}
    answer = api.post(url("schedule-list"), body, format="json")
    assert answer.status_code == 201, answer.json()
    shown = answer.json()
    assert shown["status"] == "active" and shown["next_run_at"] is not None
    again = api.put(url("schedule-detail", shown["id"]), shown, format="json")
    assert again.status_code == 200, again.json()


@pytest.mark.parametrize(
    "name, body",
    [
        ("group-list", {"name": "g", "max_running": 1, "max_runing": 2}),
        ("calendar-list", {"name": "c", "dates": [], "holiday_country": "FR"}),
        ("blackout-list", {"name": "b", "start_at": "2030-01-01T00:00:00Z", "end": "x"}),
    ],
)
@pytest.mark.vendor_independent  # validation messages; nothing is written
def test_unknown_fields_on_the_other_collections(api, name, body):
    answer = api.post(reverse(f"durable_schedules_api:{name}"), body, format="json")
    assert answer.status_code == 400
    (unknown,) = set(body) - {"name", "max_running", "dates", "start_at"}
    assert answer.json()[unknown][0].startswith("Unknown field.")
    assert not ConcurrencyGroup.objects.exists()
    assert not ExclusionCalendar.objects.exists() and not BlackoutWindow.objects.exists()


@pytest.mark.vendor_independent  # validation message
def test_an_unknown_key_of_a_nested_calendar_date(api):
    body = {"name": "c", "dates": [{"date": "2030-01-01", "reson": "x"}]}
    answer = api.post(url("calendar-list"), body, format="json")
    assert answer.status_code == 400
    assert answer.json() == {"dates": ["dates[0].reson: Unknown field. Did you mean reason?"]}


@pytest.mark.vendor_independent  # validation message
def test_unknown_fields_on_updates_of_the_other_collections(api):
    group = api.post(url("group-list"), {"name": "g", "max_running": 1}, format="json").json()
    answer = api.patch(url("group-detail", group["id"]), {"rat": "1/m"}, format="json")
    assert answer.status_code == 400 and answer.json() == {
        "rat": ["Unknown field. Did you mean rate?"]
    }


@pytest.mark.parametrize(
    "action, body",
    [
        ("trigger", {"payload": {}, "ignore_blackouts": True}),
        ("disable", {"not": "typo"}),
        ("enable", {"runat": "2030-01-01T00:00:00Z"}),
        ("rerun", {"occurrence": 1, "forse": True}),
        ("duplicate", {"name": "copy", "nmae": "x"}),
        ("backfill", {"start": "2020-01-01T00:00:00Z", "end": "2020-01-02T00:00:00Z", "dry": 1}),
    ],
)
@pytest.mark.vendor_independent  # validation messages; the row is left as it was
def test_unknown_fields_of_the_action_bodies(api, action, body):
    schedule = ScheduleFactory(name="s")
    if action == "enable":
        state.disable(schedule.pk)
    before = Schedule.objects.get(pk=schedule.pk)
    answer = api.post(url(f"schedule-{action}", schedule.pk), body, format="json")
    assert answer.status_code == 400, answer.json()
    unknown = {"ignore_blackouts", "not", "runat", "forse", "nmae", "dry"} & set(body)
    assert set(answer.json()) >= unknown
    after = Schedule.objects.get(pk=schedule.pk)
    assert (after.status, after.updated_at) == (before.status, before.updated_at)
    assert Schedule.objects.count() == 1


@settings(max_examples=60, deadline=None)
@given(
    keys=st.lists(st.text(min_size=1, max_size=20), max_size=6),
    known=st.sets(st.sampled_from(["name", "kind", "cron", "payload", "id"])),
)
@pytest.mark.vendor_independent  # a pure function searched by Hypothesis
def test_unknown_field_errors_name_exactly_the_unknown_keys(keys, known):
    errors = unknown_field_errors(keys, known, known - {"id"})
    assert set(errors) == {k for k in keys if k not in known}
    for key, (message,) in errors.items():
        assert message.startswith("Unknown field.")
        if "Did you mean" in message:
            assert message.removesuffix("?").rsplit(" ", 1)[1] in known - {"id"}


@pytest.mark.parametrize("field", ["concurrency_group", "exclusion_calendars", "blackout_windows"])
def test_a_name_with_a_nul_character_is_a_400_not_a_500(api, field):
    """Found by Schemathesis on PostgreSQL (text refuses NUL: the lookup was a 500)."""
    name = "a\x00b"
    body = {**SCHEDULE, field: name if field == "concurrency_group" else [name]}
    answer = api.post(url("schedule-list"), body, format="json")
    assert answer.status_code == 400 and field in answer.json()


# The API root.


@pytest.mark.vendor_independent  # the API root's links
def test_the_root_lists_the_endpoints_as_absolute_urls(api):
    answer = api.get("/api/")
    assert answer.status_code == 200
    root = answer.json()
    assert root["schedules"] == "http://testserver/api/schedules/"
    assert root["health"] == "http://testserver/api/health/"
    assert set(root) >= {"attempts", "receipts", "calendars", "blackouts", "groups"}
    for link in root.values():
        assert api.get(link).status_code in (200, 503), link  # 503: health when unhealthy


@pytest.mark.vendor_independent  # permissions
def test_the_root_respects_the_api_permissions(django_user_model, settings):
    assert APIClient().get("/api/").status_code == 403
    client = APIClient()
    client.force_authenticate(django_user_model.objects.create_user("alice"))
    assert client.get("/api/").status_code == 403
    settings.DURABLE_SCHEDULES = {"API_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"]}
    assert APIClient().get("/api/").status_code == 200


# The schema's create examples.


def request_examples() -> list[tuple[str, str, dict]]:
    """``(path, example name, body)`` of every request example of the schema."""
    out = StringIO()
    call_command("spectacular", "--format=openapi-json", stdout=out)
    found = []
    for path, item in json.loads(out.getvalue())["paths"].items():
        for method, operation in item.items():
            content = operation.get("requestBody", {}).get("content", {})
            for name, example in content.get("application/json", {}).get("examples", {}).items():
                found.append((method, path, name, example["value"]))
    return found


@pytest.mark.vendor_independent  # the OpenAPI document
def test_every_create_endpoint_has_request_examples():
    posted = {path for method, path, _, _ in request_examples() if method == "post"}
    assert posted >= {"/api/schedules/", "/api/groups/", "/api/calendars/", "/api/blackouts/"}


@pytest.mark.vendor_independent  # the OpenAPI document
def test_the_actions_with_a_body_have_request_examples():
    posted = {path for method, path, _, _ in request_examples() if "{" in path}
    actions = ("trigger", "disable", "duplicate", "restore")
    assert posted == {f"/api/schedules/{{id}}/{a}/" for a in actions}


def test_every_request_example_of_the_schema_succeeds(admin_client):
    """Each example on a clean database; an action's on a new active schedule."""
    examples = request_examples()
    assert examples
    for method, path, name, body in examples:
        assert method == "post", (method, path)
        if "{id}" in path:
            target = ScheduleFactory(name="example-target")
            path = path.replace("{id}", str(target.pk))
        if path.endswith("/restore/"):  # the example's id stands for a version's event
            edit = state.update_schedule(target.pk, interval_seconds=120)
            body = {"event": str(state.definition_versions(edit)[0].event_id)}
            state.update_schedule(target.pk, interval_seconds=300)
        answer = admin_client.post(path, body, content_type="application/json")
        assert 200 <= answer.status_code < 300, (path, name, answer.json())
        for model in (Schedule, ConcurrencyGroup, ExclusionCalendar, BlackoutWindow):
            model.objects.all().delete()  # a clean database for the next example


@pytest.mark.vendor_independent  # dates of the examples
def test_the_schedule_examples_are_still_valid_later():
    """The examples' fixed dates are in the future (a range in the past is refused)."""
    assert datetime(2030, 1, 5, tzinfo=UTC) - datetime.now(UTC) > timedelta(days=365)
