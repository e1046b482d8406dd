"""Run one claim: call its registered callback (sync or async) and turn what happened
into an :class:`~.state.Outcome`. No database writes here; the worker hands the outcome
to :func:`.state.complete`."""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import close_old_connections

from . import dispatch
from .conf import app_settings
from .exceptions import FailRun, NotRegistered, RetryRun, SkipRun
from .projection import project_error, project_result
from .registry import KIND_CALLABLE, registry
from .state import Claim, Outcome

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunContext:
    """What a callback receives.

    ``scheduled_for`` is the nominal slot (aware UTC); ``lateness`` is seconds from the slot
    to the claim; ``idempotency_key`` is the same for every attempt of one occurrence, so a
    callback can make a re-run (at-least-once execution) harmless.
    """

    schedule_id: uuid.UUID
    schedule_name: str
    occurrence: int
    attempt: int
    scheduled_for: datetime
    lateness: float
    payload: Any
    idempotency_key: str
    missed_slots: int = 0


def context_for(claim: Claim) -> RunContext:
    """The :class:`RunContext` of a claim."""
    return RunContext(
        schedule_id=claim.schedule_id,
        schedule_name=claim.schedule_name,
        occurrence=claim.occurrence,
        attempt=claim.attempt,
        scheduled_for=claim.scheduled_for,
        lateness=claim.lateness,
        payload=claim.payload,
        idempotency_key=claim.idempotency_key,
        missed_slots=claim.missed_slots,
    )


class RunTimeout(Exception):
    """The run passed its schedule's ``timeout_seconds``."""


async def _await(value: Any, timeout: float | None) -> Any:
    if timeout is None:
        return await value
    try:
        return await asyncio.wait_for(value, timeout)
    except TimeoutError:
        raise RunTimeout(f"cancelled after timeout_seconds={timeout:g}") from None


def execute(claim: Claim) -> Outcome:
    """Run ``claim``'s callback and return its outcome; never raises.

    Returning normally -> ``succeeded`` (the value projected, at most ``RESULT_MAX_BYTES``);
    ``SkipRun`` -> ``skipped``; ``RetryRun`` -> ``failed`` retried (after ``after_seconds``);
    ``FailRun`` -> ``failed`` terminal; any other exception -> ``failed`` retried with
    backoff; a callback that is no longer registered -> ``degraded``. A task or a
    management command is handed to :func:`.dispatch.run` (``enqueued``: see there).
    """
    started = time.monotonic()
    max_chars = app_settings.ERROR_MESSAGE_MAX_CHARS
    try:
        registration = registry.get(claim.callback)
    except NotRegistered as exc:
        return Outcome(claim, "degraded", error_type="NotRegistered", error_message=str(exc))
    try:
        if registration.kind != KIND_CALLABLE:  # a task to enqueue or a command to run
            outcome = dispatch.run(registration, claim)
        else:
            value = registration.func(context_for(claim))
            if inspect.isawaitable(value):
                value = asyncio.run(_await(value, claim.timeout_seconds))
            outcome = Outcome(
                claim, "succeeded", result=project_result(value, app_settings.RESULT_MAX_BYTES)
            )
    except SkipRun as exc:
        outcome = Outcome(
            claim, "skipped", error_type="SkipRun", error_message=project_error(exc, max_chars)[1]
        )
    except RetryRun as exc:
        after = exc.after_seconds if type(exc.after_seconds) in (int, float) else None
        outcome = Outcome(
            claim,
            "failed",
            error_type="RetryRun",
            error_message=project_error(exc, max_chars)[1],
            retry_after=after,
        )
    except FailRun as exc:
        outcome = Outcome(
            claim,
            "failed",
            error_type="FailRun",
            error_message=project_error(exc, max_chars)[1],
            terminal=True,
        )
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - any error of user code is an outcome
        error_type, message = project_error(exc, max_chars)
        if isinstance(exc, RunTimeout):
            error_type = "Timeout"
        outcome = Outcome(claim, "failed", error_type=error_type, error_message=message)
    finally:
        close_old_connections()
    logger.info(
        "run %s #%s.%s %s in %.3fs (late %.3fs)",
        claim.schedule_name,
        claim.occurrence,
        claim.attempt,
        outcome.status,
        time.monotonic() - started,
        claim.lateness,
        extra={"schedule": claim.schedule_name, "occurrence": claim.occurrence},
    )
    return outcome
