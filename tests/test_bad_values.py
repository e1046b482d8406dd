"""Totality of the state machine: one bad value affects its own schedule only.

Rows written behind ``save()`` that the engine cannot evaluate, values a callback returns
or raises (any code point, any retry delay), schedule bounds that would overflow a
datetime, an attempt pruned under a late worker, a row locked by someone else: each is
contained to that one schedule (receipted, paused with a reason, visible in health) and
the rest of the batch goes on. Driven with an injected clock; the same rules with real
worker processes are in ``tests/test_bad_values_worker.py``.
"""

from __future__ import annotations

import math
import threading
import uuid
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.db import connection, connections, transaction
from django.utils import timezone as dj_timezone

from django_durable_schedules import state
from django_durable_schedules.db.retention import prune_finished
from django_durable_schedules.exceptions import RetryRun, StateConflict
from django_durable_schedules.health import snapshot
from django_durable_schedules.models import RunAttempt, RunReceipt, Schedule
from django_durable_schedules.projection import REPAIRED_NOTE, project_result, safe_text
from django_durable_schedules.worker.execution.runner import execute

from .factories import T0

pytestmark = pytest.mark.django_db(transaction=True)

S = timedelta(seconds=1)


def make(name, **kw):
    kw.setdefault("callback", "tests.noop")
    kw.setdefault("kind", "interval")
    if kw["kind"] == "interval":
        kw.setdefault("interval_seconds", 60)
    kw.setdefault("timezone", "UTC")
    kw.setdefault("created_at", T0)
    s = Schedule(name=name, **kw)
    s.full_clean()
    s.save()
    return s


def receipts_of(s):
    return list(RunReceipt.objects.filter(schedule_id=s.pk).order_by("finished_at"))


def storable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in text


# ---------------------------------------------------------------------------------------
# Poison rows: written behind save(), claimed in a batch with healthy neighbours
# ---------------------------------------------------------------------------------------

POISON = {
    "unknown zone": ({"timezone": "Mars/Olympus"}, "timezone"),
    "minute 61": ({"kind": "cron", "cron": "61 * * * *", "interval_seconds": None}, "cron"),
    "never fires": ({"kind": "cron", "cron": "0 0 31 2 *", "interval_seconds": None}, "cron"),
    "interval 2**62": ({"interval_seconds": 2**62}, "interval_seconds"),
    "extra_specs not a list": (
        {"kind": "cron", "cron": "0 * * * *", "interval_seconds": None, "extra_specs": {"a": 1}},
        "extra_specs",
    ),
    "extra_specs item not text": (
        {"kind": "cron", "cron": "0 * * * *", "interval_seconds": None, "extra_specs": [5]},
        "extra_specs",
    ),
    "extra_specs on an interval": ({"extra_specs": ["0 9 * * *"]}, "extra_specs"),
}


def _poison(s: Schedule, values: dict, *, rehash: bool = False) -> None:
    Schedule.objects.filter(pk=s.pk).update(**values)
    if rehash:  # as if written by a tzdata that still had the zone: the fingerprint matches
        s.refresh_from_db()
        Schedule.objects.filter(pk=s.pk).update(definition_hash=s.compute_definition_hash())


@pytest.mark.parametrize("case", [*POISON, "zone removed by tzdata"])
def test_a_poison_row_is_degraded_and_the_rest_of_its_batch_runs(case):
    before = [make(f"before-{i}") for i in range(3)]
    bad = make("bad")
    after = [make(f"after-{i}") for i in range(3)]
    if case == "zone removed by tzdata":
        values, field = {"timezone": "US/Pacific-New"}, "timezone"
        _poison(bad, values, rehash=True)
    else:
        values, field = POISON[case]
        _poison(bad, values)

    claims = state.claim_due(worker="w", now=T0 + S)

    assert {c.schedule_name for c in claims} == {s.name for s in before + after}
    bad.refresh_from_db()
    assert bad.status == "paused" and bad.next_run_at is None and bad.lease_token is None
    assert bad.degraded_reason.startswith(state.UNEVALUABLE_PREFIX)
    assert field in bad.degraded_reason
    [receipt] = receipts_of(bad)
    assert receipt.status == "degraded" and field in receipt.error_message
    assert receipt.attempt.occurrence == 1 == bad.occurrence
    health = snapshot()
    assert health.degraded == 1 and not health.healthy
    [listed] = health.degraded_schedules
    assert listed["name"] == "bad" and field in listed["degraded_reason"]
    assert any("bad" in problem for problem in health.problems)
    # The neighbours complete as usual; the next pass does not touch the paused row again.
    state.complete([execute(c) for c in claims], now=T0 + 2 * S)
    assert state.claim_due(worker="w", now=T0 + 2 * S) == []
    assert len(receipts_of(bad)) == 1


