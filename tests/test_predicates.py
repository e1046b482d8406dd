"""The named predicates (``ScheduleQuerySet``) are the one definition health, the admin
filters and the API filters share: what health counts is what the filters list."""

from __future__ import annotations

import pytest
from django.urls import reverse

from django_durable_schedules.health import snapshot
from django_durable_schedules.models import Schedule

from .test_api import client_for, url

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def mixed():
    def make(name, **values):
        s = Schedule.objects.create(
            name=name, callback="tests.noop", kind="interval", interval_seconds=60
        )
        Schedule.objects.filter(pk=s.pk).update(**values)
        return s

    return {
        "failing-active": make("failing-active", failure_count=2),
        "failing-paused": make("failing-paused", status="paused", failure_count=1),
        # Failed by FailRun: counted by its status, not as failing, in every view.
        "failed": make("failed", status="failed", failure_count=1),
        "degraded": make("degraded", status="paused", degraded_reason="callback gone"),
        "healthy": make("healthy"),
    }


def _admin_names(admin_client, **query) -> set[str]:
    response = admin_client.get(reverse("admin:durable_schedules_schedule_changelist"), query)
    assert response.status_code == 200
    return {s.name for s in response.context["cl"].result_list}


def _api_names(user, **query) -> set[str]:
    response = client_for(user).get(url("schedule-list", **query))
    assert response.status_code == 200
    return {s["name"] for s in response.json()["results"]}


def test_failing_and_degraded_mean_the_same_in_health_admin_and_api(
    mixed, admin_client, admin_user
):
    health = snapshot()
    failing = _admin_names(admin_client, failing="yes")
    assert failing == {"failing-active", "failing-paused"} == _api_names(admin_user, failing="true")
    assert health.failing == len(failing) == Schedule.objects.failing().count()
    degraded = _admin_names(admin_client, degraded="yes")
    assert degraded == {"degraded"} == _api_names(admin_user, degraded="true")
    assert health.degraded == len(degraded) == Schedule.objects.degraded().count()


def test_a_paused_row_is_claimable_only_when_triggered(mixed):
    from django.utils import timezone

    now = timezone.now()
    claimable = set(Schedule.objects.claimable(now).values_list("name", flat=True))
    assert claimable == {"failing-active", "healthy"}
    Schedule.objects.filter(name="failing-paused").update(triggered_at=now, next_run_at=now)
    assert "failing-paused" in set(Schedule.objects.claimable(now).values_list("name", flat=True))
