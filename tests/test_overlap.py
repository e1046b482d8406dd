"""Overlap policy ``buffer_one`` (issue #15 item 4) next to ``skip``: through the state
functions with an injected clock, the operator actions, the API, and a real worker."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO
from itertools import pairwise

import pytest
from django.core.management import call_command
from django.utils import timezone as dj_timezone

from django_durable_schedules import state
from django_durable_schedules.models import RunAttempt, RunReceipt, Schedule
from django_durable_schedules.worker.execution.runner import execute

from .conftest import wait_until
from .factories import T0

pytestmark = pytest.mark.django_db(transaction=True)

S = timedelta(seconds=1)


def make(name="ov", **kw):
    kw.setdefault("callback", "tests.noop")
    s = Schedule(
        name=name, kind="interval", interval_seconds=60, timezone="UTC", created_at=T0, **kw
    )
    s.full_clean()
    s.save()
    return s


def run_at(now, took=timedelta(0)):
    claims = state.claim_due(worker="w", now=now, lease_seconds=600)
    report = state.complete([execute(c) for c in claims], now=now + took)
    return claims, report


def attempts():
    return list(RunAttempt.objects.select_related("receipt").order_by("occurrence", "attempt"))


def test_buffer_one_runs_one_buffered_slot_right_after_a_long_run_and_counts_the_rest():
    make(overlap_policy="buffer_one")
    [first], report = run_at(T0, took=200 * S)  # slots 60, 120, 180 pass while it runs
    [receipt] = report.receipts
    assert receipt.slots_skipped == 2 and receipt.next_run_at == T0 + 200 * S
    s = Schedule.objects.get()
    assert (s.buffered_for, s.next_run_at, s.missed_count) == (T0 + 60 * S, T0 + 200 * S, 2)

    [buffered], _ = run_at(T0 + 201 * S)
    assert (buffered.occurrence, buffered.scheduled_for) == (2, T0 + 60 * S)
    assert buffered.idempotency_key == f"{s.id}:2" and buffered.lateness == 141
    run_at(T0 + 240 * S)  # the grid goes on at 240
    rows = attempts()
    assert [(a.occurrence, a.origin, a.scheduled_for) for a in rows] == [
        (1, "scheduled", T0),
        (2, "buffered", T0 + 60 * S),
        (3, "scheduled", T0 + 240 * S),
    ]
    assert all(a.receipt.status == "succeeded" for a in rows)
    for prev, nxt in pairwise(rows):  # never two runs at once
        assert nxt.claimed_at >= prev.receipt.finished_at
    assert Schedule.objects.get().missed_count == 2  # 120 and 180: every slot run or counted


def test_skip_is_the_default_and_skips_every_passed_slot():
    s = make()
    assert s.overlap_policy == "skip"
    _, report = run_at(T0, took=200 * S)
    assert report.receipts[0].slots_skipped == 3
    s.refresh_from_db()
    assert (s.buffered_for, s.next_run_at) == (None, T0 + 240 * S)
    assert run_at(T0 + 201 * S)[0] == []


def test_a_buffered_slot_is_never_claimed_while_the_schedule_runs():
    make(overlap_policy="buffer_one")
    [first] = state.claim_due(worker="w", now=T0, lease_seconds=600)
    assert state.claim_due(worker="w2", now=T0 + 200 * S) == []  # leased: nothing twice
    state.complete([execute(first)], now=T0 + 200 * S)
    [buffered] = state.claim_due(worker="w2", now=T0 + 200 * S)
    assert buffered.scheduled_for == T0 + 60 * S
    assert state.claim_due(worker="w", now=T0 + 200 * S) == []


@pytest.mark.parametrize("action", ["disable", "cancel", "trigger"])
def test_an_operator_action_drops_a_pending_buffered_slot_and_counts_it(action):
    s = make(overlap_policy="buffer_one")
    run_at(T0, took=130 * S)  # 60 buffered, 120 skipped
    s.refresh_from_db()
    assert s.buffered_for == T0 + 60 * S and s.missed_count == 1
    getattr(state, action)(s.pk, **({"now": T0 + 131 * S} if action == "trigger" else {}))
    s.refresh_from_db()
    assert s.buffered_for is None and s.missed_count == 2
    if action == "trigger":
        [c], _ = run_at(T0 + 132 * S)
        assert c.scheduled_for == T0 + 131 * S  # the trigger runs, not the buffered slot
        assert RunAttempt.objects.get(occurrence=2).origin == "triggered"


def test_an_edit_of_the_definition_drops_a_buffered_slot():
    s = make(overlap_policy="buffer_one")
    run_at(T0, took=130 * S)
    state.update_schedule(s.pk, interval_seconds=300)
    s.refresh_from_db()
    assert s.buffered_for is None and s.interval_seconds == 300


def test_the_overlap_policy_is_editable_and_validated():
    s = make()
    state.update_schedule(s.pk, overlap_policy="buffer_one")
    assert Schedule.objects.get().overlap_policy == "buffer_one"
    bad = Schedule(name="bad", callback="tests.noop", interval_seconds=60, overlap_policy="queue")
    with pytest.raises(Exception, match="overlap_policy|not a valid choice"):
        bad.full_clean()


def test_the_api_reads_and_writes_the_overlap_policy(admin_client):
    created = admin_client.post(
        "/api/schedules/",
        {
            "name": "api-ov",
            "callback": "tests.noop",
            "kind": "interval",
            "interval_seconds": 60,
            "overlap_policy": "buffer_one",
        },
        content_type="application/json",
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["overlap_policy"] == "buffer_one" and body["buffered_for"] is None
    bad = admin_client.patch(
        f"/api/schedules/{body['id']}/",
        {"overlap_policy": "queue"},
        content_type="application/json",
    )
    assert bad.status_code == 400 and "overlap_policy" in bad.json()
    out = StringIO()
    call_command("spectacular", "--format=openapi-json", stdout=out)
    components = json.loads(out.getvalue())["components"]["schemas"]
    assert components["OverlapPolicyEnum"]["enum"] == [
        "skip",
        "buffer_one",
        "buffer_all",
        "replace",
        "allow",
    ]
    assert "origin" in components["Attempt"]["properties"]


def test_the_admin_form_offers_the_overlap_policy(admin_client):
    s = make()
    page = admin_client.get(f"/admin/durable_schedules/schedule/{s.pk}/change/")
    assert page.status_code == 200
    assert b'name="overlap_policy"' in page.content and b"buffer_one" in page.content


@pytest.mark.process
def test_a_real_worker_runs_exactly_one_buffered_run_after_a_slow_one(start_worker):
    """A 7 s first run of a 2 s interval: three or four slots pass while it runs; the first
    of them runs right after it, as its own occurrence, the others are counted skipped,
    and the grid goes on; never two runs at once."""
    s = Schedule.objects.create(
        name="slow-overlap",
        callback="tests.slow_first",
        kind="interval",
        interval_seconds=2,
        overlap_policy="buffer_one",
        payload={"seconds": 7},
    )
    worker = start_worker("--worker-id", "ov", "--lease-seconds", "30")
    wait_until(
        lambda: RunAttempt.objects.filter(schedule=s, occurrence__gte=4).exists(),
        40,
        message="four occurrences",
    )
    worker.stop()
    rows = [a for a in attempts() if hasattr(a, "receipt")]
    first, buffered, after = rows[0], rows[1], rows[2]
    assert first.origin == "scheduled" and first.receipt.status == "succeeded"
    assert buffered.origin == "buffered" and buffered.occurrence == 2
    assert buffered.scheduled_for == first.scheduled_for + 2 * S  # the first passed slot
    assert buffered.claimed_at >= first.receipt.finished_at  # right after, never during
    assert (buffered.claimed_at - first.receipt.finished_at).total_seconds() < 2
    assert buffered.lateness >= 4  # its slot came due about 5 s before it could run
    assert buffered.receipt.result["scheduled_for"] == buffered.scheduled_for.isoformat()
    passed = first.receipt.slots_skipped + 1  # the slots that came due during the slow run
    assert 3 <= passed <= 4
    assert after.origin == "scheduled" and after.scheduled_for > first.receipt.finished_at
    assert [a.origin for a in rows].count("buffered") == 1
    for prev, nxt in pairwise(rows):
        assert nxt.claimed_at >= prev.receipt.finished_at
    assert RunReceipt.objects.filter(schedule=s, status="succeeded").count() == len(rows)
    assert dj_timezone.now() > first.receipt.finished_at


def test_the_command_shows_the_policy_and_a_buffered_slot():
    s = make(overlap_policy="buffer_one")
    run_at(T0, took=70 * S)
    out = StringIO()
    call_command("schedules", "upcoming", s.name, stdout=out)
    assert "overlap policy: buffer_one" in out.getvalue()
    assert "buffered: the slot 2027-06-01T10:01:00Z runs next" in out.getvalue()
