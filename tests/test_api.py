"""The REST API: every endpoint, permission case, conflict and validation error."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.test.utils import override_settings
from django.urls import reverse
from rest_framework.test import APIClient

from django_durable_schedules import state
from django_durable_schedules.api.serializers import ScheduleSerializer
from django_durable_schedules.models import RunAttempt, RunReceipt, Schedule, ScheduleEvent
from django_durable_schedules.state import control

from .factories import T0, AttemptFactory, ReceiptFactory, ScheduleFactory

pytestmark = pytest.mark.django_db

S = timedelta(seconds=1)
SCOPED = {"API_OWNER_SCOPED": True}


def url(name, *args, **query):
    path = reverse(f"durable_schedules_api:{name}", args=args)
    if query:
        path += "?" + "&".join(f"{k}={v}" for k, v in query.items())
    return path


def parse(value):
    return datetime.fromisoformat(value)


def now():
    return datetime.now(UTC)


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_user("staff", is_staff=True)


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice")


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create_user("bob")


def client_for(user=None, **kwargs):
    client = APIClient(**kwargs)
    if user is not None:
        client.force_authenticate(user)
    return client


@pytest.fixture
def api(staff):
    return client_for(staff)


def create(api, **fields):
    body = {"name": "job", "callback": "tests.noop", "kind": "interval", "interval_seconds": 60}
    body.update(fields)
    return api.post(url("schedule-list"), body, format="json")


def lease(schedule):
    """Give ``schedule`` a live lease (and an open attempt), as a worker's claim does."""
    state.trigger(schedule.pk)
    claims = state.claim_due(worker="w")
    assert [c.schedule_id for c in claims] == [schedule.pk]


# ---------------------------------------------------------------------------------------
# Permissions
# ---------------------------------------------------------------------------------------

SID = "00000000-0000-0000-0000-000000000001"
ENDPOINTS = [
    ("get", url("schedule-list")),
    ("post", url("schedule-list")),
    ("get", url("schedule-detail", SID)),
    ("patch", url("schedule-detail", SID)),
    ("put", url("schedule-detail", SID)),
    ("delete", url("schedule-detail", SID)),
    ("post", url("schedule-enable", SID)),
    ("post", url("schedule-disable", SID)),
    ("post", url("schedule-cancel", SID)),
    ("post", url("schedule-trigger", SID)),
    ("get", url("schedule-upcoming", SID)),
    ("get", url("attempt-list")),
    ("get", url("attempt-detail", SID)),
    ("get", url("receipt-list")),
    ("get", url("receipt-detail", SID)),
    ("get", url("health")),
]


@pytest.mark.vendor_independent  # DRF's permission checks refuse before any query
@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
def test_anonymous_is_refused_everywhere(method, path):
    response = getattr(APIClient(), method)(path, {}, format="json")
    assert response.status_code in (401, 403)


@pytest.mark.vendor_independent  # DRF's permission checks refuse before any query
@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
def test_non_staff_is_refused_everywhere_by_default(alice, method, path):
    response = getattr(client_for(alice), method)(path, {}, format="json")
    assert response.status_code == 403


@pytest.mark.vendor_independent  # permissions
def test_anonymous_is_refused_even_when_owner_scoped():
    with override_settings(DURABLE_SCHEDULES=SCOPED):
        assert APIClient().get(url("schedule-list")).status_code in (401, 403)


@pytest.mark.vendor_independent  # permissions: status codes of rows read back
def test_staff_may_use_every_read_endpoint(api):
    schedule = ScheduleFactory()
    attempt = AttemptFactory(schedule=schedule)
    receipt = ReceiptFactory(attempt=AttemptFactory(schedule=schedule))
    for path in (
        url("schedule-list"),
        url("schedule-detail", schedule.pk),
        url("schedule-upcoming", schedule.pk),
        url("attempt-list"),
        url("attempt-detail", attempt.pk),
        url("receipt-list"),
        url("receipt-detail", receipt.pk),
    ):
        assert api.get(path).status_code == 200, path


@pytest.mark.vendor_independent  # permissions from settings
def test_permission_classes_are_configurable(alice):
    setting = {"API_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"]}
    ScheduleFactory()
    with override_settings(DURABLE_SCHEDULES=setting):
        response = client_for(alice).get(url("schedule-list"))
        assert response.status_code == 200 and len(response.json()["results"]) == 1
        assert APIClient().get(url("schedule-list")).status_code in (401, 403)


@pytest.mark.vendor_independent  # CSRF is checked before the view
def test_session_auth_keeps_csrf(staff):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(staff)
    body = {"name": "csrf", "callback": "tests.noop", "interval_seconds": 60}
    response = client.post(url("schedule-list"), body, format="json")
    assert response.status_code == 403 and "CSRF" in response.json()["detail"]
    assert not Schedule.objects.exists()
    token = "a" * 32
    client.cookies["csrftoken"] = token
    response = client.post(url("schedule-list"), body, format="json", HTTP_X_CSRFTOKEN=token)
    assert response.status_code == 201


# ---------------------------------------------------------------------------------------
# Schedules: CRUD
# ---------------------------------------------------------------------------------------


def test_create_interval_plans_first_slot(api):
    before = now().replace(microsecond=0)
    response = create(api, payload={"to": "ops"}, metadata={"team": "ops", "tier": 1})
    assert response.status_code == 201, response.json()
    data = response.json()
    assert data["status"] == "active" and data["occurrence"] == 0 and data["owner"] is None
    assert data["payload"] == {"to": "ops"} and data["metadata"] == {"team": "ops", "tier": 1}
    assert data["next_run_at"].endswith("Z") and parse(data["next_run_at"]) >= before
    assert Schedule.objects.get(pk=data["id"]).callback == "tests.noop"


