"""One bad value never stops a real ``run_scheduler``: poison rows, poison outcomes and a
callback that locks its own schedule row, each next to a healthy schedule that must keep
running. (The same rules driven with an injected clock: ``tests/test_bad_values.py``.)"""

from __future__ import annotations

import time
from datetime import timedelta
from itertools import pairwise

import pytest
from django.db import connection  # noqa: F401 (skipif)
from django.utils import timezone as dj_timezone

from django_durable_schedules.models import RunAttempt, RunReceipt, Schedule
from django_durable_schedules.state import UNEVALUABLE_PREFIX

from .conftest import wait_until
from .test_worker_process import assert_ledger_consistent, log, wait_started

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]


def interval(name: str, callback: str = "tests.record", every: int = 1, **kw) -> Schedule:
    return Schedule.objects.create(
        name=name,
        callback=callback,
        kind="interval",
        interval_seconds=every,
        timezone="UTC",
        **kw,
    )


def runs_of(s: Schedule, status: str = "succeeded") -> int:
    return RunReceipt.objects.filter(schedule_id=s.pk, status=status).count()


def storable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in text


def test_poison_rows_are_degraded_and_the_worker_and_its_neighbours_go_on(start_worker):
    # Rows first, then the worker: each poison row is due when the worker first looks.
    healthy = interval("healthy")
    poison = {
        "timezone": {"timezone": "Mars/Olympus"},
        "cron": {"kind": "cron", "cron": "61 * * * *", "interval_seconds": None},
        "never": {"kind": "cron", "cron": "0 0 31 2 *", "interval_seconds": None},
        "interval_seconds": {"interval_seconds": 2**62},
    }
    bad = {}
    for field, values in poison.items():
        s = interval(f"bad-{field}", every=3600)
        Schedule.objects.filter(pk=s.pk).update(**values)
        bad[field] = s
    # A zone that a tzdata upgrade removed, with the fingerprint recomputed: nothing tells
    # the worker that the definition changed.
    gone = interval("bad-zone-removed", every=3600)
    gone.timezone = "US/Pacific-New"
    Schedule.objects.filter(pk=gone.pk).update(
        timezone="US/Pacific-New", definition_hash=gone.compute_definition_hash()
    )
    worker = start_worker("--worker-id", "poison-rows", "--max-idle", "0.5")
    wait_started("poison-rows")

    wait_until(lambda: runs_of(healthy) >= 4, 20, message=f"healthy runs\n{log(worker)}")
    assert worker.proc.poll() is None, log(worker)
    for field, s in [*bad.items(), ("timezone", gone)]:
        s.refresh_from_db()
        assert s.status == "paused", (s.name, log(worker))
        never = field == "never"
        assert s.degraded_reason.startswith(UNEVALUABLE_PREFIX)
        assert ("cron" if never else field) in s.degraded_reason, s.degraded_reason
        [receipt] = RunReceipt.objects.filter(schedule_id=s.pk)
        assert receipt.status == "degraded"
    # A newly created schedule still runs.
    late = interval("created-later")
    wait_until(lambda: runs_of(late) >= 1, 15, message=f"a later schedule\n{log(worker)}")
    worker.stop()
    assert worker.proc.returncode == 0, log(worker)
    assert_ledger_consistent()


BAD_OUTCOMES = {
    "surrogate-error": {"raise": "error", "text": "surrogate"},
    "nul-error": {"raise": "error", "text": "nul"},
    "nul-skip": {"raise": "skip", "text": "both"},
    "retry-inf": {"raise": "retry", "text": "surrogate", "after": "inf"},
    "retry-nan": {"raise": "retry", "after": "nan"},
    "retry-negative": {"raise": "retry", "after": -1},
    "retry-epoch-ms": {"raise": "retry", "after": 1.8e12},
    "nul-fail": {"raise": "fail", "text": "nul"},
    "nul-result": {"return": "nul"},
    "surrogate-result": {"return": "surrogate"},
}


def test_poison_outcomes_are_receipted_and_never_fence_their_neighbours(start_worker):
    worker = start_worker("--worker-id", "poison-outcomes", "--max-idle", "0.5")
    wait_started("poison-outcomes")
    healthy = interval("healthy")
    bad = {
        name: interval(
            f"bad-{name}",
            callback="tests.badvalue.outcome",
            every=1,
            payload=payload,
            max_attempts=2,
            backoff_base_seconds=0.5,
            backoff_cap_seconds=1,
        )
        for name, payload in BAD_OUTCOMES.items()
    }
    wait_until(
        lambda: all(RunReceipt.objects.filter(schedule_id=s.pk).exists() for s in bad.values()),
        20,
        message=f"a receipt of every bad outcome\n{log(worker)}",
    )
    wait_until(lambda: runs_of(healthy) >= 4, 20, message=f"healthy runs\n{log(worker)}")
    assert worker.proc.poll() is None, log(worker)
    assert not RunReceipt.objects.filter(status__in=["lease_expired", "lease_lost"]).exists()
    for receipt in RunReceipt.objects.filter(schedule_id__in=[s.pk for s in bad.values()]):
        assert storable(receipt.error_message) and storable(receipt.error_type)
    inf = RunReceipt.objects.filter(schedule_id=bad["retry-inf"].pk).first()
    assert "after_seconds=inf" in inf.error_message and "[invalid characters" in inf.error_message
    bad["retry-inf"].refresh_from_db()
    assert bad["retry-inf"].next_run_at > dj_timezone.now() + timedelta(days=29)
    result = RunReceipt.objects.filter(schedule_id=bad["nul-result"].pk).first()
    assert result.status == "succeeded" and result.result["repaired"] is True
    worker.stop()
    assert worker.proc.returncode == 0, log(worker)
    assert_ledger_consistent(record_side_effects=False)


