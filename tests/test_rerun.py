"""Re-run an occurrence (issue #27, item 4): a new attempt of an earlier occurrence under
its own idempotency key, one attempt, never the grid; state, API and a real worker."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.test.utils import override_settings

from django_durable_schedules import state
from django_durable_schedules.exceptions import StateConflict
from django_durable_schedules.models import (
    RunAttempt,
    RunReceipt,
    Schedule,
    ScheduleEvent,
)
from django_durable_schedules.worker.execution.runner import execute

from .conftest import wait_until
from .factories import T0

pytestmark = pytest.mark.django_db(transaction=True)

S = timedelta(seconds=1)


def make(name="s", **kw):
    kw.setdefault("callback", "tests.first_attempt_fails")
    kw.setdefault("kind", "interval")
    kw.setdefault("interval_seconds", 3600)
    kw.setdefault("timezone", "UTC")
    kw.setdefault("created_at", T0)
    kw.setdefault("max_attempts", 1)
    s = Schedule(name=name, **kw)
    s.full_clean()
    s.save()
    return s


def run_at(now, worker="w1"):
    """Claim what is due at ``now``, run it, complete at ``now``."""
    claims = state.claim_due(worker=worker, now=now)
    report = state.complete([execute(c) for c in claims], now=now)
    return claims, report


def receipt_of(claim):
    return RunReceipt.objects.get(attempt_id=claim.attempt_id)


def test_rerun_of_a_failed_occurrence_runs_it_again_under_its_key_without_moving_the_grid():
    s = make()
    [first], _ = run_at(T0)
    s.refresh_from_db()
    assert (s.occurrence, s.failure_count, s.failed_occurrences) == (1, 1, 1)
    assert s.next_run_at == T0 + 3600 * S

    state.rerun(s.pk, 1, note="the partner fixed their API", now=T0 + 600 * S, actor="ops")
    s.refresh_from_db()
    assert (s.triggered_at, s.rerun_occurrence, s.rerun_attempt) == (T0 + 600 * S, 1, 2)
    assert s.next_run_at == T0 + 600 * S  # due now
    event = ScheduleEvent.objects.get(action="rerun")
    assert event.occurrence == 1 and event.actor_repr == "ops"
    assert event.changes["note"] == "the partner fixed their API"
    assert event.changes["idempotency_key"] == f"{s.pk}:1"
    assert (event.changes["attempt"], event.changes["force"]) == (2, False)
    assert event.changes["last_status"] == "failed"

    [claim], _ = run_at(T0 + 601 * S)
    assert (claim.occurrence, claim.attempt, claim.origin) == (1, 2, "rerun")
    assert claim.idempotency_key == first.idempotency_key == f"{s.pk}:1"
    assert claim.scheduled_for == T0 + 600 * S
    receipt = receipt_of(claim)
    assert receipt.status == "succeeded" and receipt.succeeded_occurrence == 1
    assert receipt.forced is False
    s.refresh_from_db()
    # The grid's counters and next slot are untouched; the failure streak is kept.
    assert (s.occurrence, s.attempt, s.next_run_at) == (1, 1, T0 + 3600 * S)
    assert (s.failure_count, s.failed_occurrences, s.status) == (1, 1, "active")
    assert s.triggered_at is s.rerun_occurrence is s.rerun_attempt is None
    [grid], _ = run_at(T0 + 3600 * S)
    assert (grid.occurrence, grid.attempt, grid.origin) == (2, 1, "scheduled")


def test_a_succeeded_occurrence_is_re_run_only_with_force_and_keeps_its_one_success():
    s = make(callback="tests.noop")
    [first], _ = run_at(T0)
    with pytest.raises(StateConflict, match="succeeded: force"):
        state.rerun(s.pk, 1, now=T0 + 10 * S)
    for number, at in ((2, 10), (3, 20)):  # forced twice: two more successes, no key
        state.rerun(s.pk, 1, force=True, now=T0 + at * S)
        [claim], _ = run_at(T0 + (at + 1) * S)
        assert (claim.occurrence, claim.attempt, claim.origin) == (1, number, "rerun")
        receipt = receipt_of(claim)
        assert receipt.status == "succeeded" and receipt.forced is True
        assert receipt.succeeded_occurrence is None
    assert receipt_of(first).succeeded_occurrence == 1 and not receipt_of(first).forced


def test_a_failed_rerun_has_one_attempt_and_counts_no_failure():
    s = make(callback="tests.fail", pause_after_failures=2)
    with override_settings(DURABLE_SCHEDULES={"MAX_ATTEMPTS": 3}):
        run_at(T0)  # max_attempts=1 on the row: given up at once
        s.refresh_from_db()
        assert (s.failure_count, s.failed_occurrences, s.status) == (1, 1, "active")
        state.rerun(s.pk, 1, now=T0 + 10 * S)
        [claim], _ = run_at(T0 + 11 * S)
        assert receipt_of(claim).status == "failed"
        s.refresh_from_db()
        assert (s.failure_count, s.failed_occurrences, s.status) == (1, 1, "active")
        assert s.retry_scheduled_for is None and s.next_run_at == T0 + 3600 * S
        assert run_at(T0 + 12 * S)[0] == []  # no retry of the re-run


def test_a_rerun_whose_lease_expires_is_receipted_and_not_retried():
    s = make()
    run_at(T0)
    state.rerun(s.pk, 1, now=T0 + 10 * S)
    [claim] = state.claim_due(worker="w", now=T0 + 11 * S)
    assert state.expire_leases(now=T0 + 3000 * S) == 1
    assert receipt_of(claim).status == "lease_expired"
    s.refresh_from_db()
    assert s.lease_token is None and s.retry_scheduled_for is None
    assert (s.occurrence, s.attempt, s.next_run_at) == (1, 1, T0 + 3600 * S)


def test_a_grid_slot_due_before_the_request_runs_after_the_rerun():
    s = make(interval_seconds=60)
    run_at(T0)
    state.rerun(s.pk, 1, now=T0 + 90 * S)  # the slot T0+60 is due, not claimed yet
    s.refresh_from_db()
    assert s.next_run_at == T0 + 60 * S
    [rerun], _ = run_at(T0 + 91 * S)
    assert rerun.origin == "rerun"
    [grid], _ = run_at(T0 + 92 * S)
    assert (grid.occurrence, grid.scheduled_for) == (2, T0 + 60 * S)


def test_a_paused_schedule_can_rerun_and_stays_paused():
    s = make()
    run_at(T0)
    state.disable(s.pk)
    state.rerun(s.pk, 1, now=T0 + 10 * S)
    [claim], _ = run_at(T0 + 11 * S)
    assert claim.origin == "rerun" and receipt_of(claim).status == "succeeded"
    s.refresh_from_db()
    assert (s.status, s.next_run_at, s.occurrence) == ("paused", None, 1)


@pytest.mark.parametrize("value", [0, -1, "1", 1.0, True, None, 2**31, 2**70])
def test_a_value_that_is_no_occurrence_number_is_refused(value):
    s = make()
    with pytest.raises(ValidationError) as caught:
        state.rerun(s.pk, value)
    assert "occurrence" in caught.value.message_dict


def test_refusals():
    s = make()
    with pytest.raises(ValidationError, match="never had an attempt"):
        state.rerun(s.pk, 1, now=T0)
    state.claim_due(worker="w", now=T0)
    with pytest.raises(StateConflict, match="running"):
        state.rerun(s.pk, 1, now=T0 + S)
    state.expire_leases(now=T0 + 3000 * S)  # occurrence 1 given up (max_attempts=1)
    state.rerun(s.pk, 1, now=T0 + 3001 * S)
    with pytest.raises(StateConflict, match="already pending"):
        state.rerun(s.pk, 1, now=T0 + 3002 * S)
    assert state.trigger(s.pk).rerun_occurrence == 1  # a no-op: the re-run stays
    with pytest.raises(ValidationError, match="never had an attempt"):
        state.rerun(s.pk, 2, now=T0 + 3002 * S)

    retrying = make("retrying", callback="tests.fail", max_attempts=3)
    run_at(T0)
    with pytest.raises(StateConflict, match="awaits its retry"):
        state.rerun(retrying.pk, 1, now=T0 + S)

    triggered = make("triggered")
    run_at(T0)
    state.trigger(triggered.pk, now=T0 + S)
    with pytest.raises(StateConflict, match="trigger is already pending"):
        state.rerun(triggered.pk, 1, now=T0 + 2 * S)

    cancelled = make("cancelled")
    run_at(T0)
    state.cancel(cancelled.pk)
    with pytest.raises(StateConflict, match="cancelled schedule cannot be re-run"):
        state.rerun(cancelled.pk, 1)
    assert not RunAttempt.objects.filter(origin="rerun").exists()


def test_cancel_drops_a_pending_rerun():
    s = make()
    run_at(T0)
    state.rerun(s.pk, 1, now=T0 + S)
    state.cancel(s.pk)
    s.refresh_from_db()
    assert s.triggered_at is s.rerun_occurrence is s.rerun_attempt is None


# -- API ------------------------------------------------------------------------------------


@pytest.fixture
def api(django_user_model):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(django_user_model.objects.create_user("ops", is_staff=True))
    return client


def rerun_url(schedule):
    from django.urls import reverse

    return reverse("durable_schedules_api:schedule-rerun", args=[schedule.pk])


def test_api_rerun_answers_200_400_and_409(api):
    s = make()
    run_at(T0)
    for value in (0, 2**70, "x", None):
        bad = api.post(rerun_url(s), {"occurrence": value}, format="json")
        assert bad.status_code == 400 and "occurrence" in bad.json()
    long_note = api.post(rerun_url(s), {"occurrence": 1, "note": "x" * 501}, format="json")
    assert long_note.status_code == 400 and "note" in long_note.json()
    assert api.post(rerun_url(s), {}, format="json").json().keys() == {"occurrence"}
    never = api.post(rerun_url(s), {"occurrence": 7}, format="json")
    assert never.status_code == 400
    assert never.json() == {"occurrence": ["Occurrence 7 of s never had an attempt."]}
    ok = api.post(rerun_url(s), {"occurrence": 1, "note": "retry by hand"}, format="json")
    assert ok.status_code == 200 and ok.json()["name"] == "s"
    s.refresh_from_db()
    assert (s.rerun_occurrence, s.rerun_attempt) == (1, 2)
    event = ScheduleEvent.objects.get(action="rerun")
    assert (event.source, event.actor_repr, event.changes["note"]) == (
        "api",
        "ops",
        "retry by hand",
    )
    again = api.post(rerun_url(s), {"occurrence": 1}, format="json")
    assert again.status_code == 409 and "already pending" in again.json()["detail"]


def test_api_forced_rerun_of_a_succeeded_occurrence(api):
    s = make(callback="tests.noop")
    run_at(T0)
    refused = api.post(rerun_url(s), {"occurrence": 1}, format="json")
    assert refused.status_code == 409 and "force" in refused.json()["detail"]
    assert (
        api.post(rerun_url(s), {"occurrence": 1, "force": True}, format="json").status_code == 200
    )
    [claim], _ = run_at(T0 + 3000 * S)  # the request was made at the database's now
    receipt = api.get(f"/api/receipts/{receipt_of(claim).pk}/").json()
    assert receipt["forced"] is True and receipt["status"] == "succeeded"


# -- manage.py schedules rerun ---------------------------------------------------------------


def test_command_rerun():
    from io import StringIO

    from django.core.management import CommandError, call_command

    s = make(callback="tests.noop")
    run_at(T0)
    with pytest.raises(CommandError, match="s: occurrence 1 succeeded: force"):
        call_command("schedules", "rerun", "s", "1")
    with pytest.raises(CommandError, match="occurrence: Occurrence 4 of s never had"):
        call_command("schedules", "rerun", "s", "4")
    out = StringIO()
    call_command("schedules", "rerun", "s", "1", "--force", "--note", "again", stdout=out)
    assert f"under its key {s.pk}:1" in out.getvalue()
    event = ScheduleEvent.objects.get(action="rerun")
    assert (event.source, event.changes["force"], event.changes["note"]) == (
        "command",
        True,
        "again",
    )


# -- admin ------------------------------------------------------------------------------------


def test_admin_rerun_button_confirmation_and_message(client, django_user_model):
    admin_user = django_user_model.objects.create_superuser("boss", password="pw")
    client.force_login(admin_user)
    s = make()
    [claim], _ = run_at(T0)
    receipt = receipt_of(claim)
    page = client.get(f"/admin/durable_schedules/runreceipt/{receipt.pk}/change/")
    assert b"Re-run this occurrence" in page.content
    confirm = client.get(f"/admin/durable_schedules/runreceipt/{receipt.pk}/rerun/")
    text = confirm.content.decode()
    assert "Occurrence <strong>1</strong> of <strong>s</strong>" in text
    assert f"{s.pk}:1" in text and ">failed<" in text
    done = client.post(
        f"/admin/durable_schedules/runreceipt/{receipt.pk}/rerun/",
        {"post": "yes", "note": "by hand"},
        follow=True,
    )
    assert done.redirect_chain[-1][0].endswith(f"/schedule/{s.pk}/change/")
    assert "Occurrence 1 of s will be re-run at the next worker pass" in done.content.decode()
    s.refresh_from_db()
    assert s.rerun_occurrence == 1
    again = client.post(
        f"/admin/durable_schedules/runattempt/{claim.attempt_id}/rerun/",
        {"post": "yes"},
        follow=True,
    )
    assert "already pending" in again.content.decode()


def test_admin_rerun_needs_change_permission(client, django_user_model):
    viewer = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    client.force_login(viewer)
    make()
    [claim], _ = run_at(T0)
    url = f"/admin/durable_schedules/runattempt/{claim.attempt_id}/rerun/"
    assert client.post(url, {"post": "yes"}).status_code == 403


# -- a real worker -------------------------------------------------------------------------------


@pytest.mark.process
def test_a_real_worker_reruns_a_failed_occurrence_under_its_key(start_worker):
    from tests.testapp.models import SideEffect

    s = Schedule.objects.create(
        name="proc-rerun",
        callback="tests.first_attempt_fails",
        kind="interval",
        interval_seconds=3600,
        timezone="UTC",
        max_attempts=1,
    )
    worker = start_worker("--worker-id", "rerun", "--max-idle", "0.3")
    wait_until(
        lambda: RunReceipt.objects.filter(occurrence=1, status="failed").exists(),
        20,
        message="occurrence 1 failed",
    )
    state.rerun(s.pk, 1, note="fixed")
    wait_until(
        lambda: RunReceipt.objects.filter(occurrence=1, status="succeeded").exists(),
        20,
        message=f"the re-run succeeded; worker said: {worker.output()[-2000:]}",
    )
    runs = list(SideEffect.objects.order_by("attempt").values_list("attempt", "idempotency_key"))
    assert runs == [(1, f"{s.pk}:1"), (2, f"{s.pk}:1")]
    rerun = RunAttempt.objects.get(attempt=2)
    assert (rerun.origin, rerun.occurrence) == ("rerun", 1)
    s.refresh_from_db()
    assert (s.occurrence, s.failure_count, s.status) == (1, 1, "active")


def test_api_rerun_bodies_from_outside_are_never_a_500(api):
    """Any JSON body: 200, 400 with field messages, or 409; never a server error."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    s = make()
    run_at(T0)
    scalars = (
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=600)
    )
    bodies = st.fixed_dictionaries(
        {}, optional={"occurrence": scalars, "force": scalars, "note": scalars}
    )

    @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
    @given(bodies)
    def check(body):
        response = api.post(rerun_url(s), body, format="json")
        assert response.status_code in (200, 400, 409), (body, response.content)
        if response.status_code == 400:
            assert isinstance(response.json(), dict)
        Schedule.objects.filter(pk=s.pk).update(
            triggered_at=None, rerun_occurrence=None, rerun_attempt=None
        )

    check()
