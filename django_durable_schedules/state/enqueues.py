"""The in-transaction enqueue of a completion (an outcome carrying ``enqueue``: a task for
a database queue, handed over in the completion's transaction once its lease is confirmed):
:func:`run_enqueue`, and its test seam :func:`enqueue_hook`."""

from __future__ import annotations

from dataclasses import replace

from django.db import transaction

from ..conf import app_settings
from ..projection import project_error
from .values import Outcome, OutcomeStatus


def enqueue_hook(stage: str, outcome: Outcome) -> None:
    """Called inside the completion transaction just ``"before"`` and ``"after"`` an
    in-transaction enqueue (a test seam: the crash tests stop the process here)."""


def run_enqueue(outcome: Outcome, using: str) -> Outcome:
    """Run ``outcome.enqueue`` (if any) in a savepoint of the completion transaction and
    return the outcome with its result, or a ``failed`` outcome if the enqueue raised (the
    savepoint is rolled back, so the completion itself still commits)."""
    if outcome.enqueue is None:
        return outcome
    try:
        with transaction.atomic(using=using):
            enqueue_hook("before", outcome)
            result = outcome.enqueue()
            enqueue_hook("after", outcome)
    except Exception as exc:  # noqa: BLE001 - a failed enqueue is an outcome, not a crash
        error_type, message = project_error(exc, app_settings.ERROR_MESSAGE_MAX_CHARS)
        return Outcome(
            outcome.claim, OutcomeStatus.FAILED, error_type=error_type, error_message=message
        )
    return replace(outcome, result=result, enqueue=None)
