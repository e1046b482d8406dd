"""The worker's signals (:mod:`django_durable_schedules.signals`), sent by :class:`Notifier`
from the main thread with ``send_robust`` (a receiver that raises is logged by Django and
never stops the worker); the sender is the ``Worker`` class. Signals are for metrics and
logging, never for correctness.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from .. import signals, state


class Notifier:
    """Sends one worker's signals. ``run_times`` is the worker's
    :attr:`.RunsInFlight.run_times` (lease token -> [monotonic start, end or None] of the
    callback), read for ``run_finished``'s ``duration``."""

    def __init__(self, sender: type, worker_id: str, run_times: dict[uuid.UUID, Any]):
        self.sender = sender
        self.worker_id = worker_id
        self.run_times = run_times

    def claimed(self, claims: list[state.Claim]) -> None:
        """``run_claimed`` for each committed claim, if the signal has receivers."""
        if claims and signals.run_claimed.has_listeners(self.sender):
            self.send_claimed(claims)

    def finished(self, outcomes: list[state.Outcome], receipts: list[Any]) -> None:
        """``run_finished`` for each receipt :func:`.state.complete` committed (of
        ``outcomes``), if the signal has receivers."""
        if receipts and signals.run_finished.has_listeners(self.sender):
            self.send_finished(outcomes, receipts)

    def dropped(self, outcomes: list[state.Outcome]) -> None:
        """``outcome_dropped`` for each late outcome whose attempt retention had pruned."""
        for outcome in outcomes:
            signals.send_robust(
                signals.outcome_dropped,
                self.sender,
                outcome=outcome,
                schedule_name=outcome.claim.schedule_name,
                worker_id=self.worker_id,
            )

    def send_claimed(self, claims: list[state.Claim]) -> None:
        """Build and send ``run_claimed`` for each of ``claims``."""
        for claim in claims:
            signals.send_robust(
                signals.run_claimed, self.sender, claim=claim, worker_id=self.worker_id
            )

    def send_finished(self, outcomes: list[state.Outcome], receipts: list[Any]) -> None:
        """Build and send ``run_finished`` for each of ``receipts``."""
        claims = {o.claim.attempt_id: o.claim for o in outcomes}
        now = time.monotonic()
        for receipt in receipts:
            claim = claims.get(receipt.attempt_id)
            if claim is None:  # pragma: no cover - complete() writes receipts of these only
                continue
            times = self.run_times.get(claim.lease_token)
            duration = None if times is None else (times[1] or now) - (times[0] or now)
            signals.send_robust(
                signals.run_finished,
                self.sender,
                receipt=receipt,
                claim=claim,
                schedule_name=claim.schedule_name,
                duration=duration,
                worker_id=self.worker_id,
            )

    def recovered(self, count: int) -> None:
        """``leases_recovered`` after ``count`` expired leases were recovered (when ``count``
        is not zero and it has receivers)."""
        if count and signals.leases_recovered.has_listeners(self.sender):
            signals.send_robust(
                signals.leases_recovered, self.sender, count=count, worker_id=self.worker_id
            )
