"""A lease token replaced behind ``save()`` while its run is out (the chaos soak's
``lease_minus_infinity`` poison on PostgreSQL, CI of 2026-12-02): the run's attempt ends
``lease_lost`` and the foreign lease, which no attempt holds, is recovered. The occurrence
must still be retried, whichever of the two happens first; it was lost."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db import connection

from django_durable_schedules import state
from django_durable_schedules.models import RunAttempt, RunReceipt, Schedule
from django_durable_schedules.state import Outcome

pytestmark = pytest.mark.django_db(transaction=True)

S = timedelta(seconds=1)


def claimed():
    now = state.db_now()
    s = state.create_schedule(
        name="victim",
        callback="tests.noop",
        kind="interval",
        interval_seconds=60,
        timezone="UTC",
        start_at=now - 120 * S,
    )
    Schedule.objects.filter(pk=s.pk).update(next_run_at=now - S)  # due now
    claims = state.claim_due(worker="w1", limit=5)
    assert [c.schedule_name for c in claims] == ["victim"]
    return s, claims[0]


def replace_token(s, expires):
    table = Schedule._meta.db_table
    qn = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET {qn('lease_token')} = %s, {qn('lease_expires_at')} = {expires} "
            f"WHERE {qn('id')} = %s",
            [uuid_param(uuid.uuid4()), uuid_param(s.pk)],
        )


def uuid_param(value):
    """A UUID as the column stores it (SQLite and MariaDB: 32 hex digits)."""
    return str(value) if connection.vendor == "postgresql" else value.hex


def past():
    """An expiry long past: PostgreSQL's ``-infinity`` (no Python datetime holds it)."""
    return "'-infinity'" if connection.vendor == "postgresql" else "'2000-01-01 00:00:00'"


def retried(s, claim):
    """The occurrence ran again (attempt 2) or a retry of it is pending."""
    later = state.db_now() + 5 * S
    claims = state.claim_due(worker="w2", limit=5, now=later)
    mine = [c for c in claims if c.schedule_name == s.name]
    assert mine, (Schedule.objects.get(pk=s.pk).__dict__, list(RunReceipt.objects.values()))
    assert (mine[0].occurrence, mine[0].attempt) == (claim.occurrence, 2)


@pytest.mark.parametrize("order", ["complete first", "recovery first"])
def test_an_occurrence_whose_lease_token_was_replaced_is_retried(order):
    s, claim = claimed()
    replace_token(s, past())
    if order == "complete first":
        state.complete([Outcome(claim, "succeeded")])
        state.expire_leases()
    else:
        state.expire_leases()
        state.complete([Outcome(claim, "succeeded")])
    receipts = {r.attempt.attempt: r.status for r in RunReceipt.objects.select_related("attempt")}
    row = Schedule.objects.values(
        "status",
        "degraded_reason",
        "occurrence",
        "attempt",
        "retry_scheduled_for",
        "next_run_at",
        "lease_token",
    ).get()
    assert receipts.get(1) in ("lease_lost", "lease_expired"), (receipts, row)
    retried(s, claim)


def test_a_quarantined_foreign_lease_receipts_the_run_it_displaced():
    """The row cannot be recovered at all (a counter that is no number, SQLite): it is
    paused with the reason, and the run the foreign token displaced gets its receipt."""
    if connection.vendor != "sqlite":
        pytest.skip("only SQLite keeps text in an integer column")
    s, claim = claimed()
    replace_token(s, past())
    Schedule.objects.filter(pk=s.pk).update(failure_count=0)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Schedule._meta.db_table} SET failure_count = 'abc' WHERE id = %s",
            [uuid_param(s.pk)],
        )
    state.expire_leases()
    row = Schedule.objects.values("status", "degraded_reason", "lease_token").get()
    assert row["status"] == "paused" and row["degraded_reason"] and row["lease_token"] is None
    attempt = RunAttempt.objects.get(pk=claim.attempt_id)
    assert attempt.receipt.status == "lease_expired"  # its run was out: it may have run
    assert "the schedule was paused" in attempt.receipt.error_message


