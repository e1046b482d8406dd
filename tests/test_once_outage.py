"""``run_scheduler --once`` and database errors: an error that waiting cannot cure (a
missing privilege, table or column) ends the pass at once, any other after
``ONCE_GIVE_UP_SECONDS``; a long-running worker keeps retrying. (The real process as a
role without grants: tests/test_two_roles.py.)"""

from __future__ import annotations

import threading
import time

import pytest
from django.db import DatabaseError, OperationalError, connection, connections

from django_durable_schedules import state
from django_durable_schedules.worker import Worker, WorkerOptions, outage
from django_durable_schedules.worker.outage import GaveUp, Outage, permanent

pytestmark = pytest.mark.django_db(transaction=True)


def _error_of(sql: str) -> DatabaseError:
    with pytest.raises(DatabaseError) as caught, connection.cursor() as cursor:
        cursor.execute(sql)
    return caught.value


def test_a_missing_table_or_column_is_permanent_on_every_backend():
    assert permanent(_error_of("SELECT * FROM dds_no_such_table"))
    assert permanent(_error_of("SELECT dds_no_such_column FROM durable_schedules_schedule"))


@pytest.mark.parametrize(
    "exc",
    [
        OperationalError("server closed the connection unexpectedly"),
        OperationalError(2006, "MySQL server has gone away"),
        OperationalError(1205, "Lock wait timeout exceeded; try restarting transaction"),
        OperationalError("database is locked"),
        DatabaseError(),
    ],
)
@pytest.mark.vendor_independent  # a pure classification of exceptions
def test_an_error_waiting_may_cure_is_not_permanent(exc):
    assert not permanent(exc)


@pytest.mark.vendor_independent  # a pure classification of exceptions (each backend's real errors: test_a_missing_table_or_column_is_permanent_on_every_backend)
def test_driver_codes_of_refusals_are_permanent():
    class PgError(Exception):
        def __init__(self, sqlstate):
            self.sqlstate = sqlstate

    for code in ("42501", "42P01", "28P01", "3D000"):
        wrapped = OperationalError("refused")
        wrapped.__cause__ = PgError(code)
        assert permanent(wrapped), code
    for code in ("40001", "40P01", "55P03", "57P01", "08006"):  # retry, lock, shutdown, link
        wrapped = OperationalError("transient")
        wrapped.__cause__ = PgError(code)
        assert not permanent(wrapped), code
    assert permanent(OperationalError(1142, "SELECT command denied to user"))
    assert permanent(OperationalError(1146, "Table 'x.y' doesn't exist"))
    assert permanent(OperationalError("attempt to write a readonly database"))


def test_give_up_after_a_permanent_error_at_once_else_when_the_outage_lasts(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(outage.time, "monotonic", lambda: clock[0])
    o = Outage("w")
    transient = OperationalError("server closed the connection unexpectedly")
    o.failed(transient, "worker %s")
    assert o.give_up(transient) is None
    clock[0] += outage.ONCE_GIVE_UP_SECONDS - 0.1
    o.failed(transient, "worker %s")
    assert o.give_up(transient) is None
    clock[0] += 0.1
    gave_up = o.give_up(transient)
    assert isinstance(gave_up, GaveUp) and "lasted 30s" in str(gave_up)
    assert "server closed the connection" in str(gave_up)
    o.ended()
    refused = OperationalError(1142, "SELECT command denied to user 'app'")
    o.failed(refused, "worker %s")
    gave_up = o.give_up(refused)
    assert gave_up is not None and "waiting will not change that" in str(gave_up)
    assert "runtime_grants" in str(gave_up)


def _failing_sync(calls: list[float]):
    def sync_declared(**kwargs):
        calls.append(time.monotonic())
        raise OperationalError("server closed the connection unexpectedly")

    return sync_declared


def test_a_once_worker_gives_up_on_an_error_that_lasts(monkeypatch):
    calls: list[float] = []
    monkeypatch.setattr(state, "sync_declared", _failing_sync(calls))
    monkeypatch.setattr(outage, "ONCE_GIVE_UP_SECONDS", 1.0)
    with pytest.raises(GaveUp, match="--once pass, the database error lasted 1s"):
        Worker(WorkerOptions(worker_id="w-once", once=True)).run()
    assert len(calls) >= 3  # it did retry first
    assert calls[-1] - calls[0] >= 1.0


def test_a_long_running_worker_keeps_retrying(monkeypatch):
    calls: list[float] = []
    monkeypatch.setattr(state, "sync_declared", _failing_sync(calls))
    monkeypatch.setattr(outage, "ONCE_GIVE_UP_SECONDS", 0.1)
    worker = Worker(WorkerOptions(worker_id="w-long", once=False))
    result: list[object] = []

    def run() -> None:
        try:
            result.append(worker.run())
        finally:
            connections.close_all()  # this thread's

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while (len(calls) < 4 or calls[-1] - calls[0] < 0.5) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert thread.is_alive() and len(calls) >= 4  # past ONCE_GIVE_UP_SECONDS, still trying
    worker.request_stop()
    thread.join(30)
    assert result == [0]
