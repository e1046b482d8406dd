"""Every edit path leads to the same behaviour: ``QuerySet.update()`` and raw SQL on a
schedule take effect at the next claim like ``save()`` and the state functions (the
triggers of ``db/edits.py``), and the append-only tables refuse a replacing INSERT."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import DatabaseError, connection, transaction

from django_durable_schedules import state
from django_durable_schedules.models import RunReceipt, Schedule
from django_durable_schedules.runner import execute

from .factories import ReceiptFactory

pytestmark = pytest.mark.django_db(transaction=True)

S = timedelta(seconds=1)


def q(name: str) -> str:
    return connection.ops.quote_name(name)


def hourly(name: str = "hourly") -> Schedule:
    """An hourly schedule that has just run its first slot (its next one is an hour away)."""
    db_now = state.db_now()
    s = Schedule.objects.create(
        name=name, callback="tests.noop", kind="interval", interval_seconds=3600, timezone="UTC"
    )
    [claim] = state.claim_due(worker="w")  # a new interval schedule is due at once
    state.complete([execute(claim)])
    s.refresh_from_db()
    assert s.next_run_at > db_now + 3000 * S
    return s


def test_an_edit_by_queryset_update_takes_effect_at_the_next_claim_without_firing():
    s = hourly()
    Schedule.objects.filter(pk=s.pk).update(interval_seconds=2)
    s.refresh_from_db()
    now = state.db_now()
    assert s.next_run_at <= now  # marked: the next claim looks at it now
    assert state.claim_due(worker="w") == []  # re-planned, not fired
    s.refresh_from_db()
    assert s.definition_hash == s.compute_definition_hash()
    assert now < s.next_run_at <= now + 3 * S  # the first 2 s slot after the edit
    assert RunReceipt.objects.filter(schedule_id=s.pk).count() == 1


def test_an_edit_by_raw_sql_takes_effect_at_the_next_claim_without_firing():
    s = hourly()
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {q(Schedule._meta.db_table)} SET {q('kind')} = 'cron', "
            f"{q('cron')} = '* * * * *', {q('interval_seconds')} = NULL WHERE {q('id')} = %s",
            [s.pk.hex if connection.vendor in ("sqlite", "mysql") else s.pk],
        )
    assert state.claim_due(worker="w") == []
    s.refresh_from_db()
    now = state.db_now()
    assert s.kind == "cron" and now < s.next_run_at <= now + 61 * S
    assert s.next_run_at.second == 0


def test_a_save_edit_is_not_marked_twice():
    s = hourly()
    before = s.next_run_at
    s.max_runs = 10  # not a definition field: nothing to re-plan
    s.save()
    Schedule.objects.filter(pk=s.pk).update(payload={"x": 1})
    s.refresh_from_db()
    assert s.next_run_at == before


def test_a_bulk_pause_clears_the_next_run_and_a_bulk_resume_replans_from_now():
    s = hourly()
    Schedule.objects.filter(pk=s.pk).update(status="paused")
    s.refresh_from_db()
    assert s.status == "paused" and s.next_run_at is None
    Schedule.objects.filter(pk=s.pk).update(interval_seconds=1)  # paused: stays unplanned
    s.refresh_from_db()
    assert s.next_run_at is None
    Schedule.objects.filter(pk=s.pk).update(status="active")
    s.refresh_from_db()
    assert s.next_run_at is not None and s.definition_hash == ""
    assert state.claim_due(worker="w") == []  # no catch-up for the time spent paused
    s.refresh_from_db()
    assert s.status == "active" and s.next_run_at > state.db_now() - S


def test_the_state_machine_own_pause_and_resume_are_unchanged():
    s = hourly()
    state.disable(s.pk)
    row = state.enable(s.pk)
    assert row.next_run_at == Schedule.objects.get(pk=s.pk).next_run_at
    assert row.definition_hash == row.compute_definition_hash()


def test_a_replacing_insert_cannot_forge_a_receipt():
    receipt = ReceiptFactory(status="succeeded")
    table = q(RunReceipt._meta.db_table)
    columns = [f.column for f in RunReceipt._meta.concrete_fields]
    names = ", ".join(q(c) for c in columns)
    select = ", ".join("'failed'" if c == "status" else q(c) for c in columns)
    if connection.vendor == "sqlite":
        statements = [
            f"INSERT OR REPLACE INTO {table} ({names}) SELECT {select} FROM {table}",
            f"REPLACE INTO {table} ({names}) SELECT {select} FROM {table}",
        ]
    elif connection.vendor == "postgresql":
        statements = [
            f"INSERT INTO {table} ({names}) SELECT {select} FROM {table} "
            f"ON CONFLICT ({q('id')}) DO UPDATE SET {q('status')} = 'failed'"
        ]
    else:
        statements = [
            f"REPLACE INTO {table} ({names}) SELECT {select} FROM {table}",
            f"INSERT INTO {table} ({names}) SELECT {select} FROM {table} AS old "
            f"ON DUPLICATE KEY UPDATE {q('status')} = 'failed'",
        ]
    for sql in statements:
        with pytest.raises(DatabaseError):
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute(sql)
    receipt.refresh_from_db()
    assert receipt.status == "succeeded" and RunReceipt.objects.count() == 1
