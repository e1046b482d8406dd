"""One verdict for every health surface: ``health.snapshot()``, the API's ``health/``, the
fleet probe, the admin's health page and schedule-list banner, and ``manage.py schedules
health``. A new user tried it with no worker running and two schedules due: health said
"Healthy" (exit 0) while the probe answered 503 at the same second. Schedules due (past a
small grace, by the database clock) with no live worker are unhealthy at once, everywhere;
a fresh install (no schedules, no worker) stays healthy everywhere."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.test import Client, override_settings
from django.urls import reverse

from django_durable_schedules import health, state
from django_durable_schedules.models import Schedule, WorkerHeartbeat

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:durable_schedules_schedule_changelist"
HEALTH_PAGE = "admin:durable_schedules_schedule_health"


def two_due(seconds: int = 180) -> None:
    past = state.db_now() - timedelta(seconds=seconds)
    for name in ("report.daily", "cleanup"):
        s = Schedule.objects.create(
            name=name, callback="tests.noop", kind="interval", interval_seconds=3600
        )
        Schedule.objects.filter(pk=s.pk).update(next_run_at=past)


def live_worker(worker_id: str = "w:1", age: float = 0.0) -> None:
    seen = state.db_now() - timedelta(seconds=age)
    WorkerHeartbeat.objects.create(
        worker_id=worker_id, started_at=seen, last_seen_at=seen, clock_skew_seconds=0.0
    )


def no_worker_problem(problems: list[str]) -> str:
    found = [p for p in problems if "no live worker" in p]
    assert found, problems
    return found[0]


def test_snapshot_with_due_schedules_and_no_worker_is_unhealthy_at_once():
    two_due(seconds=30)  # well inside every "overdue" threshold: only the worker is missing
    h = health.snapshot()
    assert h.healthy is False and h.due == 2 and h.live_workers == 0
    assert "2 schedules due" in no_worker_problem(h.problems)


def test_the_probe_and_the_snapshot_read_one_verdict():
    two_due(seconds=30)
    p, h = health.probe(), health.snapshot()
    assert p.ok is False and h.healthy is False
    assert no_worker_problem(p.problems) == no_worker_problem(h.problems)
    v = health.verdict(live_workers=0, due=2)
    assert v.healthy is False and v.fleet_ok is False
    assert [code for code, _ in v.problems] == ["no_live_worker"]


def test_api_health_and_probe_answer_503(admin_client):
    two_due()
    response = admin_client.get("/api/health/")
    assert response.status_code == 503
    assert "2 schedules due" in no_worker_problem(response.json()["problems"])
    assert Client().get("/api/health/probe/").status_code == 503


def test_admin_health_page_and_changelist_banner_say_unhealthy(admin_client):
    two_due()
    html = admin_client.get(reverse(HEALTH_PAGE)).content.decode()
    assert "Unhealthy" in html and "no live worker" in html
    html = admin_client.get(reverse(CHANGELIST)).content.decode()
    assert 'id="dds-health-banner"' in html and "no live worker" in html


def test_cli_health_exits_non_zero():
    two_due()
    with pytest.raises(CommandError, match="no live worker") as excinfo:
        call_command("schedules", "health", stdout=_Sink(), stderr=_Sink())
    assert excinfo.value.returncode == 1


def test_a_live_worker_makes_due_schedules_healthy_a_stale_one_does_not(admin_client):
    two_due(seconds=0)  # just due: a worker picks it up at its next pass
    live_worker("stale", age=10_000)
    assert health.snapshot().healthy is False
    live_worker("fresh")
    assert health.snapshot().healthy is True and health.probe().ok is True
    html = admin_client.get(reverse(CHANGELIST)).content.decode()
    assert 'id="dds-health-banner"' not in html


def test_paused_cancelled_and_completed_schedules_do_not_count():
    two_due()
    Schedule.objects.filter(name="report.daily").update(status="paused")
    Schedule.objects.filter(name="cleanup").update(status="cancelled")
    s = Schedule.objects.create(
        name="once", callback="tests.noop", kind="once", run_at=state.db_now()
    )
    Schedule.objects.filter(pk=s.pk).update(
        status="completed", next_run_at=state.db_now() - timedelta(minutes=3)
    )
    h = health.snapshot()
    assert h.healthy is True, h.problems
    assert health.probe().ok is True


def test_due_means_past_a_small_grace_by_the_database_clock():
    s = Schedule.objects.create(
        name="now", callback="tests.noop", kind="interval", interval_seconds=3600
    )
    Schedule.objects.filter(pk=s.pk).update(next_run_at=state.db_now())
    with override_settings(DURABLE_SCHEDULES={"PROBE_MIN_WORKERS": 0}):  # no worker needed
        assert health.snapshot().healthy is True and health.probe().ok is True
        past = state.db_now() - timedelta(seconds=health.DUE_GRACE_SECONDS + 1)
        Schedule.objects.filter(pk=s.pk).update(next_run_at=past)
        assert "1 schedule due" in no_worker_problem(health.snapshot().problems)
        assert health.probe().ok is False


def test_a_fresh_install_is_healthy_on_every_surface(admin_client):
    assert health.snapshot().healthy is True
    assert health.probe().ok is True
    assert admin_client.get("/api/health/").status_code == 200
    assert Client().get("/api/health/probe/").status_code == 200
    assert "Unhealthy" not in admin_client.get(reverse(HEALTH_PAGE)).content.decode()
    html = admin_client.get(reverse(CHANGELIST)).content.decode()
    assert 'id="dds-health-banner"' not in html
    call_command("schedules", "health", stdout=_Sink(), stderr=_Sink())  # exit 0


def test_waiting_schedules_with_too_few_workers_fail_health_as_they_fail_the_probe():
    Schedule.objects.create(
        name="later",
        callback="tests.noop",
        kind="interval",
        interval_seconds=3600,
        start_at=state.db_now() + timedelta(hours=1),
    )
    p, h = health.probe(), health.snapshot()
    assert p.ok is False and p.problems == ["0 live workers, at least 1 needed"]
    assert h.healthy is False and p.problems[0] in h.problems


class _Sink:
    def write(self, *args: object) -> None:
        pass

    def flush(self) -> None:
        pass


@pytest.mark.parametrize("scenario", ["fresh", "due", "waiting", "lagging", "degraded", "working"])
def test_whenever_the_probe_fails_health_fails_for_the_same_reason(scenario):
    if scenario in ("lagging", "degraded", "working"):
        live_worker()
    if scenario in ("due", "lagging", "degraded", "working"):
        two_due(seconds=300 if scenario == "lagging" else 0)
    if scenario == "waiting":
        Schedule.objects.create(
            name="later",
            callback="tests.noop",
            kind="interval",
            interval_seconds=3600,
            start_at=state.db_now() + timedelta(hours=1),
        )
    if scenario == "degraded":
        Schedule.objects.filter(name="cleanup").update(
            status="paused", next_run_at=None, degraded_reason="callback gone"
        )
    now = state.db_now() + timedelta(seconds=health.DUE_GRACE_SECONDS + 1)
    p, h = health.probe(now=now), health.snapshot(now=now)
    assert set(p.problems) <= set(h.problems), (p.problems, h.problems)
    assert p.ok or not h.healthy
    expected = {
        "fresh": (True, True),
        "due": (False, False),
        "waiting": (False, False),
        "lagging": (False, False),
        "degraded": (True, False),
        "working": (True, True),
    }[scenario]
    assert (p.ok, h.healthy) == expected, (p.problems, h.problems)
