"""A batch write sends what changed (``db/batch.py``): an ``UPDATE`` of rows loaded by a
locking read writes only the columns some row changed since (``written_columns``), an
``INSERT`` leaves out a column of NULLs only; what the database then holds is what it
held before this shortcut, on every database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_durable_schedules.db import batch
from django_durable_schedules.db.loaded import read_of
from django_durable_schedules.models import RunAttempt, Schedule
from django_durable_schedules.state.attempt_rules import new_attempt
from django_durable_schedules.state.columns import CLAIM_FIELDS, COMPLETE_FIELDS

from .factories import ScheduleFactory

T0 = datetime(2027, 5, 1, 12, 0, tzinfo=UTC)
pytestmark = pytest.mark.django_db(transaction=True)


def _locked(*rows):
    return list(Schedule.objects.select_for_update().filter(pk__in=[r.pk for r in rows]))


def _update_sql(queries):
    # executemany is logged as "N times: UPDATE ..." (SQLite, MariaDB)
    sqls = [q["sql"].split(" times: ", 1)[-1].lstrip() for q in queries]
    return [sql for sql in sqls if sql.upper().startswith("UPDATE")]


def _set_columns(sql):
    qn = connection.ops.quote_name
    sets = sql.split(" FROM ")[0] if connection.vendor == "postgresql" else sql.split(" WHERE ")[0]
    return {f.attname for f in Schedule._meta.concrete_fields if f"{qn(f.column)} =" in sets}


def test_an_update_writes_only_the_columns_some_row_changed():
    a, b = ScheduleFactory(), ScheduleFactory()
    with transaction.atomic():
        rows = _locked(a, b)
        assert all(read_of(r) is not None for r in rows)
        rows[0].missed_count += 3
        rows[1].next_run_at = T0
        with CaptureQueriesContext(connection) as q:
            batch.update_rows(rows, CLAIM_FIELDS, "default")
    [sql] = _update_sql(q.captured_queries)
    assert _set_columns(sql) == {"missed_count", "next_run_at"}
    assert Schedule.objects.get(pk=a.pk).missed_count == 3
    assert Schedule.objects.get(pk=b.pk).next_run_at == T0


def test_rows_nothing_changed_in_are_not_written_at_all():
    row = ScheduleFactory()
    with transaction.atomic():
        rows = _locked(row)
        rows[0].status = str(rows[0].status)  # an equal text: the same value
        with CaptureQueriesContext(connection) as q:
            batch.update_rows(rows, CLAIM_FIELDS, "default")
    assert _update_sql(q.captured_queries) == []


def test_a_json_value_changed_in_place_is_written():
    row = ScheduleFactory()
    Schedule.objects.filter(pk=row.pk).update(previous_result={"n": 1})
    with transaction.atomic():
        [locked] = _locked(row)
        locked.previous_result["n"] = 2  # the very object read, changed in place
        batch.update_rows([locked], COMPLETE_FIELDS, "default")
    assert Schedule.objects.get(pk=row.pk).previous_result == {"n": 2}


def test_an_equal_value_of_another_type_is_written():
    row = ScheduleFactory()
    with transaction.atomic():
        [locked] = _locked(row)
        locked.missed_count = 0.0  # equal to the 0 read, but not an int
        with CaptureQueriesContext(connection) as q:
            batch.update_rows([locked], CLAIM_FIELDS, "default")
    [sql] = _update_sql(q.captured_queries)
    assert _set_columns(sql) == {"missed_count"}


def test_a_second_write_in_the_same_transaction_writes_every_column():
    # Written once, the row no longer holds what it was read as: a value set back to the
    # one first read must still be written the second time.
    row = ScheduleFactory(next_run_at=T0)
    with transaction.atomic():
        [locked] = _locked(row)
        first = locked.next_run_at
        locked.next_run_at = T0 + timedelta(hours=1)
        batch.update_rows([locked], CLAIM_FIELDS, "default")
        assert read_of(locked) is None
        locked.next_run_at = first
        batch.update_rows([locked], CLAIM_FIELDS, "default")
    assert Schedule.objects.get(pk=row.pk).next_run_at == first


def test_rows_not_all_loaded_from_the_database_write_every_column():
    a = ScheduleFactory()
    with transaction.atomic():
        [one] = _locked(a)
        fields = Schedule._meta.concrete_fields
        built = Schedule(**{f.attname: getattr(one, f.attname) for f in fields})
        assert read_of(built) is None
        with CaptureQueriesContext(connection) as q:
            batch.update_rows([one, built], CLAIM_FIELDS, "default")
    [sql] = _update_sql(q.captured_queries)
    assert _set_columns(sql) == set(CLAIM_FIELDS)


_CHANGES = st.fixed_dictionaries(
    {},
    optional={
        "missed_count": st.integers(0, 10**6),
        "next_run_at": st.none()
        | st.datetimes(
            min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
        ).map(lambda d: d.replace(microsecond=0)),
        "occurrence": st.integers(0, 10**6),
        "degraded_reason": st.text(max_size=20).filter(lambda t: "\x00" not in t),
        "trigger_payload": st.none()
        | st.dictionaries(st.text(max_size=3).filter(lambda t: "\x00" not in t), st.integers()),
    },
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_CHANGES, min_size=2, max_size=2))
def test_after_a_write_the_database_holds_each_rows_values(changes):
    made = [ScheduleFactory.build() for _ in changes]
    Schedule.objects.bulk_create(made)
    try:
        with transaction.atomic():
            rows = sorted(_locked(*made), key=lambda r: str(r.pk))
            for row, change in zip(rows, changes, strict=True):
                for name, value in change.items():
                    setattr(row, name, value)
            batch.update_rows(rows, CLAIM_FIELDS, "default")
        for row in rows:
            stored = Schedule.objects.get(pk=row.pk)
            for name in CLAIM_FIELDS:
                assert getattr(stored, name) == getattr(row, name), name
    finally:
        Schedule.objects.filter(pk__in=[r.pk for r in made]).delete()


def test_an_insert_leaves_out_a_column_of_nulls_only():
    row = ScheduleFactory()
    attempt = new_attempt(row, 1, 1, T0, T0, T0 + timedelta(seconds=30), "w")  # no payload
    with transaction.atomic(), CaptureQueriesContext(connection) as q:
        batch.insert_rows(RunAttempt, [attempt], "default")
    got = RunAttempt.objects.get(pk=attempt.pk)
    assert got.payload is None and got.nominal_for is None and got.worker == "w"
    if connection.vendor == "postgresql":
        [sql] = [x["sql"] for x in q.captured_queries if "INSERT" in x["sql"]]
        assert '"nominal_for"' not in sql and '"payload"' not in sql
