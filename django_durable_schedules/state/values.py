"""Values passed between the state machine and the worker: frozen, and free of the database."""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..frozen import quick_init

if TYPE_CHECKING:
    from ..models import RunReceipt


@quick_init
@dataclass(frozen=True)
class Previous:
    """The schedule's last successful run, as a callback reads it (``ctx.previous``).

    ``occurrence``: its occurrence number (``int``); ``scheduled_for``: its nominal instant
    (aware UTC, as its ``ctx.scheduled_for`` was); ``finished_at``: when it finished (aware
    UTC, its receipt's ``finished_at``); ``result``: what it returned, the bounded JSON its
    receipt stores (``RESULT_MAX_BYTES``; for a task handed to an engine, ``enqueued``, the
    task's id, backend and queue). "Last" is by nominal instant: a re-run or a backfill of
    an older slot that succeeds does not move it back (docs/concepts.md, "The previous
    run"). None in :class:`Claim` and ``RunContext`` until a run of the schedule succeeds.
    """

    occurrence: int
    scheduled_for: datetime
    finished_at: datetime
    result: Any = None


@quick_init
@dataclass(frozen=True)
class Claim:
    """A committed claim: one attempt of one occurrence, owned through ``lease_token``.

    Instants are aware UTC; ``scheduled_for`` is the nominal slot (whole seconds).
    """

    attempt_id: uuid.UUID
    schedule_id: uuid.UUID
    schedule_name: str
    callback: str
    occurrence: int
    attempt: int
    scheduled_for: datetime
    claimed_at: datetime
    lease_token: uuid.UUID
    lease_expires_at: datetime
    idempotency_key: str
    payload: Any
    missed_slots: int = 0
    timeout_seconds: float | None = None
    #: Why it was claimed (``RunAttempt.origin``): "scheduled", "triggered", "buffered",
    #: "backfill" (a backfill slot: its outcome never moves the live grid).
    origin: str = "scheduled"
    #: ``overlap_policy`` replace: when the schedule's next slot comes due (aware UTC, the
    #: row's ``next_run_at`` its claim planned), at which the worker stops this run's child
    #: process (:func:`.replace_rules.replace_at`); None: the run is never replaced.
    replace_at: datetime | None = None
    #: A concurrency group with a ``rate``: the last instant (aware UTC, the database
    #: clock) the callback may start at, the claim's instant plus the rate's margin
    #: (:func:`.group_rules.rate_margin`). The worker hands a claim it could not start by
    #: then back unrun (``released``): a run starting late would bunch with later claims
    #: and break the rate. None: no start deadline.
    start_by: datetime | None = None
    #: The schedule's last successful run when this was claimed (:class:`Previous`), read
    #: with the claim's row; None before any success.
    previous: Previous | None = None

    @property
    def lateness(self) -> float:
        """Seconds from the slot to the claim (>= 0 unless a clock went backwards)."""
        return (self.claimed_at - self.scheduled_for).total_seconds()


class OutcomeStatus(enum.StrEnum):
    """What running a claim produced (:attr:`Outcome.status`). A ``str`` enum: a caller may
    pass the plain string."""

    SUCCEEDED = "succeeded"
    ENQUEUED = "enqueued"
    SKIPPED = "skipped"
    FAILED = "failed"
    DEGRADED = "degraded"
    RELEASED = "released"
    #: Stopped because its schedule's next slot came due (``overlap_policy`` replace).
    REPLACED = "replaced"


@quick_init
@dataclass(frozen=True)
class Outcome:
    """What running a claim produced, as the worker reports it to :func:`complete`.

    ``status`` is an :class:`OutcomeStatus` (or its string: ``succeeded``, ``enqueued``,
    ``skipped``, ``failed``, ``degraded``, ``released`` or ``replaced``: its child process
    stopped when the next slot came due, ``overlap_policy`` replace). For ``failed``: ``terminal`` (``FailRun``: the schedule becomes
    ``failed``) or a retry, after ``retry_after`` seconds or the exponential backoff.
    ``result`` must already be bounded JSON (see :mod:`.projection`).

    ``enqueue`` (with ``enqueued``): a callable taking no argument that hands the task to an
    execution engine whose queue lives in the same database and returns the receipt's
    bounded JSON result. :func:`complete` calls it inside the completion transaction, after
    the lease check: a fenced outcome never enqueues, and an enqueue whose transaction does
    not commit (crash, lost connection) is rolled back with it, so an occurrence enqueues
    its task exactly once. An exception it raises becomes a ``failed`` receipt (retried).

    ``started_at``: when the callback (or the dispatch) started, aware UTC by the worker's
    estimate of the database clock; None when nothing ran (released, degraded).
    ``traceback``: a failed run's stack, bounded (:func:`..projection.project_traceback`).
    """

    claim: Claim
    status: str
    result: Any = None
    error_type: str = ""
    error_message: str = ""
    terminal: bool = False
    retry_after: float | None = None
    enqueue: Callable[[], Any] | None = None
    started_at: datetime | None = None
    traceback: list[dict[str, Any]] | None = None


