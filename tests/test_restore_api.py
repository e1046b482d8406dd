"""``GET schedules/{id}/versions/`` and ``POST schedules/{id}/restore/`` (issue #29, item 3):
the versions of the definition and the restore of one as an edit; 400s for a bad, unknown
or foreign event and for unknown body fields; the schema's example."""

from __future__ import annotations

import json
import uuid
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import override_settings
from django.urls import reverse
from rest_framework.test import APIClient

from django_durable_schedules import state
from django_durable_schedules.api.versions import EXAMPLE_EVENT
from django_durable_schedules.models import RunAttempt, Schedule, ScheduleEvent

pytestmark = pytest.mark.django_db


def url(name, *args):
    return reverse(f"durable_schedules_api:{name}", args=args)


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_user("staff", is_staff=True)


@pytest.fixture
def api(staff):
    client = APIClient()
    client.force_authenticate(staff)
    return client


def edited(name="nightly", **changes):
    row = state.create_schedule(
        name=name, callback="tests.noop", kind="cron", cron="0 3 * * *", timezone="UTC"
    )
    state.update_schedule(row.pk, **(changes or {"cron": "0 5 * * *"}), source="api")
    return Schedule.objects.get(pk=row.pk)


def test_versions_lists_the_definitions_newest_first(api):
    row = edited(payload={"v": 2}, cron="0 5 * * *")
    answer = api.get(url("schedule-versions", row.pk))
    assert answer.status_code == 200
    newest, created = answer.json()
    assert newest["action"] == "edited" and newest["current"] is True
    assert newest["changed"] == ["cron", "payload"]
    assert (newest["definition"]["cron"], created["definition"]["cron"]) == (
        "0 5 * * *",
        "0 3 * * *",
    )
    assert created["definition"]["payload"] == {} and created["current"] is False
    assert "name" not in created["definition"] and "status" not in created["definition"]


def test_restore_is_a_200_with_the_schedule_and_one_edited_event(api, staff):
    row = edited()
    created = api.get(url("schedule-versions", row.pk)).json()[1]
    answer = api.post(url("schedule-restore", row.pk), {"event": created["event"]}, format="json")
    assert answer.status_code == 200, answer.json()
    assert answer.json()["cron"] == "0 3 * * *" and answer.json()["id"] == str(row.pk)
    last = ScheduleEvent.objects.filter(schedule_id=row.pk).order_by("-at").first()
    assert (last.action, last.source, last.actor_id) == ("edited", "api", staff.pk)
    assert last.changes["restored_from"][1]["event"] == created["event"]
    assert not RunAttempt.objects.filter(schedule_id=row.pk).exists()
    assert Schedule.objects.get(pk=row.pk).triggered_at is None


@pytest.mark.parametrize("event", ["not-a-uuid", str(uuid.uuid4()), "foreign", None, 7])
def test_a_bad_unknown_or_foreign_event_is_a_400_on_event(api, event):
    row = edited()
    if event == "foreign":
        other = edited(name="other")
        event = str(ScheduleEvent.objects.filter(schedule_id=other.pk).first().pk)
    answer = api.post(url("schedule-restore", row.pk), {"event": event}, format="json")
    assert answer.status_code == 400
    assert list(answer.json()) == ["event"]
    assert Schedule.objects.get(pk=row.pk).cron == "0 5 * * *"


def test_unknown_body_fields_and_a_missing_event_are_400s(api):
    row = edited()
    created = api.get(url("schedule-versions", row.pk)).json()[1]
    typo = api.post(
        url("schedule-restore", row.pk), {"event": created["event"], "evnt": 1}, format="json"
    )
    assert typo.status_code == 400
    assert typo.json() == {"evnt": ["Unknown field. Did you mean event?"]}
    assert api.post(url("schedule-restore", row.pk), {}, format="json").status_code == 400
    assert Schedule.objects.get(pk=row.pk).cron == "0 5 * * *"


def test_a_version_that_no_longer_validates_is_a_400_naming_the_field(api):
    from django_durable_schedules.registry import registry

    row = state.create_schedule(
        name="echoing", callback="tests.echo", kind="interval", interval_seconds=60
    )
    state.update_schedule(row.pk, callback="tests.noop")
    created = api.get(url("schedule-versions", row.pk)).json()[1]
    registration = registry.get("tests.echo")
    registry.remove("tests.echo")
    try:
        answer = api.post(
            url("schedule-restore", row.pk), {"event": created["event"]}, format="json"
        )
    finally:
        registry.add(registration)
    assert answer.status_code == 400 and "callback" in answer.json()


def test_an_owner_scoped_user_restores_only_their_own_and_within_the_policy(django_user_model):
    alice = django_user_model.objects.create_user("alice")
    bob = django_user_model.objects.create_user("bob")
    row = state.create_schedule(
        name="n", callback="tests.echo", kind="interval", interval_seconds=60
    )
    state.update_schedule(row.pk, callback="tests.noop")
    Schedule.objects.filter(pk=row.pk).update(owner=bob)
    with override_settings(DURABLE_SCHEDULES={"API_OWNER_SCOPED": True}):
        client = APIClient()
        client.force_authenticate(alice)
        event = str(ScheduleEvent.objects.filter(schedule_id=row.pk).first().pk)
        assert client.get(url("schedule-versions", row.pk)).status_code == 404
        answer = client.post(url("schedule-restore", row.pk), {"event": event}, format="json")
        assert answer.status_code == 404
        Schedule.objects.filter(pk=row.pk).update(owner=alice)
        created = client.get(url("schedule-versions", row.pk)).json()[1]
        refused = client.post(
            url("schedule-restore", row.pk), {"event": created["event"]}, format="json"
        )
        assert refused.status_code == 400 and "callback" in refused.json()  # not open to her
        assert Schedule.objects.get(pk=row.pk).callback == "tests.noop"


def test_the_schema_documents_both_with_an_example_body():
    out = StringIO()
    call_command("spectacular", "--format=openapi-json", stdout=out)
    paths = json.loads(out.getvalue())["paths"]
    restore = paths["/api/schedules/{id}/restore/"]["post"]
    examples = restore["requestBody"]["content"]["application/json"]["examples"]
    assert [e["value"] for e in examples.values()] == [{"event": EXAMPLE_EVENT}]
    assert "200" in restore["responses"] and "400" in restore["responses"]
    assert "get" in paths["/api/schedules/{id}/versions/"]
