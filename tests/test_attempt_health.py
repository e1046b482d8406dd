"""The health snapshot's attempts without a receipt (issue #32 item 3): the runs in flight
and the strays an edit behind the engine leaves, counted on bounded reads; ``exact`` over
every attempt (``attempt_health``)."""

import json
import uuid
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient

from django_durable_schedules import attempt_health, health, state
from django_durable_schedules.models import RunAttempt, Schedule

from .factories import T0

pytestmark = pytest.mark.django_db(transaction=True)
S = timedelta(seconds=1)


def mk(name):
    return Schedule.objects.create(
        name=name, callback="tests.noop", kind="interval", interval_seconds=60, created_at=T0
    )


def stray(schedule, occurrence, claimed_at):
    """An attempt written behind the engine: no receipt, and a lease its schedule does not
    hold."""
    return RunAttempt.objects.create(
        schedule=schedule,
        schedule_name=schedule.name,
        occurrence=occurrence,
        attempt=1,
        scheduled_for=claimed_at,
        claimed_at=claimed_at,
        lease_token=uuid.uuid4(),
        lease_expires_at=claimed_at + 30 * S,
        worker="behind-the-engine",
        idempotency_key=f"{schedule.pk}:{occurrence}",
    )


def test_a_run_in_flight_is_an_open_attempt_and_no_stray():
    mk("a")
    state.claim_due(worker="w", now=T0 + 3600 * S, lease_seconds=30)
    h = health.snapshot(now=T0 + 3601 * S)
    assert (h.open_attempts, h.open_attempts_in_flight, h.stray_attempts) == (1, 1, 0)
    assert h.open_attempts_exact and h.open_attempts_checked is None  # a small table
    assert not any("no receipt" in w for w in h.warnings)
    assert health.snapshot(now=T0 + 3601 * S, exact=True).open_attempts == 1


def test_an_attempt_left_without_a_receipt_behind_the_engine_is_counted_and_warned():
    a = mk("a")
    state.claim_due(worker="w", now=T0 + 3600 * S, lease_seconds=30)
    stray(a, 99, T0 + 3600 * S)
    h = health.snapshot(now=T0 + 3601 * S)
    assert (h.open_attempts, h.open_attempts_in_flight, h.stray_attempts) == (2, 1, 1)
    assert h.healthy  # a warning, not a fleet problem
    assert h.warnings == [
        "1 attempt has no receipt and holds no lease: left by an edit behind the engine, "
        "no worker will ever finish them"
    ]
    data = h.as_dict()
    assert data["open_attempts"] == 2 and data["stray_attempts"] == 1
    assert data["open_attempts_exact"] is True and data["open_attempts_checked"] is None


def test_a_lease_token_overwritten_behind_the_engine_leaves_a_stray():
    mk("a")
    state.claim_due(worker="w", now=T0 + 3600 * S, lease_seconds=30)
    Schedule.objects.update(lease_token=uuid.uuid4())  # the attempt's lease is gone
    h = health.snapshot(now=T0 + 3601 * S)
    assert (h.open_attempts, h.open_attempts_in_flight, h.stray_attempts) == (1, 0, 1)


def test_the_bounded_count_looks_at_the_newest_claims_and_exact_at_every_attempt(monkeypatch):
    monkeypatch.setattr(attempt_health, "RECENT_CLAIMS_CHECKED", 2)
    a = mk("a")
    for n in range(4):  # the two oldest are past the newest two claims
        stray(a, n + 1, T0 + n * S)
    h = health.snapshot(now=T0 + 10 * S)
    assert (h.open_attempts, h.stray_attempts) == (2, 2)
    assert not h.open_attempts_exact and h.open_attempts_checked == 2
    assert "(among the newest 2 claims)" in h.warnings[-1]
    h = health.snapshot(now=T0 + 10 * S, exact=True)
    assert (h.open_attempts, h.stray_attempts, h.open_attempts_exact) == (4, 4, True)
    assert h.open_attempts_checked is None
    assert RunAttempt.objects.filter(receipt__isnull=True).count() == 4  # what exact counts


def test_the_snapshot_reads_a_bounded_number_of_queries(django_assert_max_num_queries):
    a = mk("a")
    state.claim_due(worker="w", now=T0 + 3600 * S, lease_seconds=30)
    stray(a, 99, T0 + 3600 * S)
    with django_assert_max_num_queries(18):
        health.snapshot(now=T0 + 3601 * S)
    with django_assert_max_num_queries(18):
        health.snapshot(now=T0 + 3601 * S, exact=True)


def test_the_command_the_api_and_the_admin_page_offer_the_exact_count(
    monkeypatch, admin_client, django_user_model
):
    monkeypatch.setattr(attempt_health, "RECENT_CLAIMS_CHECKED", 1)
    a = mk("a")
    Schedule.objects.update(status="paused")  # nothing due: healthy, the command exits 0
    stray(a, 1, T0)
    stray(a, 2, T0 + S)
    out = StringIO()
    call_command("schedules", "health", stdout=out, stderr=StringIO())
    data = json.loads(out.getvalue())
    assert (data["stray_attempts"], data["open_attempts_exact"]) == (1, False)
    out = StringIO()
    call_command("schedules", "health", "--exact", stdout=out, stderr=StringIO())
    data = json.loads(out.getvalue())
    assert (data["open_attempts"], data["stray_attempts"], data["open_attempts_exact"]) == (
        2,
        2,
        True,
    )
    api = APIClient()
    api.force_authenticate(django_user_model.objects.create_user("staff", is_staff=True))
    path = reverse("durable_schedules_api:health")
    assert api.get(path).json()["stray_attempts"] == 1
    assert api.get(path, {"exact": "1"}).json()["stray_attempts"] == 2
    page = reverse("admin:durable_schedules_schedule_health")
    html = admin_client.get(page).content.decode()
    assert "among the newest 1 claims" in html and 'href="?exact=1"' in html
    html = admin_client.get(page, {"exact": "1"}).content.decode()
    assert "every attempt checked" in html and "2 attempts have no receipt" in html
