"""Migration 0003 (receipt status ``enqueued``) changes CHECK constraints of the receipt
table, which SQLite applies by rebuilding the table - dropping its triggers. The append-only
guards must be back after migrating forwards and backwards, on every backend."""

import pytest
from django.db import DatabaseError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from django_durable_schedules.db import guards
from django_durable_schedules.models import RunReceipt

from .factories import ReceiptFactory

APP = "durable_schedules"


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return executor


def _update_refused(receipt) -> bool:
    try:
        with transaction.atomic():
            RunReceipt.objects.filter(pk=receipt.pk).update(error_message="rewritten")
    except DatabaseError:
        return True
    return False


@pytest.mark.django_db(transaction=True)
def test_guards_survive_0003_both_ways():
    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes(APP)
    try:
        _migrate([(APP, "0002_append_only_guards")])
        assert guards.installed(connection)
        before = ReceiptFactory(status="skipped")
        assert _update_refused(before)
    finally:
        _migrate(leaves)
    assert guards.installed(connection)
    after = ReceiptFactory(status="enqueued", attempt__occurrence=3)
    assert _update_refused(after)
    assert _update_refused(before)
    assert RunReceipt.objects.get(pk=after.pk).error_message == ""