def test_every_row_of_a_batch_may_be_poison():
    bad = [make(f"bad-{i}") for i in range(len(POISON))]
    for s, (values, _field) in zip(bad, POISON.values(), strict=True):
        _poison(s, values)
    assert state.claim_due(worker="w", now=T0 + S) == []
    assert set(Schedule.objects.values_list("status", flat=True)) == {"paused"}
    assert RunReceipt.objects.filter(status="degraded").count() == len(POISON)


def test_fixing_the_row_and_enabling_it_brings_it_back():
    bad = make("bad")
    _poison(bad, {"timezone": "Mars/Olympus"})
    state.claim_due(worker="w", now=T0 + S)
    # Enabling the broken definition is refused with the reason, not a crash.
    with pytest.raises(StateConflict, match="timezone"):
        state.enable(bad.pk, now=T0 + 2 * S)
    # A worker start (degraded recovery) leaves it alone too: it needs a fix.
    assert state.recover_degraded(now=T0 + 2 * S) == []
    state.update_schedule(bad.pk, timezone="Europe/Paris")  # a valid edit
    row = state.enable(bad.pk, now=T0 + 2 * S)
    assert row.status == "active" and row.degraded_reason == ""
    assert row.next_run_at is not None
    [claim] = state.claim_due(worker="w", now=row.next_run_at)
    state.complete([execute(claim)], now=row.next_run_at + S)
    assert receipts_of(bad)[-1].status == "succeeded"


def test_a_definition_broken_while_it_runs_is_receipted_and_paused():
    s = make("edited-mid-run")
    [claim] = state.claim_due(worker="w", now=T0, lease_seconds=300)
    Schedule.objects.filter(pk=s.pk).update(timezone="Mars/Olympus")
    healthy = make("healthy", created_at=T0)
    [other] = state.claim_due(worker="w", now=T0 + S, lease_seconds=300)
    # It finishes after its next slot, so moving on must evaluate the broken definition.
    report = state.complete([execute(claim), execute(other)], now=T0 + 61 * S)
    assert sorted(r.status for r in report.receipts) == ["succeeded", "succeeded"]
    s.refresh_from_db()
    assert s.status == "paused" and "timezone" in s.degraded_reason
    mine = receipts_of(s)[-1]
    assert "the schedule was paused" in mine.error_message
    healthy.refresh_from_db()
    assert healthy.status == "active" and healthy.next_run_at == T0 + 120 * S


def test_a_lease_written_behind_save_with_no_attempt_is_cleared_and_the_schedule_runs():
    """A lease token no attempt holds (set by raw SQL or ``update()``) expires like any
    other: the lease is cleared, nothing is receipted (nothing ran), and the schedule and
    its batch neighbour run at their next claim."""
    stray = make("stray-lease", created_at=T0)
    other = make("other", created_at=T0)
    Schedule.objects.filter(pk=stray.pk).update(
        lease_token=uuid.uuid4(), lease_expires_at=T0 + 5 * S
    )
    assert state.expire_leases(now=T0 + 10 * S) == 1
    stray.refresh_from_db()
    assert stray.lease_token is None and stray.lease_expires_at is None
    assert receipts_of(stray) == []
    claims = state.claim_due(worker="w", now=T0 + 11 * S)
    assert {c.schedule_id for c in claims} == {stray.pk, other.pk}