def test_create_cron_in_a_zone(api):
    response = create(
        api, kind="cron", interval_seconds=None, cron="0  3 * * *", timezone="Europe/Paris"
    )
    assert response.status_code == 201, response.json()
    data = response.json()
    assert data["cron"] == "0 3 * * *" and data["timezone"] == "Europe/Paris"
    local = parse(data["next_run_at"]).astimezone(__import__("zoneinfo").ZoneInfo("Europe/Paris"))
    assert (local.hour, local.minute) == (3, 0)


def test_create_once_with_run_at_and_with_relative_delay(api):
    response = create(
        api, name="at", kind="once", interval_seconds=None, run_at="2027-06-01T12:00:00+02:00"
    )
    assert response.status_code == 201, response.json()
    assert response.json()["run_at"] == "2027-06-01T10:00:00Z"
    before = now().replace(microsecond=0)
    response = create(api, name="in", kind="once", interval_seconds=None, run_in_seconds=90)
    assert response.status_code == 201, response.json()
    data = response.json()
    assert "run_in_seconds" not in data
    run_at = parse(data["run_at"])
    assert before + 89 * S <= run_at <= now() + 91 * S and data["next_run_at"] == data["run_at"]


def test_list_is_paginated_by_cursor_and_filterable(api):
    for i in range(5):
        ScheduleFactory(name=f"s{i}")
    Schedule.objects.filter(name="s3").update(status="paused", next_run_at=None)
    ScheduleFactory(name="c", cron_job=True)
    seen, path = [], url("schedule-list", page_size=2)
    while path:
        page = api.get(path).json()
        assert len(page["results"]) <= 2
        seen += [row["name"] for row in page["results"]]
        path = page["next"]
    assert seen == ["c", "s0", "s1", "s2", "s3", "s4"]
    names = lambda **q: [r["name"] for r in api.get(url("schedule-list", **q)).json()["results"]]  # noqa: E731
    assert names(status="paused") == ["s3"]
    assert names(kind="cron") == ["c"]
    assert names(callback="tests.nope") == []
    assert api.get(url("schedule-list", status="bogus")).status_code == 400


@pytest.mark.vendor_independent  # serialisation and URL resolution
def test_retrieve_and_404(api):
    schedule = ScheduleFactory()
    data = api.get(url("schedule-detail", schedule.pk)).json()
    assert data["id"] == str(schedule.pk) and data["name"] == schedule.name
    assert api.get(url("schedule-detail", uuid.uuid4())).status_code == 404
    assert api.get(url("schedule-detail", "not-a-uuid")).status_code == 404


def test_patch_edits_without_firing(api):
    schedule = ScheduleFactory(created_at=now() - timedelta(hours=1))
    before = now()
    response = api.patch(
        url("schedule-detail", schedule.pk),
        {"interval_seconds": 3600, "payload": [1, 2], "status": "paused", "occurrence": 9},
        format="json",
    )
    assert response.status_code == 200, response.json()
    data = response.json()
    assert data["interval_seconds"] == 3600 and data["payload"] == [1, 2]
    assert data["status"] == "active" and data["occurrence"] == 0  # read-only: ignored
    assert parse(data["next_run_at"]) > before  # re-planned after now, never due at once


def test_put_replaces_the_definition(api):
    schedule = ScheduleFactory()
    body = {
        "name": "renamed",
        "callback": "tests.echo",
        "kind": "cron",
        "interval_seconds": None,
        "cron": "@daily",
        "timezone": "America/New_York",
    }
    response = api.put(url("schedule-detail", schedule.pk), body, format="json")
    assert response.status_code == 200, response.json()
    schedule.refresh_from_db()
    assert (schedule.name, schedule.callback, schedule.kind, schedule.cron) == (
        "renamed",
        "tests.echo",
        "cron",
        "@daily",
    )


def test_edit_never_overwrites_a_concurrent_claim():
    schedule = ScheduleFactory()
    stale = Schedule.objects.get(pk=schedule.pk)  # loaded before the worker claims
    lease(schedule)
    serializer = ScheduleSerializer(stale, data={"payload": {"v": 2}}, partial=True)
    assert serializer.is_valid(), serializer.errors
    serializer.save()
    fresh = Schedule.objects.get(pk=schedule.pk)
    assert fresh.payload == {"v": 2}
    assert fresh.lease_token is not None and fresh.occurrence == 1


def test_delete(api):
    schedule = ScheduleFactory()
    assert api.delete(url("schedule-detail", schedule.pk)).status_code == 204
    assert not Schedule.objects.filter(pk=schedule.pk).exists()
    assert api.delete(url("schedule-detail", schedule.pk)).status_code == 404


# ---------------------------------------------------------------------------------------
# Schedules: validation (400 with field messages)
# ---------------------------------------------------------------------------------------


def errors_of(response):
    assert response.status_code == 400, (response.status_code, response.content[:500])
    return response.json()


@pytest.mark.vendor_independent  # validation message
def test_unknown_callback_lists_nothing(api):
    errors = errors_of(create(api, callback="os.system"))
    assert list(errors) == ["callback"]
    assert "not a registered callback" in errors["callback"][0]
    assert "tests." not in json.dumps(errors)  # no registered name is disclosed
    long = errors_of(create(api, callback="x" * 5000))
    assert len(long["callback"][0]) < 200


@pytest.mark.vendor_independent  # validation message
def test_bad_cron_names_the_field(api):
    errors = errors_of(create(api, kind="cron", interval_seconds=None, cron="61 * * * *"))
    assert list(errors) == ["cron"] and "minute" in errors["cron"][0]
    errors = errors_of(create(api, kind="cron", interval_seconds=None, cron="0 0 30 2 *"))
    assert "never" in errors["cron"][0]


