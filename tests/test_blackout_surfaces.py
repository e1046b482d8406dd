"""Blackout windows through the state package, the API (``blackouts/``, a schedule's
``blackout_windows`` and ``blackout_policy``) and the admin (the window's pages, the
schedule form's field)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from rest_framework.test import APIClient

from django_durable_schedules import state
from django_durable_schedules.models import BlackoutWindow, EventAction, Schedule, ScheduleEvent

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def api(admin_user):
    client = APIClient()
    client.force_authenticate(admin_user)
    return client


def nightly(name="nightly", **kw):
    return state.save_window(
        BlackoutWindow(name=name, rrule="FREQ=DAILY;BYHOUR=2", duration_seconds=3600, **kw)
    )


def test_state_saves_a_window_checked_and_tells_its_schedules():
    with pytest.raises(ValidationError) as err:
        state.save_window(BlackoutWindow(name="bad", rrule="FREQ=DAILY"))
    assert "duration_seconds" in err.value.message_dict
    w = nightly()
    row = state.create_schedule(
        name="s", callback="tests.noop", kind="interval", interval_seconds=60,
        blackout_windows=["nightly"], blackout_policy="defer",
    )  # fmt: skip
    assert [x.name for x in row.blackout_windows.all()] == ["nightly"]
    created = ScheduleEvent.objects.get(schedule_id=row.pk, action=EventAction.CREATED)
    assert created.changes["blackout_windows"] == [None, ["nightly"]]
    w.duration_seconds = 600
    state.save_window(w)
    state.delete_window(w)
    events = ScheduleEvent.objects.filter(schedule_id=row.pk, action=EventAction.BLACKOUTS)
    assert sorted(e.changes.get("deleted", False) for e in events) == [False, True]
    with pytest.raises(ValidationError) as err:
        state.update_schedule(row.pk, blackout_windows=["nope"])
    assert "blackout_windows" in err.value.message_dict


def test_api_blackouts_crud_and_the_schedule_fields(api):
    made = api.post(
        "/api/blackouts/",
        {"name": "freeze", "start_at": "2027-12-20T00:00:00Z", "end_at": "2028-01-02T00:00:00Z"},
        format="json",
    )
    assert made.status_code == 201, made.json()
    bad = api.post(
        "/api/blackouts/",
        {"name": "x", "rrule": "FREQ=FORTNIGHTLY", "duration_seconds": 60},
        format="json",
    )
    assert bad.status_code == 400 and "rrule" in bad.json()
    bad = api.post(
        "/api/blackouts/", {"name": "y", "start_at": "2027-12-20T00:00:00Z"}, format="json"
    )
    assert bad.status_code == 400 and "end_at" in bad.json()
    sched = api.post(
        "/api/schedules/",
        {
            "name": "s",
            "callback": "tests.noop",
            "kind": "interval",
            "interval_seconds": 60,
            "blackout_windows": ["freeze"],
            "blackout_policy": "defer",
        },
        format="json",
    )
    assert sched.status_code == 201, sched.json()
    body = sched.json()
    assert body["blackout_windows"] == ["freeze"] and body["blackout_policy"] == "defer"
    assert body["blackout_count"] == 0
    listed = api.get("/api/schedules/").json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert rows[0]["blackout_windows"] == ["freeze"]
    unknown = api.patch(
        f"/api/schedules/{body['id']}/", {"blackout_windows": ["nope"]}, format="json"
    )
    assert unknown.status_code == 400 and "blackout_windows" in unknown.json()
    window = api.get(f"/api/blackouts/{made.json()['id']}/").json()
    assert window["schedules"] == ["s"]
    assert api.delete(f"/api/blackouts/{made.json()['id']}/").status_code == 204
    assert Schedule.objects.get(name="s").blackout_windows.count() == 0


def test_admin_window_pages_and_the_schedule_field(admin_client):
    page = admin_client.get("/admin/durable_schedules/blackoutwindow/add/")
    assert page.status_code == 200
    posted = admin_client.post(
        "/admin/durable_schedules/blackoutwindow/add/",
        {"name": "sunday", "rrule": "FREQ=WEEKLY;BYDAY=SU", "duration_seconds": "7200",
         "timezone": "Europe/Paris", "description": ""},
    )  # fmt: skip
    assert posted.status_code == 302, posted.content.decode()[:2000]
    w = BlackoutWindow.objects.get(name="sunday")
    assert w.rrule == "FREQ=WEEKLY;BYDAY=SU"
    refused = admin_client.post(
        "/admin/durable_schedules/blackoutwindow/add/",
        {"name": "bad", "rrule": "FREQ=WEEKLY", "duration_seconds": "", "timezone": "UTC"},
    )
    assert refused.status_code == 200 and b"recurring window lasts" in refused.content
    listed = admin_client.get("/admin/durable_schedules/blackoutwindow/")
    assert b"sunday" in listed.content
    form = admin_client.get("/admin/durable_schedules/schedule/add/")
    assert b'name="blackout_windows"' in form.content and b'name="blackout_policy"' in form.content


def test_the_command_shows_blacked_out_slots_struck_out():
    from io import StringIO

    from django.core.management import call_command

    state.save_window(
        BlackoutWindow(name="always-soon", rrule="FREQ=MINUTELY", duration_seconds=30)
    )
    state.create_schedule(
        name="s", callback="tests.noop", kind="interval", interval_seconds=15,
        blackout_windows=["always-soon"],
    )  # fmt: skip
    out = StringIO()
    call_command("schedules", "upcoming", "s", stdout=out)
    text = out.getvalue()
    assert "blackout windows: always-soon (skip); 0 slots blacked out so far" in text
    assert "BLACKED OUT, not run: window always-soon" in text
