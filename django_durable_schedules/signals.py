"""Signals sent by the worker loop, for metrics and logging (never for correctness).

The worker's signals are sent by its main thread *after* the transaction that recorded the event
has committed, with ``Signal.send_robust``: a receiver that raises is logged and ignored, so
it can neither crash the worker nor lose a receipt (the receipt is already in the database).
Receivers run inline in the loop, so keep them fast; when nothing is connected the worker
does not even build the arguments.

``run_claimed``
    ``sender``: :class:`~django_durable_schedules.worker.Worker` (the class).
    ``claim``: the committed :class:`~django_durable_schedules.state.Claim` - ``schedule_id``,
    ``schedule_name``, ``occurrence``, ``attempt``, ``scheduled_for`` (aware UTC, the nominal
    slot), ``claimed_at`` (aware UTC, database clock), ``lateness`` (seconds from slot to
    claim), ``idempotency_key``, ``payload``.
    ``worker_id``: the claiming worker's id.

``run_finished``
    ``sender``: :class:`~django_durable_schedules.worker.Worker` (the class).
    ``receipt``: the :class:`~django_durable_schedules.models.RunReceipt` just written
    (``status``, ``finished_at``, ``error_type``, ``schedule_id``, ...; its ``schedule`` is
    not loaded - use ``schedule_name`` to avoid a query).
    ``claim``: the :class:`~django_durable_schedules.state.Claim` it finishes.
    ``schedule_name``: the schedule's name (``claim.schedule_name``).
    ``duration``: seconds the callback ran (host monotonic clock), or ``None`` when it never
    started (a claim ``released`` at shutdown).
    ``worker_id``: the worker's id.
    Sent for every receipt the worker itself writes, including fenced ones (``lease_lost``,
    ``lease_expired``); not for the ``lease_expired`` receipts written when a worker
    recovers *another* worker's expired lease.

``outcome_dropped``
    ``sender``: :class:`~django_durable_schedules.worker.Worker` (the class).
    ``outcome``: the :class:`~django_durable_schedules.state.Outcome` no receipt could be
    written for: its attempt was pruned by retention while the run was late (a worker
    stalled past its lease, then ``prune_runs``), or the database refused even its stripped
    form. Logged too; the occurrence itself is recovered through its lease.
    ``schedule_name``: ``outcome.claim.schedule_name``. ``worker_id``: the worker's id.

``leases_recovered``
    ``sender``: :class:`~django_durable_schedules.worker.Worker` (the class).
    ``count``: how many expired leases this worker just recovered (each receipted
    ``lease_expired`` and retried or given up: their holder died or stalled). Sent only when
    the count is not 0. ``worker_id``: the worker's id.

``schedule_changed``
    ``sender``: :class:`~django_durable_schedules.models.ScheduleEvent` (the class).
    ``event``: the committed :class:`~django_durable_schedules.models.ScheduleEvent`
    (``action``: one of ``models.EventAction``: created, edited, enabled, disabled,
    cancelled, triggered, deleted, excluded, deadline_missed, recovered, ...;
    ``schedule_id``, ``schedule_name``, ``source``, ``changes``). Sent on commit of the
    transaction that recorded it, from whichever process made the change, for every event
    written, including those a claim, a completion or a lease recovery writes in bulk (a
    claim's ``excluded`` events: ``changes["slots"]`` slots each), in the order written.
"""

from __future__ import annotations

import logging
from typing import Any

from django.dispatch import Signal

logger = logging.getLogger(__name__)

run_claimed = Signal()
run_finished = Signal()
outcome_dropped = Signal()
leases_recovered = Signal()
schedule_changed = Signal()


def send_robust(signal: Signal, sender: Any, **kwargs: Any) -> None:
    """``signal.send_robust(sender, **kwargs)``, logging each receiver that raised
    (``logging.getLogger("django_durable_schedules.signals")``, level ERROR, with the
    traceback). Never raises an ``Exception``."""
    for receiver, response in signal.send_robust(sender, **kwargs):
        if isinstance(response, Exception):
            logger.error(
                "signal receiver %r raised %s: %s (ignored)",
                receiver,
                type(response).__name__,
                response,
                exc_info=(type(response), response, response.__traceback__),
            )
