"""A callback that leaves a transaction open cannot leak it into later runs (issue 11, 7).

With ``CONN_MAX_AGE=None`` (what the docs suggest for workers) a pool thread keeps its
connection from one callback to the next. A callback that enters ``transaction.atomic()``
without leaving it, or turns autocommit off and never commits, used to leave that
transaction open, and every later callback on the thread wrote into it: ``succeeded``
receipts, nothing committed. So did a raw ``BEGIN`` (issue 24, 17), which Django does not
see at all (it still says autocommit). ``runner.execute`` now checks every connection the
thread opened after each callback (Django's state, then the driver's or the server's),
rolls back (closes) one left in a transaction, and turns a ``succeeded`` outcome into
``failed`` (``TransactionLeftOpen``, retried).

The process tests run a real worker with one callback thread; the others call
``runner.execute`` in a thread of their own, as the worker's pool does.
"""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone as dj_timezone

from django_durable_schedules.db import open_transactions
from django_durable_schedules.models import RunReceipt, Schedule
from django_durable_schedules.state import Claim, Outcome
from django_durable_schedules.worker.execution import runner
from tests.testapp.models import SideEffect

from .conftest import wait_until
from .test_worker_process import assert_ledger_consistent, log, wait_exit, wait_started

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]

# Each leaves its writes in a transaction that never commits: an atomic block never exited,
# autocommit turned off, and a raw BEGIN that Django does not know about (issue 24, 17).
LEAKERS = ["tests.txleak.atomic", "tests.txleak.autocommit_off", "tests.txleak.raw_begin"]

LEAK_MESSAGE = "the callback left a transaction open on database 'default'; it was rolled back"


def _once(name: str, callback: str, run_at) -> Schedule:
    return Schedule.objects.create(
        name=name, callback=callback, kind="once", run_at=run_at, timezone="UTC"
    )


@pytest.mark.parametrize("leaker", LEAKERS)
def test_a_transaction_left_open_does_not_swallow_later_runs(start_worker, leaker):
    """CONN_MAX_AGE=None, one callback thread: the leaking run comes first, ten writing
    runs follow on the same thread and connection. Every ``succeeded`` receipt has its
    committed row; the leaking run is ``failed`` (TransactionLeftOpen, its write rolled
    back)."""
    now = dj_timezone.now()
    leak = _once("txleak-first", leaker, now - timedelta(minutes=5))  # claimed first
    writers = [_once(f"txleak-{i:02d}", "tests.record", now) for i in range(10)]
    worker = start_worker(
        "--worker-id",
        "txleak",
        "--concurrency",
        "1",
        "--max-idle",
        "0.5",
        env={"DDS_TEST_CONN_MAX_AGE": "none"},
    )
    wait_started("txleak")
    ids = [s.pk for s in writers]
    wait_until(
        lambda: (
            RunReceipt.objects.filter(schedule_id__in=ids).count() == len(ids)
            and RunReceipt.objects.filter(schedule=leak).exists()
        ),
        20,
        message=f"receipts of the leaking run and the ten writers\n{log(worker)}",
    )
    worker.signal()
    assert wait_exit(worker, 20) == 0, log(worker)

    receipts = list(RunReceipt.objects.select_related("attempt").order_by("finished_at"))
    first = next(r for r in receipts if r.schedule_id == leak.pk)
    assert (first.status, first.error_type) == ("failed", "TransactionLeftOpen"), log(worker)
    assert LEAK_MESSAGE in first.error_message
    assert not SideEffect.objects.filter(schedule_name="txleak-first").exists()
    assert "left a transaction open" in worker.output()  # and a warning says so

    committed = set(SideEffect.objects.values_list("schedule_name", "occurrence", "attempt"))
    succeeded = [r for r in receipts if r.status == "succeeded"]
    assert {r.schedule_id for r in succeeded} == set(ids), [
        (r.schedule_id, r.status, r.error_type) for r in receipts
    ]
    for r in succeeded:
        a = r.attempt
        assert (a.schedule_name, a.occurrence, a.attempt) in committed, (
            f"{a.schedule_name} succeeded but its row was never committed"
        )
    assert_ledger_consistent()


# ---------------------------------------------------------------------------------------
# runner.execute in a thread of its own (the worker's pool threads do the same)
# ---------------------------------------------------------------------------------------


def _claim(callback: str, name: str) -> Claim:
    now = dj_timezone.now()
    return Claim(
        attempt_id=uuid.uuid4(),
        schedule_id=uuid.uuid4(),
        schedule_name=name,
        callback=callback,
        occurrence=1,
        attempt=1,
        scheduled_for=now.replace(microsecond=0),
        claimed_at=now,
        lease_token=uuid.uuid4(),
        lease_expires_at=now + timedelta(seconds=30),
        idempotency_key=f"{name}:1",
        payload={},
    )


