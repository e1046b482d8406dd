"""Run one claim: call its registered callback (sync or async) and turn what happened
into an :class:`~.state.Outcome`. No database writes here; the worker hands the outcome
to :func:`.state.complete`."""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from django.db import Error as DatabaseError
from django.db import close_old_connections, connections
from django.utils import timezone as dj_timezone

from ...conf import app_settings
from ...db import open_transactions
from ...exceptions import FailRun, NotRegistered, RetryRun, SkipRun
from ...frozen import quick_init
from ...projection import bound_text, project_error, project_result, project_traceback
from ...registry import KIND_CALLABLE, registry
from ...state import Claim, Outcome, Previous
from . import dispatch, hooks

# The name it had before the move into worker/: a LOGGING setting may name it.
logger = logging.getLogger("django_durable_schedules.runner")


@quick_init
@dataclass(frozen=True)
class RunContext:
    """What a callback receives.

    ``scheduled_for`` is the nominal slot (aware UTC); ``lateness`` is seconds from the slot
    to the claim; ``idempotency_key`` is the same for every attempt of one occurrence, so a
    callback can make a re-run (at-least-once execution) harmless. ``previous`` is the
    schedule's last successful run (a :class:`~django_durable_schedules.Previous`: its
    occurrence, nominal instant, finish and bounded result), None before the first success;
    "last" by nominal instant (a re-run or backfill of an older slot does not move it).
    Only a callback run by the worker gets it: a task handed to django.tasks or Celery
    receives the payload as its keyword arguments, not the context.
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
    previous: Previous | None = None


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
        previous=claim.previous,
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


def discard_open_transactions() -> list[str]:
    """Roll back whatever transaction a callback left open on this thread's connections,
    and return the aliases of the connections it did that to (usually none).

    A connection counts as left open when it is still inside an ``atomic`` block, its
    autocommit differs from its ``AUTOCOMMIT`` setting, or it is in autocommit while its
    server session is inside a transaction (a raw ``BEGIN``; see
    :func:`.db.open_transactions.server_in_transaction`), whatever ``CONN_MAX_AGE``. Django's transaction bookkeeping
    (``in_atomic_block``, ``atomic_blocks``, ``savepoint_ids``, ``needs_rollback``,
    ``run_on_commit``, ...) is reset and the connection closed: the server discards the
    transaction, ``on_commit`` callbacks are dropped, and the thread's next query opens a
    fresh connection in autocommit. Only connections this thread already opened are looked
    at (``connections.all(initialized_only=True)``); none is opened.
    """
    leaked = []
    for conn in connections.all(initialized_only=True):
        open_tx = conn.in_atomic_block or (
            conn.connection is not None and conn.autocommit != conn.settings_dict["AUTOCOMMIT"]
        )
        if not open_tx and conn.connection is not None and conn.autocommit:
            # A raw BEGIN: Django says autocommit, the server session is in a transaction.
            in_server = open_transactions.server_in_transaction(conn)
            if in_server is None:  # cannot be told (MySQL without PROCESS): end any
                open_transactions.roll_back(conn)
            open_tx = bool(in_server)
        if not open_tx:
            continue
        leaked.append(conn.alias)
        conn.in_atomic_block = False
        conn.atomic_blocks = []
        conn.savepoint_ids = []
        conn.commit_on_exit = True
        conn.needs_rollback = False
        conn.run_on_commit = []
        conn.run_commit_hooks_on_set_autocommit_on = False
        conn.closed_in_transaction = False
        try:
            conn.close()  # not in an atomic block any more: closes and forgets the connection
        except DatabaseError:  # already broken: it is forgotten all the same
            logger.debug("closing connection %r after a leaked transaction failed", conn.alias)
    return leaked


def _transaction_left_open(outcome: Outcome, aliases: list[str]) -> Outcome:
    """``outcome`` after :func:`discard_open_transactions` rolled back ``aliases`` (see
    :func:`execute`)."""
    claim = outcome.claim
    names = ", ".join(repr(alias) for alias in aliases)
    if len(aliases) == 1:
        sentence = f"the callback left a transaction open on database {names}; it was rolled back"
    else:
        sentence = (
            f"the callback left transactions open on databases {names}; they were rolled back"
        )
    logger.warning(
        "run %s #%s.%s (%s): %s",
        claim.schedule_name,
        claim.occurrence,
        claim.attempt,
        outcome.status,
        sentence,
        extra={"schedule": claim.schedule_name, "occurrence": claim.occurrence},
    )
    max_chars = app_settings.ERROR_MESSAGE_MAX_CHARS
    if outcome.status in ("succeeded", "enqueued"):
        return replace(
            outcome,
            status="failed",
            error_type="TransactionLeftOpen",
            error_message=sentence[:max_chars],
            terminal=False,
            retry_after=None,
            enqueue=None,
        )
    if not outcome.error_message:
        return replace(outcome, error_message=sentence[:max_chars])
    suffix = f" ({sentence})"
    kept = outcome.error_message[: max(0, max_chars - len(suffix))]
    return replace(outcome, error_message=(kept + suffix)[:max_chars])


class GeneratorReturned(TypeError):
    """A callback returned a generator (a generator function registered through a wrapper
    that hides it from ``register()``): calling it ran none of its body, so the run is a
    failure, never a success."""


def start_missed(claim: Claim, at: datetime) -> Outcome:
    """The ``released`` outcome of ``claim`` handed back unrun at ``at`` (aware UTC, the
    worker's estimate of the database clock) because it is past ``claim.start_by``: the
    start deadline of a concurrency group's rate (a worker frozen or busy since the
    claim). The slot stays due and the next claim takes it, within the rate."""
    assert claim.start_by is not None
    late = (at - claim.start_by).total_seconds()
    logger.info(
        "run %s #%s.%s handed back unrun: %.3fs past its start deadline (its group's rate)",
        claim.schedule_name,
        claim.occurrence,
        claim.attempt,
        late,
        extra={"schedule": claim.schedule_name, "occurrence": claim.occurrence},
    )
    return Outcome(
        claim,
        "released",
        error_type="StartDeadline",
        error_message=f"not started within its group's rate margin ({late:.3f} s late)",
    )


def log_start(claim: Claim) -> None:
    """Log one INFO line as ``claim``'s run starts: its schedule, occurrence, attempt and
    lateness (seconds from the slot to the claim). Costs one level check when INFO is off."""
    if logger.isEnabledFor(logging.INFO):
        logger.info(
            "run %s #%s.%s started (late %.3fs)",
            claim.schedule_name,
            claim.occurrence,
            claim.attempt,
            claim.lateness,
            extra={"schedule": claim.schedule_name, "occurrence": claim.occurrence},
        )


def _failed(claim: Claim, exc: BaseException, started_at: datetime, **fields: Any) -> Outcome:
    """The ``failed`` outcome of ``exc`` with its bounded traceback (the runner's own frame
    left out: the stack starts at the callback or the dispatch)."""
    return Outcome(
        claim,
        "failed",
        started_at=started_at,
        traceback=project_traceback(exc, skip=1),
        **fields,
    )


def execute(claim: Claim, clock: Callable[[], datetime] | None = None) -> Outcome:
    """Run ``claim``'s callback and return its outcome; never raises. An integration's
    hooks (:mod:`.hooks`, e.g. ``contrib.otel``'s span) wrap it when installed; without
    any, one list is checked and nothing else happens. ``clock``: see :func:`run_claim`."""
    if hooks.RUN_CONTEXTS:
        with hooks.around(claim):
            return run_claim(claim, clock)
    return run_claim(claim, clock)


def run_claim(claim: Claim, clock: Callable[[], datetime] | None = None) -> Outcome:
    """Run ``claim``'s callback and return its outcome; never raises (:func:`execute`
    without the integrations' hooks).

    ``clock`` tells the instant the callback starts (aware UTC): the worker's estimate of
    the database clock (:meth:`..clock.WorkerClock.estimate`); without it, the host's clock.
    It becomes the outcome's ``started_at``; a failed outcome also carries the bounded
    traceback of what was raised (:func:`..projection.project_traceback`: files, lines and
    function names only). One INFO line is logged as the run starts (:func:`log_start`).

    Returning normally -> ``succeeded`` (the value projected, at most ``RESULT_MAX_BYTES``);
    ``SkipRun`` -> ``skipped``; ``RetryRun`` -> ``failed`` retried (after ``after_seconds``);
    ``FailRun`` -> ``failed`` terminal; any other exception -> ``failed`` retried with
    backoff; a callback that is no longer registered -> ``degraded``. A task or a
    management command is handed to :func:`.dispatch.run` (``enqueued``: see there).

    A callback that leaves a transaction open on any of this thread's connections (an
    ``atomic()`` never exited, autocommit turned off and never restored, a raw ``BEGIN``
    never committed) has it rolled
    back (:func:`discard_open_transactions`), so it cannot swallow the writes of later
    runs on the thread. Its writes are lost, so a ``succeeded`` or ``enqueued`` outcome
    becomes ``failed`` (retried), error type ``TransactionLeftOpen``, message "the callback
    left a transaction open on database 'default'; it was rolled back"; any other outcome
    keeps its status and gets that sentence appended, in parentheses, to its message. A
    warning is logged either way.
    """
    started = time.monotonic()
    max_chars = app_settings.ERROR_MESSAGE_MAX_CHARS
    try:
        registration = registry.get(claim.callback)
    except NotRegistered as exc:
        return Outcome(claim, "degraded", error_type="NotRegistered", error_message=str(exc))
    started_at = clock() if clock is not None else dj_timezone.now()
    if claim.start_by is not None and started_at > claim.start_by:
        return start_missed(claim, started_at)
    log_start(claim)
    try:
        if registration.kind != KIND_CALLABLE:  # a task to enqueue or a command to run
            outcome = dispatch.run(registration, claim)
        else:
            value = registration.func(context_for(claim))
            if inspect.isgenerator(value) or inspect.isasyncgen(value):
                raise GeneratorReturned(
                    "the callback returned a generator: none of its body ran (return a "
                    "value, do not yield)"
                )
            if inspect.isawaitable(value):
                value = asyncio.run(_await(value, claim.timeout_seconds))
            outcome = Outcome(
                claim,
                "succeeded",
                result=project_result(value, app_settings.RESULT_MAX_BYTES),
                started_at=started_at,
            )
        if outcome.started_at is None:  # dispatched: it started with the dispatch
            outcome = replace(outcome, started_at=started_at)
    except SkipRun as exc:
        outcome = Outcome(
            claim,
            "skipped",
            error_type="SkipRun",
            error_message=project_error(exc, max_chars)[1],
            started_at=started_at,
        )
    except RetryRun as exc:
        # Any value: the state machine bounds it and says why in the receipt (inf, nan, -1).
        after = getattr(exc, "after_seconds", None)
        outcome = _failed(
            claim,
            exc,
            started_at,
            error_type="RetryRun",
            error_message=project_error(exc, max_chars)[1],
            retry_after=after,
        )
    except FailRun as exc:
        outcome = _failed(
            claim,
            exc,
            started_at,
            error_type="FailRun",
            error_message=project_error(exc, max_chars)[1],
            terminal=True,
        )
    except BaseException as exc:  # noqa: BLE001 - anything user code raises is an outcome
        # (SystemExit, asyncio.CancelledError, a BaseException subclass of its own): this
        # runs in a worker thread or a child process, where nothing may propagate.
        error_type, message = project_error(exc, max_chars)
        if isinstance(exc, RunTimeout):
            error_type = "Timeout"
        outcome = _failed(claim, exc, started_at, error_type=error_type, error_message=message)
    finally:
        leaked = discard_open_transactions()
        close_old_connections()
    if leaked:
        outcome = _transaction_left_open(outcome, leaked)
    if outcome.status == "failed":
        # Say why, and whether the callback asked for a retry (the state machine decides
        # whether one is left, and bounds the delay: see the receipt). The delay is the
        # callback's value as given, any type: shown with repr, never formatted as a number.
        retry = (
            "" if outcome.retry_after is None else f", retry asked after {outcome.retry_after!r} s"
        )
        logger.warning(
            "run %s #%s.%s failed in %.3fs (late %.3fs)%s: %s: %s",
            claim.schedule_name,
            claim.occurrence,
            claim.attempt,
            time.monotonic() - started,
            claim.lateness,
            retry,
            bound_text(outcome.error_type, 200),
            bound_text(outcome.error_message, 300),  # any text a callback raised: storable
            extra={"schedule": claim.schedule_name, "occurrence": claim.occurrence},
        )
        return outcome
    if outcome.enqueue is not None:
        # Enqueued in the completion transaction: state.complete logs it once committed.
        logger.debug(
            "run %s #%s.%s to be enqueued with its receipt",
            claim.schedule_name,
            claim.occurrence,
            claim.attempt,
        )
        return outcome
    reason = (
        f": {outcome.error_message}"
        if outcome.status == "skipped" and outcome.error_message
        else ""
    )
    logger.info(
        "run %s #%s.%s %s in %.3fs (late %.3fs)%s",
        claim.schedule_name,
        claim.occurrence,
        claim.attempt,
        outcome.status,
        time.monotonic() - started,
        claim.lateness,
        reason,
        extra={"schedule": claim.schedule_name, "occurrence": claim.occurrence},
    )
    return outcome
