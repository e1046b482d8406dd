"""``groups/`` of the REST API (issue #28, item 1): concurrency groups listed, created,
read, changed and deleted by id or name, with what each holds now (``running``: live
leases; ``waiting``: due, unleased rows) read in one statement for a list; bad input is a
400 with field messages, a delete while schedules name the group a 409 naming them;
owner-scoped users only read. On SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings
from rest_framework.test import APIClient

from django_durable_schedules import state
from django_durable_schedules.models import ConcurrencyGroup, Schedule

pytestmark = pytest.mark.django_db

S = timedelta(seconds=1)


@pytest.fixture
def api(admin_user):
    client = APIClient()
    client.force_authenticate(admin_user)
    return client


def schedule(name: str, group: ConcurrencyGroup | None = None) -> Schedule:
    return state.create_schedule(
        name=name, callback="tests.noop", kind="interval", interval_seconds=60,
        concurrency_group=group,
    )  # fmt: skip


def test_crud_by_id_and_by_name(api):
    made = api.post(
        "/api/groups/", {"name": "partner-api", "max_running": 3, "rate": " 10 / m "}, format="json"
    )
    assert made.status_code == 201, made.json()
    body = made.json()
    assert {k: body[k] for k in ("name", "max_running", "rate", "running", "waiting")} == {
        "name": "partner-api", "max_running": 3, "rate": "10/m", "running": 0, "waiting": 0,
    }  # fmt: skip
    by_id = api.get(f"/api/groups/{body['id']}/").json()
    by_name = api.get("/api/groups/partner-api/").json()
    assert by_id == by_name
    changed = api.patch("/api/groups/partner-api/", {"max_running": 5}, format="json")
    assert changed.status_code == 200, changed.json()
    assert (changed.json()["max_running"], changed.json()["rate"]) == (5, "10/m")
    put = api.put(
        f"/api/groups/{body['id']}/", {"name": "partner-api", "rate": "2/s"}, format="json"
    )
    assert put.status_code == 200 and put.json()["rate"] == "2/s"
    assert [g["name"] for g in api.get("/api/groups/").json()] == ["partner-api"]
    assert api.delete("/api/groups/partner-api/").status_code == 204
    assert not ConcurrencyGroup.objects.exists()
    assert api.get("/api/groups/partner-api/").status_code == 404
    for odd in ("99999999999999999999999", "%D9%A1", "0", "-1"):
        assert api.get(f"/api/groups/{odd}/").status_code == 404, odd


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"name": "g", "rate": "10/d"}, "rate"),
        ({"name": "g", "max_running": 0}, "max_running"),
        ({"name": "g"}, "non_field_errors"),
        ({"name": "Bad Name", "max_running": 1}, "name"),
        ({"max_running": 1}, "name"),
        ({"name": "g", "max_running": "many"}, "max_running"),
    ],
)
def test_bad_input_is_a_400_with_field_messages(api, payload, field):
    response = api.post("/api/groups/", payload, format="json")
    assert response.status_code == 400, response.json()
    assert field in response.json()
    assert not ConcurrencyGroup.objects.exists()


def test_a_taken_name_and_a_rename_are_400s(api):
    state.save_group("g", max_running=1)
    taken = api.post("/api/groups/", {"name": "g", "max_running": 2}, format="json")
    assert taken.status_code == 400 and "name" in taken.json()
    renamed = api.patch("/api/groups/g/", {"name": "h"}, format="json")
    assert renamed.status_code == 400 and "name" in renamed.json()
    assert ConcurrencyGroup.objects.get().max_running == 1


def test_a_delete_while_schedules_name_it_is_a_409_naming_them(api):
    group = state.save_group("g", max_running=1)
    schedule("nightly-report", group)
    response = api.delete("/api/groups/g/")
    assert response.status_code == 409
    assert "nightly-report" in response.json()["detail"]
    assert ConcurrencyGroup.objects.filter(name="g").exists()


def test_running_and_waiting_in_one_statement_for_a_list(api):
    now = state.db_now()
    for n in range(3):
        group = state.save_group(f"g{n}", max_running=2)
        for i in range(3):
            schedule(f"s{n}-{i}", group)
    Schedule.objects.update(next_run_at=now + 3600 * S)  # none due but the two below
    rows = list(Schedule.objects.filter(concurrency_group__name="g1").order_by("name"))
    Schedule.objects.filter(pk=rows[0].pk).update(
        lease_token=uuid.uuid4(), lease_expires_at=now + 600 * S
    )
    Schedule.objects.filter(pk__in=[rows[1].pk, rows[2].pk]).update(next_run_at=now - S)
    with CaptureQueriesContext(connection) as queries:
        listed = api.get("/api/groups/").json()
    group_reads = [q for q in queries.captured_queries if "concurrency" in q["sql"].lower()]
    assert len(group_reads) == 1  # the groups and both counts: one statement
    found = {g["name"]: (g["running"], g["waiting"]) for g in listed}
    assert found == {"g0": (0, 0), "g1": (1, 2), "g2": (0, 0)}


@override_settings(DURABLE_SCHEDULES={"API_OWNER_SCOPED": True})
def test_owner_scoped_users_only_read():
    state.save_group("g", max_running=1)
    user = get_user_model().objects.create_user("owner", password="x")
    client = APIClient()
    client.force_authenticate(user)
    assert client.get("/api/groups/").status_code == 200
    assert client.get("/api/groups/g/").json()["name"] == "g"
    assert (
        client.post("/api/groups/", {"name": "h", "rate": "1/s"}, format="json").status_code == 403
    )
    assert client.delete("/api/groups/g/").status_code == 403
    assert client.patch("/api/groups/g/", {"max_running": 9}, format="json").status_code == 403


def test_anonymous_users_are_refused():
    assert APIClient().get("/api/groups/").status_code in (401, 403)


def test_the_schema_builds_with_the_groups_paths():
    out = StringIO()
    call_command("spectacular", "--validate", "--fail-on-warn", "--format=openapi-json", stdout=out)
    paths = json.loads(out.getvalue())["paths"]
    assert {"get", "post"} <= set(paths["/api/groups/"])
    item = paths["/api/groups/{id}/"]
    assert "409" in item["delete"]["responses"]
    body = item["get"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    assert body.endswith("/ConcurrencyGroup")