@pytest.mark.parametrize(
    "values",
    [
        {"triggered_at": T0 + 86400 * S},
        {"retry_scheduled_for": T0 + 86400 * S, "attempt": 1, "occurrence": 1},
        {"buffered_for": T0 + 86400 * S},
        {"kind": "once", "interval_seconds": None, "run_at": T0 + 86400 * S},
    ],
    ids=["triggered_at", "retry_scheduled_for", "buffered_for", "run_at"],
)
def test_a_slot_written_behind_save_in_the_future_is_run_as_of_its_claim(values):
    """A due row whose slot field was set to a future instant behind ``save()`` runs as
    due (``next_run_at`` decides), with its slot bounded by the claim's instant: lateness
    is never negative and the receipt never precedes the slot."""
    s = make("future-slot", created_at=T0)
    Schedule.objects.filter(pk=s.pk).update(next_run_at=T0 + 10 * S, **values)
    if values.get("kind") == "once":  # a matching fingerprint: not a re-plan
        s.refresh_from_db()
        Schedule.objects.filter(pk=s.pk).update(definition_hash=s.compute_definition_hash())
    [claim] = state.claim_due(worker="w", now=T0 + 20 * S)
    assert claim.scheduled_for == T0 + 20 * S
    attempt = RunAttempt.objects.get(pk=claim.attempt_id)
    assert attempt.scheduled_for == attempt.claimed_at == T0 + 20 * S
    outcome = execute(claim)
    state.complete([outcome], now=T0 + 21 * S)
    [receipt] = receipts_of(s)
    assert receipt.status == "succeeded"


def test_a_failure_on_a_row_with_overflowing_backoff_written_behind_save():
    s = make("backoff", callback="tests.fail", max_attempts=5)
    Schedule.objects.filter(pk=s.pk).update(backoff_base_seconds=1e12, backoff_cap_seconds=1e12)
    [claim] = state.claim_due(worker="w", now=T0)
    [receipt] = state.complete([execute(claim)], now=T0 + S).receipts
    assert receipt.status == "failed"
    s.refresh_from_db()
    # Bounded as save() bounds it: the base is at most a day.
    assert T0 + S < s.next_run_at <= T0 + S + timedelta(days=1, seconds=1)


@pytest.mark.parametrize(
    "field,value",
    [
        ("backoff_base_seconds", 1e12),
        ("backoff_cap_seconds", 1e12),
        ("backoff_base_seconds", math.nan),
        ("timeout_seconds", math.inf),
        ("timeout_seconds", -1.0),
    ],
)
def test_save_refuses_durations_the_engine_would_overflow_on(field, value):
    with pytest.raises(ValidationError) as err:
        Schedule.objects.create(
            name="x", callback="tests.noop", interval_seconds=60, **{field: value}
        )
    assert field in err.value.message_dict
    assert not Schedule.objects.exists()


def test_a_timeout_written_behind_save_is_bounded_in_the_claim():
    s = make("timeout")
    Schedule.objects.filter(pk=s.pk).update(timeout_seconds=1e300)  # MariaDB has no inf
    [claim] = state.claim_due(worker="w", now=T0)
    assert claim.timeout_seconds == state.TIMEOUT_MAX_SECONDS


# ---------------------------------------------------------------------------------------
# Values from callbacks
# ---------------------------------------------------------------------------------------

BAD_TEXT = ["\ud800", "a\x00b", "\x00" * 5000, "\udfff\ud800 x", "ok 😀 \ud83d\ude00"]


@pytest.mark.parametrize("text", BAD_TEXT)
@pytest.mark.parametrize("kind", ["error", "skip", "retry", "fail"])
def test_any_code_point_in_an_error_message_is_stored_and_marked(text, kind):
    bad = make("bad", callback="tests.badvalue.outcome", payload={"raise": kind})
    good = make("good")
    claims = state.claim_due(worker="w", now=T0)
    outcomes = []
    for claim in claims:
        outcome = execute(claim)
        if claim.schedule_id == bad.pk:
            outcome = state.Outcome(
                claim,
                outcome.status,
                error_type=outcome.error_type,
                error_message=text,
                terminal=outcome.terminal,
            )
        outcomes.append(outcome)
    report = state.complete(outcomes, now=T0 + S)
    assert len(report.receipts) == 2
    [mine] = receipts_of(bad)
    assert storable(mine.error_message)
    if storable(text):
        assert mine.error_message == text
    else:
        assert mine.error_message.endswith(REPAIRED_NOTE)
    [theirs] = receipts_of(good)
    assert theirs.status == "succeeded"