@pytest.mark.vendor_independent  # validation message
def test_kind_specific_fields(api):
    errors = errors_of(create(api, kind="cron", interval_seconds=None))
    assert "cron" in errors
    errors = errors_of(create(api, cron="*/5 * * * *"))  # an interval takes no cron
    assert "cron" in errors and "does not take" in errors["cron"][0]
    errors = errors_of(create(api, interval_seconds=None))
    assert "interval_seconds" in errors
    errors = errors_of(create(api, kind="once", interval_seconds=None))
    assert "run_at" in errors
    errors = errors_of(create(api, kind="bogus"))
    assert "kind" in errors


@pytest.mark.vendor_independent  # validation message
def test_unknown_zone(api):
    errors = errors_of(
        create(api, kind="cron", interval_seconds=None, cron="@daily", timezone="Mars/Olympus")
    )
    assert list(errors) == ["timezone"] and "Mars/Olympus" in errors["timezone"][0]


@pytest.mark.vendor_independent  # validation message (refused before any write)
def test_naive_datetimes_are_refused(api):
    errors = errors_of(
        create(api, kind="once", interval_seconds=None, run_at="2027-06-01T10:00:00")
    )
    assert "aware" in errors["run_at"][0]
    errors = errors_of(create(api, start_at="2027-06-01 10:00"))
    assert "aware" in errors["start_at"][0]
    errors = errors_of(create(api, start_at="0001-01-01T00:00:00+01:00"))
    assert "start_at" in errors
    errors = errors_of(create(api, start_at="yesterday"))
    assert "start_at" in errors


@pytest.mark.vendor_independent  # validation message (refused before any write)
def test_interval_bounds(api):
    assert "interval_seconds" in errors_of(create(api, interval_seconds=0))
    assert "interval_seconds" in errors_of(create(api, interval_seconds=-5))
    assert "interval_seconds" in errors_of(create(api, interval_seconds=10**12))
    assert "interval_seconds" in errors_of(create(api, interval_seconds=10**30))
    assert "max_runs" in errors_of(create(api, max_runs=0))
    assert "max_attempts" in errors_of(create(api, max_attempts=0))


@pytest.mark.vendor_independent  # validation message
def test_window_order(api):
    errors = errors_of(create(api, start_at="2027-06-02T00:00:00Z", end_at="2027-06-01T00:00:00Z"))
    assert list(errors) == ["end_at"]


def test_run_policies_round_trip_and_are_validated(api):
    policies = {
        "misfire_grace_seconds": 300,
        "backoff_base_seconds": 2.5,
        "backoff_cap_seconds": 60.0,
        "pause_after_failures": 3,
        "timeout_seconds": 30.0,
        "jitter_seconds": 10,
    }
    response = create(api, **policies)
    assert response.status_code == 201, response.json()
    assert {k: response.json()[k] for k in policies} == policies
    assert response.json()["pause_reason"] == "" and response.json()["failed_occurrences"] == 0
    assert "jitter_seconds" in errors_of(create(api, name="j", jitter_seconds=31))
    assert "backoff_cap_seconds" in errors_of(
        create(api, name="b", backoff_base_seconds=10, backoff_cap_seconds=5)
    )
    assert "timeout_seconds" in errors_of(create(api, name="t", timeout_seconds=0))
    assert "timeout_seconds" in errors_of(create(api, name="t", timeout_seconds="nan"))


@pytest.mark.vendor_independent  # validation message
def test_run_in_seconds_rules(api):
    errors = errors_of(create(api, run_in_seconds=30))
    assert "run_in_seconds" in errors
    errors = errors_of(
        create(
            api,
            kind="once",
            interval_seconds=None,
            run_in_seconds=30,
            run_at="2027-06-01T10:00:00Z",
        )
    )
    assert "run_in_seconds" in errors
    assert "run_in_seconds" in errors_of(
        create(api, kind="once", interval_seconds=None, run_in_seconds=-1)
    )


def test_name_rules(api):
    assert "name" in errors_of(create(api, name="-bad name"))
    assert create(api, name="dup").status_code == 201
    assert "name" in errors_of(create(api, name="dup"))


def test_a_name_taken_concurrently_is_a_400_not_a_500(api, monkeypatch):
    real, calls = state.prepare, []

    def racing(*args, **kwargs):  # another request inserts the same name between check and insert
        prepared = real(*args, **kwargs)
        calls.append(prepared.row.name)
        Schedule.objects.create(name=prepared.row.name, callback="tests.noop", interval_seconds=60)
        return prepared

    # The serializer prepares (validates) once; the insert is refused by the database.
    monkeypatch.setattr(state, "prepare", racing)
    errors = errors_of(create(api, name="raced"))
    assert errors == {"name": ["schedule with this name already exists."]} and len(calls) == 1
    assert Schedule.objects.filter(name="raced").count() == 1


def test_payload_and_metadata_limits(api):
    errors = errors_of(create(api, payload={"blob": "x" * (1024 * 1024)}))
    assert list(errors) == ["payload"] and "bytes" in errors["payload"][0]
    assert not Schedule.objects.exists()
    assert create(api, name="fits", payload={"blob": "x" * 60000}).status_code == 201
    assert "payload" in errors_of(create(api, payload={"a": "nul\x00"}))
    deep: list = []
    for _ in range(40):
        deep = [deep]
    assert "payload" in errors_of(create(api, payload=deep))
    assert "metadata" in errors_of(create(api, metadata={"nested": {"a": 1}}))
    assert "metadata" in errors_of(create(api, metadata={f"k{i}": i for i in range(51)}))
    assert "metadata" in errors_of(create(api, metadata=["not", "an", "object"]))
    assert "metadata" in errors_of(create(api, metadata={"k" * 101: 1}))
    assert "metadata" in errors_of(create(api, metadata={"k": "v" * 9000}))