def _in_one_thread(*callbacks: str) -> tuple[list[Outcome], list[bool]]:
    """Run ``runner.execute`` for each callback in turn in one new thread (one connection,
    kept open as with CONN_MAX_AGE=None); returns the outcomes and, after each run,
    whether that thread's connection was still inside a transaction."""
    outcomes: list[Outcome] = []
    open_after: list[bool] = []
    failure: list[BaseException] = []

    def work() -> None:
        conn = connections["default"]
        # Keep this thread's connection (a copy: the settings dict is shared by threads).
        conn.settings_dict = dict(conn.settings_dict, CONN_MAX_AGE=None)
        try:
            for i, callback in enumerate(callbacks):
                outcomes.append(runner.execute(_claim(callback, f"thread-{i}")))
                open_after.append(
                    conn.in_atomic_block
                    or (conn.connection is not None and not conn.autocommit)
                    or open_transactions.server_in_transaction(conn) is not False
                )
        except BaseException as exc:  # reported by the test
            failure.append(exc)
        finally:
            conn.close()

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(60)
    assert not thread.is_alive() and not failure, failure
    return outcomes, open_after


@pytest.mark.parametrize("leaker", LEAKERS)
def test_execute_rolls_back_a_leaked_transaction_and_fails_the_run(leaker):
    outcomes, open_after = _in_one_thread(leaker, "tests.record", "tests.record")
    assert [o.status for o in outcomes] == ["failed", "succeeded", "succeeded"]
    assert open_after == [False, False, False]
    leaked = outcomes[0]
    assert leaked.error_type == "TransactionLeftOpen"
    assert leaked.error_message == LEAK_MESSAGE
    assert not leaked.terminal  # retried like any failure
    # The leaked write was rolled back; the two later ones committed.
    assert sorted(SideEffect.objects.values_list("schedule_name", flat=True)) == [
        "thread-1",
        "thread-2",
    ]


def test_a_failure_inside_a_leaked_transaction_stays_failed_and_says_so():
    outcomes, open_after = _in_one_thread("tests.txleak.atomic_then_fail", "tests.record")
    failed, after = outcomes
    assert (failed.status, failed.error_type) == ("failed", "RuntimeError")
    assert failed.error_message.startswith("failed inside an open transaction")
    assert failed.error_message.endswith(f" ({LEAK_MESSAGE})")
    assert after.status == "succeeded" and open_after == [False, False]
    assert list(SideEffect.objects.values_list("schedule_name", flat=True)) == ["thread-1"]


def test_a_clean_callback_keeps_its_outcome_and_connection():
    """Nothing to discard: a callback that commits keeps ``succeeded`` and the thread keeps
    its persistent connection."""
    kept: list[object] = []

    def work() -> None:
        conn = connections["default"]
        conn.settings_dict = dict(conn.settings_dict, CONN_MAX_AGE=None)
        try:
            kept.append(runner.execute(_claim("tests.record", "clean-0")))
            kept.append(conn.connection)
            kept.append(runner.execute(_claim("tests.record", "clean-1")))
            kept.append(conn.connection)
        finally:
            conn.close()

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(60)
    first, raw_1, second, raw_2 = kept
    assert isinstance(first, Outcome) and isinstance(second, Outcome)
    assert (first.status, second.status) == ("succeeded", "succeeded")
    assert raw_1 is not None and raw_1 is raw_2
    assert SideEffect.objects.count() == 2


def test_server_in_transaction_sees_a_raw_begin_and_roll_back_ends_it():
    """The check behind the raw-``BEGIN`` detection, on this database: a closed connection
    is not in a transaction; after a raw ``BEGIN`` and a write Django still says autocommit
    but the check says True; ``roll_back`` ends it (the write is gone) and the check says
    False again."""
    seen: list[object] = []

    def work() -> None:
        conn = connections["default"]
        try:
            seen.append(open_transactions.server_in_transaction(conn))  # not open yet
            conn.ensure_connection()
            seen.append(open_transactions.server_in_transaction(conn))
            with conn.cursor() as cursor:
                cursor.execute("BEGIN")
            SideEffect.objects.create(schedule_name="raw", occurrence=1, attempt=1, pid=1)
            seen.append((conn.autocommit, open_transactions.server_in_transaction(conn)))
            open_transactions.roll_back(conn)
            seen.append(open_transactions.server_in_transaction(conn))
        finally:
            conn.close()

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(60)
    assert seen == [False, False, (True, True), False]
    assert not SideEffect.objects.filter(schedule_name="raw").exists()
