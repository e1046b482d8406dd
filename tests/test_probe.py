"""The fleet probe (``health/probe/``): for load balancers and uptime monitors. It is about
the fleet (database, live workers, claim lag), names no schedule, and a degraded schedule
does not pull the service out of rotation (the detailed ``health/`` still reports it)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client, override_settings

from django_durable_schedules import state
from django_durable_schedules.models import Schedule, WorkerHeartbeat

pytestmark = pytest.mark.django_db

PROBE = "/api/health/probe/"


def live_worker(worker_id: str = "w:1") -> None:
    now = state.db_now()
    WorkerHeartbeat.objects.create(
        worker_id=worker_id, started_at=now, last_seen_at=now, clock_skew_seconds=0.0
    )


def test_no_live_worker_fails_the_probe_for_anyone_to_read():
    Schedule.objects.create(  # waits for a worker (a fresh install, with none, passes)
        name="later",
        callback="tests.noop",
        kind="interval",
        interval_seconds=60,
        start_at=state.db_now() + timedelta(hours=1),
    )
    response = Client().get(PROBE)  # anonymous
    assert response.status_code == 503
    body = response.json()
    assert body["ok"] is False and body["database"] is True and body["live_workers"] == 0
    assert body["problems"] == ["0 live workers, at least 1 needed"]
    assert body["checked_at"].endswith("Z") and response["Cache-Control"] == "no-store"


def test_a_degraded_schedule_fails_health_but_not_the_probe(admin_client):
    live_worker()
    s = Schedule.objects.create(
        name="secret-job", callback="tests.noop", kind="interval", interval_seconds=60
    )
    Schedule.objects.filter(pk=s.pk).update(
        status="paused", next_run_at=None, degraded_reason="callback gone"
    )
    assert admin_client.get("/api/health/").status_code == 503
    response = Client().get(PROBE)
    assert response.status_code == 200 and response.json()["ok"] is True
    assert "secret-job" not in response.content.decode()


def test_a_due_schedule_waiting_too_long_fails_the_probe_without_naming_it():
    live_worker()
    s = Schedule.objects.create(
        name="secret-job", callback="tests.noop", kind="interval", interval_seconds=60
    )
    Schedule.objects.filter(pk=s.pk).update(next_run_at=state.db_now() - timedelta(minutes=5))
    response = Client().get(PROBE)
    assert response.status_code == 503
    body = response.json()
    assert body["claim_lag_seconds"] >= 299
    assert body["problems"][0].startswith("a due schedule has waited 30")
    assert "secret-job" not in response.content.decode()
    with override_settings(DURABLE_SCHEDULES={"PROBE_MAX_LAG_SECONDS": 600}):
        assert Client().get(PROBE).status_code == 200


def test_access_can_be_restricted_to_staff(admin_client):
    live_worker()
    with override_settings(DURABLE_SCHEDULES={"PROBE_PUBLIC": False}):
        assert Client().get(PROBE).status_code == 403
        assert admin_client.get(PROBE).status_code == 200
    assert Client().post(PROBE).status_code == 405


@pytest.mark.vendor_independent  # a settings check: no query
def test_probe_settings_are_checked():
    from django_durable_schedules.checks import check_setting_types

    with override_settings(
        DURABLE_SCHEDULES={"PROBE_MIN_WORKERS": -1, "PROBE_MAX_LAG_SECONDS": float("nan")}
    ):
        errors = [e.msg for e in check_setting_types()]
    assert any("PROBE_MIN_WORKERS" in m for m in errors)
    assert any("PROBE_MAX_LAG_SECONDS" in m for m in errors)