def post_raw(api, body: str | bytes):
    return api.generic("POST", url("schedule-list"), body, content_type="application/json")


@pytest.mark.vendor_independent  # the parser refuses; nothing is written
def test_hostile_bodies_are_400_or_413_never_500(api):
    assert post_raw(api, "{not json").status_code == 400
    assert post_raw(api, "[" * 100_000 + "]" * 100_000).status_code == 400
    base = '{"name": "n", "callback": "tests.noop", "interval_seconds": 60, "payload": %s}'
    assert post_raw(api, base % '"\\ud800"').status_code == 400
    assert post_raw(api, base % "1e400").status_code == 400
    assert post_raw(api, base % "NaN").status_code == 400
    assert post_raw(api, '{"kind": "\\ud800"}').status_code == 400
    assert post_raw(api, b"\xff\xfe").status_code == 400
    huge = '{"payload": "' + "x" * 3_000_000 + '"}'
    assert post_raw(api, huge).status_code in (400, 413)  # Django's or the parser's limit
    assert not Schedule.objects.exists()


@pytest.mark.vendor_independent  # validation message
def test_edit_is_validated_too(api):
    schedule = ScheduleFactory()
    errors = errors_of(
        api.patch(url("schedule-detail", schedule.pk), {"kind": "cron"}, format="json")
    )
    assert "interval_seconds" in errors or "cron" in errors
    errors = errors_of(
        api.patch(url("schedule-detail", schedule.pk), {"callback": "nope"}, format="json")
    )
    assert "callback" in errors
    schedule.refresh_from_db()
    assert schedule.kind == "interval" and schedule.callback == "tests.noop"


# ---------------------------------------------------------------------------------------
# Schedules: transitions and conflicts (409)
# ---------------------------------------------------------------------------------------


def post(api, name, schedule):
    return api.post(url(f"schedule-{name}", schedule.pk))


def test_disable_enable_cancel(api):
    schedule = ScheduleFactory()
    response = post(api, "disable", schedule)
    assert response.status_code == 200 and response.json()["status"] == "paused"
    assert response.json()["next_run_at"] is None
    response = post(api, "enable", schedule)
    assert response.status_code == 200 and response.json()["status"] == "active"
    response = post(api, "cancel", schedule)
    assert response.status_code == 200 and response.json()["status"] == "cancelled"


def test_trigger_requests_a_run_now(api):
    schedule = ScheduleFactory()  # next slot T0, in the future
    response = post(api, "trigger", schedule)
    assert response.status_code == 200
    assert parse(response.json()["next_run_at"]) <= now()
    assert Schedule.objects.get(pk=schedule.pk).triggered_at is not None


def test_enable_cancelled_or_completed_is_409(api):
    cancelled = ScheduleFactory(status="cancelled")
    response = post(api, "enable", cancelled)
    assert response.status_code == 409
    assert response.json() == {"detail": "a cancelled schedule cannot be enabled"}
    completed = ScheduleFactory()
    Schedule.objects.filter(pk=completed.pk).update(status="completed", next_run_at=None)
    response = post(api, "enable", completed)
    assert response.status_code == 409 and "completed" in response.json()["detail"]


def test_trigger_cancelled_and_cancel_twice_are_409(api):
    schedule = ScheduleFactory(status="cancelled")
    assert post(api, "trigger", schedule).status_code == 409
    assert post(api, "cancel", schedule).status_code == 409
    assert post(api, "disable", schedule).status_code == 409


def test_delete_with_a_live_lease_is_409(api):
    schedule = ScheduleFactory()
    lease(schedule)
    response = api.delete(url("schedule-detail", schedule.pk))
    assert response.status_code == 409 and "lease" in response.json()["detail"]
    assert Schedule.objects.filter(pk=schedule.pk).exists()
    assert post(api, "trigger", schedule).status_code == 409  # running


def test_api_writes_are_in_the_audit_trail(api, staff):
    sid = create(api).json()["id"]
    api.patch(url("schedule-detail", sid), {"interval_seconds": 120}, format="json")
    api.patch(url("schedule-detail", sid), {"interval_seconds": 120}, format="json")  # no-op
    api.post(url("schedule-disable", sid))
    api.post(url("schedule-enable", sid))
    api.post(url("schedule-trigger", sid))
    api.post(url("schedule-cancel", sid))
    assert api.delete(url("schedule-detail", sid)).status_code == 204
    events = ScheduleEvent.objects.filter(schedule_id=sid)
    assert sorted(events.values_list("action", flat=True)) == sorted(
        ["created", "edited", "disabled", "enabled", "triggered", "cancelled", "deleted"]
    )
    assert set(events.values_list("source", "actor_id")) == {("api", staff.pk)}
    assert events.get(action="edited").changes == {"interval_seconds": [60, 120]}
    assert events.get(action="created").changes["callback"] == [None, "tests.noop"]


#: A schedule in each state an operator meets, built through the state machine where it can
#: be (failed and completed are where the worker leaves a row: set directly).
STATES = {
    "active": lambda: ScheduleFactory(),
    "running": lambda: leased(ScheduleFactory()),
    "paused": lambda: state.disable(ScheduleFactory().pk),
    "failed": lambda: with_status(ScheduleFactory(), "failed", failure_count=3),
    "completed": lambda: with_status(ScheduleFactory(), "completed"),
    "cancelled": lambda: state.cancel(ScheduleFactory().pk),
}
ACTIONS = ("cancel", "delete", "disable", "enable", "trigger")


def leased(schedule):
    lease(schedule)
    return Schedule.objects.get(pk=schedule.pk)


