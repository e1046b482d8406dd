"""Field reports (../shared/field-reports.md) that need the database or the worker.

The pure time rules (R1-R5, the [dst], [tz] and [cron-syntax] entries) are in
test_timing.py and test_cron_corpus.py; B01/B03/B21/B26/B27 are in test_state.py and the
process tests. Each test names its entry.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_durable_schedules import health, state
from django_durable_schedules.models import RunAttempt, Schedule
from django_durable_schedules.worker import Worker, WorkerOptions
from django_durable_schedules.worker.execution.runner import execute

pytestmark = pytest.mark.django_db(transaction=True)
S = timedelta(seconds=1)


def z(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def make(name, **kw):
    kw.setdefault("callback", "tests.noop")
    s = Schedule(name=name, **kw)
    s.full_clean()
    s.save()
    return s


def drive(start, end, step, **claim_kw):
    """Poll every ``step`` from ``start`` to ``end`` (injected clock); return claims."""
    out = []
    now = start
    while now <= end:
        claims = state.claim_due(worker="w", now=now, **claim_kw)
        state.complete([execute(c) for c in claims], now=now)
        out += claims
        now += step
    return out


def test_b24_a_fast_host_clock_cannot_fire_early(monkeypatch):
    """The database clock decides: a host 10 minutes ahead claims nothing early, and the
    skew shows in health."""
    future = datetime.now(UTC) + timedelta(minutes=10)
    make(
        "hourly",
        kind="interval",
        interval_seconds=3600,
        start_at=datetime.now(UTC).replace(microsecond=0) + timedelta(minutes=5),
    )
    monkeypatch.setattr("django.utils.timezone.now", lambda: future)
    assert state.claim_due(worker="fast-host") == []  # no injected now: db_now() decides
    state.heartbeat("fast-host")
    snap = health.snapshot()
    assert not snap.healthy and any("clock" in p for p in snap.problems)


@pytest.mark.vendor_independent  # the zone/grid arithmetic, an injected clock
def test_b19_restarts_do_not_reset_a_long_interval():
    """Due-ness lives in the row: runs land on the 7-day grid whatever the restarts.
    (DESIGN: slot 0 is the creation time, so 06-01 runs too; the report's "2 runs" counts
    only the later ones.)"""
    make("weekly", kind="interval", interval_seconds=7 * 86400, created_at=z(2027, 6, 1))
    runs = drive(z(2027, 6, 1, 12), z(2027, 6, 16, 12), timedelta(hours=12))
    assert [c.scheduled_for for c in runs] == [z(2027, 6, 1), z(2027, 6, 8), z(2027, 6, 15)]


@pytest.mark.vendor_independent  # the zone/grid arithmetic, an injected clock
def test_b10b_bogota_cron_runs_twice_without_a_tight_loop():
    make(
        "bogota",
        kind="cron",
        cron="0 14 * * *",
        timezone="America/Bogota",
        created_at=z(2027, 6, 1, 18, 59),
    )
    Schedule.objects.update(next_run_at=z(2027, 6, 1, 19))
    runs = drive(z(2027, 6, 1, 18, 59), z(2027, 6, 2, 20), timedelta(minutes=1))
    assert [c.scheduled_for for c in runs] == [z(2027, 6, 1, 19), z(2027, 6, 2, 19)]


def test_b11_zone_is_stored_and_later_setting_changes_do_not_move_it(settings):
    settings.TIME_ZONE = "Asia/Jakarta"
    s = make("jakarta", kind="cron", cron="25 8-16 * * *")
    assert s.timezone == "Asia/Jakarta"
    settings.TIME_ZONE = "UTC"
    s.refresh_from_db()
    assert s.timezone == "Asia/Jakarta"
    assert s.upcoming(9, after=z(2027, 6, 1) - timedelta(hours=7)) == [
        z(2027, 6, 1, h, 25) for h in range(1, 10)
    ]


def test_b31c_cron_next_run_is_a_whole_minute():
    make("minutely", kind="cron", cron="* * * * *", created_at=z(2027, 6, 1, 10))
    Schedule.objects.update(next_run_at=z(2027, 6, 1, 10))
    [claim] = state.claim_due(worker="w", now=datetime(2027, 6, 1, 10, 0, 0, 700000, tzinfo=UTC))
    s = Schedule.objects.get()
    assert s.next_run_at == z(2027, 6, 1, 10, 1)
    assert RunAttempt.objects.get().scheduled_for == claim.scheduled_for == z(2027, 6, 1, 10)


def test_b30_far_future_schedules_idle_without_overflow():
    make("newyear", kind="cron", cron="0 0 1 1 *", timezone="UTC", created_at=z(2027, 1, 2))
    make("y2099", kind="once", run_at=z(2099, 12, 31, 23, 59, 59))
    make(
        "decade",
        kind="interval",
        interval_seconds=3650 * 86400,
        start_at=datetime.now(UTC) + timedelta(days=1),
    )
    newyear = Schedule.objects.get(name="newyear")
    assert newyear.upcoming(1, after=z(2027, 1, 2)) == [z(2028, 1, 1)]
    assert newyear.next_run_at > datetime.now(UTC)
    assert Schedule.objects.get(name="y2099").next_run_at == z(2099, 12, 31, 23, 59, 59)
    worker = Worker(WorkerOptions(poll_max_seconds=0.05))
    ticks = []

    def on_idle():
        ticks.append(1)
        if len(ticks) >= 5:
            worker.request_stop()

    worker.on_idle = on_idle
    assert worker.run() == 0
    assert RunAttempt.objects.count() == 0
    # Nothing overflowed, nothing is overdue or degraded: the one problem left is that the
    # worker has stopped while schedules wait for one (the probe's verdict too).
    assert health.snapshot().problems == ["0 live workers, at least 1 needed"]


_B29_COUNTS: dict[int, int] = {}


@pytest.mark.parametrize("total", [200, 2000])
def test_b29_queries_per_claim_do_not_grow_with_the_table(total):
    """The due query is an index range scan with a batch limit: the same statements for
    1,000 or 10,000 schedules (here 200 vs 2,000 to keep the suite fast; the bench goes
    to 1M)."""
    rows = [
        Schedule(
            name=f"b29-{i}",
            callback="tests.noop",
            kind="interval",
            interval_seconds=60,
            created_at=z(2027, 6, 1),
            next_run_at=z(2027, 6, 1, 10) if i < 100 else z(2027, 6, 2),
        )
        for i in range(total)
    ]
    for r in rows:
        r.definition_hash = r.compute_definition_hash()
    Schedule.objects.bulk_create(rows)
    with CaptureQueriesContext(connection) as ctx:
        claims = state.claim_due(worker="w", now=z(2027, 6, 1, 10), limit=100)
        state.complete([execute(c) for c in claims], now=z(2027, 6, 1, 10, 0, 1))
    assert len(claims) == 100
    _B29_COUNTS[total] = len(ctx.captured_queries)
    if len(_B29_COUNTS) == 2:  # the second size must issue exactly as many statements
        assert _B29_COUNTS[200] == _B29_COUNTS[2000], _B29_COUNTS
    assert len(ctx.captured_queries) <= 16  # a batch, whatever its size (SQLite logs BEGIN/COMMIT)