@pytest.mark.skipif(
    "not connection.features.has_select_for_update_skip_locked",
    reason="SQLite has no row locks: a callback's write transaction holds the whole database",
)
def test_a_callback_locking_its_own_row_does_not_stop_the_worker(start_worker):
    # Lease 12 s: renewals every 4 s, the first one while the callback holds its row.
    worker = start_worker("--worker-id", "self-lock", "--max-idle", "0.5", "--lease-seconds", "12")
    wait_started("self-lock")
    healthy = interval("healthy")
    locker = Schedule.objects.create(
        name="locker",
        callback="tests.badvalue.lock_own_row",
        kind="once",
        run_at=dj_timezone.now(),
        payload={"seconds": 9},
        timezone="UTC",
    )
    wait_until(
        lambda: RunAttempt.objects.filter(schedule_id=locker.pk).exists(), 15, message="claim"
    )
    started = time.monotonic()
    wait_until(
        lambda: runs_of(locker) == 1, 30, message=f"the locking run to finish\n{log(worker)}"
    )
    assert time.monotonic() - started >= 7
    # While the row was locked the main thread kept claiming (no gap of a blocked renewal).
    claimed = list(
        RunAttempt.objects.filter(schedule_id=healthy.pk)
        .order_by("claimed_at")
        .values_list("claimed_at", flat=True)
    )
    gaps = [(b - a).total_seconds() for a, b in pairwise(claimed)]
    assert len(claimed) >= 8 and max(gaps) < 2.5, (gaps, log(worker))
    assert worker.proc.poll() is None
    worker.stop()
    assert worker.proc.returncode == 0, log(worker)
    assert_ledger_consistent()


def test_a_poisoned_backfill_never_stops_the_worker_or_its_neighbours(start_worker):
    """Issue #24 items 1 and 2 with a real ``run_scheduler``: a backfill whose stored slots
    overflow in UTC and one whose occurrence clashes with an attempt already written (both
    behind ``save()``) are cancelled with the reason; the innocent schedule keeps running
    and the innocent backfill completes, and the worker never exits by itself."""
    from django_durable_schedules import state
    from django_durable_schedules.models import Backfill, ScheduleEvent
    from django_durable_schedules.worker.execution.runner import execute

    end = dj_timezone.now().replace(second=0, microsecond=0, minute=0)
    start = end.replace(year=end.year - 3)

    def yearly(name: str) -> Schedule:
        return Schedule.objects.create(
            name=name, callback="tests.record", kind="cron", cron="0 0 1 1 *", timezone="UTC"
        )

    clash = yearly("bf-clash")
    clash_bf = state.request_backfill(clash.pk, start, end, source="code")
    [first] = state.claim_due(worker="setup")  # its slot 1 runs as occurrence 1
    state.complete([execute(first)])
    Backfill.objects.filter(pk=clash_bf.pk).update(occurrence=1, attempt=0)
    overflow = yearly("bf-overflow")
    overflow_bf = state.request_backfill(overflow.pk, start, end, source="code")
    Backfill.objects.filter(pk=overflow_bf.pk).update(slots=["0001-01-01T00:00:00+23:59"] * 3)
    innocent_bf = state.request_backfill(yearly("bf-innocent").pk, start, end, source="code")
    healthy = interval("healthy")

    worker = start_worker("--worker-id", "poison-backfill", "--max-idle", "0.5")
    wait_started("poison-backfill")

    def settled() -> bool:
        assert worker.proc.poll() is None, log(worker)
        statuses = dict(Backfill.objects.values_list("pk", "status"))
        return (
            statuses[innocent_bf.pk] == "completed"
            and statuses[clash_bf.pk] == statuses[overflow_bf.pk] == "cancelled"
            and runs_of(healthy) >= 4
        )

    wait_until(settled, 30, message=f"backfills settled, healthy runs\n{log(worker)}")
    reasons = dict(
        ScheduleEvent.objects.filter(action="backfill_cancel").values_list(
            "schedule_name", "changes__reason"
        )
    )
    # The clash is seen before the database is asked (the stored occurrence is no slot of
    # this backfill's); a clash it misses is refused by the database, then cancelled.
    clash = reasons["bf-clash"]
    assert "stored occurrence" in clash or "refused" in clash, reasons
    assert "slot 1" in reasons["bf-overflow"], reasons
    before = runs_of(healthy)
    wait_until(lambda: runs_of(healthy) >= before + 2, 15, message=f"still running\n{log(worker)}")
    assert worker.proc.poll() is None, log(worker)
    worker.stop()
    assert worker.proc.returncode == 0, log(worker)
    assert_ledger_consistent()
