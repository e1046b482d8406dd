"""Append-only guards in the database, and the one retention path through them."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction

from django_durable_schedules.db import guards
from django_durable_schedules.db.retention import prune_finished, retention_gate
from django_durable_schedules.models import RunAttempt, RunReceipt

from .factories import T0, AttemptFactory, ReceiptFactory, ScheduleFactory

pytestmark = pytest.mark.django_db(transaction=True)


def q(name: str) -> str:
    return connection.ops.quote_name(name)


@pytest.fixture
def pair():
    receipt = ReceiptFactory()
    from django_durable_schedules import state

    state.disable(receipt.schedule_id)  # an audit event row too
    return receipt


def refused(sql: str, params=()) -> None:
    with pytest.raises(DatabaseError, match="append-only"):
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(sql, params)


@pytest.mark.parametrize("table", guards.TABLES)
def test_raw_update_and_delete_are_refused(pair, table):
    refused(f"UPDATE {q(table)} SET {q('id')} = {q('id')}")
    refused(f"DELETE FROM {q(table)}")
    assert RunAttempt.objects.count() == 1 and RunReceipt.objects.count() == 1


def test_orm_update_and_delete_are_refused(pair):
    with pytest.raises(DatabaseError):
        with transaction.atomic():
            RunReceipt.objects.update(error_message="rewritten history")
    with pytest.raises(DatabaseError):
        with transaction.atomic():
            RunReceipt.objects.all()._raw_delete(RunReceipt.objects.db)
    with pytest.raises(DatabaseError):
        with transaction.atomic():
            RunAttempt.objects.update(worker="someone else")
    assert RunReceipt.objects.get().error_message == ""


def test_gate_is_per_session_and_closes_after_the_block(pair):
    with transaction.atomic():
        with retention_gate():
            pass
    refused(f"DELETE FROM {q('durable_schedules_runreceipt')}")


def test_guards_are_installed_and_reinstall_is_idempotent():
    assert guards.installed(connection)
    guards.install(connection)
    guards.install(connection)
    assert guards.installed(connection)


def test_prune_removes_only_old_finished_pairs():
    s = ScheduleFactory()
    old = [
        ReceiptFactory(attempt=AttemptFactory(schedule=s), finished_at=T0 - timedelta(days=40))
        for _ in range(3)
    ]
    recent = ReceiptFactory(attempt=AttemptFactory(schedule=s), finished_at=T0 - timedelta(days=2))
    open_attempt = AttemptFactory(schedule=s, claimed_at=T0 - timedelta(days=90))
    result = prune_finished(timedelta(days=30), now=T0, batch_size=2)
    assert (result.receipts, result.attempts) == (3, 3)
    assert list(RunReceipt.objects.all()) == [recent]
    assert set(RunAttempt.objects.values_list("id", flat=True)) == {
        recent.attempt_id,
        open_attempt.id,
    }
    assert not RunReceipt.objects.filter(id__in=[r.id for r in old]).exists()
    # the gate is closed again afterwards
    refused(f"DELETE FROM {q('durable_schedules_runattempt')}")


def test_prune_runs_command():
    ReceiptFactory(finished_at=T0 - timedelta(days=400))
    out = StringIO()
    call_command("prune_runs", "--older-than", "30", "--no-input", stdout=out)
    assert "Pruned 1 receipts and 1 attempts" in out.getvalue()
    assert RunAttempt.objects.count() == 0
    with pytest.raises(CommandError):
        call_command("prune_runs", "--older-than", "-1")