def with_status(schedule, status, **fields):
    Schedule.objects.filter(pk=schedule.pk).update(status=status, next_run_at=None, **fields)
    return Schedule.objects.get(pk=schedule.pk)


def attempt_action(api, name, schedule):
    if name == "delete":
        return api.delete(url("schedule-detail", schedule.pk))
    return post(api, name, schedule)


@pytest.mark.parametrize("label", STATES)
def test_allowed_actions_are_what_the_actions_accept(api, label):
    """``allowed_actions`` lists exactly the actions the endpoints then carry out (each
    tried on its own copy); any other is a 409, or, for an enable of an active schedule or
    a disable of a paused one, a no-op 200 that changes nothing."""
    listed = api.get(url("schedule-detail", STATES[label]().pk)).json()["allowed_actions"]
    assert listed == sorted(listed) and set(listed) <= set(ACTIONS)
    for name in ACTIONS:
        schedule = STATES[label]()
        events = ScheduleEvent.objects.filter(schedule_id=schedule.pk).count()
        response = attempt_action(api, name, schedule)
        if name in listed:
            assert response.status_code in (200, 204), (label, name, response.json())
            assert ScheduleEvent.objects.filter(schedule_id=schedule.pk).count() == events + 1
        elif control.ALREADY.get(name) == schedule.status:
            assert response.status_code == 200, (label, name, response.json())
            assert response.json()["status"] == schedule.status
            assert ScheduleEvent.objects.filter(schedule_id=schedule.pk).count() == events
        else:
            assert response.status_code == 409, (label, name, response.json())
            assert Schedule.objects.get(pk=schedule.pk).status == schedule.status


def test_allowed_actions_follow_the_transitions(api):
    """Each action's answer carries the row's new ``allowed_actions``."""
    schedule = ScheduleFactory()
    before = api.get(url("schedule-detail", schedule.pk)).json()["allowed_actions"]
    after = post(api, "disable", schedule).json()
    assert after["allowed_actions"] == sorted(state.allowed_actions(state.disable(schedule.pk)))
    assert "disable" in before and "disable" not in after["allowed_actions"]
    assert post(api, "cancel", schedule).json()["allowed_actions"] == ["delete"]


def test_list_queries_do_not_grow_with_rows(api, django_assert_max_num_queries):
    """``allowed_actions`` (and every other field) is read from the row: one page of
    schedules costs the same few queries however many rows it holds."""
    for make in STATES.values():
        make()
    with django_assert_max_num_queries(1):
        response = api.get(url("schedule-list"))
    assert len(response.json()["results"]) == len(STATES)
    for _ in range(20):
        ScheduleFactory()
    with django_assert_max_num_queries(1):
        response = api.get(url("schedule-list"))
    assert len(response.json()["results"]) == len(STATES) + 20


@pytest.mark.vendor_independent  # URL and 404 handling
def test_actions_404_for_a_missing_schedule(api):
    for name in ("enable", "disable", "cancel", "trigger"):
        assert api.post(url(f"schedule-{name}", uuid.uuid4())).status_code == 404


# ---------------------------------------------------------------------------------------
# Upcoming
# ---------------------------------------------------------------------------------------


@pytest.mark.vendor_independent  # cron and zone arithmetic serialised
def test_upcoming_default_count_and_zones(api):
    schedule = ScheduleFactory(cron_job=True, cron="0 3 * * *", timezone="Europe/Paris")
    data = api.get(url("schedule-upcoming", schedule.pk)).json()
    assert data["count"] == 5 and len(data["upcoming"]) == 5
    assert data["timezone"] == "Europe/Paris"
    for item in data["upcoming"]:
        assert item["utc"].endswith("Z")
        assert parse(item["utc"]) == parse(item["local"])
        assert item["local"][11:19] == "03:00:00" and item["local"][19:] in ("+01:00", "+02:00")
    times = [parse(i["utc"]) for i in data["upcoming"]]
    assert times == sorted(times) and times[0] > now()


@pytest.mark.vendor_independent  # query-string validation and slot arithmetic
def test_upcoming_count_bounds(api):
    schedule = ScheduleFactory(interval_seconds=60)
    get = lambda **q: api.get(url("schedule-upcoming", schedule.pk, **q))  # noqa: E731
    assert len(get(count=1).json()["upcoming"]) == 1
    assert len(get(count=100).json()["upcoming"]) == 100
    assert get(count=1000).json()["count"] == 100  # capped
    for bad in ("0", "-3", "abc", "1.5"):
        response = get(count=bad)
        assert response.status_code == 400 and "count" in response.json()
    data = get(count=2, after="2030-01-01T00:00:00Z").json()
    assert parse(data["upcoming"][0]["utc"]) > datetime(2030, 1, 1, tzinfo=UTC)
    assert "after" in get(after="2030-01-01T00:00:00").json()  # naive: 400


@pytest.mark.vendor_independent  # slot arithmetic serialised
def test_upcoming_of_a_past_once_is_empty(api):
    schedule = ScheduleFactory(once=True, run_at=datetime(2020, 1, 1, tzinfo=UTC))
    data = api.get(url("schedule-upcoming", schedule.pk)).json()
    assert data == {**data, "count": 0, "upcoming": []}


# ---------------------------------------------------------------------------------------
# Attempts and receipts
# ---------------------------------------------------------------------------------------