def test_a_result_holding_nul_surrogates_and_nan_is_stored_and_marked():
    s = make("result", callback="tests.badvalue.outcome", payload={"return": "nul"})
    [claim] = state.claim_due(worker="w", now=T0)
    # Straight from a callback (projected by the runner) and handed over raw (bounded here).
    raw = state.Outcome(claim, "succeeded", result={"k\x00": ["\ud800", math.nan]})
    [receipt] = state.complete([raw], now=T0 + S).receipts
    receipt.refresh_from_db()
    assert receipt.status == "succeeded"
    assert receipt.result["repaired"] is True
    assert receipt.result["value"] == {"k\ufffd": ["\ufffd", "nan"]}
    [claim] = state.claim_due(worker="w", now=T0 + 60 * S)
    outcome = execute(claim)
    [receipt] = state.complete([outcome], now=T0 + 61 * S).receipts
    receipt.refresh_from_db()
    assert receipt.result["repaired"] is True
    assert s.pk == receipt.schedule_id


@pytest.mark.parametrize(
    "after,expected",
    [
        (math.inf, 30 * 86400),
        (1.8e12, 30 * 86400),
        (2**80, 30 * 86400),
        (-1.0, 0),
        (-math.inf, 0),
        (math.nan, None),
        ("soon", None),
        (True, None),
        (12.5, 12.5),
    ],
)
def test_any_retry_delay_is_bounded_and_the_receipt_says_so(after, expected):
    s = make("retry", callback="tests.noop", max_attempts=5)
    good = make("good")
    claims = state.claim_due(worker="w", now=T0)
    outcomes = [
        state.Outcome(c, "failed", error_type="RetryRun", error_message="later", retry_after=after)
        if c.schedule_id == s.pk
        else execute(c)
        for c in claims
    ]
    report = state.complete(outcomes, now=T0 + S)
    assert len(report.receipts) == 2
    s.refresh_from_db()
    [receipt] = receipts_of(s)
    if expected is None:  # not a number of seconds: the backoff (5 s by default)
        assert s.next_run_at == T0 + 6 * S
        assert "the backoff was used" in receipt.error_message
    else:
        assert s.next_run_at == T0 + S + timedelta(seconds=math.ceil(expected))
        if expected != after:
            assert "outside" in receipt.error_message
        else:
            assert receipt.error_message == "later"
    assert receipts_of(good)[0].status == "succeeded"


def test_retry_run_with_infinite_delay_from_a_real_callback():
    s = make(
        "retry-inf", callback="tests.badvalue.outcome", payload={"raise": "retry", "after": "inf"}
    )
    [claim] = state.claim_due(worker="w", now=T0)
    outcome = execute(claim)
    assert outcome.status == "failed"
    [receipt] = state.complete([outcome], now=T0 + S).receipts
    s.refresh_from_db()
    assert s.next_run_at == T0 + S + timedelta(days=30)
    assert "after_seconds=inf" in receipt.error_message
    assert isinstance(RetryRun("x", after_seconds=math.inf), RetryRun)


def test_safe_text_pairs_surrogates_and_replaces_the_rest():
    assert safe_text("plain") == ("plain", False)
    assert safe_text("\ud83d\ude00") == ("😀", True)
    assert safe_text("\ud800x\x00") == ("\ufffdx\ufffd", True)
    assert project_result({"\ud800": 1}, 100) == {"repaired": True, "value": {"\ufffd": 1}}


def test_a_row_whose_claim_the_database_refuses_is_paused_and_the_rest_claimed():
    # Its counter is behind its attempts (an attempt written by hand, a restored backup):
    # the next attempt's (schedule, occurrence, attempt) already exists.
    neighbours = [make(f"n-{i}") for i in range(3)]
    clash = make("clash")
    RunAttempt.objects.create(
        schedule_id=clash.pk,
        schedule_name=clash.name,
        occurrence=1,
        attempt=1,
        scheduled_for=T0,
        claimed_at=T0,
        lease_token=uuid.uuid4(),
        lease_expires_at=T0,
        worker="by-hand",
        idempotency_key="x",
    )
    claims = state.claim_due(worker="w", now=T0 + S)
    assert {c.schedule_name for c in claims} == {s.name for s in neighbours}
    clash.refresh_from_db()
    assert clash.status == "paused" and "refused its claim" in clash.degraded_reason
    assert "IntegrityError" in clash.degraded_reason
    assert snapshot().degraded == 1
    assert state.claim_due(worker="w", now=T0 + 2 * S) == []


