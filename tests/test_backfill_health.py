"""Health lists a backfill that makes no progress, and one a worker cancelled (issue #24
item 15): warnings, never a 503."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.test.utils import override_settings
from django.urls import reverse

from django_durable_schedules import health, state
from django_durable_schedules.models import Backfill, Schedule
from django_durable_schedules.state import Outcome

from .factories import T0

pytestmark = pytest.mark.django_db(transaction=True)

S = timedelta(seconds=1)
D = 86400 * S


def paused_daily(name, created_at):
    """A paused daily schedule (never due, so health stays healthy) created at
    ``created_at``."""
    s = Schedule(
        name=name,
        callback="tests.noop",
        kind="interval",
        interval_seconds=86400,
        timezone="UTC",
        created_at=created_at,
        status="paused",
    )
    s.full_clean()
    s.save()
    return s


def backfill_of(s, slots, now):
    return state.request_backfill(s.pk, s.created_at, s.created_at + slots * D, now=now)


def test_a_backfill_with_no_slot_claimed_for_longer_than_the_threshold_is_stalled():
    s = paused_daily("starved", T0)
    requested = T0 + 10 * D
    b = backfill_of(s, 3, requested)
    assert health.snapshot(now=requested + 599 * S).stalled_backfills == []
    h = health.snapshot(now=requested + 601 * S)
    assert h.healthy and h.problems == []  # a warning, not a problem
    assert h.stalled_backfills == [
        {"id": str(b.pk), "schedule": "starved", "done": 0, "total": 3, "since": requested}
    ]
    assert h.warnings == [
        "stalled backfill of starved: 0/3 slots done, no slot claimed or finished since "
        "2027-06-11T10:00:00Z"
    ]
    data = h.as_dict()
    assert data["stalled_backfills"][0]["since"] == "2027-06-11T10:00:00Z"


def test_a_running_slot_is_progress_and_the_stall_counts_from_the_last_claim_or_end():
    s = paused_daily("slow", T0)
    requested = T0 + 10 * D
    backfill_of(s, 3, requested)
    claimed = requested + 3600 * S
    [c] = state.claim_due(worker="w", now=claimed, lease_seconds=86400)
    assert c.origin == "backfill"
    assert health.snapshot(now=claimed + 7200 * S).stalled_backfills == []  # still running
    state.complete([Outcome(c, "succeeded")], now=claimed + 7200 * S)
    finished = claimed + 7200 * S  # progress too: the stall counts from the last end
    assert health.snapshot(now=finished + 599 * S).stalled_backfills == []
    [row] = health.snapshot(now=finished + 601 * S).stalled_backfills
    assert (row["done"], row["total"], row["since"]) == (1, 3, finished)


@override_settings(DURABLE_SCHEDULES={"BACKFILL_STALL_SECONDS": 3600})
def test_the_threshold_is_a_setting():
    s = paused_daily("hourly-threshold", T0)
    backfill_of(s, 2, T0 + 10 * D)
    assert health.snapshot(now=T0 + 10 * D + 3599 * S).stalled_backfills == []
    assert len(health.snapshot(now=T0 + 10 * D + 3601 * S).stalled_backfills) == 1


def test_finished_and_cancelled_backfills_are_not_stalled():
    s = paused_daily("done", T0)
    backfill_of(s, 1, T0 + 10 * D)
    [c] = state.claim_due(worker="w", now=T0 + 10 * D, lease_seconds=60)
    state.complete([Outcome(c, "succeeded")], now=T0 + 10 * D + S)
    t = paused_daily("stopped", T0)
    backfill_of(t, 2, T0 + 10 * D)
    state.cancel_backfill(t.pk)  # by a person: not listed as cancelled by a worker either
    h = health.snapshot(now=T0 + 20 * D)
    assert h.stalled_backfills == [] and h.cancelled_backfills == [] and h.warnings == []


def test_a_backfill_a_worker_cancelled_is_listed_with_the_reason_for_a_day():
    s = paused_daily("poisoned", T0)
    b = backfill_of(s, 2, T0 + 10 * D)
    Backfill.objects.filter(pk=b.pk).update(slots=["not a date", "x"])
    at = T0 + 10 * D + S
    assert state.claim_due(worker="w", now=at) == []
    h = health.snapshot(now=at + 3600 * S)
    assert h.healthy and h.stalled_backfills == []
    [row] = h.cancelled_backfills
    assert (row["schedule"], row["done"], row["total"], row["cancelled_at"]) == (
        "poisoned",
        0,
        2,
        at,
    )
    assert row["reason"] == "its slot 1 is not a stored instant"
    assert h.warnings == [
        f"backfill of poisoned cancelled by a worker at 2027-06-11T10:00:01Z (0/2 slots "
        f"done): {row['reason']}"
    ]
    assert health.snapshot(now=at + D + S).cancelled_backfills == []


def _stalled_now():
    """A stalled backfill by the database clock (what the API and the command read)."""
    now = state.db_now().replace(microsecond=0)
    s = paused_daily("stalled-job", now - 20 * D)
    backfill_of(s, 3, now - 3600 * S)
    return s


def test_the_api_lists_a_stalled_backfill_and_stays_200(admin_client):
    _stalled_now()
    response = admin_client.get(reverse("durable_schedules_api:health"))
    assert response.status_code == 200, response.content
    data = response.json()
    assert data["healthy"] is True
    [row] = data["stalled_backfills"]
    assert (row["schedule"], row["done"], row["total"]) == ("stalled-job", 0, 3)
    assert row["since"].endswith("Z")
    assert data["warnings"][0].startswith("stalled backfill of stalled-job: 0/3 slots done")


def test_the_command_prints_it_and_exits_0():
    _stalled_now()
    out, err = StringIO(), StringIO()
    call_command("schedules", "health", stdout=out, stderr=err)  # no CommandError: exit 0
    data = json.loads(out.getvalue())
    assert data["healthy"] is True and data["stalled_backfills"][0]["schedule"] == "stalled-job"
    assert "warning: stalled backfill of stalled-job: 0/3 slots done" in err.getvalue()


def test_the_admin_health_page_shows_it(admin_client):
    _stalled_now()
    html = admin_client.get(reverse("admin:durable_schedules_schedule_health")).content.decode()
    assert "stalled backfill" in html and "stalled-job" in html and "0/3" in html