@pytest.fixture
def runs():
    a, b = ScheduleFactory(name="a"), ScheduleFactory(name="b")
    a1 = AttemptFactory(schedule=a, claimed_at=T0, occurrence=1)
    a2 = AttemptFactory(schedule=a, claimed_at=T0 + 60 * S, occurrence=2)
    a3 = AttemptFactory(schedule=a, claimed_at=T0 + 120 * S, occurrence=3)  # open
    b1 = AttemptFactory(schedule=b, claimed_at=T0 + 30 * S, occurrence=1)
    r1 = ReceiptFactory(attempt=a1, status="succeeded", finished_at=T0 + 1 * S)
    r2 = ReceiptFactory(attempt=a2, status="failed", finished_at=T0 + 61 * S, error_type="E")
    r3 = ReceiptFactory(attempt=b1, status="skipped", finished_at=T0 + 31 * S)
    return {"a": a, "b": b, "attempts": [a1, a2, a3, b1], "receipts": [r1, r2, r3]}


def ids(api, name, **query):
    response = api.get(url(f"{name}-list", **query))
    assert response.status_code == 200, response.content[:300]
    return [row["id"] for row in response.json()["results"]]


def test_attempts_newest_first_with_receipt_status(api, runs):
    a1, a2, a3, b1 = (str(x.pk) for x in runs["attempts"])
    assert ids(api, "attempt") == [a3, a2, b1, a1]
    rows = {r["id"]: r for r in api.get(url("attempt-list")).json()["results"]}
    assert rows[a1]["receipt_status"] == "succeeded" and rows[a3]["receipt_status"] is None
    assert rows[a3]["finished_at"] is None and rows[a1]["finished_at"] == "2027-06-01T10:00:01Z"
    detail = api.get(url("attempt-detail", a2)).json()
    assert detail["occurrence"] == 2 and detail["schedule"] == str(runs["a"].pk)
    assert detail["lateness"] == 60.0


def test_attempt_filters(api, runs):
    a1, a2, a3, b1 = (str(x.pk) for x in runs["attempts"])
    assert ids(api, "attempt", schedule=runs["b"].pk) == [b1]
    assert ids(api, "attempt", status="failed") == [a2]
    assert set(ids(api, "attempt", status="failed&status=skipped")) == {a2, b1}
    assert ids(api, "attempt", open="true") == [a3]
    assert ids(api, "attempt", claimed_after="2027-06-01T10:01:00Z") == [a3, a2]
    assert ids(api, "attempt", claimed_before="2027-06-01T12:01:00%2B02:00") == [b1, a1]
    assert api.get(url("attempt-list", claimed_after="2027-06-01T10:00:00")).status_code == 400
    assert api.get(url("attempt-list", schedule="nope")).status_code == 400


def test_receipts_newest_first_and_filters(api, runs):
    r1, r2, r3 = (str(x.pk) for x in runs["receipts"])
    assert ids(api, "receipt") == [r2, r3, r1]
    assert ids(api, "receipt", schedule=runs["a"].pk) == [r2, r1]
    assert ids(api, "receipt", status="skipped") == [r3]
    assert ids(api, "receipt", finished_after="2027-06-01T10:00:31Z") == [r2, r3]
    assert ids(api, "receipt", finished_before="2027-06-01T10:00:31Z") == [r1]
    assert api.get(url("receipt-list", status="bogus")).status_code == 400
    assert api.get(url("receipt-list", finished_before="2027-06-01")).status_code == 400
    detail = api.get(url("receipt-detail", r2)).json()
    assert detail["status"] == "failed" and detail["error_type"] == "E"
    assert detail["schedule_name"] == "a" and detail["attempt_number"] == 1
    assert api.get(url("receipt-detail", uuid.uuid4())).status_code == 404


def test_cursor_pagination_is_stable_across_equal_timestamps(api):
    schedule = ScheduleFactory()
    made = {str(AttemptFactory(schedule=schedule, claimed_at=T0).pk) for _ in range(7)}
    seen, path = [], url("attempt-list", page_size=3)
    while path:
        page = api.get(path).json()
        seen += [r["id"] for r in page["results"]]
        path = page["next"]
    assert len(seen) == 7 and set(seen) == made
    assert api.get(url("attempt-list", cursor="garbage")).status_code == 404


def test_attempts_and_receipts_are_read_only(api, runs):
    attempt = runs["attempts"][0]
    assert api.post(url("attempt-list"), {}, format="json").status_code == 405
    assert api.delete(url("attempt-detail", attempt.pk)).status_code == 405
    assert api.patch(url("receipt-detail", runs["receipts"][0].pk), {}).status_code == 405
    assert RunAttempt.objects.count() == 4 and RunReceipt.objects.count() == 3


# ---------------------------------------------------------------------------------------
# Health
# ---------------------------------------------------------------------------------------


@pytest.mark.vendor_independent  # serialisation; the 503 and its SQL: test_health_503_when_a_schedule_is_overdue
def test_health_200_when_healthy(api):
    response = api.get(url("health"))
    assert response.status_code == 200
    data = response.json()
    assert data["healthy"] is True and data["problems"] == [] and "schedules" in data
    assert data["checked_at"].endswith("Z")  # every datetime the API answers ends in Z


@pytest.mark.vendor_independent  # serialisation of datetimes
def test_every_datetime_of_the_api_ends_in_z(api, staff):
    from django_durable_schedules.models import WorkerHeartbeat

    WorkerHeartbeat.objects.create(
        worker_id="w:1", started_at=now(), last_seen_at=now(), clock_skew_seconds=0.0
    )
    s = create(api, name="z").json()
    texts = [s["next_run_at"], s["created_at"], s["updated_at"]]
    health = api.get(url("health")).json()
    texts += [health["checked_at"], health["workers"][0]["last_seen_at"]]
    texts += [health["workers"][0]["started_at"]]
    assert all(t.endswith("Z") and "+00:00" not in t for t in texts), texts


def test_health_503_when_a_schedule_is_overdue(api):
    schedule = ScheduleFactory()
    Schedule.objects.filter(pk=schedule.pk).update(next_run_at=now() - timedelta(hours=1))
    response = api.get(url("health"))
    assert response.status_code == 503
    data = response.json()
    assert data["healthy"] is False and data["overdue"] == 1 and "overdue" in data["problems"][0]