# ---------------------------------------------------------------------------------------
# Retention race and locked rows
# ---------------------------------------------------------------------------------------


def test_a_late_outcome_whose_attempt_was_pruned_is_dropped_and_the_rest_recorded():
    late = make("late", kind="once", run_at=T0, interval_seconds=None)
    [stalled] = state.claim_due(worker="stalled", now=T0, lease_seconds=10)
    # Its lease expires; another worker recovers it, runs it again, and retention prunes
    # the first pair while the stalled worker is still away.
    assert state.expire_leases(now=T0 + 11 * S) == 1
    [again] = state.claim_due(worker="other", now=T0 + 11 * S)
    state.complete([execute(again)], now=T0 + 12 * S)
    pruned = prune_finished(timedelta(0), now=T0 + 13 * S)
    assert pruned.attempts == 2
    good = make("good", created_at=T0 + 13 * S)
    [other] = state.claim_due(worker="stalled", now=T0 + 13 * S)

    report = state.complete([execute(stalled), execute(other)], now=T0 + 14 * S)

    assert report.dropped and report.dropped[0].claim.schedule_id == late.pk
    assert [r.schedule_id for r in report.receipts] == [good.pk]
    assert RunReceipt.objects.get(schedule_id=good.pk).status == "succeeded"


@pytest.mark.skipif(
    "not connection.features.has_select_for_update_skip_locked",
    reason="SQLite has no row locks: a writer holds the whole database",
)
def test_completion_and_renewal_skip_a_row_locked_by_someone_else():
    locked = make("locked", created_at=dj_timezone.now() - S)
    free = make("free", created_at=dj_timezone.now() - S)
    claims = state.claim_due(worker="w", lease_seconds=30)
    by_id = {c.schedule_id: c for c in claims}
    holding, release = threading.Event(), threading.Event()

    def hold():
        with transaction.atomic():
            Schedule.objects.select_for_update().get(pk=locked.pk)
            holding.set()
            release.wait(20)
        connections.close_all()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(10)
        owned = state.renew_leases([c.lease_token for c in claims])
        assert owned == {c.lease_token for c in claims}  # renewed or still live: not lost
        report = state.complete([execute(by_id[locked.pk]), execute(by_id[free.pk])])
        assert [o.claim.schedule_id for o in report.deferred] == [locked.pk]
        assert [r.schedule_id for r in report.receipts] == [free.pk]
    finally:
        release.set()
        holder.join(20)
    report = state.complete(report.deferred)
    assert [r.status for r in report.receipts] == ["succeeded"]
    assert RunAttempt.objects.count() == RunReceipt.objects.count() == 2


@pytest.mark.parametrize("bad", ["a\x00b", "x" * 201, "undecodable \udcff"])
def test_a_worker_id_no_database_stores_is_a_usage_error(bad):
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="worker-id"):
        call_command("run_scheduler", "--once", "--worker-id", bad)
    assert not RunAttempt.objects.exists()


@pytest.mark.skipif(
    "connection.vendor == 'sqlite'", reason="SQLite's lock wait is its OPTIONS timeout"
)
def test_the_worker_thread_bounds_its_lock_waits_before_it_locks_rows():
    from django_durable_schedules.db import session

    show = (
        "SHOW lock_timeout"
        if connection.vendor == "postgresql"
        else "SELECT @@SESSION.innodb_lock_wait_timeout"
    )

    def current() -> str:
        with connection.cursor() as cursor:
            cursor.execute(show)
            return str(cursor.fetchone()[0])

    before = current()
    session.limit_lock_waits("default", 3)
    try:
        assert current() == before  # nothing sent until a transaction locks rows
        state.claim_due(worker="w", now=T0)
        assert current() in ("3s", "3000ms", "3")
    finally:
        session.clear_lock_wait_limit("default")
        connection.close()
