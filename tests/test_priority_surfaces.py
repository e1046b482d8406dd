"""``Schedule.pool`` and ``Schedule.priority`` where a user meets them (issue #28): the
API's ``?pool=`` filter and its 400s, ``manage.py schedules show`` and ``list --pool``, and
the admin's changelist by pool."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.test import APIClient

from django_durable_schedules.models import Schedule

from .factories import ScheduleFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(django_user_model):
    client = APIClient()
    client.force_authenticate(django_user_model.objects.create_user("staff", is_staff=True))
    return client


def names(api, **query):
    response = api.get(reverse("durable_schedules_api:schedule-list"), query)
    assert response.status_code == 200, response.content[:500]
    return [row["name"] for row in response.json()["results"]]


def post(api, **fields):
    body = {"name": "job", "callback": "tests.noop", "kind": "interval", "interval_seconds": 60}
    body.update(fields)
    return api.post(reverse("durable_schedules_api:schedule-list"), body, format="json")


def cli(*args: str) -> str:
    out = StringIO()
    call_command("schedules", *args, stdout=out)
    return out.getvalue()


def test_the_api_lists_one_pool(api):
    ScheduleFactory(name="r1", pool="reports")
    ScheduleFactory(name="r2", pool="reports", priority=3)
    ScheduleFactory(name="d1")
    assert names(api, pool="reports") == ["r1", "r2"]
    assert names(api, pool="default") == ["d1"]
    assert names(api, pool="nowhere") == []
    assert names(api) == ["d1", "r1", "r2"]


def test_the_api_creates_a_schedule_with_a_pool_and_a_priority(api):
    response = post(api, pool="reports", priority=-7)
    assert response.status_code == 201, response.content[:500]
    assert (response.json()["pool"], response.json()["priority"]) == ("reports", -7)
    assert Schedule.objects.filter(name="job", pool="reports", priority=-7).exists()


@pytest.mark.parametrize("priority", [32768, -32769, 10**12])
def test_an_api_priority_out_of_range_is_a_400_naming_the_field(api, priority):
    response = post(api, priority=priority)
    assert response.status_code == 400, response.content[:500]
    body = response.json()
    assert set(body) == {"priority"}, body
    assert any(("32767" in m or "-32768" in m) for m in body["priority"]), body
    assert not Schedule.objects.exists()


@pytest.mark.parametrize("pool", ["", "has space", "-lead", "x" * 65, "a/b"])
def test_an_api_bad_pool_name_is_a_400_naming_the_field(api, pool):
    response = post(api, pool=pool)
    assert response.status_code == 400, response.content[:500]
    body = response.json()
    assert set(body) == {"pool"}, body
    assert body["pool"], body
    assert not Schedule.objects.exists()


def test_show_prints_the_pool_and_the_priority():
    ScheduleFactory(name="nightly", pool="reports", priority=5)
    ScheduleFactory(name="plain")
    assert "  pool: reports, priority: 5\n" in cli("show", "nightly")
    assert "  pool: default, priority: 0\n" in cli("show", "plain")


def test_list_by_pool():
    ScheduleFactory(name="r1", pool="reports")
    ScheduleFactory(name="d1")
    listed = [line.split()[0] for line in cli("list", "--pool", "reports").splitlines()[1:]]
    assert listed == ["r1"]
    everything = [line.split()[0] for line in cli("list").splitlines()[1:]]
    assert everything == ["d1", "r1"]
    assert cli("list", "--pool", "nowhere").splitlines()[1:] == []


def test_list_with_a_malformed_pool_is_a_command_error():
    with pytest.raises(CommandError, match="invalid pool 'a b': 1-64 of letters"):
        cli("list", "--pool", "a b")


def test_the_admin_changelist_filters_by_pool(admin_client):
    ScheduleFactory(name="r1", pool="reports")
    ScheduleFactory(name="d1")
    response = admin_client.get(
        reverse("admin:durable_schedules_schedule_changelist"), {"pool": "reports"}
    )
    assert response.status_code == 200
    assert [s.name for s in response.context["cl"].result_list] == ["r1"]