@quick_init
@dataclass(frozen=True)
class Failure:
    """A failed attempt, as the failure path takes it (:func:`.outcomes.fail_attempt`):
    which attempt (``occurrence``, ``attempt``, its nominal slot ``scheduled_for``, aware
    UTC, and ``attempt_id``), the receipt it gets (``status``: ``failed`` from a callback,
    ``lease_expired`` from a recovery or a late report; ``error_type``, ``error_message``,
    ``result``: bounded already) and how the occurrence goes on: ``terminal`` (``FailRun``:
    the schedule becomes ``failed``), else retried after ``retry_after`` seconds (None:
    the row's exponential backoff) until ``max_attempts``, then given up. ``started_at``
    and ``traceback``: as the :class:`Outcome`'s (None for a lease recovered: nothing is
    known of the run)."""

    occurrence: int
    attempt: int
    scheduled_for: datetime
    attempt_id: uuid.UUID
    status: str
    error_type: str = ""
    error_message: str = ""
    terminal: bool = False
    retry_after: float | None = None
    result: Any = None
    started_at: datetime | None = None
    traceback: list[dict[str, Any]] | None = None
    #: Why the attempt was claimed (``RunAttempt.origin``).
    origin: str = "scheduled"

    @classmethod
    def of(cls, attempt: Claim | Any, status: str, **fields: Any) -> Failure:
        """The failure of ``attempt``: a :class:`Claim`, or a ``RunAttempt`` row (its
        ``id`` is the attempt id); ``fields`` as the class's."""
        attempt_id = attempt.attempt_id if isinstance(attempt, Claim) else attempt.id
        fields.setdefault("origin", getattr(attempt, "origin", "scheduled"))
        return cls(
            attempt.occurrence, attempt.attempt, attempt.scheduled_for, attempt_id, status, **fields
        )


@dataclass
class CompletionReport:
    """What :func:`complete` did: receipts written, outcomes it fenced off, outcomes it
    ``deferred`` (their schedule row was locked by someone else, e.g. by the callback
    itself: hand them to :func:`complete` again later) and outcomes it ``dropped`` (their
    attempt was pruned by retention meanwhile, or no receipt of them could be stored at
    all; logged, and the occurrence is recovered when its lease expires)."""

    receipts: list[RunReceipt] = field(default_factory=list)
    fenced: list[Outcome] = field(default_factory=list)
    deferred: list[Outcome] = field(default_factory=list)
    dropped: list[Outcome] = field(default_factory=list)
    #: Seconds each in-transaction enqueue took, by attempt id (committed ones only): the
    #: duration of a run handed to a database task queue is its enqueue.
    enqueue_seconds: dict[Any, float] = field(default_factory=dict)

    def extend(self, other: CompletionReport) -> None:
        """Add ``other``'s lists to this report's."""
        self.receipts += other.receipts
        self.fenced += other.fenced
        self.deferred += other.deferred
        self.dropped += other.dropped
        self.enqueue_seconds.update(other.enqueue_seconds)


@dataclass(frozen=True)
class Wakeup:
    """The next instants a worker must act at (aware UTC, None when there is none): the
    next due slot, the next lease expiry (:attr:`earliest`: the sooner) and the next end
    of a pause (``resume``, a duty of its own: :class:`..worker.pause_ends.PauseEnds`)."""

    due: datetime | None
    lease_expiry: datetime | None
    resume: datetime | None = None

    @property
    def earliest(self) -> datetime | None:
        candidates = [t for t in (self.due, self.lease_expiry) if t is not None]
        return min(candidates) if candidates else None
