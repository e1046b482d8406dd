"""Every create and every delete of a schedule, by any path, leaves exactly one event
(issue #31, item 4): the state functions with who and from where; ``save()`` of a new row,
``bulk_create()``, ``Model.delete()`` and ``QuerySet.delete()`` from code (source ``code``,
no actor); raw SQL by the database's trigger (source ``database``). A deleted schedule's
events stay readable by its id and name (db/audit.py, state/code_events.py)."""

from __future__ import annotations

import sqlite3
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.db import IntegrityError, connection, transaction

from django_durable_schedules import state
from django_durable_schedules.models import Schedule, ScheduleEvent

pytestmark = pytest.mark.django_db(transaction=True)

TABLE = Schedule._meta.db_table


def q(name: str) -> str:
    return connection.ops.quote_name(name)


def new(name: str = "a", **fields) -> Schedule:
    return Schedule(
        name=name, callback="tests.noop", kind="interval", interval_seconds=60, **fields
    )


def trail(pk=None, name=None) -> list[tuple[str, str, object]]:
    """(action, source, actor id) of the events of schedule ``pk`` (or named ``name``)."""
    events = ScheduleEvent.objects.order_by("at", "action")
    events = events.filter(schedule_id=pk) if pk is not None else events.filter(schedule_name=name)
    return list(events.values_list("action", "source", "actor_id"))


def db_id(pk: uuid.UUID):
    return Schedule._meta.pk.get_db_prep_value(pk, connection)


def raw_insert_copy(of: Schedule, name: str) -> uuid.UUID:
    """Insert a copy of ``of`` named ``name`` with raw SQL; its new id."""
    columns = [f.column for f in Schedule._meta.concrete_fields]
    selected = ", ".join("%s" if c in ("id", "name") else q(c) for c in columns)
    pk = uuid.uuid4()
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {q(TABLE)} ({', '.join(q(c) for c in columns)}) "
            f"SELECT {selected} FROM {q(TABLE)} WHERE {q('id')} = %s",
            [db_id(pk), name, db_id(of.pk)],
        )
    return pk


def raw_delete(*pks: uuid.UUID) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {q(TABLE)} WHERE {q('id')} IN ({', '.join('%s' for _ in pks)})",
            [db_id(pk) for pk in pks],
        )


def test_orm_create_leaves_one_code_event():
    s = Schedule.objects.create(
        name="a", callback="tests.noop", kind="interval", interval_seconds=60
    )
    assert trail(s.pk) == [("created", "code", None)]
    event = ScheduleEvent.objects.get(schedule_id=s.pk)
    assert event.schedule_name == "a" and event.at == s.created_at and event.actor_repr == ""


def test_save_of_a_new_row_leaves_one_code_event_and_an_edit_by_save_none():
    s = new()
    s.save()
    s.max_runs = 5
    s.save()  # an edit: not a create
    assert trail(s.pk) == [("created", "code", None)]


def test_bulk_create_leaves_one_code_event_per_row():
    rows = Schedule.objects.bulk_create([new(f"b{i}") for i in range(3)])
    for row in rows:
        assert trail(row.pk) == [("created", "code", None)]


def test_bulk_create_ignoring_conflicts_is_recorded_by_the_database_for_the_rows_inserted():
    Schedule.objects.create(name="b0", callback="tests.noop", kind="interval", interval_seconds=60)
    Schedule.objects.bulk_create([new("b0"), new("b1")], ignore_conflicts=True)
    assert trail(name="b0") == [("created", "code", None)]  # not inserted again: no event
    assert trail(name="b1") == [("created", "database", None)]


def test_instance_delete_leaves_one_code_event_readable_after_the_row_is_gone():
    s = new()
    s.save()
    pk = s.pk
    s.delete()
    assert not Schedule.objects.filter(pk=pk).exists()
    assert trail(pk) == [("created", "code", None), ("deleted", "code", None)]
    assert ScheduleEvent.objects.get(schedule_id=pk, action="deleted").schedule_name == "a"


def test_deleting_a_row_already_gone_records_nothing():
    s = new()
    s.save()
    pk, stale = s.pk, Schedule.objects.get(pk=s.pk)
    s.delete()
    stale.delete()
    assert trail(pk) == [("created", "code", None), ("deleted", "code", None)]


def test_queryset_delete_leaves_one_code_event_per_row_in_bounded_queries(
    django_assert_max_num_queries,
):
    n = 300
    Schedule.objects.bulk_create([new(f"q{i:03}") for i in range(n)])
    kept = Schedule.objects.create(
        name="kept", callback="tests.noop", kind="interval", interval_seconds=60
    )
    # The read (locked), the links, the occurrence leases (overlap_policy allow: a
    # cascade Django 5.2 collects with one statement more), one DELETE per 100 rows, the
    # mute, the clock, the events: no statement per row.
    with django_assert_max_num_queries(21):
        total, counts = Schedule.objects.filter(name__startswith="q").delete()
    assert counts[Schedule._meta.label] == n
    deleted = ScheduleEvent.objects.filter(action="deleted")
    assert deleted.count() == n and set(deleted.values_list("source", flat=True)) == {"code"}
    assert deleted.values("schedule_id").distinct().count() == n
    assert trail(kept.pk) == [("created", "code", None)]


def test_queryset_delete_refuses_what_django_refuses():
    Schedule.objects.create(name="a", callback="tests.noop", kind="interval", interval_seconds=60)
    with pytest.raises(TypeError):
        Schedule.objects.all()[:1].delete()
    with pytest.raises(TypeError):
        Schedule.objects.values("name").delete()
    assert Schedule.objects.count() == 1


