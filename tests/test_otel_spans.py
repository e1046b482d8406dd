"""One OpenTelemetry span per run (issue #26 item 5), with the real SDK and an in-memory
exporter; its trace context handed to a real Celery task (eager mode)."""

from __future__ import annotations

import pytest
from django.test.utils import override_settings

from django_durable_schedules import register, signals, state
from django_durable_schedules.models import RunAttempt, RunReceipt, Schedule
from django_durable_schedules.registry import registry
from django_durable_schedules.worker import Worker, WorkerOptions
from django_durable_schedules.worker.execution import hooks

pytest.importorskip("opentelemetry.sdk")
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import StatusCode

from django_durable_schedules.contrib import install_configured, otel

pytestmark = pytest.mark.django_db(transaction=True)
P = "durable_schedules"


@pytest.fixture
def exporter():
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    otel.install(tracer_provider=provider)
    yield memory
    otel.uninstall()
    assert not hooks.RUN_CONTEXTS and not hooks.DISPATCH_HEADERS
    assert not signals.run_claimed.has_listeners()


@pytest.fixture
def cleanup_registry():
    before = set(registry.names())
    yield
    for name in set(registry.names()) - before:
        registry.remove(name)


def mk(name, callback, **kw):
    return Schedule.objects.create(
        name=name, callback=callback, kind="interval", interval_seconds=3600, **kw
    )


def run_once():
    return Worker(WorkerOptions(once=True, concurrency=2)).run()


def spans_by_schedule(exporter):
    return {s.attributes[f"{P}.schedule.name"]: s for s in exporter.get_finished_spans()}


def test_one_span_per_run_with_its_attributes_and_outcome(exporter):
    ok = mk("ok", "tests.noop")
    mk("bad", "tests.fail")
    mk("skip", "tests.skip")
    assert run_once() == 0
    spans = spans_by_schedule(exporter)
    assert set(spans) == {"ok", "bad", "skip"}
    span = spans["ok"]
    attempt = RunAttempt.objects.get(schedule=ok)
    assert span.name == "durable_schedules.run ok"
    assert span.attributes[f"{P}.schedule.id"] == str(ok.pk)
    assert span.attributes[f"{P}.occurrence"] == 1 and span.attributes[f"{P}.attempt"] == 1
    assert span.attributes[f"{P}.lateness_seconds"] == attempt.lateness
    assert span.attributes[f"{P}.scheduled_for"] == attempt.scheduled_for.isoformat()
    assert span.attributes[f"{P}.idempotency_key"] == attempt.idempotency_key
    assert span.attributes[f"{P}.status"] == "succeeded"
    assert span.status.status_code == StatusCode.UNSET
    assert span.end_time >= span.start_time
    bad = spans["bad"]
    assert bad.attributes[f"{P}.status"] == "failed"
    assert bad.status.status_code == StatusCode.ERROR
    assert "RuntimeError" in bad.status.description
    assert bad.attributes["error.type"] == RunReceipt.objects.get(schedule__name="bad").error_type
    assert spans["skip"].status.status_code == StatusCode.UNSET


def test_the_run_span_is_current_while_the_callback_runs(exporter, cleanup_registry):
    seen = []

    def look(ctx):
        seen.append(trace.get_current_span().get_span_context())

    register("tests.otel_look", look)
    mk("look", "tests.otel_look")
    assert run_once() == 0
    [span] = exporter.get_finished_spans()
    [context] = seen
    assert (context.trace_id, context.span_id) == (
        span.context.trace_id,
        span.context.span_id,
    )


def test_a_celery_task_gets_the_traceparent(exporter, cleanup_registry):
    celery = pytest.importorskip("celery")
    app = celery.Celery("dds-otel-tests", set_as_current=False)
    app.conf.task_always_eager = True
    received = []

    @app.task(bind=True, name="tests.otel_celery")
    def remember(self, **payload):
        headers = self.request.headers or {}
        received.append(headers.get("traceparent") or getattr(self.request, "traceparent", None))
        return payload

    register("tests.otel_celery", remember)
    mk("celery-run", "tests.otel_celery", payload={"n": 1})
    assert run_once() == 0
    assert RunReceipt.objects.get(schedule__name="celery-run").status == "enqueued"
    [span] = exporter.get_finished_spans()
    [traceparent] = received
    version, trace_id, parent_id, flags = traceparent.split("-")
    assert (version, trace_id, parent_id) == (
        "00",
        f"{span.context.trace_id:032x}",
        f"{span.context.span_id:016x}",
    )
    assert int(flags, 16) & 1  # sampled


def test_without_the_integration_nothing_wraps_a_run(monkeypatch):
    assert not hooks.RUN_CONTEXTS and not hooks.DISPATCH_HEADERS

    def fail(*args, **kwargs):
        raise AssertionError("a hook ran without an integration installed")

    monkeypatch.setattr(hooks, "around", fail)
    mk("plain", "tests.noop")
    assert run_once() == 0
    assert RunReceipt.objects.get().status == "succeeded"
    assert hooks.dispatch_headers(state.Claim.__new__(state.Claim)) == {}


def test_a_hook_that_raises_never_fails_the_run(exporter, caplog):
    def broken(claim):
        raise RuntimeError("tracing backend bug")

    hooks.add(run_context=broken, headers=broken)
    try:
        mk("sturdy", "tests.noop")
        assert run_once() == 0
    finally:
        hooks.remove(run_context=broken, headers=broken)
    assert RunReceipt.objects.get().status == "succeeded"
    assert "tracing backend bug" in caplog.text
    assert [s.name for s in exporter.get_finished_spans()] == ["durable_schedules.run sturdy"]


@pytest.mark.vendor_independent  # hook installation: no query
def test_the_setting_installs_it_on_the_global_provider():
    with override_settings(DURABLE_SCHEDULES={"OTEL_SPANS": True}):
        try:
            assert install_configured() == ["otel"]
            assert otel.is_installed() and hooks.RUN_CONTEXTS
        finally:
            otel.uninstall()
    assert not otel.is_installed()


def test_a_run_in_a_child_process_still_gets_its_span(exporter):
    """A callback with ``timeout_seconds`` runs in a child process (hard timeouts): the
    span covers it from the worker; the child does not trace it twice."""
    mk("isolated", "tests.noop", timeout_seconds=30)
    assert run_once() == 0
    assert RunReceipt.objects.get().status == "succeeded"
    [span] = exporter.get_finished_spans()
    assert span.attributes[f"{P}.status"] == "succeeded"
