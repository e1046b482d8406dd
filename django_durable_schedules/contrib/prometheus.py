"""Prometheus metrics of a worker, fed by :mod:`django_durable_schedules.signals`.

Needs the ``prometheus`` extra (``pip install django-durable-schedules[prometheus]``). The
signals are sent by the ``run_scheduler`` process, so the metrics live there:

* ``manage.py run_scheduler --metrics-port 9464`` connects them and serves ``/metrics``;
* or call :func:`connect` yourself (e.g. in your ``AppConfig.ready()``) and expose the
  registry with your own exporter.

Metrics (``schedule`` is the schedule's name, capped: see below; ``status`` a receipt
status). Counters are per worker process: ``sum by (schedule)`` over workers.

* ``durable_schedules_runs_claimed_total{schedule}`` (counter): attempts claimed.
* ``durable_schedules_runs_total{schedule,status}`` (counter): receipts this worker wrote,
  by status (incl. ``lease_lost``, ``lease_expired``).
* ``durable_schedules_missed_slots_total{schedule}`` (counter): slots passed over before a
  run this worker claimed (downtime coalesced, a retry's wait).
* ``durable_schedules_overlap_skipped_slots_total{schedule}`` (counter): slots skipped
  because they came due while a run ran (``overlap_policy``).
* ``durable_schedules_excluded_slots_total{schedule}`` (counter): slots an exclusion
  calendar left out.
* ``durable_schedules_deadline_missed_total{schedule}`` (counter): occurrences that missed
  their ``deadline_seconds``.
* ``durable_schedules_next_deadline_timestamp_seconds{schedule}`` (gauge): the owed slot
  plus ``deadline_seconds`` (Unix seconds), database-wide, read at scrape time
  (:mod:`.prometheus_deadlines`).
* ``durable_schedules_run_duration_seconds{schedule}`` (histogram): run time (seconds; a
  database-queue task: its enqueue).
* ``durable_schedules_run_lateness_seconds{schedule}`` (histogram): slot to claim (s).
* ``durable_schedules_last_success_timestamp_seconds{schedule}`` (gauge): when the schedule
  last succeeded here (Unix seconds).
* ``durable_schedules_runs_in_flight`` (gauge): runs claimed and not yet receipted.
* ``durable_schedules_leases_recovered_total`` (counter): expired leases this worker
  recovered.
* ``durable_schedules_outcomes_dropped_total{schedule}`` (counter): late outcomes with no
  receipt left to write.
* ``durable_schedules_worker_up`` (gauge): 1 while the metrics are connected.
* ``durable_schedules_build_info{version,python,django}`` (info): what runs.

Where the counts come from (no query on the hot path): ``missed_slots`` is each claim's
``missed_slots`` (``run_claimed``), ``overlap_skipped_slots`` each receipt's
``slots_skipped`` (``run_finished``); ``excluded_slots`` and ``deadline_missed`` count the
``excluded`` (their ``slots``) and ``deadline_missed`` events written by this process
(``schedule_changed``, sent on commit: each event is written once, by one worker). Slots a
claim receipts ``missed`` (``misfire_grace_seconds``) or skips (``misfire_policy`` skip)
without running are in the schedule's ``missed_count`` (admin, API, health), not here.

Alert on, for example, ``time() - durable_schedules_last_success_timestamp_seconds > 2 *
<the schedule's period>`` (take the ``max`` over workers: each worker reports its own
successes), ``increase(durable_schedules_deadline_missed_total[15m]) > 0``,
``time() > max by (schedule) (durable_schedules_next_deadline_timestamp_seconds)``,
``increase(durable_schedules_leases_recovered_total[15m]) > 0`` (a worker died or
stalled), ``durable_schedules_worker_up == 0`` or a missing series (the process is gone).
docs/monitoring-integrations.md has complete rules.

**Cardinality.** The first ``DURABLE_SCHEDULES["METRICS_MAX_SCHEDULES"]`` schedules (default
500) a process sees get their own ``schedule`` label and keep it; every later one is summed
under ``schedule="_other"`` (no next-deadline series: a timestamp does not sum). Label
values are bounded (a name at most 128 characters; an unknown status is ``other``). That is
about ``cap × (statuses seen + 9)`` series per worker at most.

Workers alive, overdue schedules and expired leases are database-wide facts: read them from
the health endpoints (``health/probe/`` for machines) or ``manage.py schedules health``
rather than from one process.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass, field
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
from ..conf import app_settings
from .labels import ScheduleLabels, status_label
from .prometheus_deadlines import DeadlineCollector

#: Receipt statuses that are a success (``models.SUCCESS_STATUSES``; kept here so that this
#: module imports before the app registry is ready).
SUCCESS_STATUSES = ("succeeded", "enqueued")

#: Histogram buckets of ``run_duration_seconds`` (seconds).
DURATION_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)
#: Histogram buckets of ``run_lateness_seconds`` (seconds).
LATENESS_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600)
#: Largest increment one event or receipt adds to a slot counter (a bound on a value read
#: from a row).
MAX_SLOTS = 10**12


def _slots(value: Any) -> int:
    """A slot count from a receipt, a claim or an event, bounded to ``[0, MAX_SLOTS]``;
    anything that is no whole number is 0."""
    if not isinstance(value, int) or isinstance(value, bool):
        return 0
    return min(MAX_SLOTS, max(0, value))


def _counter(name: str, doc: str, registry: CollectorRegistry, *labels: str) -> Counter:
    return Counter(name, doc, list(labels), registry=registry)


def _gauge(name: str, doc: str, registry: CollectorRegistry, *labels: str) -> Gauge:
    return Gauge(name, doc, list(labels), registry=registry)


@dataclass(frozen=True)
class Metrics:
    """The metric objects registered in one ``registry``, and the signal receivers that
    update them. ``labels`` gives each schedule its (capped) label."""

    registry: CollectorRegistry
    labels: ScheduleLabels
    runs_claimed: Counter
    runs: Counter
    missed_slots: Counter
    overlap_skipped: Counter
    excluded_slots: Counter
    deadline_missed: Counter
    run_duration: Histogram
    run_lateness: Histogram
    outcomes_dropped: Counter
    last_success: Gauge
    in_flight: Gauge
    leases_recovered: Counter
    worker_up: Gauge
    build_info: Info
    extra: list[Any] = field(default_factory=list)  # other collectors (next deadline)

    @classmethod
    def create(
        cls, registry: CollectorRegistry, max_schedules: int | None = None, deadlines: bool = True
    ) -> Metrics:
        """Register the metrics in ``registry`` (raises ``ValueError`` if already there).
        ``max_schedules``: the label cap (default: setting ``METRICS_MAX_SCHEDULES``);
        ``deadlines``: also the next-deadline gauge (a query per scrape)."""
        cap = app_settings.METRICS_MAX_SCHEDULES if max_schedules is None else max_schedules
        labels = ScheduleLabels(cap)
        r = registry
        metrics = cls(
            registry=r,
            labels=labels,
            runs_claimed=_counter(
                "durable_schedules_runs_claimed",
                "Run attempts claimed by this worker.",
                r,
                "schedule",
            ),
            runs=_counter(
                "durable_schedules_runs",
                "Run receipts written by this worker, by receipt status.",
                r,
                "schedule",
                "status",
            ),
            missed_slots=_counter(
                "durable_schedules_missed_slots",
                "Slots passed over before a run this worker claimed.",
                r,
                "schedule",
            ),
            overlap_skipped=_counter(
                "durable_schedules_overlap_skipped_slots",
                "Slots skipped because they came due while a run ran (overlap_policy).",
                r,
                "schedule",
            ),
            excluded_slots=_counter(
                "durable_schedules_excluded_slots",
                "Slots an exclusion calendar left out (counted by this process).",
                r,
                "schedule",
            ),
            deadline_missed=_counter(
                "durable_schedules_deadline_missed",
                "Occurrences that missed their deadline (recorded by this process).",
                r,
                "schedule",
            ),
            run_duration=Histogram(
                "durable_schedules_run_duration_seconds",
                "How long callbacks ran (seconds).",
                ["schedule"],
                buckets=DURATION_BUCKETS,
                registry=r,
            ),
            run_lateness=Histogram(
                "durable_schedules_run_lateness_seconds",
                "Seconds from a run's nominal slot to its claim.",
                ["schedule"],
                buckets=LATENESS_BUCKETS,
                registry=r,
            ),
            outcomes_dropped=_counter(
                "durable_schedules_outcomes_dropped",
                "Late outcomes dropped because their attempt was pruned (or not storable).",
                r,
                "schedule",
            ),
            last_success=_gauge(
                "durable_schedules_last_success_timestamp_seconds",
                "When the schedule last succeeded on this worker (Unix time, seconds).",
                r,
                "schedule",
            ),
            in_flight=_gauge(
                "durable_schedules_runs_in_flight",
                "Runs this worker claimed and has not receipted yet.",
                r,
            ),
            leases_recovered=_counter(
                "durable_schedules_leases_recovered",
                "Expired leases this worker recovered (their holder died or stalled).",
                r,
            ),
            worker_up=_gauge(
                "durable_schedules_worker_up", "1 while this worker's metrics are connected.", r
            ),
            build_info=Info(
                "durable_schedules_build", "The versions this worker runs.", registry=r
            ),
        )
        if deadlines:
            collector = DeadlineCollector(labels)
            r.register(collector)
            metrics.extra.append(collector)
        return metrics

    def collectors(self) -> list[Any]:
        """Every collector this registered (what :func:`disconnect` unregisters)."""
        return [
            self.runs_claimed,
            self.runs,
            self.missed_slots,
            self.overlap_skipped,
            self.excluded_slots,
            self.deadline_missed,
            self.run_duration,
            self.run_lateness,
            self.outcomes_dropped,
            self.last_success,
            self.in_flight,
            self.leases_recovered,
            self.worker_up,
            self.build_info,
            *self.extra,
        ]

    def on_claimed(self, sender: Any, claim: Any, **kwargs: Any) -> None:
        """``run_claimed`` receiver."""
        label = self.labels(claim.schedule_name)
        self.runs_claimed.labels(label).inc()
        self.missed_slots.labels(label).inc(_slots(claim.missed_slots))
        self.run_lateness.labels(label).observe(max(0.0, claim.lateness))
        self.in_flight.inc()

    def on_finished(
        self, sender: Any, receipt: Any, schedule_name: str, duration: float | None, **kwargs: Any
    ) -> None:
        """``run_finished`` receiver."""
        label = self.labels(schedule_name)
        self.runs.labels(label, status_label(receipt.status)).inc()
        self.overlap_skipped.labels(label).inc(_slots(receipt.slots_skipped))
        if duration is not None:
            self.run_duration.labels(label).observe(duration)
        if receipt.status in SUCCESS_STATUSES:
            self.last_success.labels(label).set(receipt.finished_at.timestamp())
        self.in_flight.dec()

    def on_changed(self, sender: Any, event: Any, **kwargs: Any) -> None:
        """``schedule_changed`` receiver: ``deadline_missed`` and ``excluded`` events."""
        if event.action == "deadline_missed":
            self.deadline_missed.labels(self.labels(event.schedule_name)).inc()
        elif event.action == "excluded":
            changes = event.changes if isinstance(event.changes, dict) else {}
            slots = _slots(changes.get("slots"))
            self.excluded_slots.labels(self.labels(event.schedule_name)).inc(slots)

    def on_dropped(self, sender: Any, schedule_name: str, **kwargs: Any) -> None:
        """``outcome_dropped`` receiver."""
        self.outcomes_dropped.labels(self.labels(schedule_name)).inc()
        self.in_flight.dec()

    def on_recovered(self, sender: Any, count: int, **kwargs: Any) -> None:
        """``leases_recovered`` receiver."""
        self.leases_recovered.inc(count)

    def receivers(self) -> list[tuple[Any, Any, str]]:
        """``(signal, receiver, name)`` of each connection :func:`connect` makes."""
        return [
            (signals.run_claimed, self.on_claimed, "claimed"),
            (signals.run_finished, self.on_finished, "finished"),
            (signals.outcome_dropped, self.on_dropped, "dropped"),
            (signals.leases_recovered, self.on_recovered, "recovered"),
            (signals.schedule_changed, self.on_changed, "changed"),
        ]


_connected: dict[int, Metrics] = {}


def connect(
    registry: CollectorRegistry | None = None,
    *,
    max_schedules: int | None = None,
    deadlines: bool = True,
) -> Metrics:
    """Register the metrics in ``registry`` (default: ``prometheus_client.REGISTRY``) and
    connect them to the signals. Idempotent per registry (the arguments of the first call
    stay); returns the :class:`Metrics`. ``max_schedules``: schedules with a label of their
    own (default: setting ``METRICS_MAX_SCHEDULES``); ``deadlines``: also collect the
    next-deadline gauge (one to three queries per scrape, none per run)."""
    registry = REGISTRY if registry is None else registry
    key = id(registry)
    if key not in _connected:
        metrics = Metrics.create(registry, max_schedules, deadlines)
        for signal, receiver, name in metrics.receivers():
            signal.connect(receiver, weak=False, dispatch_uid=f"dds-prometheus-{name}-{key}")
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
    for signal, _receiver, name in metrics.receivers():
        signal.disconnect(dispatch_uid=f"dds-prometheus-{name}-{key}")
    for collector in metrics.collectors():
        registry.unregister(collector)


def serve(port: int, addr: str = "0.0.0.0", registry: CollectorRegistry | None = None) -> Any:
    """Serve ``registry`` on ``http://addr:port/metrics`` from a daemon thread (port 0 picks
    a free one: read ``server.server_port``). Returns the server; ``server.shutdown()``
    stops it. Raises ``OSError`` when the port is taken."""
    server, _thread = start_http_server(port, addr=addr, registry=registry or REGISTRY)
    return server
