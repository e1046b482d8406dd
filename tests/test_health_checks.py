"""Health snapshot and system checks."""

from datetime import timedelta

import pytest
from django.core import checks
from django.test.utils import override_settings

from django_durable_schedules import health, state
from django_durable_schedules.models import Schedule

from .factories import T0

pytestmark = pytest.mark.django_db(transaction=True)
S = timedelta(seconds=1)


def mk(name, **kw):
    kw.setdefault("interval_seconds", 60)
    return Schedule.objects.create(
        name=name, callback="tests.noop", kind="interval", created_at=T0, **kw
    )


def test_empty_is_healthy():
    h = health.snapshot(now=T0)
    assert h.healthy and h.problems == [] and h.schedules["active"] == 0


def test_overdue_expired_and_degraded_are_unhealthy():
    mk("a")
    h = health.snapshot(now=T0 + 10 * S)  # due, and no worker is alive to run it
    assert not h.healthy and h.due == 1 and h.problems == ["no live worker: 1 schedule due"]
    h = health.snapshot(now=T0 + 3600 * S)
    assert not h.healthy and h.overdue == 1
    state.claim_due(worker="w", now=T0 + 3600 * S, lease_seconds=30)
    h = health.snapshot(now=T0 + 3601 * S)
    assert h.live_leases == 1 and h.open_attempts == 1 and h.healthy
    h = health.snapshot(now=T0 + 3700 * S)
    assert h.expired_leases == 1 and not h.healthy
    assert h.as_dict()["checked_at"].startswith("2027-06-01")


def test_workers_and_skew_are_reported():
    state.heartbeat("w1")
    h = health.snapshot()
    assert h.live_workers == 1 and h.workers[0]["worker_id"] == "w1"
    Schedule.objects.none()
    from django_durable_schedules.models import WorkerHeartbeat

    WorkerHeartbeat.objects.filter(worker_id="w1").update(clock_skew_seconds=600)
    h = health.snapshot()
    assert not h.healthy and "clock" in h.problems[0]


def ids(messages):
    return {m.id for m in messages}


@pytest.mark.vendor_independent  # a non-database system check
def test_check_requires_use_tz():
    with override_settings(USE_TZ=False):
        assert "durable_schedules.E001" in ids(checks.run_checks())


@pytest.mark.vendor_independent  # non-database system checks
def test_check_unknown_and_bad_settings():
    with override_settings(DURABLE_SCHEDULES={"LEASE_SECOND": 3}):
        assert "durable_schedules.E003" in ids(checks.run_checks())
    with override_settings(DURABLE_SCHEDULES={"LEASE_SECONDS": 0}):
        assert "durable_schedules.E004" in ids(checks.run_checks())
    with override_settings(DURABLE_SCHEDULES={"LEASE_SECONDS": 10, "RENEW_EVERY_SECONDS": 20}):
        assert "durable_schedules.E005" in ids(checks.run_checks())
    assert not ids(checks.run_checks()) & {"durable_schedules.E003", "durable_schedules.E004"}


def test_check_warns_about_unregistered_callbacks():
    mk("ghost")
    Schedule.objects.update(callback="tests.nope")
    assert "durable_schedules.W001" in ids(
        checks.run_checks(databases=["default"], include_deployment_checks=False)
    )
