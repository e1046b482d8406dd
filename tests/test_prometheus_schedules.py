"""Per-schedule Prometheus counters (issue #26 item 5): runs by outcome, missed,
overlap-skipped, excluded and deadline-missed slots, the next-deadline gauge and the cap on
the ``schedule`` label, read from a real ``prometheus_client`` registry after real worker
runs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext, override_settings
from hypothesis import given
from hypothesis import strategies as st

from django_durable_schedules import signals, state
from django_durable_schedules.models import RunAttempt, RunReceipt, Schedule
from django_durable_schedules.worker import Worker, WorkerOptions

prometheus_client = pytest.importorskip("prometheus_client")
from django_durable_schedules.contrib import prometheus  # noqa: E402
from django_durable_schedules.contrib.labels import (  # noqa: E402
    OTHER,
    ScheduleLabels,
    status_label,
)
from django_durable_schedules.contrib.prometheus_deadlines import owed_slot  # noqa: E402

pytestmark = pytest.mark.django_db(transaction=True)


def mk(name, callback="tests.noop", **kw):
    kw.setdefault("kind", "interval")
    kw.setdefault("interval_seconds", 3600)
    return Schedule.objects.create(name=name, callback=callback, **kw)


def run_once(**kw):
    kw.setdefault("concurrency", 4)
    return Worker(WorkerOptions(once=True, **kw)).run()


@pytest.fixture
def registry():
    reg = prometheus_client.CollectorRegistry()
    yield reg
    prometheus.disconnect(reg)
    assert not signals.run_finished.has_listeners()
    assert not signals.schedule_changed.has_listeners()


def value(registry, name, **labels):
    return registry.get_sample_value(name, labels)


def test_runs_by_outcome_per_schedule(registry):
    prometheus.connect(registry)
    mk("ok")
    mk("bad", "tests.fail")
    mk("skip", "tests.skip")
    assert run_once() == 0
    runs = "durable_schedules_runs_total"
    assert value(registry, runs, schedule="ok", status="succeeded") == 1
    assert value(registry, runs, schedule="bad", status="failed") == 1
    assert value(registry, runs, schedule="skip", status="skipped") == 1
    assert value(registry, runs, schedule=OTHER, status="succeeded") is None


def test_missed_slots_are_the_claims_missed_slots(registry):
    """Ten minutes of a one-minute grid passed while no worker ran: the late run counts
    the slots it passed over, as its attempt records them."""
    prometheus.connect(registry)
    row = mk("minutely", interval_seconds=60)
    ago = state.db_now().replace(microsecond=0) - timedelta(minutes=10)
    Schedule.objects.filter(pk=row.pk).update(created_at=ago, next_run_at=ago)
    assert run_once() == 0
    attempt = RunAttempt.objects.get(schedule=row)
    assert attempt.missed_slots >= 9
    assert value(registry, "durable_schedules_missed_slots_total", schedule="minutely") == (
        attempt.missed_slots
    )


def test_overlap_skipped_slots_are_the_receipts_slots_skipped(registry):
    prometheus.connect(registry)
    mk("long", "tests.sleep", interval_seconds=1, payload={"seconds": 2.5})
    assert run_once() == 0
    receipt = RunReceipt.objects.get(schedule__name="long")
    assert receipt.status == "succeeded" and receipt.slots_skipped >= 1
    skipped = value(registry, "durable_schedules_overlap_skipped_slots_total", schedule="long")
    assert skipped == receipt.slots_skipped


def test_excluded_slots_are_counted_from_the_claims_events(registry):
    """A calendar excludes the last six slots of a schedule: its claim counts them (in
    one transaction, written in bulk) and the counter says six, as the row does."""
    from tests.test_excluded_count import EXCLUDED, JUL, calendar, make, walk

    prometheus.connect(registry)
    calendar()
    make()
    walk(JUL[12] + 18 * timedelta(hours=1), JUL[21])
    assert Schedule.objects.get(name="daily").excluded_count == EXCLUDED
    assert value(registry, "durable_schedules_excluded_slots_total", schedule="daily") == EXCLUDED


def test_deadline_missed_counts_each_event_once_committed(registry):
    """The deadline sweep writes ``deadline_missed`` through ``record_event``: counted on
    commit, never for a transaction rolled back."""
    prometheus.connect(registry)
    row = mk("late", deadline_seconds=60)
    with transaction.atomic():
        state.events.record_event(row, "deadline_missed", source="worker")
    with pytest.raises(RuntimeError), transaction.atomic():
        state.events.record_event(row, "deadline_missed", source="worker")
        raise RuntimeError("rolled back")
    state.events.record_event(row, "recovered", source="worker")
    assert value(registry, "durable_schedules_deadline_missed_total", schedule="late") == 1


def test_next_deadline_is_the_owed_slot_plus_the_deadline(registry):
    prometheus.connect(registry)
    row = mk("watched", deadline_seconds=300)
    mk("unwatched")
    gauge = "durable_schedules_next_deadline_timestamp_seconds"
    first = value(registry, gauge, schedule="watched")
    assert first == (row.next_run_at + timedelta(seconds=300)).timestamp()
    assert value(registry, gauge, schedule="unwatched") is None
    assert run_once() == 0  # it succeeded: the next slot is owed now
    row.refresh_from_db()
    assert value(registry, gauge, schedule="watched") == (
        (row.next_run_at + timedelta(seconds=300)).timestamp()
    )
    assert value(registry, gauge, schedule="watched") >= first + 3600


@pytest.mark.vendor_independent  # a pure function on a dict
def test_the_owed_slot_is_the_earliest_pending_one():
    t = datetime(2030, 1, 1, tzinfo=UTC)
    row = {"retry_scheduled_for": None, "triggered_at": None, "buffered_for": None}
    assert owed_slot({**row, "next_run_at": t}, None) == t
    assert owed_slot({**row, "next_run_at": t}, t - timedelta(minutes=5)) == t - timedelta(
        minutes=5
    )
    retry = {**row, "retry_scheduled_for": t - timedelta(hours=1), "next_run_at": t}
    assert owed_slot(retry, None) == t - timedelta(hours=1)
    assert owed_slot({**row, "next_run_at": None}, None) is None


def test_a_running_attempt_owes_its_own_slot(registry):
    prometheus.connect(registry)
    row = mk("running", deadline_seconds=120)
    [claim] = state.claim_due(worker="w-x")
    gauge = value(registry, "durable_schedules_next_deadline_timestamp_seconds", schedule="running")
    assert gauge == (claim.scheduled_for + timedelta(seconds=120)).timestamp()
    assert Schedule.objects.get(pk=row.pk).next_run_at > claim.scheduled_for


def test_a_database_error_leaves_the_gauge_out_not_the_scrape(registry, monkeypatch):
    from django_durable_schedules.contrib.prometheus_deadlines import DeadlineCollector

    prometheus.connect(registry)
    mk("watched", deadline_seconds=300)

    def broken(self):
        raise RuntimeError("database gone")

    monkeypatch.setattr(DeadlineCollector, "deadlines", broken)
    body = prometheus_client.generate_latest(registry).decode()
    assert "durable_schedules_worker_up 1.0" in body
    assert 'next_deadline_timestamp_seconds{schedule="watched"}' not in body


def test_schedules_beyond_the_cap_are_summed_under_other(registry):
    prometheus.connect(registry, max_schedules=2)
    for i in range(5):
        mk(f"s{i}")
    assert run_once() == 0
    runs = "durable_schedules_runs_total"
    own = {
        s.labels["schedule"]
        for m in registry.collect()
        if m.name == "durable_schedules_runs"
        for s in m.samples
        if s.name == runs
    }
    assert len(own - {OTHER}) == 2 and OTHER in own
    assert value(registry, runs, schedule=OTHER, status="succeeded") == 3
    kept = own - {OTHER}
    # First seen keeps its label: the next runs of the same schedules count there again,
    # and a new schedule goes to _other.
    Schedule.objects.update(next_run_at=state.db_now())
    mk("late-comer")
    assert run_once() == 0
    for name in kept:
        assert value(registry, runs, schedule=name, status="succeeded") == 2
    assert value(registry, runs, schedule=OTHER, status="succeeded") == 7
    assert value(registry, runs, schedule="late-comer", status="succeeded") is None


def test_the_cap_comes_from_the_setting(registry):
    with override_settings(DURABLE_SCHEDULES={"METRICS_MAX_SCHEDULES": 1}):
        metrics = prometheus.connect(registry)
    assert metrics.labels.cap == 1


@pytest.mark.vendor_independent  # a setting's check: no query
@pytest.mark.parametrize("bad", [-1, 1.5, "500", True, None, 10**6])
def test_a_bad_cap_is_a_system_check_error(bad):
    from django_durable_schedules.checks import check_setting_types

    with override_settings(DURABLE_SCHEDULES={"METRICS_MAX_SCHEDULES": bad}):
        ids = [m.id for m in check_setting_types()]
        assert "durable_schedules.E006" in ids
        from django_durable_schedules.conf import app_settings

        assert 0 <= app_settings.METRICS_MAX_SCHEDULES <= 100_000


@pytest.mark.vendor_independent  # a pure label rule searched by Hypothesis
@given(st.lists(st.text(max_size=300), max_size=60), st.integers(min_value=0, max_value=20))
def test_labels_are_bounded_and_stable(names, cap):
    labels = ScheduleLabels(cap)
    first = [labels(n) for n in names]
    again = [labels(n) for n in names]
    assert first == again  # a name never changes label
    own = set(first) - {OTHER}
    assert len(own) <= cap
    assert all(len(label) <= 128 for label in first)
    # the first distinct (bounded) names seen are the ones that got their own label
    seen: list[str] = []
    for n in names:
        if n and n[:128] not in seen:
            seen.append(n[:128])
    assert own == set(seen[:cap])


@pytest.mark.vendor_independent  # a pure label rule searched by Hypothesis
@given(st.one_of(st.text(), st.integers(), st.none()))
def test_status_labels_are_the_known_statuses_or_other(status):
    label = status_label(status)
    assert label == "other" or label == status


def test_no_query_is_added_to_a_run_by_the_metrics():
    """The claim and the completion pay the same queries with the metrics connected (the
    next-deadline gauge reads the database only when scraped)."""
    reg = prometheus_client.CollectorRegistry()

    def queries_of_a_run(name):
        mk(name, deadline_seconds=60)
        with CaptureQueriesContext(connection) as ctx:
            assert run_once(concurrency=1) == 0
        return len(ctx.captured_queries)

    without = queries_of_a_run("plain")
    Schedule.objects.all().delete()
    prometheus.connect(reg)
    try:
        with_metrics = queries_of_a_run("measured")
    finally:
        prometheus.disconnect(reg)
    assert with_metrics <= without


@pytest.mark.process
def test_a_real_run_scheduler_serves_the_per_schedule_metrics(start_worker):
    """``run_scheduler --metrics-port`` with ``METRICS_MAX_SCHEDULES`` 3: the first three
    schedules it runs keep their label, the next three are summed under ``_other``, and
    the next-deadline gauge is the database's owed slot plus the deadline."""
    import json
    import socket
    from urllib.request import urlopen

    from .conftest import wait_until

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    mk("watched", deadline_seconds=600)
    mk("bad", "tests.fail", max_attempts=1)
    worker = start_worker(
        "--metrics-port",
        str(port),
        "--metrics-addr",
        "127.0.0.1",
        env={"DDS_TEST_DURABLE_SCHEDULES": json.dumps({"METRICS_MAX_SCHEDULES": 3})},
    )
    wait_until(lambda: RunReceipt.objects.count() == 2, timeout=60, message="first runs")
    mk("third")
    wait_until(lambda: RunReceipt.objects.count() == 3, timeout=60, message="third run")
    for i in range(3):
        mk(f"beyond-{i}")
    wait_until(lambda: RunReceipt.objects.count() == 6, timeout=60, message="the rest")

    def scrape():
        try:
            return urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        except OSError:
            return ""

    runs = "durable_schedules_runs_total"
    body = wait_until(
        lambda: (
            (b := scrape()) and f'{runs}{{schedule="_other",status="succeeded"}} 3.0' in b and b
        ),
        timeout=30,
        message=f"the metrics\n{worker.output()[-3000:]}",
    )
    assert f'{runs}{{schedule="watched",status="succeeded"}} 1.0' in body
    assert f'{runs}{{schedule="bad",status="failed"}} 1.0' in body
    assert f'{runs}{{schedule="third",status="succeeded"}} 1.0' in body
    assert 'schedule="beyond-' not in body
    row = Schedule.objects.get(name="watched")
    deadline = (row.next_run_at + timedelta(seconds=600)).timestamp()
    from prometheus_client.parser import text_string_to_metric_families

    [gauge] = [
        sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
        if sample.name == "durable_schedules_next_deadline_timestamp_seconds"
    ]
    assert gauge == deadline


@pytest.mark.vendor_independent  # pure label rule
def test_every_receipt_status_is_a_label_of_its_own():
    """The label's statuses are the model's (derived, not copied): a status added to
    ``ReceiptStatus`` gets its own label, not ``other``."""
    from django_durable_schedules.contrib.labels import FAILURE_STATUSES, status_label
    from django_durable_schedules.models import ReceiptStatus

    assert [status_label(s) for s in ReceiptStatus.values] == list(ReceiptStatus.values)
    assert status_label("no such status") == "other"
    assert FAILURE_STATUSES == {"failed", "degraded", "lease_expired", "lease_lost", "missed"}
