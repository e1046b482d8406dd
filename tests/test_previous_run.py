"""The previous run (issue #30, item 2): ``ctx.previous`` is the last successful run of the
schedule (occurrence, nominal instant, finish, bounded result), None before the first
success, read with the claim's row at no statement of its own.

Driven with an injected clock (``state.claim_due`` / ``state.complete``), then with a real
``run_scheduler`` process. The rule: "last" is by nominal instant (docs/concepts.md, "The
previous run"): a failure, a skip, a backfill or a re-run of an older slot never moves it.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_durable_schedules import Previous, state
from django_durable_schedules.models import RunAttempt, RunReceipt, Schedule
from django_durable_schedules.projection import is_storable
from django_durable_schedules.state.previous_rules import note_success, previous_of
from django_durable_schedules.state.records import Receipt
from django_durable_schedules.worker.execution.runner import context_for, execute

from .conftest import wait_until
from .factories import T0

pytestmark = pytest.mark.django_db(transaction=True)

S = timedelta(seconds=1)
M = 60 * S


def make(name: str, **kw) -> Schedule:
    kw.setdefault("callback", "tests.previous")
    s = Schedule(
        name=name, kind="interval", interval_seconds=60, timezone="UTC", created_at=T0, **kw
    )
    s.full_clean()
    s.save()
    return s


def claim(now):
    return state.claim_due(worker="w", now=now, lease_seconds=60)


def run(now, finish=None):
    """Claim at ``now``, run in this process, complete at ``finish`` (default ``now``)."""
    claims = claim(now)
    state.complete([execute(c) for c in claims], now=finish or now)
    return claims


def test_the_first_run_sees_none_and_the_next_sees_the_success():
    make("first")
    [c1] = claim(T0 + M)
    assert c1.previous is None and context_for(c1).previous is None
    [receipt] = state.complete([execute(c1)], now=T0 + M + 7 * S).receipts
    assert receipt.status == "succeeded"

    [c2] = claim(T0 + 2 * M)
    expected = Previous(
        occurrence=c1.occurrence,
        scheduled_for=c1.scheduled_for,
        finished_at=receipt.finished_at,
        result={"total": 1, "after": None, "since": None},
    )
    assert c2.previous == expected == context_for(c2).previous
    assert receipt.finished_at == T0 + M + 7 * S
    assert c2.previous.scheduled_for.utcoffset() == timedelta(0)
    [r2] = state.complete([execute(c2)], now=T0 + 2 * M).receipts
    assert r2.result == {
        "total": 2,
        "after": c1.occurrence,
        "since": c1.scheduled_for.isoformat(),
    }


def test_a_failure_and_a_skip_in_between_leave_it_as_it_was():
    make("gaps", max_attempts=1, payload={"skip": [2], "fail": [3]})
    [c1] = run(T0 + M)
    [c2] = run(T0 + 2 * M)
    [c3] = run(T0 + 3 * M)
    statuses = dict(
        RunReceipt.objects.filter(attempt__occurrence__in=[1, 2, 3]).values_list(
            "occurrence", "status"
        )
    )
    assert statuses == {1: "succeeded", 2: "skipped", 3: "failed"}
    assert c2.previous.occurrence == c3.previous.occurrence == 1
    [c4] = claim(T0 + 4 * M)
    assert c4.previous.occurrence == 1
    assert c4.previous.scheduled_for == c1.scheduled_for
    assert c4.previous.result["total"] == 1
    state.complete([execute(c4)], now=T0 + 4 * M)
    [c5] = claim(T0 + 5 * M)
    assert (c5.previous.occurrence, c5.previous.result["total"]) == (4, 2)


def test_a_retried_occurrence_is_the_previous_run_with_its_slot_and_its_last_finish():
    make("retried", max_attempts=3, backoff_base_seconds=1, payload={"fail": [2]})
    [c1] = run(T0 + M)
    [c2] = run(T0 + 2 * M)  # attempt 1 fails
    assert c2.attempt == 1 and c2.previous.occurrence == 1
    [retry] = claim(T0 + 2 * M + 10 * S)
    assert (retry.occurrence, retry.attempt) == (2, 2)
    assert retry.previous.occurrence == 1  # the failure moved nothing
    state.complete([execute(retry)], now=T0 + 2 * M + 12 * S)
    [c3] = claim(T0 + 3 * M)
    assert c3.previous.occurrence == 2
    assert c3.previous.scheduled_for == c2.scheduled_for == retry.scheduled_for  # nominal
    assert c3.previous.finished_at == T0 + 2 * M + 12 * S
    assert c3.previous.result["total"] == 2


def test_a_backfill_or_a_rerun_of_an_older_slot_never_moves_it_back():
    s = make("older")
    for k in (1, 2, 3):
        run(T0 + k * M)
    s.refresh_from_db()
    latest = (s.previous_occurrence, s.previous_scheduled_for, s.previous_finished_at)
    assert latest[0] == 3

    # A backfill of slots older than the latest success: run, succeeded, nothing moves.
    state.request_backfill(s.pk, T0, T0 + 2 * M, include_succeeded=True, now=T0 + 3 * M)
    now = T0 + 3 * M + S
    ran = 0
    while claims := [c for c in run(now) if c.origin == "backfill"]:
        ran += len(claims)
        now += S
    assert ran >= 1
    assert RunReceipt.objects.filter(attempt__origin="backfill", status="succeeded").count()
    s.refresh_from_db()
    assert (s.previous_occurrence, s.previous_scheduled_for, s.previous_finished_at) == latest

    # A forced re-run of occurrence 1 succeeds: requested after the latest slot, but its
    # nominal instant is occurrence 1's, older: nothing moves.
    state.rerun(s.pk, 1, force=True, now=now)
    [rerun] = run(now + S)
    assert rerun.origin == "rerun" and rerun.occurrence == 1
    s.refresh_from_db()
    assert (s.previous_occurrence, s.previous_scheduled_for, s.previous_finished_at) == latest

    # A forced re-run of the latest occurrence: the same instant, the later finish and result.
    state.rerun(s.pk, 3, force=True, now=now + 2 * S)
    [again] = run(now + 3 * S, finish=now + 4 * S)
    assert again.origin == "rerun" and again.occurrence == 3
    s.refresh_from_db()
    assert (s.previous_occurrence, s.previous_scheduled_for) == latest[:2]
    assert s.previous_finished_at == now + 4 * S
    assert s.previous_result == RunReceipt.objects.get(attempt_id=again.attempt_id).result


def test_a_backfill_success_is_the_previous_run_when_nothing_later_succeeded():
    s = make("backfill-first", max_attempts=1, payload={"fail": [1]})
    [live] = run(T0 + M)  # fails: nothing succeeded yet
    now = T0 + 2 * M - S  # the grid's next slot is not due yet
    state.request_backfill(s.pk, T0 + M, T0 + M + S, now=now)
    [c] = run(now)
    assert c.origin == "backfill" and c.previous is None
    assert c.scheduled_for == live.scheduled_for
    s.refresh_from_db()
    assert s.previous_occurrence == c.occurrence and s.previous_scheduled_for == c.scheduled_for


def test_the_result_is_the_receipts_bounded_result(settings):
    settings.DURABLE_SCHEDULES = {"RESULT_MAX_BYTES": 256}
    make("big", payload={"rows": 1})
    [c1] = claim(T0 + M)
    outcome = execute(c1)
    huge = {"total": 1, "blob": "x" * 10_000}
    from dataclasses import replace

    [receipt] = state.complete([replace(outcome, result=huge)], now=T0 + M).receipts
    assert receipt.result != huge and is_storable(receipt.result, 256)
    [c2] = claim(T0 + 2 * M)
    assert c2.previous.result == receipt.result  # never more than the receipt keeps


# ---------------------------------------------------------------------------------------
# Values written behind save(): never a crash, never more than a receipt holds
# ---------------------------------------------------------------------------------------


def test_a_garbage_previous_result_written_behind_save_is_bounded_and_the_row_runs(settings):
    settings.DURABLE_SCHEDULES = {"RESULT_MAX_BYTES": 512}
    s = make("garbage-result")
    neighbour = make("neighbour")
    Schedule.objects.filter(pk=s.pk).update(
        previous_occurrence=7,
        previous_scheduled_for=T0,
        previous_finished_at=T0,
        previous_result={"total": "not a number", "junk": ["y" * 5000] * 4},
    )
    claims = {c.schedule_name: c for c in claim(T0 + M)}
    assert set(claims) == {"garbage-result", "neighbour"}
    prev = claims["garbage-result"].previous
    assert prev.occurrence == 7 and prev.scheduled_for == T0
    assert is_storable(prev.result, 512)
    assert prev.result.get("truncated") is True
    report = state.complete([execute(c) for c in claims.values()], now=T0 + M)
    # The callback added to a total that is no number: its failure is its own, receipted.
    assert {r.status for r in report.receipts} <= {"succeeded", "failed"}
    assert neighbour.pk in {r.schedule_id for r in report.receipts}


@pytest.mark.parametrize(
    "values",
    [
        {"previous_occurrence": 3},  # no instants
        {"previous_occurrence": 3, "previous_scheduled_for": T0},  # no finish
        {"previous_scheduled_for": T0, "previous_finished_at": T0, "previous_result": [1]},
    ],
    ids=["occurrence-only", "no-finish", "no-occurrence"],
)
def test_an_incomplete_previous_written_behind_save_is_none_and_the_row_runs(values):
    s = make("incomplete")
    Schedule.objects.filter(pk=s.pk).update(**values)
    [c] = claim(T0 + M)
    assert c.previous is None
    state.complete([execute(c)], now=T0 + M)
    s.refresh_from_db()
    assert s.previous_occurrence == 1 and s.previous_scheduled_for == c.scheduled_for


@pytest.mark.skipif("connection.vendor != 'sqlite'", reason="SQLite stores any value anywhere")
@pytest.mark.parametrize(
    "sql",
    [
        "previous_occurrence = 'abc'",
        "previous_occurrence = 1099511627776",
        "previous_scheduled_for = 'garbage'",
        "previous_finished_at = 'garbage'",
    ],
)
def test_a_previous_column_of_another_type_is_none_or_contained_on_sqlite(sql):
    s = make("sqlite-garbage")
    neighbour = make("sqlite-neighbour")
    Schedule.objects.filter(pk=s.pk).update(previous_scheduled_for=T0, previous_finished_at=T0)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {Schedule._meta.db_table} SET {sql} WHERE id = %s", [s.pk.hex])
    claims = {c.schedule_name: c for c in claim(T0 + M)}
    assert set(claims) == {"sqlite-garbage", "sqlite-neighbour"}
    assert claims["sqlite-garbage"].previous is None
    state.complete([execute(c) for c in claims.values()], now=T0 + M)
    for row in (s, neighbour):
        assert RunReceipt.objects.filter(schedule_id=row.pk, status="succeeded").exists()
    # The success replaced the bad values with its own.
    s.refresh_from_db()
    assert s.previous_occurrence == 1
    assert s.previous_scheduled_for == claims["sqlite-garbage"].scheduled_for


@pytest.mark.skipif("connection.vendor != 'postgresql'", reason="PostgreSQL's -infinity")
def test_an_infinite_previous_instant_on_postgresql_is_contained_to_its_row():
    s = make("pg-infinity")
    neighbour = make("pg-neighbour")
    Schedule.objects.filter(pk=s.pk).update(previous_occurrence=1, previous_finished_at=T0)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Schedule._meta.db_table} SET previous_scheduled_for = '-infinity' "
            "WHERE id = %s",
            [s.pk],
        )
    claims = {c.schedule_name: c for c in claim(T0 + M)}
    assert "pg-neighbour" in claims
    state.complete([execute(c) for c in claims.values()], now=T0 + M)
    assert RunReceipt.objects.filter(schedule_id=neighbour.pk, status="succeeded").exists()


# ---------------------------------------------------------------------------------------
# The rules themselves, for any value (Hypothesis)
# ---------------------------------------------------------------------------------------

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)
INSTANTS = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
)
ANYTHING = (
    st.none()
    | st.integers()
    | st.text()
    | st.datetimes()  # naive
    | INSTANTS
    | st.floats()
    | st.booleans()
)


@pytest.mark.vendor_independent  # pure rules on unsaved rows
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    occurrence=ANYTHING | st.integers(min_value=0, max_value=2**40),
    scheduled_for=ANYTHING,
    finished_at=ANYTHING,
    result=JSON | ANYTHING,
)
def test_previous_of_never_raises_and_hands_on_only_storable_results(
    occurrence, scheduled_for, finished_at, result
):
    row = Schedule(
        previous_occurrence=occurrence,
        previous_scheduled_for=scheduled_for,
        previous_finished_at=finished_at,
        previous_result=result,
    )
    prev = previous_of(row)
    if prev is not None:
        assert type(prev.occurrence) is int and 0 <= prev.occurrence < 2**31
        assert prev.scheduled_for.utcoffset() is not None
        assert prev.finished_at.utcoffset() is not None
        # what a receipt could store: plain JSON (no NaN) within RESULT_MAX_BYTES
        encoded = json.dumps(prev.result, ensure_ascii=False, allow_nan=False)
        assert len(encoded.encode("utf-8")) <= 8192


@pytest.mark.vendor_independent  # pure rules on unsaved rows
@settings(max_examples=200, deadline=None)
@given(
    runs=st.lists(
        st.tuples(
            INSTANTS,
            st.sampled_from(["succeeded", "enqueued", "skipped", "failed", "replaced"]),
            st.booleans(),  # instant known (False: a re-run whose first attempt was pruned)
        ),
        max_size=12,
    ),
    held=ANYTHING,
)
def test_note_success_keeps_the_success_of_the_latest_nominal_instant(runs, held):
    row = Schedule(previous_scheduled_for=held)
    succeeded = []
    for n, (instant, status, known) in enumerate(runs, start=1):
        receipt = Receipt(
            attempt_id=None, schedule_id=None, occurrence=n, status=status, finished_at=instant
        )
        note_success(row, receipt, instant if known else None)
        if status in ("succeeded", "enqueued") and known:
            succeeded.append((instant, n))
    base = held if isinstance(held, datetime) and held.utcoffset() is not None else None
    later = [(t, n) for t, n in succeeded if base is None or t >= base]
    if later:
        top = max(t for t, _ in later)
        assert row.previous_scheduled_for == top
        # ties go to the later finish (here: the later run)
        assert row.previous_occurrence == max(n for t, n in later if t == top)


# ---------------------------------------------------------------------------------------
# No statement more per run
# ---------------------------------------------------------------------------------------


def _statements(now):
    with CaptureQueriesContext(connection) as claimed:
        claims = claim(now)
    outcomes = [execute(c) for c in claims]
    with CaptureQueriesContext(connection) as completed:
        state.complete(outcomes, now=now)
    return claims, len(claimed.captured_queries), len(completed.captured_queries)


def test_the_claim_and_the_completion_make_no_statement_more_once_a_run_succeeded():
    for i in range(5):
        make(f"count-{i}")
    first, claim_before, complete_before = _statements(T0 + M)
    assert len(first) == 5 and all(c.previous is None for c in first)
    later, claim_after, complete_after = _statements(T0 + 2 * M)
    assert len(later) == 5 and all(c.previous is not None for c in later)
    assert (claim_after, complete_after) == (claim_before, complete_before)


# ---------------------------------------------------------------------------------------
# A real worker
# ---------------------------------------------------------------------------------------


@pytest.mark.process
def test_a_real_worker_hands_each_run_the_previous_success(start_worker):
    from .test_worker_process import log, wait_started

    s = Schedule.objects.create(
        name="chain", callback="tests.previous", kind="interval", interval_seconds=1,
        timezone="UTC", payload={"rows": 10},
    )  # fmt: skip
    worker = start_worker("--worker-id", "previous-run", "--max-idle", "0.5")
    wait_started("previous-run")

    def successes():
        return list(
            RunReceipt.objects.filter(schedule_id=s.pk, status="succeeded").order_by("occurrence")
        )

    wait_until(lambda: len(successes()) >= 3, 30, message=f"three runs\n{log(worker)}")
    worker.stop()
    assert worker.proc.returncode == 0, log(worker)
    receipts = successes()
    slots = dict(
        RunAttempt.objects.filter(schedule_id=s.pk).values_list("occurrence", "scheduled_for")
    )
    first, *rest = receipts
    assert first.result == {"total": 10, "after": None, "since": None}
    for before, receipt in zip(receipts, rest, strict=False):
        assert receipt.result == {
            "total": before.result["total"] + 10,
            "after": before.occurrence,
            "since": slots[before.occurrence].astimezone(UTC).isoformat(),
        }, log(worker)
    s.refresh_from_db()
    last = receipts[-1]
    assert (s.previous_occurrence, s.previous_result) == (last.occurrence, last.result)
    assert s.previous_finished_at == last.finished_at
