"""An ``overlap_policy="allow"`` schedule's occurrences in flight show as running on every
surface (issue #28 item 4): each holds an ``OccurrenceLease`` while the schedule's own
row stays unleased, so a surface reading only ``Schedule.lease_token`` would show it idle.
The admin's list and change page, its "running" filter, the API's ``running`` and
``running_occurrences``, ``schedules list`` / ``show`` and the health counts, with no
query per row on the lists."""

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

from django_durable_schedules import health, health_counts, state
from django_durable_schedules.models import OccurrenceLease, RunAttempt, Schedule

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:durable_schedules_schedule_changelist"
WORKER = "host-1:4242"


def make(name: str, *, allow: bool = True, max_parallel: int = 2) -> Schedule:
    """An hourly schedule not due before an hour from now (runs only when triggered)."""
    extra = {"overlap_policy": "allow", "max_parallel": max_parallel} if allow else {}
    return Schedule.objects.create(
        name=name,
        callback="tests.noop",
        kind="interval",
        interval_seconds=3600,
        timezone="UTC",
        max_attempts=1,
        start_at=timezone.now() + timedelta(hours=1),
        **extra,
    )


def run(schedule: Schedule, times: int = 1) -> None:
    """Trigger and claim ``schedule`` ``times`` times, as a worker does: with ``allow``,
    one more occurrence in flight each time (each under its own lease)."""
    for _ in range(times):
        state.trigger(schedule.pk)
        claims = state.claim_due(worker=WORKER)
        assert [c.schedule_id for c in claims] == [schedule.pk]


@pytest.fixture
def api(django_user_model):
    client = APIClient()
    client.force_authenticate(django_user_model.objects.create_user("ops", is_staff=True))
    return client


def oldest_since(schedule: Schedule) -> str:
    first = RunAttempt.objects.filter(schedule=schedule).order_by("claimed_at", "pk").first()
    assert first is not None
    return f"#{first.occurrence}.{first.attempt} since {first.claimed_at:%H:%M:%S} UTC on {WORKER}"


def test_the_admin_list_says_how_many_occurrences_run_and_the_oldest_since_when(admin_client):
    par, idle = make("par", max_parallel=3), make("idle")
    run(par, 2)
    assert Schedule.objects.get(pk=par.pk).lease_token is None  # the row stays unleased
    page = admin_client.get(reverse(CHANGELIST)).content.decode()
    assert 'running</span> <span class="dds-running-since">2 of 3 occurrences; oldest' in page
    assert f"oldest {oldest_since(par)}" in page
    assert page.count("dds-running-since") == 1  # the idle one says nothing
    assert "waiting:" not in page  # below its limit, and not due anyway
    change = admin_client.get(
        reverse("admin:durable_schedules_schedule_change", args=[par.pk])
    ).content.decode()
    assert 'running</span> <span class="dds-running-since">2 of 3 occurrences; oldest' in change
    for lease in OccurrenceLease.objects.filter(schedule=par):
        assert f"occurrence {lease.occurrence}: {lease.lease_token}, expires" in change
    change = admin_client.get(
        reverse("admin:durable_schedules_schedule_change", args=[idle.pk])
    ).content.decode()
    assert "none (not running)" in change and "dds-running-since" not in change


def test_a_due_row_held_at_its_limit_says_it_waits(admin_client):
    par = make("par")
    run(par, 2)
    # Due now: the next claim holds it back (2 of 2 run).
    Schedule.objects.filter(pk=par.pk).update(next_run_at=timezone.now() - timedelta(minutes=1))
    page = admin_client.get(reverse(CHANGELIST)).content.decode()
    assert "2 of 2 occurrences; oldest" in page and "waiting: 2 of 2 running" in page


def test_the_running_filter_counts_occurrence_leases(admin_client):
    make("idle")
    par = make("par")
    run(par, 1)
    plain = make("plain", allow=False)
    run(plain, 1)
    url = reverse(CHANGELIST)
    running = admin_client.get(url, {"running": "yes"}).content.decode()
    idle = admin_client.get(url, {"running": "no"}).content.decode()
    assert ">par<" in running and ">plain<" in running and ">idle<" not in running
    assert ">idle<" in idle and ">par<" not in idle and ">plain<" not in idle


def _queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    return len(ctx.captured_queries)


