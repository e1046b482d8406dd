"""A running occurrence shows since when and on which worker (issue 26, item 3): the
admin's schedule list and change page, the API's ``running`` object and ``schedules
show``, read from the open attempt (the one whose ``lease_token`` is the schedule's) in the
page's own query: no query per row."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from django_durable_schedules import state
from django_durable_schedules.models import RunAttempt, Schedule

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:durable_schedules_schedule_changelist"
WORKER = "host-1:4242"


def make(name: str) -> Schedule:
    """An hourly schedule not due before an hour from now (runs only when triggered)."""
    return Schedule.objects.create(
        name=name,
        callback="tests.noop",
        kind="interval",
        interval_seconds=3600,
        timezone="UTC",
        start_at=timezone.now() + timedelta(hours=1),
    )


def run(schedules: list[Schedule]) -> None:
    """Claim each of ``schedules`` as a worker does: an open attempt holding its lease."""
    for schedule in schedules:
        state.trigger(schedule.pk)
    claims = state.claim_due(worker=WORKER)
    assert {c.schedule_id for c in claims} == {s.pk for s in schedules}


@pytest.fixture
def api(django_user_model):
    client = APIClient()
    client.force_authenticate(django_user_model.objects.create_user("ops", is_staff=True))
    return client


def test_the_admin_list_and_change_page_say_which_run_since_when_on_which_worker(
    admin_client,
):
    busy, idle = make("busy"), make("idle")
    run([busy])
    attempt = RunAttempt.objects.get(schedule=busy)
    since = f"#{attempt.occurrence}.{attempt.attempt} since {attempt.claimed_at:%H:%M:%S} UTC"
    page = admin_client.get(reverse(CHANGELIST)).content.decode()
    assert f"{since} on {WORKER}" in page
    assert page.count("dds-running-since") == 1  # the idle one says nothing
    change = admin_client.get(
        reverse("admin:durable_schedules_schedule_change", args=[busy.pk])
    ).content.decode()
    assert f"{since} on {WORKER}" in change
    change = admin_client.get(
        reverse("admin:durable_schedules_schedule_change", args=[idle.pk])
    ).content.decode()
    assert "dds-running-since" not in change


def _list_queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    return len(ctx.captured_queries)


def test_running_rows_cost_no_query_per_row(admin_client, api, django_assert_max_num_queries):
    schedules = [make(f"s-{i:02}") for i in range(12)]
    run(schedules[:1])
    admin_url = reverse(CHANGELIST)
    api_url = reverse("durable_schedules_api:schedule-list")
    admin_client.get(admin_url)  # warm the session and content types
    one = (_list_queries(admin_client, admin_url), _list_queries(api, api_url))
    run(schedules[1:])
    many = (_list_queries(admin_client, admin_url), _list_queries(api, api_url))
    assert many == one, (one, many)
    with django_assert_max_num_queries(one[1]):
        body = api.get(api_url).json()
    running = [s["running"] for s in body["results"]]
    assert all(r is not None and r["worker"] == WORKER for r in running)


def test_the_api_returns_the_running_object_and_null_when_idle(api):
    busy, idle = make("busy"), make("idle")
    run([busy])
    attempt = RunAttempt.objects.get(schedule=busy)
    body = api.get(reverse("durable_schedules_api:schedule-detail", args=[busy.pk])).json()
    assert body["running"] == {
        "occurrence": attempt.occurrence,
        "attempt": attempt.attempt,
        "claimed_at": attempt.claimed_at.isoformat().replace("+00:00", "Z"),
        "worker": WORKER,
    }
    body = api.get(reverse("durable_schedules_api:schedule-detail", args=[idle.pk])).json()
    assert body["running"] is None
    # A transition's answer reads it too (a row fresh from the state machine).
    body = api.post(
        reverse("durable_schedules_api:schedule-disable", args=[busy.pk]), format="json"
    ).json()
    assert body["running"]["worker"] == WORKER


def test_a_lease_naming_no_attempt_shows_as_idle(api):
    """A lease token written behind ``save()`` that no attempt holds: running is null,
    never an error."""
    import uuid

    schedule = make("forged")
    run([schedule])
    Schedule.objects.filter(pk=schedule.pk).update(lease_token=uuid.uuid4())
    body = api.get(reverse("durable_schedules_api:schedule-detail", args=[schedule.pk])).json()
    assert body["running"] is None


def test_schedules_show_says_what_runs(django_assert_max_num_queries):
    busy = make("busy")
    run([busy])
    out = StringIO()
    call_command("schedules", "show", "busy", stdout=out)
    attempt = RunAttempt.objects.get(schedule=busy)
    assert f"running: #1.1 since {attempt.claimed_at:%Y-%m-%dT%H:%M:%SZ} on {WORKER}" in (
        out.getvalue()
    )
