"""A one-shot's ``run_at`` in the past (issue #31 item 3): refused with a field message on
``run_at`` unless the request says it means it (``run_now``), accepted within a grace of
:data:`PAST_RUN_AT_GRACE_SECONDS`; an edit that keeps ``run_at`` is never refused; the change
page of a one-shot due at once says so instead of "No further fire times"."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse
from hypothesis import given
from hypothesis import strategies as st
from rest_framework.test import APIClient

from django_durable_schedules import state
from django_durable_schedules.humanize import gap_words
from django_durable_schedules.models import Schedule
from django_durable_schedules.models.validation import (
    PAST_RUN_AT_GRACE_SECONDS,
    past_run_at_errors,
)

from .test_admin import _form_data

pytestmark = pytest.mark.django_db

ADD = "admin:durable_schedules_schedule_add"
CHANGE = "admin:durable_schedules_schedule_change"
LIST = reverse("durable_schedules_api:schedule-list")
NOW = datetime(2027, 6, 1, 12, 0, tzinfo=UTC)


def iso(at: datetime) -> str:
    return at.replace(microsecond=0).isoformat().replace("+00:00", "Z")


@pytest.fixture
def api(django_user_model):
    client = APIClient()
    client.force_authenticate(django_user_model.objects.create_user("staff", is_staff=True))
    return client


def post_once(api, run_at: datetime, **extra):
    body = {"name": "one", "callback": "tests.noop", "kind": "once", "run_at": iso(run_at)}
    return api.post(LIST, {**body, **extra}, format="json")


@pytest.mark.vendor_independent  # a pure rule and its words
def test_the_rule_refuses_past_the_grace_and_says_the_gap():
    assert past_run_at_errors(NOW - timedelta(days=3), NOW, kind="once") == {
        "run_at": [
            "run_at is 3 days in the past; set run_now to run it at once, or choose a future time."
        ]
    }
    grace = NOW - timedelta(seconds=PAST_RUN_AT_GRACE_SECONDS)
    assert past_run_at_errors(grace, NOW, kind="once") == {}
    assert past_run_at_errors(NOW - timedelta(days=3), NOW, kind="once", run_now=True) == {}
    assert past_run_at_errors(NOW - timedelta(days=3), NOW, kind="interval") == {}
    old = NOW - timedelta(days=400)
    assert past_run_at_errors(old, NOW, kind="once", before=("once", old)) == {}
    assert past_run_at_errors(old, NOW, kind="once", before=("interval", None)) != {}
    assert [gap_words(s) for s in (1, 61, 7200, 86400, 31535330)] == [
        "1 second",
        "1 minute",
        "2 hours",
        "1 day",
        "364 days",
    ]


def test_the_api_refuses_a_past_run_at_with_a_field_message(api):
    response = post_once(api, datetime.now(UTC) - timedelta(days=3, minutes=5))
    assert response.status_code == 400, response.json()
    assert response.json() == {
        "run_at": [
            "run_at is 3 days in the past; set run_now to run it at once, or choose a future time."
        ]
    }
    assert not Schedule.objects.exists()


def test_the_api_with_run_now_creates_it_due_at_once(api):
    run_at = datetime.now(UTC).replace(microsecond=0) - timedelta(days=3)
    response = post_once(api, run_at, run_now=True)
    assert response.status_code == 201, response.json()
    data = response.json()
    assert "run_now" not in data and data["run_at"] == iso(run_at)
    assert data["next_run_at"] == iso(run_at)  # due now; its receipt keeps the slot
    claims = state.claim_due(worker="w", now=datetime.now(UTC))
    assert [c.schedule_id for c in claims] == [Schedule.objects.get().pk]
    assert claims[0].scheduled_for == run_at


def test_run_now_is_for_a_once_schedule_only(api):
    body = {"name": "i", "callback": "tests.noop", "kind": "interval", "interval_seconds": 60}
    response = api.post(LIST, {**body, "run_now": True}, format="json")
    assert response.status_code == 400 and "run_now" in response.json()


def test_a_run_at_within_the_grace_is_accepted_as_now(api):
    response = post_once(api, datetime.now(UTC) - timedelta(seconds=20))
    assert response.status_code == 201, response.json()


def test_an_api_edit_into_the_past_is_refused_but_a_rename_of_a_completed_one_is_not(api):
    future = datetime.now(UTC) + timedelta(days=1)
    pk = post_once(api, future).json()["id"]
    detail = reverse("durable_schedules_api:schedule-detail", args=[pk])
    past = datetime.now(UTC) - timedelta(hours=5)
    response = api.patch(detail, {"run_at": iso(past)}, format="json")
    assert response.status_code == 400 and "5 hours in the past" in response.json()["run_at"][0]
    # The one-shot ran long ago (completed): renaming it touches no run_at.
    Schedule.objects.filter(pk=pk).update(
        status="completed", next_run_at=None, run_at=datetime(2020, 1, 1, tzinfo=UTC)
    )
    response = api.patch(detail, {"name": "renamed"}, format="json")
    assert response.status_code == 200, response.json()
    body = {**response.json(), "name": "again"}
    body = {k: body[k] for k in ("name", "callback", "kind", "run_at")}
    assert api.put(detail, body, format="json").status_code == 200


def once_form(run_at: datetime, **fields) -> dict:
    text = run_at.strftime("%Y-%m-%dT%H:%M:%S")
    fields = {"name": "one-shot", **fields}
    return _form_data(kind="once", cron="", timezone="UTC", run_at=text, **fields)


def test_the_admin_refuses_a_past_run_at_and_shows_the_checkbox(admin_client):
    past = datetime.now(UTC) - timedelta(days=3, minutes=5)
    add = admin_client.get(reverse(ADD)).content.decode()
    assert 'type="hidden" name="run_now"' in add
    assert 'class="form-row hidden field-run_now"' in add  # the row is not shown
    response = admin_client.post(reverse(ADD), once_form(past))
    assert response.status_code == 200 and not Schedule.objects.exists()
    form = response.context["adminform"].form
    assert form.errors["run_at"] == [
        'run_at is 3 days in the past; tick "Run at once" below to run it at once, '
        "or choose a future time."
    ]
    html = response.content.decode()
    assert 'type="checkbox" name="run_now"' in html
    assert 'class="form-row field-run_now"' in html
    assert "Run at once (run_at is in the past)" in html
    response = admin_client.post(reverse(ADD), once_form(past, run_now="on"))
    assert response.status_code == 302
    row = Schedule.objects.get()
    assert row.next_run_at == row.run_at == past.replace(microsecond=0)


def test_the_admin_accepts_within_the_grace_and_renames_a_completed_one_shot(admin_client):
    response = admin_client.post(reverse(ADD), once_form(datetime.now(UTC) - timedelta(seconds=20)))
    assert response.status_code == 302
    row = Schedule.objects.get()
    Schedule.objects.filter(pk=row.pk).update(
        status="completed", next_run_at=None, run_at=datetime(2020, 1, 1, tzinfo=UTC)
    )
    data = once_form(datetime(2020, 1, 1, tzinfo=UTC), name="renamed")
    response = admin_client.post(reverse(CHANGE, args=[row.pk]), data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert Schedule.objects.get().name == "renamed"


def test_the_change_page_of_a_due_one_shot_says_it_runs_at_once(admin_client, api):
    run_at = datetime(2026, 1, 5, 9, 30, tzinfo=UTC)
    pk = post_once(api, run_at, run_now=True).json()["id"]
    html = admin_client.get(reverse(CHANGE, args=[pk])).content.decode()
    assert "Runs at once (was due 2026-01-05 09:30:00 UTC)" in html
    assert "No further fire times" not in html


@pytest.mark.vendor_independent  # a pure rule searched by Hypothesis
@given(gap=st.integers(min_value=-(10**9), max_value=10**10))
def test_the_rule_refuses_exactly_past_the_grace_whatever_the_gap(gap):
    run_at = NOW - timedelta(seconds=gap)
    errors = past_run_at_errors(run_at, NOW, kind="once")
    assert bool(errors) == (gap > PAST_RUN_AT_GRACE_SECONDS)
    if errors:
        assert errors["run_at"][0].startswith(f"run_at is {gap_words(gap)} in the past; ")
    assert past_run_at_errors(run_at, NOW, kind="once", run_now=True) == {}