def test_occurrences_cost_no_query_per_row(admin_client, api, django_assert_max_num_queries):
    schedules = [make(f"s-{i:02}") for i in range(8)]
    run(schedules[0])
    admin_url = reverse(CHANGELIST)
    api_url = reverse("durable_schedules_api:schedule-list")
    admin_client.get(admin_url)  # warm the session and content types
    one = (_queries(admin_client, admin_url), _queries(api, api_url))
    for schedule in schedules[1:]:
        run(schedule, 2)
    many = (_queries(admin_client, admin_url), _queries(api, api_url))
    assert many == one, (one, many)
    with django_assert_max_num_queries(one[1]):
        body = api.get(api_url).json()
    counts = {s["name"]: s["running_occurrences"] for s in body["results"]}
    assert counts == {"s-00": 1, **{f"s-{i:02}": 2 for i in range(1, 8)}}
    assert all(s["running"]["worker"] == WORKER for s in body["results"])


def test_the_api_returns_the_oldest_occurrence_and_the_count(api):
    par, idle, plain = make("par"), make("idle"), make("plain", allow=False)
    run(par, 2)
    run(plain)
    first = RunAttempt.objects.filter(schedule=par).order_by("claimed_at", "pk").first()
    url = "durable_schedules_api:schedule-detail"
    body = api.get(reverse(url, args=[par.pk])).json()
    assert body["running_occurrences"] == 2
    assert body["running"]["occurrence"] == first.occurrence
    assert body["running"]["worker"] == WORKER
    body = api.get(reverse(url, args=[idle.pk])).json()
    assert body["running_occurrences"] == 0 and body["running"] is None
    body = api.get(reverse(url, args=[plain.pk])).json()
    assert body["running_occurrences"] == 1 and body["running"]["worker"] == WORKER
    # A transition's answer (a row fresh from the state machine, read without annotations).
    body = api.post(reverse("durable_schedules_api:schedule-disable", args=[par.pk])).json()
    assert body["running_occurrences"] == 2 and body["running"]["occurrence"] == 1


def test_schedules_list_and_show_say_what_runs():
    par, plain = make("par", max_parallel=3), make("plain", allow=False)
    make("idle")
    run(par, 2)
    run(plain)
    out = StringIO()
    call_command("schedules", "list", stdout=out)
    lines = {line.split()[0]: line for line in out.getvalue().splitlines()[1:]}
    assert lines["par"].endswith("(running: 2 of 3 occurrences)")
    assert lines["plain"].endswith("(running)")
    assert "running" not in lines["idle"]
    out = StringIO()
    call_command("schedules", "show", "par", stdout=out)
    first = RunAttempt.objects.filter(schedule=par).order_by("claimed_at", "pk").first()
    expected = (
        f"running: #{first.occurrence}.1 since {first.claimed_at:%Y-%m-%dT%H:%M:%SZ} "
        f"on {WORKER} (the oldest of 2 running)"
    )
    assert expected in out.getvalue()
    assert "overlap=allow, blackout=skip, max_parallel=3" in out.getvalue()


@pytest.mark.parametrize("one_pass", [False, True])
def test_health_counts_the_occurrence_leases(monkeypatch, one_pass):
    par = make("par", max_parallel=3)
    run(par, 2)
    plain = make("plain", allow=False)
    run(plain)
    if one_pass:  # MariaDB's way, whatever the database
        monkeypatch.setattr(connection.features, "supports_partial_indexes", False)
    now = state.db_now()
    with CaptureQueriesContext(connection) as queries:
        counts = health_counts.schedule_counts(now, 60.0)
    assert len(queries) == 1
    assert (counts["live"], counts["expired"]) == (3, 0)
    # One occurrence's worker died: its lease lapsed, not yet recovered.
    lapsed = OccurrenceLease.objects.filter(schedule=par).order_by("pk").first()
    OccurrenceLease.objects.filter(pk=lapsed.pk).update(lease_expires_at=now - timedelta(seconds=1))
    counts = health_counts.schedule_counts(now, 60.0)
    assert (counts["live"], counts["expired"]) == (2, 1)
    snap = health.snapshot(now=now)
    assert (snap.live_leases, snap.expired_leases) == (2, 1)


def test_the_timeline_draws_the_occurrences_in_flight_as_a_running_bar(admin_client):
    """The timeline's running bar (from the claim to now, linking to the attempt) for an
    ``allow`` schedule whose row holds no lease: from its oldest occurrence, its words
    saying how many run."""
    par = make("par", max_parallel=3)
    run(par, 2)
    first = RunAttempt.objects.filter(schedule=par).order_by("claimed_at", "pk").first()
    html = admin_client.get(reverse("admin:durable_schedules_schedule_timeline")).content.decode()
    url = reverse("admin:durable_schedules_runattempt_change", args=[first.pk])
    link = f'<a href="{url}" class="dds-tl-link dds-tl-running-link" data-attempt="{first.pk}">'
    assert html.count(link) == 1 and html.count("dds-tl-running-link") == 1
    assert '<rect class="dds-tl-bar dds-tl-running" x="' in html
    assert f"running since {first.claimed_at:%H:%M:%S} UTC (2 of 3 occurrences)" in html
