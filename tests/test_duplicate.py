"""Duplicate a schedule (issue #27 item 6): a new name, the same definition, policies,
input, owner, exclusion calendars and blackout windows, created paused (no next run) until
enabled, with a ``created`` event that says ``duplicated_from``; from the state package,
the admin (the change page's "Duplicate…" and a list action) and the API."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.core.exceptions import ValidationError
from django.urls import reverse
from rest_framework.test import APIClient

from django_durable_schedules import state
from django_durable_schedules.models import (
    BlackoutWindow,
    ExclusionCalendar,
    RunAttempt,
    Schedule,
    ScheduleEvent,
)

pytestmark = pytest.mark.django_db(transaction=True)

CHANGELIST = "admin:durable_schedules_schedule_changelist"


def source(admin_user=None) -> Schedule:
    calendar = ExclusionCalendar.objects.create(name="holidays")
    window = BlackoutWindow.objects.create(
        name="nightly", rrule="FREQ=DAILY;BYHOUR=2;BYMINUTE=0", duration_seconds=600
    )
    row = state.create_schedule(
        name="reports.daily",
        callback="tests.noop",
        kind="cron",
        cron="30 6 * * 1-5",
        timezone="Europe/Paris",
        payload={"to": "ops"},
        metadata={"team": "data"},
        owner=admin_user,
        max_attempts=4,
        jitter_seconds=30,
        deadline_seconds=900,
        exclusion_calendars=[calendar],
    )
    row.blackout_windows.set([window])
    return row


def test_a_duplicate_has_the_same_definition_and_is_paused_until_enabled(admin_user):
    original = source(admin_user)
    copy = state.duplicate_schedule(original.pk, "reports.daily-2", actor=admin_user)
    copy.refresh_from_db()
    for field in (
        "callback",
        "kind",
        "cron",
        "timezone",
        "payload",
        "metadata",
        "owner_id",
        "max_attempts",
        "jitter_seconds",
        "deadline_seconds",
        "blackout_policy",
    ):
        assert getattr(copy, field) == getattr(original, field), field
    assert [c.name for c in copy.exclusion_calendars.all()] == ["holidays"]
    assert [w.name for w in copy.blackout_windows.all()] == ["nightly"]
    assert copy.status == "paused" and copy.next_run_at is None and copy.occurrence == 0
    assert "reports.daily" in copy.pause_reason
    # Paused: a claim much later runs nothing; enabled: its next slot. (An hour after the
    # source's next slot: "now + 3 days" fell inside the nightly window between 02:00
    # and 02:10 UTC, and nothing was claimed.)
    claims = state.claim_due(worker="w", now=original.next_run_at + timedelta(hours=1))
    assert [c.schedule_id for c in claims] == [original.pk]  # the source's, not the copy's
    assert not RunAttempt.objects.filter(schedule_id=copy.pk).exists()
    enabled = state.enable(copy.pk)
    assert enabled.status == "active" and enabled.next_run_at is not None
    assert enabled.pause_reason == ""
    event = ScheduleEvent.objects.get(schedule_id=copy.pk, action="created")
    assert event.changes["duplicated_from"] == [
        None,
        {"id": str(original.pk), "name": "reports.daily"},
    ]
    assert event.source == "code" and event.actor_id == admin_user.pk
    original.refresh_from_db()
    assert original.status == "active"  # the source is untouched


def test_a_name_taken_or_invalid_is_a_field_message():
    original = source()
    for name in ("reports.daily", "-bad name"):
        with pytest.raises(ValidationError) as caught:
            state.duplicate_schedule(original.pk, name)
        assert list(caught.value.message_dict) == ["name"], caught.value.message_dict
    assert Schedule.objects.count() == 1


def test_a_manual_schedule_duplicates_as_manual():
    original = state.create_schedule(name="by-hand", callback="tests.noop", kind="manual")
    copy = state.duplicate_schedule(original.pk, "by-hand-copy")
    assert copy.kind == "manual" and copy.status == "paused" and copy.next_run_at is None


def test_the_admin_change_page_offers_duplicate_and_its_form_creates_the_copy(admin_client):
    original = source()
    change = reverse("admin:durable_schedules_schedule_change", args=[original.pk])
    url = reverse("admin:durable_schedules_schedule_duplicate", args=[original.pk])
    page = admin_client.get(change).content.decode()
    assert f'href="{url}"' in page and "Duplicate…" in page
    form = admin_client.get(url)
    assert form.status_code == 200
    assert 'value="reports.daily-copy"' in form.content.decode()
    taken = admin_client.post(url, {"name": "reports.daily"})
    assert taken.status_code == 200 and "already exists" in taken.content.decode()
    done = admin_client.post(url, {"name": "reports.daily-copy"}, follow=True)
    assert "Duplicated reports.daily as reports.daily-copy" in done.content.decode()
    copy = Schedule.objects.get(name="reports.daily-copy")
    assert copy.status == "paused" and copy.next_run_at is None
    assert ScheduleEvent.objects.get(schedule_id=copy.pk, action="created").source == "admin"


def test_the_list_action_needs_exactly_one_schedule(admin_client):
    original = source()
    other = state.create_schedule(name="other", callback="tests.noop", interval_seconds=60)
    changelist = reverse(CHANGELIST)
    one = admin_client.post(
        changelist, {"action": "duplicate", ACTION_CHECKBOX_NAME: [str(original.pk)]}
    )
    assert one.status_code == 302
    assert one["Location"] == reverse(
        "admin:durable_schedules_schedule_duplicate", args=[original.pk]
    )
    two = admin_client.post(
        changelist,
        {"action": "duplicate", ACTION_CHECKBOX_NAME: [str(original.pk), str(other.pk)]},
        follow=True,
    )
    assert "Select exactly one schedule to duplicate." in two.content.decode()


def test_the_api_duplicates_with_201_and_refuses_a_taken_name_with_400(admin_user):
    original = source()
    client = APIClient()
    client.force_authenticate(admin_user)
    url = f"/api/schedules/{original.pk}/duplicate/"
    made = client.post(url, {"name": "api-copy"}, format="json")
    assert made.status_code == 201, made.json()
    body = made.json()
    assert body["name"] == "api-copy" and body["status"] == "paused"
    assert body["next_run_at"] is None and body["exclusion_calendars"] == ["holidays"]
    assert body["cron"] == "30 6 * * 1-5"
    for bad in ({"name": "api-copy"}, {"name": "no spaces"}, {}):
        refused = client.post(url, bad, format="json")
        assert refused.status_code == 400 and "name" in refused.json(), refused.json()
    assert (
        client.post(
            "/api/schedules/00000000-0000-0000-0000-000000000000/duplicate/",
            {"name": "x"},
            format="json",
        ).status_code
        == 404
    )
    assert Schedule.objects.count() == 2
