"""Backfill (issue #15 item 3): the state functions with an injected clock, the worker's
claim and completion of backfill slots, and the command."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.test.utils import override_settings

from django_durable_schedules import state
from django_durable_schedules.exceptions import StateConflict
from django_durable_schedules.models import (
    Backfill,
    RunAttempt,
    RunReceipt,
    Schedule,
    ScheduleEvent,
)
from django_durable_schedules.state import Outcome
from django_durable_schedules.worker.execution.runner import execute

from .factories import T0

pytestmark = pytest.mark.django_db(transaction=True)

S = timedelta(seconds=1)
M = 60 * S
NOW = T0 + 3601 * S  # one live run at T0 + 3600 happened; the next live slot is T0 + 3660


def live(name="bf", **kw):
    """An every-minute schedule created at T0 whose live grid ran once at T0 + 3600."""
    kw.setdefault("callback", "tests.echo")
    s = Schedule(
        name=name, kind="interval", interval_seconds=60, timezone="UTC", created_at=T0, **kw
    )
    s.full_clean()
    s.save()
    run(T0 + 3600 * S)
    s.refresh_from_db()
    assert s.next_run_at == T0 + 3660 * S
    return s


def run(now, status=None):
    claims = state.claim_due(worker="w", now=now, lease_seconds=60)
    outcomes = [execute(c) if status is None else Outcome(c, status) for c in claims]
    state.complete(outcomes, now=now)
    return claims


def test_a_backfill_runs_every_slot_of_the_range_in_order_as_its_own_occurrences():
    s = live()
    b = state.request_backfill(s.pk, T0, T0 + 5 * M, now=NOW, source="code")
    assert b.slot_instants == [T0 + i * M for i in range(5)] and b.status == "active"
    claimed = []
    for i in range(5):
        [c] = run(NOW + i * S)
        claimed.append((c.occurrence, c.attempt, c.scheduled_for, c.origin, c.idempotency_key))
    assert claimed == [(2 + i, 1, T0 + i * M, "backfill", f"{s.id}:{2 + i}") for i in range(5)]
    b.refresh_from_db()  # completed with its last slot's receipt, not at a later claim
    assert (b.status, b.position, b.finished_at) == ("completed", 5, NOW + 4 * S)
    assert run(NOW + 10 * S) == []  # no slot left
    receipts = RunReceipt.objects.filter(attempt__origin="backfill").order_by("occurrence")
    assert [r.status for r in receipts] == ["succeeded"] * 5
    assert receipts[0].result["occurrence"] == 2
    missed = s.missed_count  # the live catch-up run at T0 + 3600 counted 60
    s.refresh_from_db()  # the live grid is untouched
    assert (s.next_run_at, s.occurrence, s.missed_count) == (T0 + 3660 * S, 6, missed)
    actions = list(ScheduleEvent.objects.order_by("at").values_list("action", flat=True))
    assert actions == ["created", "backfill", "backfill_done"]  # created: from code
    [live_next] = run(T0 + 3660 * S)
    assert (live_next.occurrence, live_next.origin) == (7, "scheduled")


def test_a_rule_without_start_at_says_why_it_has_no_slot_before_its_creation_day():
    s = Schedule.objects.create(
        name="month-end",
        callback="tests.echo",
        kind="rrule",
        rrule="FREQ=DAILY;BYHOUR=9",
        timezone="Europe/Paris",
        created_at=T0,
    )
    with pytest.raises(ValidationError) as exc:
        state.plan_backfill(s, T0 - 10 * 86400 * S, T0 - 5 * 86400 * S, now=NOW)
    [message] = exc.value.message_dict["__all__"]
    assert (
        "A calendar rule has no slot before its start (DTSTART: midnight of its creation" in message
    )
    assert "2027-06-01 00:00:00 Europe/Paris); set start_at earlier" in message


def test_backfill_runs_count_towards_max_runs_and_the_last_one_completes_the_schedule():
    s = live(max_runs=3)  # one live occurrence fired: two runs left
    with pytest.raises(ValidationError) as exc:
        state.plan_backfill(s, T0, T0 + 3 * M, now=NOW)
    [message] = exc.value.message_dict["end"]
    assert "max_runs=3 and 1 occurrence fired: 2 runs left" in message
    assert "the range holds 3 slots" in message
    b = state.request_backfill(s.pk, T0, T0 + 2 * M, now=NOW)
    assert [c.origin for c in run(NOW)] == ["backfill"]
    assert [c.origin for c in run(NOW + S)] == ["backfill"]
    s.refresh_from_db()
    assert (s.status, s.occurrence, s.next_run_at) == ("completed", 3, None)
    b.refresh_from_db()
    assert b.status == "completed" and b.position == 2
    assert run(T0 + 7200 * S) == []  # no live run after the last allowed one


def test_a_schedule_that_ends_while_its_backfill_is_open_cancels_the_backfill():
    s = live(max_runs=4)
    b = state.request_backfill(s.pk, T0, T0 + 2 * M, now=NOW)
    [first] = run(NOW)  # slot 1 of 2: occurrence 2
    assert first.origin == "backfill"
    [second] = run(T0 + 3660 * S)  # the live slot keeps priority: occurrence 3
    assert second.origin == "scheduled"
    [third] = run(T0 + 3661 * S)  # slot 2 of 2: occurrence 4, the last one
    assert third.origin == "backfill"
    s.refresh_from_db()
    assert (s.status, s.occurrence) == ("completed", 4)
    b.refresh_from_db()
    assert b.status == "completed" and b.position == 2

    t = live("bf-ends", max_runs=3)  # the live grid ends the schedule, backfill open
    b = state.request_backfill(t.pk, T0, T0 + 2 * M, now=NOW)
    [first] = run(NOW)  # backfill slot 1: occurrence 2
    [last] = run(T0 + 3660 * S)  # live: occurrence 3, the last
    assert (first.origin, last.origin) == ("backfill", "scheduled")
    t.refresh_from_db()
    b.refresh_from_db()
    assert t.status == "completed" and (b.status, b.position) == ("cancelled", 1)
    event = ScheduleEvent.objects.filter(schedule_id=t.pk, action="backfill_cancel").get()
    assert event.source == "worker" and event.changes["reason"] == "the schedule is completed"


@pytest.mark.parametrize(
    "slots",
    [["not a date"], [None], [123], ["2027-06-01T10:00:00"], "x", 7, {"a": 1}],
    ids=["text", "null", "number", "naive", "string", "int", "object"],
)
def test_backfill_slots_written_behind_save_cancel_that_backfill_not_the_claim(slots):
    """A backfill's stored slots poisoned behind save() (QuerySet.update, raw SQL) stop that
    backfill, with a reason in its cancel event; the claim batch, and the schedules in it,
    go on."""
    s = live("bf-poison")
    b = state.request_backfill(s.pk, T0, T0 + 2 * M, now=NOW)
    other = live("bf-neighbour")
    Schedule.objects.filter(pk=other.pk).update(next_run_at=NOW)
    Backfill.objects.filter(pk=b.pk).update(slots=slots)
    claims = run(NOW + S)
    assert [(c.schedule_name, c.origin) for c in claims] == [("bf-neighbour", "scheduled")]
    b.refresh_from_db()
    assert b.status in ("cancelled", "completed") and b.finished_at is not None
    if b.status == "cancelled":
        event = ScheduleEvent.objects.get(schedule_id=s.pk, action="backfill_cancel")
        assert "is not a stored instant" in event.changes["reason"]
    assert run(NOW + 2 * S) == []  # nothing left to claim, nothing raised


def test_live_slots_keep_priority_and_never_run_beside_a_backfill_slot():
    s = live()
    state.request_backfill(s.pk, T0, T0 + 3 * M, now=NOW)
    [first] = state.claim_due(worker="w", now=T0 + 3659 * S, lease_seconds=600)
    assert first.origin == "backfill"
    # The live slot comes due while the backfill slot runs: nothing else is claimed.
    assert state.claim_due(worker="w2", now=T0 + 3661 * S) == []
    state.complete([execute(first)], now=T0 + 3662 * S)
    [second] = state.claim_due(worker="w2", now=T0 + 3662 * S)
    assert second.origin == "scheduled" and second.scheduled_for == T0 + 3660 * S
    state.complete([execute(second)], now=T0 + 3663 * S)
    [third] = state.claim_due(worker="w", now=T0 + 3663 * S)
    assert third.origin == "backfill" and third.scheduled_for == T0 + M


def test_slots_that_already_succeeded_are_skipped_unless_included():
    s = live()
    plan = state.plan_backfill(s, T0 + 3540 * S, T0 + 3601 * S, now=NOW)
    assert plan.slots == [T0 + 3540 * S] and plan.skipped_succeeded == 1  # 3600 ran live
    plan = state.plan_backfill(s, T0 + 3540 * S, T0 + 3601 * S, include_succeeded=True, now=NOW)
    assert plan.slots == [T0 + 3540 * S, T0 + 3600 * S] and plan.skipped_succeeded == 0
    with pytest.raises(ValidationError, match="has not succeeded already"):
        state.plan_backfill(s, T0 + 3600 * S, T0 + 3601 * S, now=NOW)


@pytest.mark.parametrize(
    ("start", "end", "field", "message"),
    [
        (T0 + M, T0, "end", "Must be after start."),
        (T0, T0 + 4000 * S, "end", "Must not be after now"),
        (datetime(2027, 6, 1, 10), T0 + M, "start", "aware"),
        (T0, T0 + 5 * M, "end", "more than 3 slots (BACKFILL_MAX_SLOTS)"),
    ],
)
def test_bad_ranges_are_field_errors_and_write_nothing(start, end, field, message):
    s = live()
    with override_settings(DURABLE_SCHEDULES={"BACKFILL_MAX_SLOTS": 3}):
        with pytest.raises(ValidationError) as caught:
            state.request_backfill(s.pk, start, end, now=NOW)
    assert field in caught.value.message_dict
    assert message in " ".join(caught.value.message_dict[field])
    assert not Backfill.objects.exists()
    assert not ScheduleEvent.objects.exclude(action="created").exists()  # created: from code


def test_state_conflicts_one_open_backfill_and_runnable_schedules_only():
    s = live()
    state.request_backfill(s.pk, T0, T0 + 2 * M, now=NOW)
    with pytest.raises(StateConflict, match="already has an open backfill"):
        state.request_backfill(s.pk, T0, T0 + 2 * M, now=NOW)
    state.cancel(s.pk)  # cancelling the schedule cancels its backfill
    assert Backfill.objects.get().status == "cancelled"
    with pytest.raises(StateConflict, match="a cancelled schedule cannot be backfilled"):
        state.request_backfill(s.pk, T0, T0 + 2 * M, now=NOW)
    with pytest.raises(StateConflict, match="no open backfill"):
        state.cancel_backfill(s.pk)


def test_a_cancelled_backfill_claims_nothing_more_and_its_running_slot_finishes():
    s = live()
    state.request_backfill(s.pk, T0, T0 + 3 * M, now=NOW)
    [c] = state.claim_due(worker="w", now=NOW, lease_seconds=60)
    b = state.cancel_backfill(s.pk, source="command")
    assert b.status == "cancelled" and b.finished_at is not None
    state.complete([execute(c)], now=NOW + S)
    assert RunReceipt.objects.get(attempt_id=c.attempt_id).status == "succeeded"
    assert run(NOW + 2 * S) == []
    event = ScheduleEvent.objects.get(action="backfill_cancel")
    assert event.source == "command" and event.changes["done"] == 0


def test_a_released_slot_runs_again_as_the_next_attempt_of_its_occurrence():
    s = live()
    state.request_backfill(s.pk, T0, T0 + 2 * M, now=NOW)
    [c] = run(NOW, status="released")
    [again] = run(NOW + S)
    assert (again.occurrence, again.attempt, again.scheduled_for) == (c.occurrence, 2, T0)
    [nxt] = run(NOW + 2 * S)
    assert (nxt.occurrence, nxt.attempt, nxt.scheduled_for) == (c.occurrence + 1, 1, T0 + M)


def test_a_lost_lease_reruns_the_slot_and_leaves_the_grid_alone():
    s = live(max_attempts=2)
    state.request_backfill(s.pk, T0, T0 + M, now=NOW)
    [c] = state.claim_due(worker="w", now=NOW, lease_seconds=10)
    assert state.expire_leases(now=NOW + 11 * S) == 1
    receipt = RunReceipt.objects.get(attempt_id=c.attempt_id)
    assert receipt.status == "lease_expired"
    s.refresh_from_db()
    assert (s.next_run_at, s.retry_scheduled_for, s.failure_count) == (T0 + 3660 * S, None, 0)
    [again] = state.claim_due(worker="w", now=NOW + 12 * S, lease_seconds=10)
    assert (again.occurrence, again.attempt, again.scheduled_for) == (c.occurrence, 2, T0)
    state.expire_leases(now=NOW + 23 * S)  # max_attempts reached: the slot is given up
    assert run(NOW + 24 * S) == [] and Backfill.objects.get().status == "completed"


def test_a_failed_slot_is_receipted_and_the_backfill_goes_on_without_failing_the_schedule():
    s = live()
    Schedule.objects.filter(pk=s.pk).update(callback="tests.fatal")  # FailRun from now on
    state.request_backfill(s.pk, T0, T0 + 2 * M, now=NOW)
    first, second = run(NOW)[0], run(NOW + S)[0]
    assert [r.status for r in RunReceipt.objects.filter(attempt__origin="backfill")] == [
        "failed",
        "failed",
    ]
    assert (first.scheduled_for, second.scheduled_for) == (T0, T0 + M)
    s.refresh_from_db()
    assert (s.status, s.failure_count, s.next_run_at) == ("active", 0, T0 + 3660 * S)


def test_a_paused_schedule_runs_its_backfill_and_next_wakeup_says_it_is_due():
    s = live()
    state.disable(s.pk)
    state.request_backfill(s.pk, T0, T0 + M, now=NOW)
    assert state.next_wakeup().due is not None  # due now (database clock)
    [c] = run(NOW)
    assert c.origin == "backfill"
    assert Schedule.objects.get().status == "paused"


def test_the_command_lists_requests_and_cancels(monkeypatch):
    s = live()
    monkeypatch.setattr("django_durable_schedules.db.clock.db_now", lambda using="default": NOW)
    out = StringIO()
    args = ["schedules", "backfill", s.name, "--from", T0.isoformat(), "--to"]
    call_command(*args, (T0 + 3 * M).isoformat(), "--dry-run", stdout=out)
    text = out.getvalue()
    assert "3 slots" in text and "2027-06-01T10:02:00Z" in text and "dry run" in text
    assert not Backfill.objects.exists()
    with pytest.raises(CommandError, match="end: Must be after start"):
        call_command(
            "schedules", "backfill", s.name, "--from", T0.isoformat(), "--to", T0.isoformat()
        )
    out = StringIO()
    call_command(*args, (T0 + 3 * M).isoformat(), stdout=out)
    assert Backfill.objects.get().source == "command" and "3 slots" in out.getvalue()
    with pytest.raises(CommandError, match="open backfill"):
        call_command(*args, (T0 + 3 * M).isoformat())
    with pytest.raises(CommandError, match="offset"):
        call_command("schedules", "backfill", s.name, "--from", "2027-06-01 10:00", "--to", "x")
    out = StringIO()
    call_command("schedules", "cancel-backfill", s.name, stdout=out)
    assert "cancelled" in out.getvalue() and Backfill.objects.get().status == "cancelled"


def test_a_backfill_of_a_once_schedule_runs_its_one_slot():
    when = datetime(2027, 6, 1, 9, 0, tzinfo=UTC)
    s = Schedule.objects.create(name="one", callback="tests.echo", kind="once", run_at=when)
    b = state.request_backfill(s.pk, when, when + S, now=NOW)
    assert b.slots == [when.isoformat()]
    assert RunAttempt.objects.count() == 0


# -- the API: POST / DELETE schedules/{id}/backfill/ ------------------------------------


def test_the_api_requests_lists_and_cancels_a_backfill(admin_client):
    s = Schedule.objects.create(
        name="api-bf", callback="tests.echo", kind="cron", cron="*/5 * * * *", timezone="UTC"
    )
    url = f"/api/schedules/{s.pk}/backfill/"
    body = {"start": "2026-01-01T00:00:00Z", "end": "2026-01-01T00:30:00+00:00"}
    dry = admin_client.post(url, {**body, "dry_run": True}, content_type="application/json")
    assert dry.status_code == 200, dry.content
    assert dry.json()["slots"][:2] == ["2026-01-01T00:00:00Z", "2026-01-01T00:05:00Z"]
    assert len(dry.json()["slots"]) == 6 and not Backfill.objects.exists()
    made = admin_client.post(url, body, content_type="application/json")
    assert made.status_code == 201, made.content
    assert made.json()["status"] == "active" and made.json()["remaining"] == 6
    assert Backfill.objects.get().source == "api"
    again = admin_client.post(url, body, content_type="application/json")
    assert again.status_code == 409 and "open backfill" in again.json()["detail"]
    shown = admin_client.get(url)  # progress: the open backfill
    assert shown.status_code == 200 and shown.json()["id"] == made.json()["id"]
    assert (shown.json()["position"], shown.json()["remaining"]) == (0, 6)
    stop = admin_client.delete(url)
    assert stop.status_code == 200 and stop.json()["status"] == "cancelled"
    assert admin_client.delete(url).status_code == 409
    latest = admin_client.get(url)  # none open: the latest one
    assert latest.status_code == 200 and latest.json()["status"] == "cancelled"
    other = Schedule.objects.create(
        name="api-bf-none", callback="tests.echo", kind="cron", cron="*/5 * * * *"
    )
    assert admin_client.get(f"/api/schedules/{other.pk}/backfill/").status_code == 404
    attempts = admin_client.get("/api/attempts/", {"origin": "backfill"})
    assert attempts.status_code == 200 and attempts.json()["results"] == []
    bad_origin = admin_client.get("/api/attempts/", {"origin": "nonsense"})
    assert bad_origin.status_code == 400 and "origin" in bad_origin.json()
    actions = set(ScheduleEvent.objects.values_list("action", flat=True))
    assert {"backfill", "backfill_cancel"} <= actions


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"end": "2026-01-01T00:30:00Z"}, "start"),
        ({"start": "2026-01-01T00:00:00", "end": "2026-01-01T00:30:00Z"}, "start"),
        ({"start": "2026-01-01T00:30:00Z", "end": "2026-01-01T00:00:00Z"}, "end"),
        ({"start": "2026-01-01T00:00:00Z", "end": "2999-01-01T00:00:00Z"}, "end"),
        ({"start": "2026-01-01T00:01:00Z", "end": "2026-01-01T00:02:00Z"}, "non_field_errors"),
        ({"start": "2020-01-01T00:00:00Z", "end": "2026-01-01T00:00:00Z"}, "end"),
        ({"start": "x", "end": "2026-01-01T00:00:00Z", "include_succeeded": "maybe"}, "start"),
    ],
)
def test_bad_backfill_bodies_are_400_with_field_messages(admin_client, body, field):
    s = Schedule.objects.create(
        name="api-bad", callback="tests.echo", kind="cron", cron="*/5 * * * *", timezone="UTC"
    )
    answer = admin_client.post(
        f"/api/schedules/{s.pk}/backfill/", body, content_type="application/json"
    )
    assert answer.status_code == 400, answer.content
    assert field in answer.json(), answer.json()
    assert "__all__" not in answer.json(), answer.json()  # once, as DRF names it
    assert not Backfill.objects.exists()


def test_the_backfill_endpoint_is_in_the_openapi_schema():
    import json

    out = StringIO()
    call_command("spectacular", "--validate", "--fail-on-warn", "--format=openapi-json", stdout=out)
    paths = json.loads(out.getvalue())["paths"]
    operations = paths["/api/schedules/{id}/backfill/"]
    assert {"201", "200", "400", "409"} <= set(operations["post"]["responses"])
    assert "409" in operations["delete"]["responses"]


# -- the admin: the list action's form, its confirmation page, and the stored backfill ------


def test_the_admin_action_asks_for_a_range_shows_the_slots_then_backfills(admin_client):
    from django_durable_schedules.admin import ScheduleAdmin  # noqa: F401 - registers

    s = Schedule.objects.create(
        name="adm-bf", callback="tests.echo", kind="cron", cron="*/10 * * * *", timezone="UTC"
    )
    url = "/admin/durable_schedules/schedule/"
    base = {"action": "backfill", "_selected_action": [str(s.pk)]}
    form = admin_client.post(url, base)
    assert form.status_code == 200 and b'name="start"' in form.content
    bad = admin_client.post(
        url, {**base, "start": "2026-01-01T01:00:00Z", "end": "2026-01-01T00:00:00Z"}
    )
    assert bad.status_code == 200 and b"Must be after start." in bad.content
    rng = {"start": "2026-01-01T00:00:00Z", "end": "2026-01-01T01:00:00Z"}
    page = admin_client.post(url, {**base, **rng})
    assert page.status_code == 200
    text = page.content.decode()
    assert "These 6 slots will run" in text and "2026-01-01 00:50:00 UTC" in text
    assert not Backfill.objects.exists()
    done = admin_client.post(url, {**base, **rng, "post": "yes"}, follow=True)
    assert done.status_code == 200
    b = Backfill.objects.get()
    assert (b.source, len(b.slots), b.created_by_repr) == ("admin", 6, "admin")
    assert "6 slots" in done.content.decode()
    stop = admin_client.post(
        url, {"action": "cancel_backfill", "_selected_action": [str(s.pk)]}, follow=True
    )
    assert "Backfill cancelled: adm-bf" in stop.content.decode()
    assert Backfill.objects.get().status == "cancelled"
    listing = admin_client.get("/admin/durable_schedules/backfill/")
    assert listing.status_code == 200 and b"0 of 6 slots" in listing.content


def test_the_admin_reads_the_range_in_the_schedules_zone_and_shows_slots_in_it(admin_client):
    from django_durable_schedules.admin import ScheduleAdmin  # noqa: F401 - registers

    s = Schedule.objects.create(
        name="adm-ny",
        callback="tests.echo",
        kind="cron",
        cron="0 * * * *",
        timezone="America/New_York",
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
    )
    url = "/admin/durable_schedules/schedule/"
    base = {"action": "backfill", "_selected_action": [str(s.pk)]}
    form = admin_client.post(url, base).content.decode()
    assert "Start (in America/New_York)" in form
    # 10:00 to 12:00 New York wall time in June: 14:00 to 16:00 UTC.
    page = admin_client.post(url, {**base, "start": "2026-06-01 10:00", "end": "2026-06-01 12:00"})
    text = page.content.decode()
    assert "These 2 slots will run, in order (in America/New_York, and in UTC)" in text
    assert "2026-06-01 10:00:00 EDT (2026-06-01 14:00:00 UTC)" in text
    assert "2026-06-01 11:00:00 EDT (2026-06-01 15:00:00 UTC)" in text
    # An explicit offset is that instant; a wall time the zone skips is refused.
    page = admin_client.post(
        url, {**base, "start": "2026-06-01T14:00:00Z", "end": "2026-06-01T15:00:00+00:00"}
    )
    assert "This slot will run (in America/New_York, and in UTC)" in page.content.decode()
    gap = admin_client.post(url, {**base, "start": "2026-03-08 02:30", "end": "2026-03-08 05:00"})
    assert "does not exist in America/New_York" in gap.content.decode()
    assert not Backfill.objects.exists()


def test_the_backfill_list_counts_slots_in_the_database_not_per_row(
    admin_client, django_assert_max_num_queries
):
    from django_durable_schedules.admin import ScheduleAdmin  # noqa: F401 - registers

    for i in range(12):
        s = live(f"bf-list-{i}")
        state.request_backfill(s.pk, T0, T0 + (i + 1) * M, now=NOW, source="code")
    with django_assert_max_num_queries(8):  # session, user, count, page: not one per row
        listing = admin_client.get("/admin/durable_schedules/backfill/")
    text = listing.content.decode()
    assert listing.status_code == 200
    # (each live() runs the due slots, backfill slots of the earlier rows included)
    totals = sorted(int(n) for n in re.findall(r"\d+ of (\d+) slots?\b", text))
    assert totals == list(range(1, 13)), totals
    b = Backfill.objects.filter(schedule_name="bf-list-11").get()
    change = admin_client.get(f"/admin/durable_schedules/backfill/{b.pk}/change/")
    assert change.status_code == 200 and "of 12 slots" in change.content.decode()


# -- a real worker -----------------------------------------------------------------------


@pytest.mark.process
def test_a_real_worker_runs_the_backfill_slots_in_order_one_at_a_time(start_worker):
    from itertools import pairwise

    from django.utils import timezone as dj_timezone

    from .conftest import wait_until

    s = Schedule.objects.create(
        name="proc-bf", callback="tests.record", kind="cron", cron="0 0 1 1 *", timezone="UTC"
    )
    end = dj_timezone.now().replace(second=0, microsecond=0, minute=0)
    start = end.replace(year=end.year - 5)
    b = state.request_backfill(s.pk, start, end, source="code")
    assert len(b.slots) == 5  # 1 January 00:00 of the last five years
    start_worker("--worker-id", "bf", "--concurrency", "4")
    wait_until(
        lambda: Backfill.objects.get().status == "completed", 40, message="the backfill done"
    )
    rows = list(
        RunAttempt.objects.filter(origin="backfill")
        .select_related("receipt")
        .order_by("claimed_at")
    )
    assert [a.scheduled_for for a in rows] == b.slot_instants
    assert [a.receipt.status for a in rows] == ["succeeded"] * 5
    assert len({a.idempotency_key for a in rows}) == 5
    for prev, nxt in pairwise(rows):  # one at a time, though the worker has 4 threads
        assert nxt.claimed_at >= prev.receipt.finished_at
    assert ScheduleEvent.objects.filter(action="backfill_done", source="worker").exists()