def test_raw_sql_insert_is_recorded_by_the_database():
    s = Schedule.objects.create(
        name="a", callback="tests.noop", kind="interval", interval_seconds=60
    )
    pk = raw_insert_copy(s, "raw")
    assert Schedule.objects.get(pk=pk).name == "raw"
    assert trail(pk) == [("created", "database", None)]
    assert ScheduleEvent.objects.get(schedule_id=pk).schedule_name == "raw"


def test_raw_sql_delete_is_recorded_by_the_database_one_event_per_row():
    a = Schedule.objects.create(
        name="a", callback="tests.noop", kind="interval", interval_seconds=60
    )
    b = Schedule.objects.create(
        name="b", callback="tests.noop", kind="interval", interval_seconds=60
    )
    raw_delete(a.pk, b.pk)
    assert trail(a.pk) == [("created", "code", None), ("deleted", "database", None)]
    assert trail(b.pk) == [("created", "code", None), ("deleted", "database", None)]
    event = ScheduleEvent.objects.get(schedule_id=a.pk, action="deleted")
    assert event.schedule_name == "a" and event.changes == {} and event.at is not None


def test_state_create_and_delete_leave_exactly_one_event_each_with_who():
    user = get_user_model().objects.create_user("ops", password="x")
    s = state.create_schedule(
        name="a",
        callback="tests.noop",
        kind="interval",
        interval_seconds=60,
        actor=user,
        source="api",
    )
    state.delete_schedule(s.pk, actor=user, source="admin")
    assert trail(s.pk) == [("created", "api", user.pk), ("deleted", "admin", user.pk)]


def test_a_raw_statement_after_an_orm_write_in_the_same_transaction_is_recorded():
    with transaction.atomic():
        s = Schedule.objects.create(
            name="a", callback="tests.noop", kind="interval", interval_seconds=60
        )
        pk, code_pk = raw_insert_copy(s, "raw"), s.pk
        s.delete()
        raw_delete(pk)
    assert trail(code_pk) == [("created", "code", None), ("deleted", "code", None)]
    assert trail(pk) == [("created", "database", None), ("deleted", "database", None)]


def test_a_refused_orm_create_records_nothing_and_leaves_the_trigger_on():
    s = Schedule.objects.create(
        name="a", callback="tests.noop", kind="interval", interval_seconds=60
    )
    with pytest.raises(IntegrityError), transaction.atomic():
        Schedule.objects.create(
            name="a", callback="tests.noop", kind="interval", interval_seconds=60
        )
    assert ScheduleEvent.objects.count() == 1
    pk = raw_insert_copy(s, "raw")  # the mute did not outlive the refused insert
    assert trail(pk) == [("created", "database", None)]


def test_a_rolled_back_create_leaves_no_event():
    with pytest.raises(RuntimeError), transaction.atomic():
        Schedule.objects.create(
            name="a", callback="tests.noop", kind="interval", interval_seconds=60
        )
        raise RuntimeError
    assert ScheduleEvent.objects.count() == 0


def test_a_client_without_this_app_is_recorded_on_sqlite():
    """The ``sqlite3`` shell (``dbshell``) defines none of this app's SQL functions: its
    insert and delete still work, and are recorded."""
    if connection.vendor != "sqlite":
        pytest.skip("the sqlite3 shell")
    s = Schedule.objects.create(
        name="a", callback="tests.noop", kind="interval", interval_seconds=60
    )
    columns = [f.column for f in Schedule._meta.concrete_fields]
    selected = ", ".join("?" if c in ("id", "name") else f'"{c}"' for c in columns)
    quoted = ", ".join(f'"{c}"' for c in columns)
    pk = uuid.uuid4()
    shell = sqlite3.connect(connection.settings_dict["NAME"])
    try:
        shell.execute(
            f'INSERT INTO "{TABLE}" ({quoted}) SELECT {selected} FROM "{TABLE}" WHERE id = ?',
            [pk.hex, "shell", s.pk.hex],
        )
        shell.execute(f'DELETE FROM "{TABLE}" WHERE id = ?', [s.pk.hex])
        shell.commit()
    finally:
        shell.close()
    assert trail(pk) == [("created", "database", None)]
    assert trail(s.pk) == [("created", "code", None), ("deleted", "database", None)]


def test_a_sqlite_rebuild_of_the_event_table_needs_the_audit_triggers_dropped_first():
    """db/rebuilds.py: SQLite refuses to rename the rebuilt event table while the audit
    triggers name it; ``drop_audit`` first and ``reinstall`` last make it work, and the
    triggers record again after it."""
    if connection.vendor != "sqlite":
        pytest.skip("only SQLite rebuilds a table to alter it")
    from django.db import OperationalError, models

    from django_durable_schedules.db import rebuilds

    old = ScheduleEvent._meta.get_field("actor_repr")
    wider = models.CharField(max_length=300, blank=True, default="")
    wider.set_attributes_from_name("actor_repr")
    wider.model = ScheduleEvent
    with pytest.raises(OperationalError, match="error in trigger"):
        with connection.schema_editor() as editor:
            editor.alter_field(ScheduleEvent, old, wider)
    for new_field, old_field in ((wider, old), (old, wider)):
        with connection.schema_editor() as editor:
            rebuilds.drop_audit(None, editor)
            editor.alter_field(ScheduleEvent, old_field, new_field)
            rebuilds.reinstall(None, editor)
    s = Schedule.objects.create(
        name="a", callback="tests.noop", kind="interval", interval_seconds=60
    )
    pk = raw_insert_copy(s, "raw")
    assert trail(pk) == [("created", "database", None)]
