"""Migration 0003 (receipt status ``enqueued``) changes CHECK constraints of the receipt
table, which SQLite applies by rebuilding the table - dropping its triggers. The append-only
guards must be back after migrating forwards and backwards, on every backend."""

import uuid
from datetime import timedelta

import pytest
from django.db import DatabaseError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from django_durable_schedules.db import guards
from django_durable_schedules.models import RunReceipt

from .factories import T0, ReceiptFactory

APP = "durable_schedules"


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return executor


def _cron_schedule_at(node, name, **fields):
    """Migrate to ``node`` (its guards installed) and write, with that state's models, a
    cron schedule due in 2030 (the caller migrates back to the leaves)."""
    executor = _migrate([node])
    assert guards.installed(connection)
    old = executor.loader.project_state(node).apps
    return old.get_model(APP, "Schedule").objects.create(
        name=name,
        callback="tests.noop",
        kind="cron",
        cron="0 7 * * *",
        timezone="Europe/Paris",
        created_at=T0,
        next_run_at=T0.replace(year=2030),
        **fields,
    )


def _edit_trigger_works(model, pk) -> bool:
    """A definition changed behind ``save()`` makes the 2030 row due now (the edit trigger)."""
    model.objects.filter(pk=pk).update(cron="0 8 * * *")
    return model.objects.get(pk=pk).next_run_at.year < 2030


def _update_refused(receipt) -> bool:
    try:
        with transaction.atomic():
            RunReceipt.objects.filter(pk=receipt.pk).update(error_message="rewritten")
    except DatabaseError:
        return True
    return False


def _old_receipt(executor, node):
    """A skipped receipt (and its schedule and attempt) written with the models of
    migration ``node``: today's models have columns that later migrations add."""
    old = executor.loader.project_state(node).apps
    schedule = old.get_model(APP, "Schedule").objects.create(
        name="before-0003",
        callback="tests.noop",
        kind="interval",
        interval_seconds=60,
        timezone="UTC",
        created_at=T0,
    )
    attempt = old.get_model(APP, "RunAttempt").objects.create(
        schedule=schedule,
        schedule_name=schedule.name,
        occurrence=1,
        attempt=1,
        scheduled_for=T0,
        claimed_at=T0,
        lease_token=uuid.uuid4(),
        lease_expires_at=T0 + timedelta(seconds=30),
        worker="old",
        idempotency_key=f"{schedule.id}:1",
    )
    return old.get_model(APP, "RunReceipt").objects.create(
        attempt=attempt,
        schedule=schedule,
        occurrence=1,
        status="skipped",
        finished_at=T0 + timedelta(seconds=1),
    )


@pytest.mark.django_db(transaction=True)
def test_guards_survive_0003_both_ways():
    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes(APP)
    try:
        node = (APP, "0002_append_only_guards")
        executor = _migrate([node])
        assert guards.installed(connection)
        before = _old_receipt(executor, node)
        assert _update_refused(before)
    finally:
        _migrate(leaves)
    assert guards.installed(connection)
    after = ReceiptFactory(status="enqueued", attempt__occurrence=3)
    assert _update_refused(after)
    assert _update_refused(before)
    assert RunReceipt.objects.get(pk=after.pk).error_message == ""
