"""Prometheus metrics fed by the worker signals (skipped without prometheus-client)."""

from io import StringIO
from urllib.request import urlopen

import pytest
from django.core.management import CommandError, call_command

from django_durable_schedules import signals
from django_durable_schedules.models import Schedule
from django_durable_schedules.worker import Worker, WorkerOptions

prometheus_client = pytest.importorskip("prometheus_client")
from django_durable_schedules.contrib import prometheus  # noqa: E402

pytestmark = pytest.mark.django_db(transaction=True)


def mk(name, callback, **kw):
    return Schedule.objects.create(
        name=name, callback=callback, kind="interval", interval_seconds=3600, **kw
    )


@pytest.fixture
def registry():
    reg = prometheus_client.CollectorRegistry()
    yield reg
    prometheus.disconnect(reg)
    assert not signals.run_finished.has_listeners()


def test_runs_durations_and_lateness_are_counted(registry):
    metrics = prometheus.connect(registry)
    assert prometheus.connect(registry) is metrics  # idempotent
    mk("ok", "tests.noop")
    mk("bad", "tests.fail")
    mk("skip", "tests.skip")
    assert Worker(WorkerOptions(once=True, concurrency=2)).run() == 0
    value = registry.get_sample_value
    assert value("durable_schedules_runs_total", {"schedule": "ok", "status": "succeeded"}) == 1
    assert value("durable_schedules_runs_total", {"schedule": "bad", "status": "failed"}) == 1
    assert value("durable_schedules_runs_total", {"schedule": "skip", "status": "skipped"}) == 1
    assert value("durable_schedules_runs_claimed_total", {"schedule": "ok"}) == 1
    assert value("durable_schedules_run_duration_seconds_count", {"schedule": "bad"}) == 1
    assert value("durable_schedules_run_lateness_seconds_count", {"schedule": "ok"}) == 1
    assert value("durable_schedules_run_lateness_seconds_sum", {"schedule": "ok"}) >= 0


def test_disconnect_stops_counting(registry):
    prometheus.connect(registry)
    prometheus.disconnect(registry)
    mk("ok", "tests.noop")
    Worker(WorkerOptions(once=True)).run()
    assert (
        registry.get_sample_value(
            "durable_schedules_runs_total", {"schedule": "ok", "status": "succeeded"}
        )
        is None
    )


def test_serve_exposes_the_registry(registry):
    prometheus.connect(registry)
    mk("ok", "tests.noop")
    Worker(WorkerOptions(once=True)).run()
    server = prometheus.serve(0, "127.0.0.1", registry)
    try:
        body = urlopen(f"http://127.0.0.1:{server.server_port}/metrics", timeout=10).read().decode()
    finally:
        server.shutdown()
        server.server_close()
    assert 'durable_schedules_runs_total{schedule="ok",status="succeeded"} 1.0' in body


def test_run_scheduler_metrics_port(monkeypatch):
    served = []
    real_serve = prometheus.serve

    def serve(port, addr="0.0.0.0", registry=None):
        server = real_serve(0, "127.0.0.1", registry)
        served.append((port, addr, server))
        return server

    monkeypatch.setattr(prometheus, "serve", serve)
    before = prometheus_client.REGISTRY.get_sample_value(
        "durable_schedules_runs_total", {"schedule": "cmd", "status": "succeeded"}
    )
    mk("cmd", "tests.noop")
    seen = []
    real_disconnect = prometheus.disconnect

    def disconnect(registry=None):
        seen.append(
            prometheus_client.REGISTRY.get_sample_value(
                "durable_schedules_runs_total", {"schedule": "cmd", "status": "succeeded"}
            )
        )
        real_disconnect(registry)

    monkeypatch.setattr(prometheus, "disconnect", disconnect)
    call_command(
        "run_scheduler",
        "--once",
        "--metrics-port",
        "9464",
        "--metrics-addr",
        "127.0.0.1",
        verbosity=0,
        stdout=StringIO(),
        stderr=StringIO(),
    )
    assert [(p, a) for p, a, _ in served] == [(9464, "127.0.0.1")]
    assert before is None and seen == [1.0]  # counted while the command ran
    # stopped and disconnected when the command returned
    assert not signals.run_finished.has_listeners()
    with pytest.raises(OSError):
        urlopen(f"http://127.0.0.1:{served[0][2].server_port}/metrics", timeout=2)


def test_metrics_port_must_be_a_port():
    with pytest.raises(CommandError):
        call_command("run_scheduler", "--once", "--metrics-port", "70000")


def test_a_taken_metrics_port_is_a_command_error():
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(CommandError, match="cannot serve metrics"):
            call_command(
                "run_scheduler",
                "--once",
                "--metrics-port",
                str(port),
                "--metrics-addr",
                "127.0.0.1",
                verbosity=0,
                stdout=StringIO(),
            )
    assert not prometheus.is_connected()


def test_the_command_leaves_a_projects_own_connection_alone(monkeypatch):
    monkeypatch.setattr(
        prometheus, "serve", lambda port, addr="", registry=None: _real_serve(0, "127.0.0.1")
    )
    prometheus.connect()
    try:
        call_command(
            "run_scheduler", "--once", "--metrics-port", "1", verbosity=0, stdout=StringIO()
        )
        assert prometheus.is_connected()
    finally:
        prometheus.disconnect()


_real_serve = prometheus.serve


def test_what_on_call_alerts_on(registry):
    """Last success per schedule, runs in flight, recovered leases, worker up, build info."""
    import time
    from datetime import timedelta

    from django_durable_schedules import __version__, state

    prometheus.connect(registry)
    # A lease another worker left behind, already expired: this worker recovers it.
    mk("dead", "tests.noop")
    [claim] = state.claim_due(worker="gone")
    Schedule.objects.filter(pk=claim.schedule_id).update(
        lease_expires_at=state.db_now() - timedelta(seconds=5)
    )
    mk("ok", "tests.noop")
    mk("bad", "tests.fail")
    before = time.time()
    assert Worker(WorkerOptions(once=True, concurrency=2)).run() == 0
    value = registry.get_sample_value
    succeeded_at = value("durable_schedules_last_success_timestamp_seconds", {"schedule": "ok"})
    assert succeeded_at is not None and before - 5 <= succeeded_at <= time.time() + 5
    assert value("durable_schedules_last_success_timestamp_seconds", {"schedule": "bad"}) is None
    assert value("durable_schedules_runs_in_flight") == 0
    assert value("durable_schedules_leases_recovered_total") == 1
    assert value("durable_schedules_worker_up") == 1
    [build] = [
        s for m in registry.collect() if m.name == "durable_schedules_build" for s in m.samples
    ]
    assert build.value == 1 and build.labels["version"] == __version__
    assert set(build.labels) == {"version", "python", "django"}