# ---------------------------------------------------------------------------------------
# Owner scoping
# ---------------------------------------------------------------------------------------


@pytest.fixture
def scoped():
    with override_settings(DURABLE_SCHEDULES=SCOPED):
        yield


def test_scoped_user_creates_and_sees_only_own(scoped, alice, bob, staff):
    as_alice, as_bob = client_for(alice), client_for(bob)
    response = create(as_alice, name="alice-job", owner=bob.pk)
    assert response.status_code == 201, response.json()
    assert response.json()["owner"] == alice.pk  # owner is the creator, not the input
    assert create(as_bob, name="bob-job").status_code == 201
    ScheduleFactory(name="unowned")
    names = lambda c: [r["name"] for r in c.get(url("schedule-list")).json()["results"]]  # noqa: E731
    assert names(as_alice) == ["alice-job"]
    assert names(as_bob) == ["bob-job"]
    assert names(client_for(staff)) == ["alice-job", "bob-job", "unowned"]


@pytest.mark.vendor_independent  # permissions (owner scoping)
def test_scoped_user_gets_404_for_anyone_elses_schedule(scoped, alice, bob):
    mine = ScheduleFactory(name="mine", owner=alice)
    theirs = ScheduleFactory(name="theirs", owner=bob)
    unowned = ScheduleFactory(name="unowned")
    client = client_for(alice)
    for schedule in (theirs, unowned):
        assert client.get(url("schedule-detail", schedule.pk)).status_code == 404
        assert client.get(url("schedule-upcoming", schedule.pk)).status_code == 404
        assert client.patch(url("schedule-detail", schedule.pk), {"payload": 1}).status_code == 404
        assert client.put(url("schedule-detail", schedule.pk), {}).status_code == 404
        assert client.delete(url("schedule-detail", schedule.pk)).status_code == 404
        for name in ("enable", "disable", "cancel", "trigger"):
            assert client.post(url(f"schedule-{name}", schedule.pk)).status_code == 404
    theirs.refresh_from_db()
    assert theirs.status == "active" and theirs.payload == {}
    assert client.get(url("schedule-detail", mine.pk)).status_code == 200
    assert client.post(url("schedule-disable", mine.pk)).status_code == 200
    response = client.patch(url("schedule-detail", mine.pk), {"owner": bob.pk}, format="json")
    assert response.status_code == 200 and response.json()["owner"] == alice.pk


@pytest.mark.vendor_independent  # permissions (owner scoping)
def test_scoped_user_sees_only_own_runs(scoped, alice, bob):
    mine, theirs = ScheduleFactory(owner=alice), ScheduleFactory(owner=bob)
    my_receipt = ReceiptFactory(attempt=AttemptFactory(schedule=mine))
    their_receipt = ReceiptFactory(attempt=AttemptFactory(schedule=theirs))
    client = client_for(alice)
    assert ids(client, "attempt") == [str(my_receipt.attempt_id)]
    assert ids(client, "receipt") == [str(my_receipt.pk)]
    assert ids(client, "receipt", schedule=theirs.pk) == []
    assert client.get(url("attempt-detail", their_receipt.attempt_id)).status_code == 404
    assert client.get(url("receipt-detail", their_receipt.pk)).status_code == 404
    assert client.get(url("receipt-detail", my_receipt.pk)).status_code == 200


@pytest.mark.vendor_independent  # permissions and validation messages
def test_scoped_user_may_schedule_only_open_callbacks_at_their_cadence(scoped, alice, staff):
    from django_durable_schedules.registry import register, registry

    register("tests.scoped_hourly", lambda ctx: None, owner_scoped=True, owner_min_interval=3600)
    try:
        client = client_for(alice)
        closed = create(client, name="expensive", callback="tests.echo")
        assert closed.status_code == 400 and "callback" in closed.json()
        fast = create(client, name="fast", callback="tests.scoped_hourly", interval_seconds=1)
        assert fast.status_code == 400
        assert fast.json()["interval_seconds"] == [
            "Runs 1 seconds apart; tests.scoped_hourly may run at most every 3600 seconds for you."
        ]
        minutely = create(
            client,
            name="minutely",
            callback="tests.scoped_hourly",
            kind="cron",
            cron="* * * * *",
            interval_seconds=None,
        )
        assert minutely.status_code == 400 and "cron" in minutely.json()
        ok = create(client, name="hourly", callback="tests.scoped_hourly", interval_seconds=3600)
        assert ok.status_code == 201, ok.json()
        edit = client.patch(
            url("schedule-detail", ok.json()["id"]), {"interval_seconds": 60}, format="json"
        )
        assert edit.status_code == 400  # an edit is held to the same limit
        # Staff are not limited: any callback, any cadence.
        assert create(client_for(staff), name="staff-job", callback="tests.echo").status_code == 201
        assert not Schedule.objects.filter(name__in=["expensive", "fast", "minutely"]).exists()
    finally:
        registry.remove("tests.scoped_hourly")


@pytest.mark.vendor_independent  # registry argument checks
def test_register_refuses_a_bad_owner_min_interval():
    from django_durable_schedules.registry import register

    with pytest.raises(ValueError, match="owner_min_interval"):
        register("tests.bad", lambda ctx: None, owner_scoped=True, owner_min_interval=-1)
    with pytest.raises(TypeError, match="owner_scoped"):
        register("tests.bad", lambda ctx: None, owner_scoped="yes")


@pytest.mark.vendor_independent  # permissions
def test_scoped_user_gets_no_health(scoped, alice, staff):
    assert client_for(alice).get(url("health")).status_code == 403
    assert client_for(staff).get(url("health")).status_code == 200


