"""Prometheus metrics of a worker, fed by :mod:`django_durable_schedules.signals`.

Needs the ``prometheus`` extra (``pip install django-durable-schedules[prometheus]``). The
signals are sent by the ``run_scheduler`` process, so the metrics live there:

* ``manage.py run_scheduler --metrics-port 9464`` connects them and serves ``/metrics``;
* or call :func:`connect` yourself (e.g. in your ``AppConfig.ready()``) and expose the
  registry with your own exporter.

Metrics (``schedule`` is the schedule's name; ``status`` a receipt status):

=============================================================  =========  ====================
name                                                           type       meaning
=============================================================  =========  ====================
``durable_schedules_runs_claimed_total{schedule}``             counter    attempts claimed
``durable_schedules_runs_total{schedule,status}``              counter    receipts written by
                                                                          this worker (incl.
                                                                          ``lease_lost``,
                                                                          ``lease_expired``)
``durable_schedules_run_duration_seconds{schedule}``           histogram  run time (seconds;
                                                                          a database-queue
                                                                          task: its enqueue)
``durable_schedules_run_lateness_seconds{schedule}``           histogram  slot to claim (s)
``durable_schedules_last_success_timestamp_seconds{schedule}`` gauge      when the schedule
                                                                          last succeeded
                                                                          here (Unix seconds)
``durable_schedules_runs_in_flight``                           gauge      runs claimed and not
                                                                          yet receipted
``durable_schedules_leases_recovered_total``                   counter    expired leases this
                                                                          worker recovered
``durable_schedules_outcomes_dropped_total{schedule}``         counter    late outcomes with no
                                                                          receipt left to write
``durable_schedules_worker_up``                                gauge      1 while the metrics
                                                                          are connected
``durable_schedules_build_info{version,python,django}``        info       what runs
=============================================================  =========  ====================

Alert on, for example, ``time() - durable_schedules_last_success_timestamp_seconds > 2 *
<the schedule's period>`` (take the ``max`` over workers: each worker reports its own
successes), ``increase(durable_schedules_leases_recovered_total[15m]) > 0`` (a worker died or
stalled), ``durable_schedules_worker_up == 0`` or a missing series (the process is gone).

**Cardinality.** The per-schedule series are about ``schedules × (statuses seen + 6)`` per
worker: 1,000 schedules are ~10,000 series, fine for Prometheus; with tens of thousands of
schedules, aggregate in a recording rule, drop the ``schedule`` label at scrape time
(``metric_relabel_configs``), or read the database-wide facts instead.

Workers alive, overdue schedules and expired leases are database-wide facts: read them from
the health endpoints (``health/probe/`` for machines) or ``manage.py schedules health``
rather than from one process.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from typing import Any

import django
from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    start_http_server,
)

from .. import __version__, signals

#: Receipt statuses that are a success (``models.SUCCESS_STATUSES``; kept here so that this
#: module imports before the app registry is ready).
SUCCESS_STATUSES = ("succeeded", "enqueued")

#: Histogram buckets of ``run_duration_seconds`` (seconds).
DURATION_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)
#: Histogram buckets of ``run_lateness_seconds`` (seconds).
LATENESS_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600)


@dataclass(frozen=True)
class Metrics:
    """The metric objects registered in one ``registry``, and the signal receivers that
    update them."""

    registry: CollectorRegistry
    runs_claimed: Counter
    runs: Counter
    run_duration: Histogram
    run_lateness: Histogram
    outcomes_dropped: Counter
    last_success: Gauge
    in_flight: Gauge
    leases_recovered: Counter
    worker_up: Gauge
    build_info: Info

    @classmethod
    def create(cls, registry: CollectorRegistry) -> Metrics:
        """Register the metrics in ``registry`` (raises ``ValueError`` if already there)."""
        return cls(
            registry=registry,
            runs_claimed=Counter(
                "durable_schedules_runs_claimed",
                "Run attempts claimed by this worker.",
                ["schedule"],
                registry=registry,
            ),
            runs=Counter(
                "durable_schedules_runs",
                "Run receipts written by this worker, by receipt status.",
                ["schedule", "status"],
                registry=registry,
            ),
            run_duration=Histogram(
                "durable_schedules_run_duration_seconds",
                "How long callbacks ran (seconds).",
                ["schedule"],
                buckets=DURATION_BUCKETS,
                registry=registry,
            ),
            run_lateness=Histogram(
                "durable_schedules_run_lateness_seconds",
                "Seconds from a run's nominal slot to its claim.",
                ["schedule"],
                buckets=LATENESS_BUCKETS,
                registry=registry,
            ),
            outcomes_dropped=Counter(
                "durable_schedules_outcomes_dropped",
                "Late outcomes dropped because their attempt was pruned (or not storable).",
                ["schedule"],
                registry=registry,
            ),
            last_success=Gauge(
                "durable_schedules_last_success_timestamp_seconds",
                "When the schedule last succeeded on this worker (Unix time, seconds).",
                ["schedule"],
                registry=registry,
            ),
            in_flight=Gauge(
                "durable_schedules_runs_in_flight",
                "Runs this worker claimed and has not receipted yet.",
                registry=registry,
            ),
            leases_recovered=Counter(
                "durable_schedules_leases_recovered",
                "Expired leases this worker recovered (their holder died or stalled).",
                registry=registry,
            ),
            worker_up=Gauge(
                "durable_schedules_worker_up",
                "1 while this worker's metrics are connected.",
                registry=registry,
            ),
            build_info=Info(
                "durable_schedules_build",
                "The versions this worker runs.",
                registry=registry,
            ),
        )

    def on_claimed(self, sender: Any, claim: Any, **kwargs: Any) -> None:
        """``run_claimed`` receiver."""
        self.runs_claimed.labels(claim.schedule_name).inc()
        self.run_lateness.labels(claim.schedule_name).observe(max(0.0, claim.lateness))
        self.in_flight.inc()

    def on_finished(
        self, sender: Any, receipt: Any, schedule_name: str, duration: float | None, **kwargs: Any
    ) -> None:
        """``run_finished`` receiver."""
        self.runs.labels(schedule_name, receipt.status).inc()
        if duration is not None:
            self.run_duration.labels(schedule_name).observe(duration)
        if receipt.status in SUCCESS_STATUSES:
            self.last_success.labels(schedule_name).set(receipt.finished_at.timestamp())
        self.in_flight.dec()

    def on_dropped(self, sender: Any, schedule_name: str, **kwargs: Any) -> None:
        """``outcome_dropped`` receiver."""
        self.outcomes_dropped.labels(schedule_name).inc()
        self.in_flight.dec()

    def on_recovered(self, sender: Any, count: int, **kwargs: Any) -> None:
        """``leases_recovered`` receiver."""
        self.leases_recovered.inc(count)


_connected: dict[int, Metrics] = {}


def connect(registry: CollectorRegistry | None = None) -> Metrics:
    """Register the metrics in ``registry`` (default: ``prometheus_client.REGISTRY``) and
    connect them to the worker signals. Idempotent per registry; returns the
    :class:`Metrics`."""
    registry = REGISTRY if registry is None else registry
    key = id(registry)
    if key not in _connected:
        metrics = Metrics.create(registry)
        signals.run_claimed.connect(
            metrics.on_claimed, weak=False, dispatch_uid=f"dds-prometheus-claimed-{key}"
        )
        signals.run_finished.connect(
            metrics.on_finished, weak=False, dispatch_uid=f"dds-prometheus-finished-{key}"
        )
        signals.outcome_dropped.connect(
            metrics.on_dropped, weak=False, dispatch_uid=f"dds-prometheus-dropped-{key}"
        )
        signals.leases_recovered.connect(
            metrics.on_recovered, weak=False, dispatch_uid=f"dds-prometheus-recovered-{key}"
        )
        metrics.worker_up.set(1)
        metrics.build_info.info(
            {
                "version": __version__,
                "python": platform.python_version(),
                "django": django.get_version(),
            }
        )
        _connected[key] = metrics
    return _connected[key]


def is_connected(registry: CollectorRegistry | None = None) -> bool:
    """Whether :func:`connect` was called for ``registry`` (and not undone)."""
    return id(REGISTRY if registry is None else registry) in _connected


def disconnect(registry: CollectorRegistry | None = None) -> None:
    """Disconnect the receivers and unregister the metrics of ``registry`` (a no-op if
    :func:`connect` was not called for it)."""
    registry = REGISTRY if registry is None else registry
    key = id(registry)
    metrics = _connected.pop(key, None)
    if metrics is None:
        return
    signals.run_claimed.disconnect(dispatch_uid=f"dds-prometheus-claimed-{key}")
    signals.run_finished.disconnect(dispatch_uid=f"dds-prometheus-finished-{key}")
    signals.outcome_dropped.disconnect(dispatch_uid=f"dds-prometheus-dropped-{key}")
    signals.leases_recovered.disconnect(dispatch_uid=f"dds-prometheus-recovered-{key}")
    for collector in (
        metrics.runs_claimed,
        metrics.runs,
        metrics.run_duration,
        metrics.run_lateness,
        metrics.outcomes_dropped,
        metrics.last_success,
        metrics.in_flight,
        metrics.leases_recovered,
        metrics.worker_up,
        metrics.build_info,
    ):
        registry.unregister(collector)


def serve(port: int, addr: str = "0.0.0.0", registry: CollectorRegistry | None = None) -> Any:
    """Serve ``registry`` on ``http://addr:port/metrics`` from a daemon thread (port 0 picks
    a free one: read ``server.server_port``). Returns the server; ``server.shutdown()``
    stops it. Raises ``OSError`` when the port is taken."""
    server, _thread = start_http_server(port, addr=addr, registry=registry or REGISTRY)
    return server
