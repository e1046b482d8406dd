"""The receipt of a run whose schedule row was poisoned while it was out (a chaos soak
finding, ``ok_with_wrong_receipt``: ``chaos-svictim-occurrence_text #2.1`` ran ``ok``,
its receipt said ``degraded``).

The sequence: a worker claims an occurrence and runs it; behind ``save()`` a counter of
the row becomes one the engine cannot go on from (``occurrence = 'abc'`` on SQLite, a
value the next increment overflows on any database); the worker dies before its
completion commits; the lease expires and the recovery, unable to move the row on,
quarantines it (:func:`.state.quarantine.quarantine_lease`). The schedule is paused as
degraded with the reason, but the attempt's receipt is the truth about the run: its lease
expired before it reported an outcome (``lease_expired``, the pause noted), as the
recovery of any other row says. ``degraded`` is the receipt of a run that never ran
because its schedule cannot be evaluated (the claim's). A run that reports in time keeps
its own status. Driven with an injected clock, the poison written by raw SQL.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection

from django_durable_schedules import state
from django_durable_schedules.models import RunAttempt, RunReceipt, Schedule
from django_durable_schedules.state.quarantine import LEASE_PREFIX
from django_durable_schedules.worker.execution.runner import execute

from .bench_modules import import_bench
from .factories import T0

pytestmark = pytest.mark.django_db(transaction=True)


S = timedelta(seconds=1)

#: The poisons: SQLite keeps text in an integer column; every database keeps a count the
#: next increment overflows (read_count's bound is 2**31 - 2).
POISONS = [
    pytest.param("'abc'", id="text"),
    pytest.param("2147483647", id="overflowing"),
]


def poison(pk, value):
    if value == "'abc'" and connection.vendor != "sqlite":
        pytest.skip("only SQLite keeps text in an integer column")
    qn = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {qn(Schedule._meta.db_table)} SET {qn('occurrence')} = {value} "
            f"WHERE {qn('id')} = %s",
            [Schedule._meta.pk.get_db_prep_value(pk, connection)],
        )


def claimed(name):
    """A schedule claimed at ``T0 + 60 s`` (its lease: 10 s), with the run's outcome."""
    s = Schedule.objects.create(
        name=name,
        callback="tests.noop",
        kind="interval",
        interval_seconds=60,
        timezone="UTC",
        created_at=T0,
    )
    Schedule.objects.filter(pk=s.pk).update(next_run_at=T0 + 60 * S)
    [claim] = state.claim_due(worker="w", now=T0 + 60 * S, lease_seconds=10)
    assert claim.schedule_id == s.pk
    return s, claim, execute(claim)


@pytest.mark.parametrize("value", POISONS)
def test_a_run_whose_worker_died_after_the_poison_is_receipted_lease_expired(value):
    """The worker died after its callback returned, before its completion committed; the
    recovery quarantines the row (paused, degraded) and receipts the run ``lease_expired``
    with the pause in its message, never ``degraded``; the innocent row beside it is
    recovered as usual."""
    bad, bad_claim, outcome = claimed("victim")
    assert outcome.status == "succeeded"  # the callback's own word: lost with its worker
    innocent, innocent_claim, _ = claimed("innocent")
    poison(bad.pk, value)
    assert state.expire_leases(now=T0 + 71 * S) == 2
    row = Schedule.objects.values("status", "degraded_reason", "lease_token").get(pk=bad.pk)
    assert row["status"] == "paused" and row["lease_token"] is None
    assert row["degraded_reason"].startswith(LEASE_PREFIX), row
    receipt = RunReceipt.objects.get(attempt_id=bad_claim.attempt_id)
    assert receipt.status == "lease_expired", (receipt.status, receipt.error_message)
    assert receipt.error_type == "LeaseExpired"
    assert "before the run reported an outcome" in receipt.error_message
    assert f"the schedule was paused: {LEASE_PREFIX}" in receipt.error_message
    assert receipt.occurrence == bad_claim.occurrence and receipt.started_at is None
    assert RunReceipt.objects.get(attempt_id=innocent_claim.attempt_id).status == "lease_expired"
    assert RunAttempt.objects.filter(schedule_id=bad.pk).count() == 1  # not retried: paused


@pytest.mark.parametrize("value", POISONS)
def test_a_run_reported_in_time_after_the_poison_keeps_its_own_status(value):
    """The worker reports the success while its lease holds: the receipt says
    ``succeeded`` (the row's pause, if any, noted), whatever the row's counter became."""
    bad, bad_claim, outcome = claimed("victim")
    poison(bad.pk, value)
    report = state.complete([outcome], now=T0 + 61 * S)
    assert not report.dropped and not report.fenced
    receipt = RunReceipt.objects.get(attempt_id=bad_claim.attempt_id)
    assert receipt.status == "succeeded", (receipt.status, receipt.error_message)
    assert state.expire_leases(now=T0 + 200 * S) == 0  # nothing left to recover
    assert RunReceipt.objects.get(attempt_id=bad_claim.attempt_id).status == "succeeded"


@pytest.mark.parametrize("value", POISONS)
def test_the_chaos_audit_holds_the_quarantined_run_fenced_and_its_occurrence_ended(value, tmp_path):
    """The soak's audit (bench/chaos.py) of that sequence: the callback's ``done ... ok``
    line with a ``lease_expired`` receipt is no ``ok_with_wrong_receipt`` (its worker died:
    fenced), and the occurrence the pause ended is no ``lost_occurrences``."""
    (chaos,) = import_bench("chaos")
    bad, bad_claim, _ = claimed("victim")
    poison(bad.pk, value)
    state.expire_leases(now=T0 + 71 * S)
    log = tmp_path / "side-effects.log"
    key, attempt = bad_claim.idempotency_key, bad_claim.attempt
    log.write_text(f"start {key} {attempt} 1 0.0\ndone {key} {attempt} ok 1 0.1\n")
    report = chaos.audit(log)
    wrong = {k: n for k, n in report["violations"].items() if n}
    assert not wrong, (wrong, report["examples"])
    assert report["totals"]["occurrences_ended_by_degraded_pause"] == 1
