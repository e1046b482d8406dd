"""The degraded kind is data (issue #25 item 3): why a schedule was paused as degraded is a
field the engine reads (``Schedule.degraded_kind``), never a prefix of the reason's text.

Only a schedule paused because its callback was missing comes back by itself when the
callback is registered again (``recover_degraded``, run at every worker start); a row
quarantined for another cause (its expired lease could not be recovered, the database
refused its claim, its definition cannot be evaluated) stays paused with its reason until
an operator enables it. Before, a quarantined lease or a refused claim was re-enabled at
the next worker start because its reason lacked one text prefix."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db import connection

from django_durable_schedules import state
from django_durable_schedules.models import DegradedKind, Schedule
from django_durable_schedules.state.quarantine import quarantine_lease, quarantine_refused

pytestmark = pytest.mark.django_db(transaction=True)

S = timedelta(seconds=1)


def schedule(name="s"):
    now = state.db_now()
    s = state.create_schedule(
        name=name,
        callback="tests.noop",
        kind="interval",
        interval_seconds=60,
        timezone="UTC",
        start_at=now - 120 * S,
    )
    Schedule.objects.filter(pk=s.pk).update(next_run_at=now - S)  # due now
    return s


def test_a_quarantined_lease_is_not_recovered_as_a_missing_callback():
    s = schedule()
    exc = ValueError("failure_count: 'abc' is no number")
    assert quarantine_lease(s.pk, exc, state.db_now(), "default") is False  # no lease
    token = uuid.uuid4()
    Schedule.objects.filter(pk=s.pk).update(
        lease_token=token, lease_expires_at=state.db_now() - 5 * S
    )
    assert quarantine_lease(s.pk, exc, state.db_now(), "default") is True
    row = Schedule.objects.get(pk=s.pk)
    assert (row.status, row.degraded_kind) == ("paused", DegradedKind.LEASE)
    assert state.recover_degraded() == []
    row.refresh_from_db()
    assert row.status == "paused" and row.degraded_reason


def test_a_refused_claim_is_not_recovered_as_a_missing_callback():
    s = schedule()
    quarantine_refused(s.pk, ValueError("refused"), "default")
    row = Schedule.objects.get(pk=s.pk)
    assert (row.status, row.degraded_kind) == ("paused", DegradedKind.CLAIM)
    assert state.recover_degraded() == []
    assert Schedule.objects.get(pk=s.pk).status == "paused"


def test_a_missing_callback_is_recovered_whatever_its_reason_says(settings):
    s = schedule()
    Schedule.objects.filter(pk=s.pk).update(callback="tests.gone")
    claims = state.claim_due(worker="w")
    assert claims == []
    row = Schedule.objects.get(pk=s.pk)
    assert (row.status, row.degraded_kind) == ("paused", DegradedKind.CALLBACK)
    # An operator's edit of the text changes nothing about what the engine does.
    Schedule.objects.filter(pk=s.pk).update(
        callback="tests.noop", degraded_reason="cannot evaluate the schedule: edited"
    )
    assert [r.pk for r in state.recover_degraded()] == [s.pk]
    row.refresh_from_db()
    assert (row.status, row.degraded_kind, row.degraded_reason) == ("active", "", "")


def test_an_unevaluable_definition_is_recorded_as_such():
    s = schedule()
    Schedule.objects.filter(pk=s.pk).update(timezone="Mars/Olympus", definition_hash="x")
    state.claim_due(worker="w")
    row = Schedule.objects.get(pk=s.pk)
    assert (row.status, row.degraded_kind) == ("paused", DegradedKind.DEFINITION)
    assert state.recover_degraded() == []
    state.update_schedule(s.pk, timezone="UTC")
    state.enable(s.pk)
    row.refresh_from_db()
    assert (row.status, row.degraded_kind, row.degraded_reason) == ("active", "", "")


def test_every_degraded_row_has_a_kind_and_every_kind_a_reason():
    """The migration and every writer keep the two together."""
    assert connection.vendor  # a database is there
    for row in Schedule.objects.all():
        assert bool(row.degraded_kind) == bool(row.degraded_reason), row


def test_a_cancelled_schedule_whose_lease_is_quarantined_stays_cancelled():
    """A worker never undoes a cancel (found by the transition-table observer)."""
    s = schedule()
    Schedule.objects.filter(pk=s.pk).update(
        status="cancelled", lease_token=uuid.uuid4(), lease_expires_at=state.db_now() - 5 * S
    )
    assert quarantine_lease(s.pk, ValueError("bad"), state.db_now(), "default") is True
    row = Schedule.objects.get(pk=s.pk)
    assert (row.status, row.lease_token, row.degraded_kind) == ("cancelled", None, "lease")
    assert state.recover_degraded() == []
