"""One OpenTelemetry span per run, its trace context handed to the Celery tasks it dispatches.

Needs the ``otel`` extra (``pip install django-durable-schedules[otel]``: the
``opentelemetry-api``; configure an SDK and an exporter as usual). Turn it on with
``DURABLE_SCHEDULES["OTEL_SPANS"] = True`` (installed when the app is ready, on the global
tracer provider) or call :func:`install` yourself (``install(tracer_provider=...)``).

Each attempt is one span named ``durable_schedules.run <schedule>`` (kind INTERNAL),
started when the worker claims it (``run_claimed``, or when its run starts, whichever comes
first) and ended when its receipt is written (``run_finished``). Attributes:

* ``durable_schedules.schedule.name``, ``durable_schedules.schedule.id``;
* ``durable_schedules.occurrence``, ``durable_schedules.attempt``,
  ``durable_schedules.scheduled_for`` (ISO 8601, UTC), ``durable_schedules.lateness_seconds``
  (slot to claim), ``durable_schedules.missed_slots``, ``durable_schedules.origin``,
  ``durable_schedules.idempotency_key``;
* at the end ``durable_schedules.status`` (the receipt's status),
  ``durable_schedules.slots_skipped`` and, for a failure, ``error.type``.

A failure (``failed``, ``degraded``, ``lease_lost``, ``lease_expired``, ``missed``) sets the
span's status to ERROR with the error type and message; other outcomes leave it unset.

While the run executes in its thread the span is the current span (a hook of
:mod:`..worker.execution.hooks`), so spans the callback starts are its children and a
Celery task it dispatches gets a W3C ``traceparent`` (and ``tracestate``) header: a Celery
worker instrumented with ``opentelemetry-instrumentation-celery`` continues the trace.
django.tasks has no header to carry it (its ``enqueue`` takes the task's arguments only).
A callback run in a child process (hard timeouts) is not the current span there.

Nothing here raises into the worker; when not installed nothing is done per run.
"""

from __future__ import annotations

import logging
import os
import threading
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from .. import __version__, signals
from ..worker.execution import hooks
from .labels import FAILURE_STATUSES, STATUSES

logger = logging.getLogger(__name__)

PREFIX = "durable_schedules"
#: Spans open at once (a run that never gets a receipt in this process is ended when the
#: limit is reached, oldest first).
MAX_OPEN = 10_000
_DISPATCH_UID = "dds-otel"
_lock = threading.Lock()
_open: dict[Any, Any] = {}  # attempt id -> span, in the order started
_state: dict[str, Any] = {"tracer": None, "pid": None}


def span_name(schedule_name: str) -> str:
    """``durable_schedules.run <schedule>`` (the name bounded to 128 characters)."""
    return f"{PREFIX}.run {str(schedule_name)[:128]}"


def claim_attributes(claim: Any) -> dict[str, Any]:
    """The span attributes known at the claim."""
    return {
        f"{PREFIX}.schedule.name": str(claim.schedule_name),
        f"{PREFIX}.schedule.id": str(claim.schedule_id),
        f"{PREFIX}.occurrence": int(claim.occurrence),
        f"{PREFIX}.attempt": int(claim.attempt),
        f"{PREFIX}.scheduled_for": claim.scheduled_for.isoformat(),
        f"{PREFIX}.lateness_seconds": float(claim.lateness),
        f"{PREFIX}.missed_slots": int(claim.missed_slots),
        f"{PREFIX}.origin": str(claim.origin),
        f"{PREFIX}.idempotency_key": str(claim.idempotency_key),
    }


def span_for(claim: Any) -> Any:
    """The open span of ``claim``'s attempt, started now if it has none yet."""
    tracer = _state["tracer"]
    with _lock:
        span = _open.get(claim.attempt_id)
        if span is None:
            while len(_open) >= MAX_OPEN:
                _open.pop(next(iter(_open))).end()
            span = tracer.start_span(
                span_name(claim.schedule_name),
                kind=SpanKind.INTERNAL,
                attributes=claim_attributes(claim),
            )
            _open[claim.attempt_id] = span
    return span