def test_a_late_outcome_on_a_row_no_conversion_reads_is_fenced_not_dropped():
    """The completion reads the row to apply an outcome; a lease expiry that no Python
    datetime holds (PostgreSQL ``-infinity``, written behind ``save()`` with a foreign token
    while the run was out: the chaos soak's ``lease_minus_infinity``) made the whole read
    fail, and the outcome was dropped ("dropped the outcome ..."), its run known only as
    ``lease_expired`` once the recovery came. The token, read alone, is not the outcome's:
    the outcome is fenced as any late one, receipted ``lease_lost`` at once, and the
    occurrence still retried after the recovery."""
    s, claim = claimed()
    replace_token(s, past())
    report = state.complete([Outcome(claim, "succeeded")])
    assert report.dropped == []
    assert [o.claim.attempt_id for o in report.fenced] == [claim.attempt_id]
    assert RunAttempt.objects.get(pk=claim.attempt_id).receipt.status == "lease_lost"
    state.expire_leases()
    assert RunReceipt.objects.filter(attempt_id=claim.attempt_id).count() == 1
    retried(s, claim)


def poison_unreadable(s):
    """Write behind ``save()`` a value no conversion reads, the lease token left as it is:
    ``-infinity`` in ``last_run_at`` (no Python datetime holds it). SQLite and MariaDB
    hold no such value in a datetime column (SQLite's text there reads as no date)."""
    if connection.vendor != "postgresql":
        pytest.skip("only PostgreSQL keeps a timestamp that no Python datetime holds")
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Schedule._meta.db_table} SET last_run_at = '-infinity' WHERE id = %s",
            [uuid_param(s.pk)],
        )


def test_an_outcome_on_its_own_row_that_no_conversion_reads_is_receipted_and_the_row_paused():
    """The row its lease token still owns cannot be read at all (a value written behind
    ``save()`` while the run was out): the outcome was dropped ("dropped the outcome ...")
    and the run known only as ``lease_expired`` once its lease expired. Now the outcome is
    receipted with its own status at once, the pause noted, and the row alone is paused as
    degraded with the reason (``outcome.unappliable``), its lease cleared: nothing is left
    for the recovery, and the rest of the batch commits."""
    s, claim = claimed()
    other = state.create_schedule(
        name="bystander", callback="tests.noop", kind="interval", interval_seconds=60
    )
    Schedule.objects.filter(pk=other.pk).update(next_run_at=state.db_now() - S)
    [bystander] = state.claim_due(worker="w1", limit=5)
    poison_unreadable(s)
    report = state.complete([Outcome(claim, "succeeded"), Outcome(bystander, "succeeded")])
    assert report.dropped == [] and report.fenced == []
    receipt = RunAttempt.objects.get(pk=claim.attempt_id).receipt
    assert receipt.status == "succeeded"
    assert "the schedule was paused" in receipt.error_message
    assert RunAttempt.objects.get(pk=bystander.attempt_id).receipt.status == "succeeded"
    row = Schedule.objects.filter(pk=s.pk).values(
        "status", "degraded_reason", "degraded_kind", "lease_token", "next_run_at"
    )[0]
    assert row["status"] == "paused" and row["lease_token"] is None, row
    assert row["degraded_reason"].startswith("its completion could not read the row"), row
    assert row["next_run_at"] is None
    assert state.expire_leases() == 0  # nothing left to recover
    assert RunReceipt.objects.filter(attempt_id=claim.attempt_id).count() == 1


def test_an_outcome_to_enqueue_on_an_unreadable_row_is_enqueued_then_receipted():
    """The outcome of a run handed to a task queue (``enqueue``) on its own row that cannot
    be read: enqueued as the completion would, in its transaction, then receipted
    ``enqueued`` with the pause noted; the row is paused."""
    s, claim = claimed()
    poison_unreadable(s)
    sent = []
    report = state.complete([Outcome(claim, "enqueued", enqueue=lambda: sent.append(1) or "id-1")])
    assert sent == [1] and report.dropped == []
    receipt = RunAttempt.objects.get(pk=claim.attempt_id).receipt
    assert (receipt.status, receipt.result) == ("enqueued", "id-1")
    assert "the schedule was paused" in receipt.error_message
    assert Schedule.objects.filter(pk=s.pk).values_list("status", flat=True)[0] == "paused"


def test_an_enqueue_that_raises_on_an_unreadable_row_is_receipted_failed():
    """The task queue refuses the hand-off (the callback's ``enqueue`` raises) while its
    row cannot be read: the run is receipted ``failed`` with the error, the pause noted;
    the row is paused and the worker's call returns."""
    s, claim = claimed()
    poison_unreadable(s)

    def refuse():
        raise ConnectionError("broker down")

    report = state.complete([Outcome(claim, "enqueued", enqueue=refuse)])
    assert report.dropped == []
    receipt = RunAttempt.objects.get(pk=claim.attempt_id).receipt
    assert (receipt.status, receipt.error_type) == ("failed", "ConnectionError")
    assert "the schedule was paused" in receipt.error_message
    assert Schedule.objects.filter(pk=s.pk).values_list("status", flat=True)[0] == "paused"
