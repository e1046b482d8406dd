"""Sentry Crons check-ins of every run (issue #26 item 5), with the real ``sentry_sdk`` and
a transport that keeps the envelopes in memory."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test.utils import override_settings
from hypothesis import given
from hypothesis import strategies as st

from django_durable_schedules import signals, state
from django_durable_schedules.models import RunAttempt, RunReceipt, Schedule
from django_durable_schedules.worker import Worker, WorkerOptions

sentry_sdk = pytest.importorskip("sentry_sdk")
from sentry_sdk.transport import Transport  # noqa: E402

from django_durable_schedules.contrib import install_configured, sentry  # noqa: E402

db = pytest.mark.django_db(transaction=True)


class MemoryTransport(Transport):
    """Keeps every envelope the SDK sends."""

    def __init__(self, options=None):
        super().__init__(options)
        self.envelopes = []

    def capture_envelope(self, envelope):
        self.envelopes.append(envelope)

    def flush(self, timeout, callback=None):
        return None

    def check_ins(self):
        return [
            item.payload.json
            for envelope in self.envelopes
            for item in envelope.items
            if item.type == "check_in"
        ]


@pytest.fixture
def transport():
    memory = MemoryTransport()
    sentry_sdk.init(
        dsn="https://public@sentry.example.invalid/1",
        transport=memory,
        default_integrations=False,
        auto_enabling_integrations=False,
        environment="test",
    )
    sentry.install()
    yield memory
    sentry.uninstall()
    sentry_sdk.init()  # no DSN: a client that sends nothing
    assert not signals.run_claimed.has_listeners()


def run_once():
    return Worker(WorkerOptions(once=True, concurrency=2)).run()


def by_slug(check_ins, slug):
    return [c for c in check_ins if c["monitor_slug"] == slug]


@db
def test_a_successful_run_checks_in_progress_then_ok(transport):
    row = Schedule.objects.create(
        name="Nightly.Report",
        callback="tests.noop",
        kind="cron",
        cron="*/5 * * * *",
        timezone="Europe/Paris",
        timeout_seconds=90,
        jitter_seconds=30,
    )
    Schedule.objects.filter(pk=row.pk).update(next_run_at=state.db_now() - timedelta(seconds=1))
    assert run_once() == 0
    attempt = RunAttempt.objects.get(schedule=row)
    started, finished = by_slug(transport.check_ins(), "nightly-report")
    assert started["status"] == "in_progress" and finished["status"] == "ok"
    assert started["check_in_id"] == finished["check_in_id"] == attempt.id.hex
    assert started["monitor_config"] == {
        "schedule": {"type": "crontab", "value": "*/5 * * * *"},
        "timezone": "Europe/Paris",
        "checkin_margin": 2,
        "max_runtime": 2,
    }
    assert "monitor_config" not in finished
    assert finished["duration"] is not None and 0 <= finished["duration"] < 30
    assert finished["environment"] == "test"


@db
def test_a_failed_run_checks_in_error_and_an_interval_is_an_interval(transport):
    Schedule.objects.create(
        name="hourly-sync", callback="tests.fail", kind="interval", interval_seconds=7200
    )
    Schedule.objects.create(
        name="skipper", callback="tests.skip", kind="interval", interval_seconds=90
    )
    assert run_once() == 0
    assert RunReceipt.objects.get(schedule__name="hourly-sync").status == "failed"
    started, finished = by_slug(transport.check_ins(), "hourly-sync")
    assert (started["status"], finished["status"]) == ("in_progress", "error")
    assert started["check_in_id"] == finished["check_in_id"]
    assert started["monitor_config"]["schedule"] == {"type": "interval", "value": 2, "unit": "hour"}
    assert started["monitor_config"]["timezone"]
    assert "max_runtime" not in started["monitor_config"]  # no timeout: Sentry's default
    skipped = by_slug(transport.check_ins(), "skipper")
    assert [c["status"] for c in skipped] == ["in_progress", "ok"]  # SkipRun is no failure
    assert skipped[0]["monitor_config"]["schedule"] == {
        "type": "interval",
        "value": 2,
        "unit": "minute",
    }


@db
def test_a_once_schedule_sends_no_config(transport):
    Schedule.objects.create(
        name="one-shot", callback="tests.noop", kind="once", run_at=state.db_now()
    )
    assert run_once() == 0
    started, finished = by_slug(transport.check_ins(), "one-shot")
    assert "monitor_config" not in started and finished["status"] == "ok"


@db
def test_a_check_in_that_raises_never_reaches_the_worker(transport, monkeypatch, caplog):
    def broken(**kwargs):
        raise RuntimeError("sentry down")

    monkeypatch.setattr(sentry, "capture_checkin", broken)
    Schedule.objects.create(name="a", callback="tests.noop", kind="interval", interval_seconds=60)
    assert run_once() == 0
    assert RunReceipt.objects.get(schedule__name="a").status == "succeeded"
    assert "sentry down" in caplog.text


@db
def test_the_config_is_read_once_per_ttl(transport, django_assert_max_num_queries):
    row = Schedule.objects.create(
        name="cached", callback="tests.noop", kind="interval", interval_seconds=60
    )
    sentry.config_for(row.pk)
    with django_assert_max_num_queries(0):
        assert sentry.config_for(row.pk)["schedule"]["unit"] == "minute"


def test_the_setting_installs_it():
    with override_settings(DURABLE_SCHEDULES={"SENTRY_CRONS": True}):
        try:
            assert install_configured() == ["sentry"]
            assert sentry.is_installed() and signals.run_finished.has_listeners()
        finally:
            sentry.uninstall()
    with override_settings(DURABLE_SCHEDULES={"SENTRY_CRONS": "yes"}):
        from django_durable_schedules.checks import check_setting_types

        assert "durable_schedules.E006" in [m.id for m in check_setting_types()]
        assert install_configured() == []  # only True turns it on


@given(st.text(max_size=400))
def test_slugs_are_what_sentry_accepts(name):
    slug = sentry.monitor_slug(name)
    assert re.fullmatch(r"[a-z0-9_-]{1,50}", slug)


def test_long_names_keep_distinct_slugs():
    a, b = "x" * 100 + "a", "x" * 100 + "b"
    assert sentry.monitor_slug(a) != sentry.monitor_slug(b)


@pytest.mark.parametrize(
    "seconds, expected",
    [
        (86400 * 2, (2, "day")),
        (3600, (1, "hour")),
        (300, (5, "minute")),
        (30, (1, "minute")),
        (90, (2, "minute")),
    ],
)
def test_intervals_in_sentry_units(seconds, expected):
    schedule = sentry.interval_schedule(seconds)
    assert (schedule["value"], schedule["unit"]) == expected