def run_context(claim: Any) -> AbstractContextManager[Any]:
    """The run hook: ``claim``'s span as the current span while the run executes (not in
    a child process forked from the worker: its spans would be lost)."""
    if os.getpid() != _state["pid"]:
        return nullcontext()
    return trace.use_span(span_for(claim), end_on_exit=False)


def trace_headers(claim: Any) -> dict[str, str]:
    """The dispatch hook: W3C ``traceparent`` / ``tracestate`` of ``claim``'s span."""
    if os.getpid() != _state["pid"]:
        return {}
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=trace.set_span_in_context(span_for(claim)))
    return carrier


def on_claimed(sender: Any, claim: Any, **kwargs: Any) -> None:
    """``run_claimed`` receiver: start the span (never raises)."""
    try:
        span_for(claim)
    except Exception as exc:  # noqa: BLE001 - never into the worker
        logger.warning("span of %s not started: %s", claim.schedule_name, exc)


def on_finished(sender: Any, receipt: Any, claim: Any, **kwargs: Any) -> None:
    """``run_finished`` receiver: the outcome's attributes and status, then end the span
    (never raises)."""
    try:
        span = span_for(claim)
        with _lock:
            _open.pop(claim.attempt_id, None)
        status = str(receipt.status)
        span.set_attribute(f"{PREFIX}.status", status)
        span.set_attribute(f"{PREFIX}.slots_skipped", int(receipt.slots_skipped or 0))
        if status in FAILURE_STATUSES or status not in STATUSES:
            error_type = str(receipt.error_type or status)[:200]
            span.set_attribute("error.type", error_type)
            message = str(receipt.error_message or "")[:300]
            span.set_status(Status(StatusCode.ERROR, f"{error_type}: {message}".rstrip(": ")))
        span.end()
    except Exception as exc:  # noqa: BLE001 - never into the worker
        logger.warning("span of %s not ended: %s", claim.schedule_name, exc)


def on_dropped(sender: Any, outcome: Any, **kwargs: Any) -> None:
    """``outcome_dropped`` receiver: end the span as an error (no receipt was written)."""
    try:
        claim = outcome.claim
        with _lock:
            span = _open.pop(claim.attempt_id, None)
        if span is not None:
            span.set_attribute(f"{PREFIX}.status", "dropped")
            span.set_status(Status(StatusCode.ERROR, "outcome dropped: no receipt written"))
            span.end()
    except Exception as exc:  # noqa: BLE001 - never into the worker
        logger.warning("span not ended: %s", exc)


def install(tracer_provider: Any = None) -> None:
    """Start a span per run with ``tracer_provider`` (default: the global one, bound when
    it is set) and hand its context to dispatched Celery tasks. Idempotent: a second call
    only changes the provider."""
    _state["tracer"] = trace.get_tracer(
        "django_durable_schedules", __version__, tracer_provider=tracer_provider
    )
    _state["pid"] = os.getpid()
    for signal, receiver in _receivers():
        signal.connect(receiver, weak=False, dispatch_uid=f"{_DISPATCH_UID}-{receiver.__name__}")
    hooks.add(run_context=run_context, headers=trace_headers)


def uninstall() -> None:
    """Disconnect everything and end the spans still open (a no-op when not installed)."""
    for signal, receiver in _receivers():
        signal.disconnect(dispatch_uid=f"{_DISPATCH_UID}-{receiver.__name__}")
    hooks.remove(run_context=run_context, headers=trace_headers)
    with _lock:
        spans = list(_open.values())
        _open.clear()
    for span in spans:
        span.end()
    _state["tracer"] = None


def is_installed() -> bool:
    """Whether :func:`install` was called (and not undone)."""
    return _state["tracer"] is not None


def _receivers() -> list[tuple[Any, Any]]:
    return [
        (signals.run_claimed, on_claimed),
        (signals.run_finished, on_finished),
        (signals.outcome_dropped, on_dropped),
    ]
