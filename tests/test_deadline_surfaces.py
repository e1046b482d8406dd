"""Deadlines on every surface (issue #26): the API (``deadline_seconds`` editable and
bounded, ``late`` and ``deadline_at`` read-only), health's ``late`` list (computed on read,
a warning), ``schedules health``, and the admin."""

from __future__ import annotations

from datetime import datetime, timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient

from django_durable_schedules import health, state
from django_durable_schedules.models import Schedule

pytestmark = pytest.mark.django_db

S = timedelta(seconds=1)


@pytest.fixture
def api(django_user_model):
    client = APIClient()
    client.force_authenticate(django_user_model.objects.create_user("staff", is_staff=True))
    return client


def url(name, *args):
    return reverse(f"durable_schedules_api:{name}", args=args)


def late_schedule(name="late-one", seconds=5):
    """A schedule whose first slot was a minute ago by the database clock, deadline 5 s."""
    s = Schedule.objects.create(
        name=name,
        callback="tests.noop",
        kind="interval",
        interval_seconds=3600,
        deadline_seconds=seconds,
    )
    Schedule.objects.filter(pk=s.pk).update(next_run_at=state.db_now() - 60 * S)
    return Schedule.objects.get(pk=s.pk)


def test_the_api_edits_deadline_seconds_within_its_bounds(api):
    body = {"name": "d", "callback": "tests.noop", "kind": "interval", "interval_seconds": 60}
    created = api.post(url("schedule-list"), {**body, "deadline_seconds": 120}, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["deadline_seconds"] == 120
    assert created.json()["late"] is False and created.json()["deadline_at"] is not None
    pk = created.json()["id"]
    for bad in (0, -1, 366 * 86400 + 1, "soon", 1.5):
        answer = api.patch(url("schedule-detail", pk), {"deadline_seconds": bad}, format="json")
        assert answer.status_code == 400, bad
        assert "deadline_seconds" in answer.json()
    cleared = api.patch(url("schedule-detail", pk), {"deadline_seconds": None}, format="json")
    assert cleared.status_code == 200 and cleared.json()["deadline_at"] is None
    assert (
        api.patch(
            url("schedule-detail", pk), {"open_alerts": "late", "late": True}, format="json"
        ).json()["open_alerts"]
        == ""
    )


def test_the_api_shows_a_late_schedule_with_no_worker(api):
    s = late_schedule()
    data = api.get(url("schedule-detail", s.pk)).json()
    assert data["late"] is True
    assert datetime.fromisoformat(data["deadline_at"]) == s.next_run_at + 5 * S
    listed = api.get(url("schedule-list")).json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert [r["late"] for r in rows] == [True]


def test_health_lists_late_schedules_as_a_warning_not_a_failure():
    late_schedule()
    Schedule.objects.create(
        name="on-time",
        callback="tests.noop",
        kind="interval",
        interval_seconds=3600,
        deadline_seconds=3600,
    )
    snap = health.snapshot()
    assert snap.late == 1 and [r["name"] for r in snap.late_schedules] == ["late-one"]
    assert any("late" in w and "late-one" in w for w in snap.warnings)
    assert not any("late-one" in p for p in snap.problems)  # due with no worker is the problem
    data = snap.as_dict()
    assert data["late_schedules"][0]["deadline_at"].endswith("Z")


def test_schedules_health_prints_the_late_schedules():
    late_schedule()
    out, err = StringIO(), StringIO()
    with pytest.raises(Exception):  # unhealthy: due with no live worker
        call_command("schedules", "health", stdout=out, stderr=err)
    assert '"late": 1' in out.getvalue()
    assert "late: late-one occurrence 1" in err.getvalue()


def test_the_admin_shows_late_and_the_deadline(admin_client):
    s = late_schedule()
    page = admin_client.get(reverse("admin:durable_schedules_schedule_changelist"))
    assert page.status_code == 200 and "dds-s-late" in page.content.decode()
    change = admin_client.get(reverse("admin:durable_schedules_schedule_change", args=[s.pk]))
    text = change.content.decode()
    assert change.status_code == 200
    assert "dds-s-late" in text and "occurrence 1:" in text and ", late" in text
