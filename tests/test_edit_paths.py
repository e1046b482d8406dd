"""Every edit path leads to the same behaviour: ``QuerySet.update()`` and raw SQL on a
schedule take effect at the next claim like ``save()`` and the state functions (the
triggers of ``db/edits.py``), and the append-only tables refuse a replacing INSERT."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import DatabaseError, connection, transaction

from django_durable_schedules import state
from django_durable_schedules.models import RunReceipt, Schedule
from django_durable_schedules.worker.execution.runner import execute

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


# -- save() plans by the database clock, not the host's ------------------------------------


@pytest.fixture
def host_an_hour_ahead(monkeypatch):
    """The host clock one hour ahead of the database's (a skewed application server)."""
    from django.utils import timezone as dj_timezone

    real_now = dj_timezone.now

    def host_now():
        return real_now() + timedelta(hours=1)

    monkeypatch.setattr(dj_timezone, "now", host_now)
    field = Schedule._meta.get_field("created_at")
    if field.default is real_now:  # a default captured before the patch reads the host too
        monkeypatch.setattr(field, "default", host_now)


def test_a_new_schedule_is_anchored_and_planned_by_the_database_clock(host_an_hour_ahead):
    before = state.db_now()
    s = Schedule.objects.create(
        name="new", callback="tests.noop", kind="interval", interval_seconds=600, timezone="UTC"
    )
    after = state.db_now()
    assert before - S <= s.created_at <= after + S  # the database's time, not the host's
    assert s.next_run_at <= after  # due at once, not in an hour
    assert [c.schedule_id for c in state.claim_due(worker="w")] == [s.pk]


def test_an_edit_by_save_is_planned_by_the_database_clock(host_an_hour_ahead):
    s = hourly()
    s.interval_seconds = 60
    s.save()
    now = state.db_now()
    # The first 60 s slot after the database's now, not after the host's (an hour later).
    assert now < s.next_run_at <= now + 61 * S


def test_bulk_create_fills_created_at_and_plans_like_save(host_an_hour_ahead):
    from django.test.utils import CaptureQueriesContext

    from django_durable_schedules.db.clock import _NOW_SQL

    rows = [
        Schedule(name=f"bulk-{i}", callback="tests.noop", kind="interval", interval_seconds=60)
        for i in range(3)
    ]
    with CaptureQueriesContext(connection) as ctx:
        Schedule.objects.bulk_create(rows)
    clock_sql = _NOW_SQL[connection.vendor]
    assert [q["sql"] for q in ctx.captured_queries].count(clock_sql) == 1  # one for the batch
    now = state.db_now()
    for row in Schedule.objects.filter(name__startswith="bulk-"):
        assert now - 5 * S <= row.created_at <= now
        assert row.definition_hash == row.compute_definition_hash()
        assert row.next_run_at <= now  # due at once, as after save()
    assert len(state.claim_due(worker="w")) == 3


def test_a_save_that_changes_no_definition_field_reads_no_clock():
    from django.test.utils import CaptureQueriesContext

    from django_durable_schedules.db.clock import _NOW_SQL

    s = hourly()
    s.payload = {"x": 1}
    with CaptureQueriesContext(connection) as ctx:
        s.save()
    clock_sql = _NOW_SQL[connection.vendor]
    assert [q["sql"] for q in ctx.captured_queries if clock_sql in q["sql"]] == []
    assert any(q["sql"].startswith("UPDATE") for q in ctx.captured_queries)