def test_staff_may_set_an_owner(api, alice):
    response = create(api, owner=alice.pk)
    assert response.status_code == 201 and response.json()["owner"] == alice.pk
    assert "owner" in errors_of(create(api, name="other", owner=10**9))


# ---------------------------------------------------------------------------------------
# OpenAPI schema
# ---------------------------------------------------------------------------------------


@pytest.mark.vendor_independent  # the OpenAPI document
def test_openapi_schema_is_valid_without_warnings():
    out = StringIO()
    call_command("spectacular", "--validate", "--fail-on-warn", "--format=openapi-json", stdout=out)
    schema = json.loads(out.getvalue())
    paths = schema["paths"]
    for path in (
        "/api/schedules/",
        "/api/schedules/{id}/",
        "/api/schedules/{id}/enable/",
        "/api/schedules/{id}/disable/",
        "/api/schedules/{id}/cancel/",
        "/api/schedules/{id}/trigger/",
        "/api/schedules/{id}/rerun/",
        "/api/schedules/{id}/upcoming/",
        "/api/attempts/",
        "/api/attempts/{id}/",
        "/api/receipts/",
        "/api/receipts/{id}/",
        "/api/health/",
    ):
        assert path in paths, path
    assert "409" in paths["/api/schedules/{id}/enable/"]["post"]["responses"]
    assert "409" in paths["/api/schedules/{id}/rerun/"]["post"]["responses"]
    assert "503" in paths["/api/health/"]["get"]["responses"]


@pytest.mark.django_db
def test_events_endpoint_lists_the_audit_trail():
    from django.contrib.auth import get_user_model
    from rest_framework.test import APIClient

    admin = get_user_model().objects.create_user("auditor", password="pw", is_staff=True)
    client = APIClient()
    client.force_authenticate(admin)
    s = Schedule.objects.create(
        name="audited", callback="tests.noop", kind="interval", interval_seconds=60
    )
    assert client.post(f"/api/schedules/{s.pk}/disable/").status_code == 200
    assert client.post(f"/api/schedules/{s.pk}/trigger/").status_code == 200
    response = client.get(f"/api/schedules/{s.pk}/events/")
    assert response.status_code == 200
    actions = [(e["action"], e["source"], e["actor_repr"]) for e in response.json()]
    assert actions[:2] == [("triggered", "api", "auditor"), ("disabled", "api", "auditor")]


@pytest.mark.vendor_independent  # cron in words, translated
def test_cron_description_is_the_cron_in_words(api):
    body = create(api, name="weekdays", kind="cron", cron="0 9 * * 1-5", interval_seconds=None)
    assert body.status_code == 201, body.json()
    assert body.json()["cron_description"] == "At 09:00, Monday through Friday"
    other = create(api, name="tick").json()
    assert other["cron_description"] is None
    from django.utils import translation

    with translation.override("fr"):  # what LocaleMiddleware does for a French request
        french = api.get(url("schedule-detail", body.json()["id"]))
    assert french.json()["cron_description"].startswith("À 09:00")


@pytest.mark.vendor_independent  # validation messages; nothing is written
def test_rough_edges_are_clear_errors_not_silent_successes(api):
    assert api.get(url("schedule-list"), {"failing": "maybe"}).status_code == 400
    assert api.get(url("schedule-list"), {"failing": "TRUE"}).status_code == 200
    assert api.get(url("attempt-list"), {"open": "perhaps"}).status_code == 400
    assert api.get(url("schedule-list"), {"cursor": "%%%"}).status_code == 404
    negative = create(api, name="neg", interval_seconds=-5).json()
    assert negative == {"interval_seconds": ["At least 1 second."]}
    assert create(api, name="zero", interval_seconds=0).json() == negative
    words = create(api, name="abc", interval_seconds="abc").json()
    assert words == {"interval_seconds": ["A whole number of seconds is required."]}
    assert not Schedule.objects.exists()


@pytest.mark.vendor_independent  # the parser refuses; nothing is written
def test_every_oversized_or_non_json_body_is_a_json_answer(api):
    body = '{"payload": "' + "x" * 3_000_000 + '"}'
    response = api.generic("POST", url("schedule-list"), body, content_type="application/json")
    assert response.status_code == 413 and response["Content-Type"] == "application/json"
    from django.core.files.uploadedfile import SimpleUploadedFile

    fields = {"name": "m", "callback": "tests.noop", "kind": "interval", "interval_seconds": "60"}
    upload = SimpleUploadedFile("big.bin", b"x" * 100_000)
    response = api.post(url("schedule-list"), {**fields, "f": upload}, format="multipart")
    assert response.status_code == 415 and response["Content-Type"] == "application/json"
    assert not Schedule.objects.exists()


@pytest.mark.vendor_independent  # the docs page's HTML
def test_swagger_ui_loads_its_files_from_the_site_not_a_cdn(rf, admin_user, settings, monkeypatch):
    """The example project's (and docs/api.md's) settings: drf-spectacular-sidecar's files.
    (drf-spectacular reads its settings once: they are set on its settings object here.)"""
    from drf_spectacular.settings import spectacular_settings
    from drf_spectacular.views import SpectacularSwaggerView

    from example_project.example_project import settings as example

    settings.STATIC_URL = "/static/"
    for key in ("SWAGGER_UI_DIST", "SWAGGER_UI_FAVICON_HREF"):
        monkeypatch.setattr(spectacular_settings, key, example.SPECTACULAR_SETTINGS[key])
    request = rf.get("/api/docs/")
    request.user = admin_user
    response = SpectacularSwaggerView.as_view(url="/api/schema/")(request)
    html = response.render().content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in html
    assert "cdn.jsdelivr.net" not in html and "unpkg.com" not in html
