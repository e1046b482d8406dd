"""Prometheus metrics of a worker, fed by :mod:`django_durable_schedules.signals`.

Needs the ``prometheus`` extra (``pip install django-durable-schedules[prometheus]``). The
signals are sent by the ``run_scheduler`` process, so the metrics live there:

* ``manage.py run_scheduler --metrics-port 9464`` connects them and serves ``/metrics``;
* or call :func:`connect` yourself (e.g. in your ``AppConfig.ready()``) and expose the
  registry with your own exporter.

Metrics (``schedule`` is the schedule's name; ``status`` a receipt status):

=======================================================  ==========  ==========================
name                                                     type        meaning
=======================================================  ==========  ==========================
``durable_schedules_runs_claimed_total{schedule}``       counter     attempts claimed
``durable_schedules_runs_total{schedule,status}``        counter     receipts written by workers
``durable_schedules_run_duration_seconds{schedule}``     histogram   callback run time (seconds)
``durable_schedules_run_lateness_seconds{schedule}``     histogram   slot to claim (seconds)
``durable_schedules_outcomes_dropped_total{schedule}``   counter     late outcomes with no
                                                                     receipt left to write
=======================================================  ==========  ==========================

Workers alive, overdue schedules and expired leases are database-wide facts: read them from
the health endpoint or ``manage.py schedules health`` rather than from one process.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram, start_http_server

from .. import signals

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
        )

    def on_claimed(self, sender: Any, claim: Any, **kwargs: Any) -> None:
        """``run_claimed`` receiver."""
        self.runs_claimed.labels(claim.schedule_name).inc()
        self.run_lateness.labels(claim.schedule_name).observe(max(0.0, claim.lateness))

    def on_finished(
        self, sender: Any, receipt: Any, schedule_name: str, duration: float | None, **kwargs: Any
    ) -> None:
        """``run_finished`` receiver."""
        self.runs.labels(schedule_name, receipt.status).inc()
        if duration is not None:
            self.run_duration.labels(schedule_name).observe(duration)

    def on_dropped(self, sender: Any, schedule_name: str, **kwargs: Any) -> None:
        """``outcome_dropped`` receiver."""
        self.outcomes_dropped.labels(schedule_name).inc()


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
    for collector in (
        metrics.runs_claimed,
        metrics.runs,
        metrics.run_duration,
        metrics.run_lateness,
        metrics.outcomes_dropped,
    ):
        registry.unregister(collector)


def serve(port: int, addr: str = "0.0.0.0", registry: CollectorRegistry | None = None) -> Any:
    """Serve ``registry`` on ``http://addr:port/metrics`` from a daemon thread (port 0 picks
    a free one: read ``server.server_port``). Returns the server; ``server.shutdown()``
    stops it. Raises ``OSError`` when the port is taken."""
    server, _thread = start_http_server(port, addr=addr, registry=registry or REGISTRY)
    return server
