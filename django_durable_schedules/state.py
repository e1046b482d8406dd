"""The state machine: every transition of a schedule and every transaction lives here.

Transitions (all take an optional injected ``now``, an aware UTC datetime; by default the
*database* clock decides, R8):

* :func:`claim_due` - lock due schedules (``SELECT ... FOR UPDATE SKIP LOCKED`` where the
  database has it, a write-locking transaction on SQLite), write one append-only
  :class:`~.models.RunAttempt` per claim with a fresh lease token, and advance
  ``next_run_at`` - all committed *before* any callback runs (B26).
* :func:`renew_leases` - extend the leases a worker still holds; tells it which it lost.
* :func:`complete` - write the one :class:`~.models.RunReceipt` of each attempt and move the
  schedule on, but only while the exact lease token still owns the row (fencing, R7).
* :func:`expire_leases` - recover claims whose lease ran out (a dead worker): receipt
  ``lease_expired``, the occurrence is retried (at-least-once).
* :func:`enable`, :func:`disable`, :func:`cancel`, :func:`delete_schedule`,
  :func:`sync_declared`, :func:`heartbeat`.

Callers (worker, admin, API, commands) never open transactions themselves.

On PostgreSQL every ``Schedule.save()`` here that leaves a next run also queues a NOTIFY in
the same transaction, waking idle workers when it commits (:mod:`.db.wakeups`).
"""

from __future__ import annotations

import logging
import math
import socket
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.db import DataError, IntegrityError, connections, transaction
from django.db.models import DateTimeField, Field, ForeignObjectRel, JSONField, Model, QuerySet
from django.db.models.expressions import RawSQL
from django.db.models.functions import Now
from django.utils import timezone as dj_timezone
from django.utils.dateparse import parse_datetime

from . import signals, timing
from .conf import app_settings
from .exceptions import StateConflict
from .models import (
    SUCCESS_STATUSES,
    EventAction,
    Kind,
    MisfirePolicy,
    ReceiptStatus,
    RunAttempt,
    RunReceipt,
    Schedule,
    ScheduleEvent,
    Status,
    WorkerHeartbeat,
    plan_next,
)
from .projection import bound_text, is_storable, project_error, project_result
from .registry import registry

logger = logging.getLogger(__name__)

_QS = TypeVar("_QS", bound=QuerySet[Any])

ONE_SECOND = timedelta(seconds=1)

#: What the database (or its driver) raises for a value it refuses to store: a batch that
#: meets one is retried row by row, so one bad row or outcome never blocks the others.
_REFUSED = (IntegrityError, DataError, ValueError)

#: Schedule columns a claim writes.
_CLAIM_FIELDS = [
    "occurrence",
    "attempt",
    "retry_scheduled_for",
    "lease_token",
    "lease_expires_at",
    "next_run_at",
    "triggered_at",
    "last_run_at",
    "missed_count",
    "status",
    "degraded_reason",
    "definition_hash",
]
#: Schedule columns a completion or a recovery writes.
_FINISH_FIELDS = [
    "attempt",
    "retry_scheduled_for",
    "triggered_at",
    "lease_token",
    "lease_expires_at",
    "next_run_at",
    "failure_count",
    "failed_occurrences",
    "missed_count",
    "status",
    "degraded_reason",
    "pause_reason",
]


# ---------------------------------------------------------------------------------------
# Values passed between the state machine and the worker
# ---------------------------------------------------------------------------------------


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

    @property
    def lateness(self) -> float:
        """Seconds from the slot to the claim (>= 0 unless a clock went backwards)."""
        return (self.claimed_at - self.scheduled_for).total_seconds()


@dataclass(frozen=True)
class Outcome:
    """What running a claim produced, as the worker reports it to :func:`complete`.

    ``status`` is one of ``succeeded``, ``enqueued``, ``skipped``, ``failed``, ``degraded``
    or ``released``. For ``failed``: ``terminal`` (``FailRun``: the schedule becomes
    ``failed``) or a retry, after ``retry_after`` seconds or the exponential backoff.
    ``result`` must already be bounded JSON (see :mod:`.projection`).

    ``enqueue`` (with ``enqueued``): a callable taking no argument that hands the task to an
    execution engine whose queue lives in the same database and returns the receipt's
    bounded JSON result. :func:`complete` calls it inside the completion transaction, after
    the lease check: a fenced outcome never enqueues, and an enqueue whose transaction does
    not commit (crash, lost connection) is rolled back with it, so an occurrence enqueues
    its task exactly once. An exception it raises becomes a ``failed`` receipt (retried).
    """

    claim: Claim
    status: str
    result: Any = None
    error_type: str = ""
    error_message: str = ""
    terminal: bool = False
    retry_after: float | None = None
    enqueue: Callable[[], Any] | None = None


@dataclass
class _Receipt:
    attempt_id: uuid.UUID
    schedule_id: uuid.UUID
    occurrence: int
    status: str
    finished_at: datetime
    result: Any = None
    error_type: str = ""
    error_message: str = ""
    failure_count_after: int = 0
    next_run_at: datetime | None = None
    slots_skipped: int = 0

    def model(self) -> RunReceipt:
        return RunReceipt(
            attempt_id=self.attempt_id,
            schedule_id=self.schedule_id,
            occurrence=self.occurrence,
            succeeded_occurrence=self.occurrence if self.status in SUCCESS_STATUSES else None,
            status=self.status,
            finished_at=self.finished_at,
            result=self.result,
            error_type=self.error_type[:200],
            error_message=self.error_message,
            failure_count_after=self.failure_count_after,
            next_run_at=self.next_run_at,
            slots_skipped=self.slots_skipped,
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

    def extend(self, other: CompletionReport) -> None:
        """Add ``other``'s lists to this report's."""
        self.receipts += other.receipts
        self.fenced += other.fenced
        self.deferred += other.deferred
        self.dropped += other.dropped


# ---------------------------------------------------------------------------------------
# Clock and locking helpers
# ---------------------------------------------------------------------------------------

_NOW_SQL = {
    "postgresql": "SELECT statement_timestamp()",
    "mysql": "SELECT UTC_TIMESTAMP(6)",
    "sqlite": "SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')",
    "oracle": "SELECT SYS_EXTRACT_UTC(SYSTIMESTAMP) FROM DUAL",
}


# The same clocks as SQL expressions, for the due test inside claim_due's locking SELECT.
_DUE_NOW_SQL = {"postgresql": "statement_timestamp()", "mysql": "UTC_TIMESTAMP(6)"}


def db_now(using: str = "default") -> datetime:
    """The database server's current time as an aware UTC datetime (R8).

    PostgreSQL ``statement_timestamp()``, MySQL/MariaDB ``UTC_TIMESTAMP(6)``, SQLite
    ``strftime('%f', 'now')`` (millisecond precision; SQLite's clock is the host's own).
    """
    conn = connections[using]
    sql = _NOW_SQL.get(conn.vendor)
    if sql is None:  # pragma: no cover - unknown backend
        return dj_timezone.now()
    with conn.cursor() as cursor:
        cursor.execute(sql)
        value = cursor.fetchone()[0]
    if isinstance(value, str):
        value = parse_datetime(value.replace(" ", "T"))
    assert isinstance(value, datetime)
    if dj_timezone.is_naive(value):
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def _resolve_now(now: datetime | None, using: str) -> datetime:
    if now is None:
        return db_now(using)
    return timing.require_aware(now, "now")


def _lock_for_write(using: str) -> None:
    """On backends without row locks (SQLite), take the database write lock first so the
    read that follows cannot be raced by another writer (a no-op UPDATE acquires it)."""
    conn = connections[using]
    if not conn.features.has_select_for_update:
        with conn.cursor() as cursor:
            cursor.execute(
                f"UPDATE {conn.ops.quote_name(WorkerHeartbeat._meta.db_table)} SET pid = pid WHERE 1 = 0"
            )


def _locked(qs: _QS, using: str, *, skip_locked: bool) -> _QS:
    features = connections[using].features
    if not features.has_select_for_update:
        return qs
    if skip_locked and features.has_select_for_update_skip_locked:
        return qs.select_for_update(skip_locked=True)
    return qs.select_for_update()


def _ceil_second(value: datetime) -> datetime:
    if value.microsecond:
        value = value.replace(microsecond=0) + ONE_SECOND
    return value


def _update_rows(rows: Sequence[Schedule], fields: Sequence[str], using: str) -> None:
    """Write ``fields`` of each row in one round trip.

    PostgreSQL: one ``UPDATE ... FROM unnest(%s::uuid[], %s::integer[], ...)`` per batch,
    one array parameter per column, so the statement text is the same for every batch and
    the client caches its parsing. Others: one parameterised ``UPDATE ... WHERE id = %s``
    sent through ``executemany``. (``QuerySet.bulk_update`` builds a CASE expression per row
    and field, about 10 ms of Python per row here; see docs/benchmarks.md.)
    """
    if not rows:
        return
    conn = connections[using]
    pk, pk_column = _column_field(Schedule._meta.pk)
    targets = [_column_field(Schedule._meta.get_field(name)) for name in fields]
    columns = [f for f, _ in targets]
    with conn.cursor() as cursor:
        if conn.vendor == "postgresql":
            cursor.execute(
                _unnest_sql(conn, Schedule, "update", (pk, *columns)),
                [_pg_array(c, [getattr(r, c.attname) for r in rows], conn) for c in (pk, *columns)],
            )
        else:
            qn = conn.ops.quote_name
            sets = ", ".join(f"{qn(c)} = %s" for _, c in targets)
            cursor.executemany(
                f"UPDATE {qn(Schedule._meta.db_table)} SET {sets} WHERE {qn(pk_column)} = %s",
                [
                    [*_row_params(row, pk, columns, conn)[1:], pk.get_db_prep_save(row.pk, conn)]
                    for row in rows
                ],
            )


def _insert_rows(model: type[Model], objs: Sequence[Model], using: str) -> None:
    """Insert new rows of ``model`` (attempts, receipts) in one round trip.

    PostgreSQL: ``INSERT ... SELECT * FROM unnest(%s::uuid[], ...)`` with one array
    parameter per column (constant statement text; no per-row SQL compilation). Others:
    ``QuerySet.bulk_create``. Primary keys must be set (every model here has a UUID default).
    """
    if not objs:
        return
    conn = connections[using]
    if conn.vendor != "postgresql":
        model._default_manager.using(using).bulk_create(objs)
        return
    fields = tuple(model._meta.concrete_fields)
    params = [_pg_array(f, [f.pre_save(o, True) for o in objs], conn) for f in fields]
    with conn.cursor() as cursor:
        cursor.execute(_unnest_sql(conn, model, "insert", fields), params)
    for o in objs:
        o._state.adding, o._state.db = False, using


def _pg_array(field: Field[Any, Any], values: list[Any], conn: Any) -> Any:
    """One column of a batch as the parameter of an ``unnest`` statement (PostgreSQL).

    Plain values (``None``, ``str``, ``bool``, ``int``, ``uuid.UUID``, aware ``datetime``)
    are written straight into an array literal (``{"a\\"b",NULL,42}``; format: PostgreSQL
    docs, "Arrays", 8.15.6): psycopg's per-element array dumping and Django's per-value
    ``get_db_prep_save`` cost ~15% of the worker's CPU per run. JSON columns, and any other
    value, go through the field's ``get_db_prep_save`` as a list.
    """
    if not isinstance(field, JSONField):
        parts: list[str] = []
        for v in values:
            if v is None:
                parts.append("NULL")
            elif isinstance(v, str):
                parts.append('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"')
            elif isinstance(v, bool):
                parts.append("t" if v else "f")
            elif isinstance(v, int | uuid.UUID):
                parts.append(str(v))
            elif isinstance(v, datetime) and v.tzinfo is not None:
                parts.append(v.isoformat())
            else:
                break
        else:
            return "{" + ",".join(parts) + "}"
    return [field.get_db_prep_save(v, conn) for v in values]


_UNNEST_SQL: dict[tuple[Any, ...], str] = {}


def _unnest_sql(conn: Any, model: type[Model], verb: str, fields: Sequence[Field[Any, Any]]) -> str:
    """The PostgreSQL statement of :func:`_update_rows` (``fields[0]`` is the key) or of
    :func:`_insert_rows`, built once per model, verb and column list."""
    key = (conn.alias, model, verb, tuple(f.column for f in fields))
    sql = _UNNEST_SQL.get(key)
    if sql is None:
        qn = conn.ops.quote_name
        table = qn(model._meta.db_table)
        names = ", ".join(qn(f.column) for f in fields)
        # varchar(n) arrays as text[]: an explicit cast to varchar(n) would silently cut a
        # long value; the assignment to the column rejects it instead, as an INSERT would.
        types = [str(f.db_type(conn)) for f in fields]
        arrays = ", ".join(f"%s::{'text' if t.startswith('varchar') else t}[]" for t in types)
        if verb == "insert":
            sql = f"INSERT INTO {table} ({names}) SELECT * FROM unnest({arrays})"
        else:
            key_column = qn(fields[0].column)
            sets = ", ".join(f"{qn(f.column)} = v.{qn(f.column)}" for f in fields[1:])
            sql = (
                f"UPDATE {table} AS t SET {sets} FROM unnest({arrays}) AS v ({names}) "
                f"WHERE t.{key_column} = v.{key_column}"
            )
        _UNNEST_SQL[key] = sql
    return sql


def _column_field(field: Field[Any, Any] | ForeignObjectRel | None) -> tuple[Field[Any, Any], str]:
    """A concrete field of ``Schedule`` and its column (``_update_rows`` writes no other)."""
    if not isinstance(field, Field) or field.column is None:
        raise ValueError(f"{field!r} is not a concrete column of {Schedule._meta.db_table}")
    return field, field.column


def _row_params(row: Schedule, pk: Any, columns: Sequence[Any], conn: Any) -> list[Any]:
    return [pk.get_db_prep_save(row.pk, conn)] + [
        c.get_db_prep_save(getattr(row, c.attname), conn) for c in columns
    ]


def _claim_committing() -> None:
    """Called as the last statement inside the claim transaction (a test seam for B26)."""


def _max_attempts(schedule: Schedule) -> int:
    return schedule.max_attempts or app_settings.MAX_ATTEMPTS


# ---------------------------------------------------------------------------------------
# Values that enter the engine: bounded where they enter
# ---------------------------------------------------------------------------------------

#: Longest ``backoff_base_seconds`` / ``backoff_cap_seconds`` / ``timeout_seconds`` the
#: engine uses, whatever a row written behind ``save()`` holds (the bounds
#: ``Schedule.clean()`` and ``save()`` enforce: 1 day, 30 days, 7 days).
BACKOFF_BASE_MAX_SECONDS = 86400.0
BACKOFF_CAP_MAX_SECONDS = 30 * 86400.0
TIMEOUT_MAX_SECONDS = 7 * 86400.0


def _bounded_seconds(value: Any, default: float | None, high: float) -> float | None:
    """``value`` as seconds in ``[0, high]``: None, NaN and non-numbers give ``default``,
    negative values 0, larger ones ``high`` (a row written behind ``save()`` may hold
    anything its column type allows)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    try:
        seconds = float(value)
    except OverflowError:  # an int beyond a float
        return high if value > 0 else 0.0
    if math.isnan(seconds):
        return default
    return min(max(seconds, 0.0), high)


def bound_retry_after(value: Any) -> tuple[float | None, str]:
    """``(seconds, note)`` for the ``after_seconds`` a callback gave ``RetryRun``.

    ``None`` means "use the backoff". A number is kept if it lies in
    ``[0, RETRY_AFTER_MAX_SECONDS]``; a larger one (``inf``, ``1.8e12`` epoch milliseconds
    read as seconds, a huge int) is clamped to that bound, a negative one (or ``-inf``) to 0;
    NaN, a bool or a non-number falls back to the backoff. ``note`` says what was changed
    and why (empty when nothing was), for the receipt's error message. Never raises.
    """
    if value is None:
        return None, ""
    high = app_settings.RETRY_AFTER_MAX_SECONDS
    shown = value if type(value) in (int, float) else type(value).__name__
    if type(value) is int and value.bit_length() > 64:
        shown = "a huge int"
    seconds = _bounded_seconds(value, None, high)
    if seconds is None:
        return None, f"after_seconds={shown!s} is not a number of seconds; the backoff was used"
    if seconds == value:
        return seconds, ""
    return (
        seconds,
        f"after_seconds={shown!s} is outside [0, {high:g}] s; retried after {seconds:g} s",
    )


def bound_outcome(outcome: Outcome) -> Outcome:
    """``outcome`` with every value a callback could influence made storable: error type
    (200 characters) and message (``ERROR_MESSAGE_MAX_CHARS``) as valid text, invalid
    characters replaced and marked (:func:`.projection.bound_text`); ``result`` projected
    if it is not plain, storable JSON (:func:`.projection.project_result`); ``retry_after``
    bounded (:func:`bound_retry_after`, the reason appended to the message). The state
    machine applies it to every outcome it is given, so a receipt is always writable."""
    max_chars = app_settings.ERROR_MESSAGE_MAX_CHARS
    changes: dict[str, Any] = {}
    error_type, error_message = outcome.error_type, outcome.error_message
    clean_type = bound_text(error_type, 200)
    if clean_type != error_type:
        changes["error_type"] = clean_type
    clean_message = bound_text(error_message, max_chars)
    retry_after, note = bound_retry_after(outcome.retry_after)
    if note:
        clean_message = bound_text(
            f"{clean_message} ({note})" if clean_message else note, max_chars
        )
    if clean_message != error_message:
        changes["error_message"] = clean_message
    if retry_after != outcome.retry_after or type(retry_after) is not type(outcome.retry_after):
        changes["retry_after"] = retry_after
    max_bytes = app_settings.RESULT_MAX_BYTES
    if outcome.result is not None and not is_storable(outcome.result, max_bytes):
        changes["result"] = project_result(outcome.result, max_bytes)
    if type(outcome.terminal) is not bool:
        changes["terminal"] = bool(outcome.terminal is True)
    return replace(outcome, **changes) if changes else outcome


def describe_problem(exc: BaseException) -> str:
    """One line for a receipt or a ``degraded_reason`` saying what could not be evaluated:
    ``"<field>: <message>"`` for an :class:`~.timing.InvalidSchedule`, ``"<Type>: <message>"``
    for any other exception (its text bounded, never its ``__str__``). Never raises."""
    if isinstance(exc, timing.InvalidSchedule) and type(exc.message) is str:
        return bound_text(f"{exc.field}: {exc.message}", 450)
    error_type, message = project_error(exc, 400)
    return bound_text(f"{error_type}: {message}" if message else error_type, 450)


#: How a ``degraded_reason`` begins when the engine could not evaluate the row's definition
#: (such a schedule comes back by a valid edit and :func:`enable`, never by itself).
UNEVALUABLE_PREFIX = "cannot evaluate the schedule: "


def _snapshot(row: Schedule, fields: Sequence[str]) -> dict[str, Any]:
    return {f: getattr(row, f) for f in fields}


def _restore(row: Schedule, snapshot: dict[str, Any]) -> None:
    for name, value in snapshot.items():
        setattr(row, name, value)


def _safe_hash(row: Schedule) -> str:
    try:
        return row.compute_definition_hash()
    except Exception:  # noqa: BLE001 - a definition too broken to fingerprint
        return row.definition_hash


def _pause_degraded(row: Schedule, reason: str) -> None:
    """Pause ``row`` because the engine cannot evaluate it (health counts it as degraded);
    a valid edit and :func:`enable` bring it back."""
    row.status = Status.PAUSED
    row.degraded_reason = reason[:500]
    row.next_run_at = row.retry_scheduled_for = row.triggered_at = None
    row.lease_token = row.lease_expires_at = None
    logger.warning(
        "schedule %s degraded: %s", row.name, row.degraded_reason, extra={"schedule": row.name}
    )


def _quarantine_claim(
    row: Schedule,
    exc: BaseException,
    now: datetime,
    worker: str,
    attempts: list[RunAttempt],
    receipts: list[RunReceipt],
) -> None:
    """A due row the engine could not evaluate (a value written behind ``save()``, a zone
    tzdata no longer has, ...): record its slot as one attempt with a ``degraded`` receipt
    naming the field and the problem, and pause it with that reason. The rest of the batch
    is claimed as usual."""
    occurrence = row.occurrence + 1
    slot = row.retry_scheduled_for or row.triggered_at or row.next_run_at or now
    if row.retry_scheduled_for is not None:
        occurrence = row.occurrence
    number = row.attempt + 1 if row.retry_scheduled_for is not None else 1
    reason = f"{UNEVALUABLE_PREFIX}{describe_problem(exc)}"
    attempt = RunAttempt(
        id=uuid.uuid4(),
        schedule_id=row.id,
        schedule_name=row.name,
        occurrence=occurrence,
        attempt=number,
        scheduled_for=slot,
        claimed_at=now,
        lease_token=uuid.uuid4(),
        lease_expires_at=now,
        worker=worker[:200],
        idempotency_key=idempotency_key(row.id, occurrence),
    )
    attempts.append(attempt)
    row.occurrence, row.attempt = occurrence, number
    row.last_run_at = now
    row.definition_hash = _safe_hash(row)
    _pause_degraded(row, reason)
    receipts.append(
        _Receipt(
            attempt_id=attempt.id,
            schedule_id=row.id,
            occurrence=occurrence,
            status=ReceiptStatus.DEGRADED,
            finished_at=now,
            error_type="InvalidSchedule"
            if isinstance(exc, timing.InvalidSchedule)
            else bound_text(type(exc).__name__, 200),
            error_message=reason,
            failure_count_after=row.failure_count,
            next_run_at=None,
        ).model()
    )


def idempotency_key(schedule_id: uuid.UUID, occurrence: int) -> str:
    """Stable key of one occurrence, the same for every attempt of it: ``"<uuid>:<n>"``."""
    return f"{schedule_id}:{occurrence}"


# ---------------------------------------------------------------------------------------
# Claiming
# ---------------------------------------------------------------------------------------


def claim_due(
    *,
    worker: str,
    limit: int | None = None,
    lease_seconds: float | None = None,
    now: datetime | None = None,
    using: str = "default",
) -> list[Claim]:
    """Claim up to ``limit`` due schedules for ``worker`` in one transaction.

    Due means ``status = active``, no lease, ``next_run_at <= now`` (database clock), oldest
    first. For each row: a schedule edited behind ``save()`` is re-planned instead (R10); an
    unregistered callback is receipted ``degraded`` and paused; a row the engine cannot
    evaluate (an unknown zone, a cron that can never fire, a value out of range, written
    behind ``save()``) is receipted ``degraded`` with the field and the reason, and paused;
    otherwise missed slots are coalesced into one run of the latest slot (R6), an attempt
    row is written with a fresh lease of ``lease_seconds`` (default setting
    ``LEASE_SECONDS``) and ``next_run_at`` moves to the next slot. Returns the committed
    claims.

    If the database refuses the batch (``IntegrityError``/``DataError``: a row whose stored
    counters clash with its attempts, ...), the due rows are claimed one transaction each,
    and a row refused on its own is paused as degraded with the database's reason, so one
    row never blocks every claim. Other database errors propagate and nothing is claimed.
    """
    limit = limit or app_settings.BATCH_SIZE
    lease = timedelta(seconds=lease_seconds or app_settings.LEASE_SECONDS)
    if now is not None:  # a caller's naive instant is its error, never a row's
        now = timing.require_aware(now, "now")
    try:
        claims = _claim_batch(worker, limit, lease, now, using, only=None)
    except _REFUSED as exc:
        if connections[using].in_atomic_block:
            raise  # inside the caller's transaction nothing can be retried here
        logger.warning("a claim batch was refused (%s); claiming row by row", exc)
        claims = _claim_one_by_one(worker, limit, lease, now, using)
    for claim in claims:
        logger.debug(
            "claimed %s occurrence %s attempt %s",
            claim.schedule_name,
            claim.occurrence,
            claim.attempt,
            extra={"schedule": claim.schedule_name, "occurrence": claim.occurrence},
        )
    return claims


def _due(using: str, due_before: Any) -> QuerySet[Schedule]:
    """Rows a claim may take (``ScheduleQuerySet.claimable``), oldest first."""
    return Schedule.objects.using(using).claimable(due_before).order_by("next_run_at")


def _claim_one_by_one(
    worker: str, limit: int, lease: timedelta, now: datetime | None, using: str
) -> list[Claim]:
    """The due rows, each claimed in its own transaction; a row the database refuses on
    its own is paused as degraded (:func:`_quarantine_refused`)."""
    due_before = now if now is not None else db_now(using)
    claims: list[Claim] = []
    for pk in list(_due(using, due_before).values_list("pk", flat=True)[:limit]):
        try:
            claims += _claim_batch(worker, limit, lease, now, using, only=pk)
        except _REFUSED as exc:
            _quarantine_refused(pk, exc, using)
    return claims


def _quarantine_refused(pk: uuid.UUID, exc: BaseException, using: str) -> None:
    """Pause the due row ``pk`` whose claim the database refused (its attempt cannot be
    written, so no receipt can be either): the reason goes to ``degraded_reason``."""
    reason = f"the database refused its claim: {describe_problem(exc)}"[:500]
    with transaction.atomic(using=using):
        updated = (
            Schedule.objects.using(using)
            .filter(pk=pk, lease_token__isnull=True)
            .update(
                status=Status.PAUSED,
                degraded_reason=reason,
                next_run_at=None,
                retry_scheduled_for=None,
                triggered_at=None,
            )
        )
    if updated:
        logger.error("schedule %s paused: %s", pk, reason, extra={"schedule": str(pk)})


def _claim_batch(
    worker: str,
    limit: int,
    lease: timedelta,
    now: datetime | None,
    using: str,
    *,
    only: uuid.UUID | None,
) -> list[Claim]:
    """One claim transaction (see :func:`claim_due`); ``only``: that row alone."""
    claims: list[Claim] = []
    with transaction.atomic(using=using):
        _lock_for_write(using)
        vendor = connections[using].vendor
        # With row locks, "due" is judged by the database clock inside the locking SELECT and
        # the claim time is read after it: a row released or completed by another worker is
        # visible here only once that commit happened, so its next attempt's ``claimed_at``
        # can never precede the previous attempt's ``finished_at`` (R7). SQLite serialises
        # writers with _lock_for_write, so reading its clock first is already ordered.
        clock_after = now is None and vendor in _DUE_NOW_SQL
        due_before: Any = (
            RawSQL(_DUE_NOW_SQL[vendor], (), output_field=DateTimeField())
            if clock_after
            else (now := _resolve_now(now, using))
        )
        qs = _due(using, due_before)
        if only is not None:
            qs = qs.filter(pk=only)
        rows = list(_locked(qs, using, skip_locked=True)[:limit])
        if not rows:
            return []
        if clock_after:
            now = db_now(using)
        assert now is not None
        attempts: list[RunAttempt] = []
        receipts: list[RunReceipt] = []
        for row in rows:
            # One row's bad value (behind save(): an unknown zone, a cron that never fires,
            # an overflowing interval) must not abort the batch: quarantine that row only.
            snapshot = _snapshot(row, _CLAIM_FIELDS)
            marks = len(attempts), len(receipts), len(claims)
            try:
                _plan_claim(row, now, lease, worker, attempts, receipts, claims)
            except Exception as exc:  # noqa: BLE001 - any evaluation error is that row's
                del attempts[marks[0] :], receipts[marks[1] :], claims[marks[2] :]
                _restore(row, snapshot)
                _quarantine_claim(row, exc, now, worker, attempts, receipts)
        if attempts:
            _insert_rows(RunAttempt, attempts, using)
        if receipts:
            _insert_rows(RunReceipt, receipts, using)
        _update_rows(rows, _CLAIM_FIELDS, using)
        _claim_committing()
    return claims


def _record_missed(
    row: Schedule,
    occurrence: int,
    slot: datetime,
    now: datetime,
    missed: int,
    next_run_at: datetime | None,
    worker: str,
    attempts: list[RunAttempt],
    receipts: list[RunReceipt],
) -> None:
    attempt = RunAttempt(
        id=uuid.uuid4(),
        schedule_id=row.id,
        schedule_name=row.name,
        occurrence=occurrence,
        attempt=1,
        scheduled_for=slot,
        claimed_at=now,
        lease_token=uuid.uuid4(),
        lease_expires_at=now,
        worker=worker[:200],
        idempotency_key=idempotency_key(row.id, occurrence),
        missed_slots=missed,
    )
    attempts.append(attempt)
    row.occurrence, row.attempt = occurrence, 1
    row.missed_count += missed + 1
    row.next_run_at = next_run_at
    if next_run_at is None and row.status == Status.ACTIVE:
        row.status = Status.COMPLETED
    late = (now - slot).total_seconds()
    receipts.append(
        _Receipt(
            attempt_id=attempt.id,
            schedule_id=row.id,
            occurrence=occurrence,
            status=ReceiptStatus.MISSED,
            finished_at=now,
            error_type="Missed",
            error_message=f"claimed {late:.0f}s after its slot, beyond misfire_grace_seconds="
            f"{row.misfire_grace_seconds}",
            failure_count_after=row.failure_count,
            next_run_at=next_run_at,
        ).model()
    )


def _plan_claim(
    row: Schedule,
    now: datetime,
    lease: timedelta,
    worker: str,
    attempts: list[RunAttempt],
    receipts: list[RunReceipt],
    claims: list[Claim],
) -> None:
    current_hash = row.compute_definition_hash()
    if row.definition_hash != current_hash:
        # Edited by QuerySet.update() or raw SQL: re-plan from now, never fire (B27 C).
        row.definition_hash = current_hash
        row.retry_scheduled_for = row.triggered_at = None
        if row.status == Status.PAUSED:
            row.next_run_at = None
            return
        row.next_run_at = plan_next(row, timing.truncate_to_second(now))
        if row.next_run_at is None:
            row.status = Status.COMPLETED
        return

    spec = row.spec()
    missed = 0
    recurring_next = (
        row.due_at(timing.next_slot_after(spec, now))
        if row.kind != Kind.ONCE and row.status == Status.ACTIVE
        else None
    )
    if row.retry_scheduled_for is not None:
        occurrence, attempt_no, slot = row.occurrence, row.attempt + 1, row.retry_scheduled_for
        provisional_next = recurring_next
        if row.kind != Kind.ONCE and row.status == Status.ACTIVE:
            # Grid slots that came due while the occurrence waited for its retry (backoff,
            # lease recovery, a missing callback) are passed over: counted, never dropped.
            # The previous attempt's claim (``last_run_at``) planned the grid up to its own
            # instant, so the slots to count are those after it, up to now.
            since = max(slot, timing.truncate_to_second(row.last_run_at or slot))
            missed = timing.count_slots(spec, since + ONE_SECOND, now + ONE_SECOND)
    elif row.triggered_at is not None:
        # A manual run (trigger): its own occurrence; the grid continues after now.
        occurrence, attempt_no, slot = row.occurrence + 1, 1, row.triggered_at
        provisional_next = recurring_next
    else:
        occurrence, attempt_no = row.occurrence + 1, 1
        due = row.next_run_at
        assert due is not None
        if row.kind == Kind.ONCE:
            slot, provisional_next = row.run_at or due, None
        else:
            # ``due`` may include jitter: the nominal slot lies up to jitter_seconds before it.
            earliest = due - timedelta(seconds=row.jitter_seconds or 0)
            latest = timing.latest_slot_at_or_before(spec, now, not_before=earliest) or due
            missed = timing.count_slots(spec, earliest, latest)
            slot = latest
            provisional_next = row.due_at(timing.next_slot_after(spec, max(slot, now)))
            if row.misfire_policy == MisfirePolicy.SKIP and missed:
                # Policy "skip": after downtime, no late run at all; wait for the next slot.
                row.missed_count += missed + 1
                row.next_run_at = provisional_next
                if provisional_next is None:
                    row.status = Status.COMPLETED
                return
        grace = row.misfire_grace_seconds
        if grace is not None and (now - slot).total_seconds() > grace:
            # Too stale for the catch-up window: receipt the slot 'missed', run nothing.
            _record_missed(
                row, occurrence, slot, now, missed, provisional_next, worker, attempts, receipts
            )
            return

    token = uuid.uuid4()
    attempt = RunAttempt(
        id=uuid.uuid4(),
        schedule_id=row.id,
        schedule_name=row.name,
        occurrence=occurrence,
        attempt=attempt_no,
        scheduled_for=slot,
        claimed_at=now,
        lease_token=token,
        lease_expires_at=now + lease,
        worker=worker[:200],
        idempotency_key=idempotency_key(row.id, occurrence),
        missed_slots=missed,
    )
    attempts.append(attempt)
    row.occurrence, row.attempt = occurrence, attempt_no
    row.retry_scheduled_for = row.triggered_at = None
    row.missed_count += missed
    row.last_run_at = now

    if row.callback not in registry:
        # The code that should run is gone: receipt it, pause the schedule with a reason,
        # and let a later registration recover it (sync_declared).
        row.status = Status.PAUSED
        row.degraded_reason = f"callback {row.callback!r} is not registered"
        row.next_run_at = None
        # The occurrence awaits its run: recover_degraded() makes it due once the callback
        # is registered again (the retry branch above then runs it, attempt + 1).
        row.retry_scheduled_for = slot
        receipts.append(
            _Receipt(
                attempt_id=attempt.id,
                schedule_id=row.id,
                occurrence=occurrence,
                status=ReceiptStatus.DEGRADED,
                finished_at=now,
                error_type="NotRegistered",
                error_message=row.degraded_reason,
                failure_count_after=row.failure_count,
                next_run_at=None,
            ).model()
        )
        logger.warning(
            "schedule %s degraded: %s",
            row.name,
            row.degraded_reason,
            extra={"schedule": row.name, "occurrence": occurrence},
        )
        return

    row.lease_token, row.lease_expires_at = token, attempt.lease_expires_at
    row.next_run_at = provisional_next
    claims.append(
        Claim(
            attempt_id=attempt.id,
            schedule_id=row.id,
            schedule_name=row.name,
            callback=row.callback,
            occurrence=occurrence,
            attempt=attempt_no,
            scheduled_for=slot,
            claimed_at=now,
            lease_token=token,
            lease_expires_at=attempt.lease_expires_at,
            idempotency_key=attempt.idempotency_key,
            payload=row.payload,
            missed_slots=missed,
            timeout_seconds=_bounded_seconds(row.timeout_seconds, None, TIMEOUT_MAX_SECONDS)
            or None,
        )
    )


# ---------------------------------------------------------------------------------------
# Leases
# ---------------------------------------------------------------------------------------


def renew_leases(
    tokens: Iterable[uuid.UUID],
    *,
    lease_seconds: float | None = None,
    now: datetime | None = None,
    using: str = "default",
) -> set[uuid.UUID]:
    """Extend the leases named by ``tokens`` to ``now + lease_seconds`` while they are
    still live, and return the tokens that are still owned (the others were lost: expired
    and recovered, or the schedule was deleted). A row locked by another transaction is
    skipped, not waited for (where the database has ``SKIP LOCKED``); its lease stays
    owned while it has not expired."""
    tokens = list(tokens)
    if not tokens:
        return set()
    lease = timedelta(seconds=lease_seconds or app_settings.LEASE_SECONDS)
    with transaction.atomic(using=using):
        now = _resolve_now(now, using)
        live = Schedule.objects.using(using).filter(
            lease_token__in=tokens, lease_expires_at__gt=now
        )
        if connections[using].features.has_select_for_update_skip_locked:
            # Never wait for a row someone else locked (a callback may lock its own
            # schedule): renew the others now, that one at the next renewal.
            live = Schedule.objects.using(using).filter(
                pk__in=list(_locked(live, using, skip_locked=True).values_list("pk", flat=True))
            )
        live.update(lease_expires_at=now + lease)
        owned = {
            token
            for token in Schedule.objects.using(using)
            .filter(lease_token__in=tokens, lease_expires_at__gt=now)
            .values_list("lease_token", flat=True)
            if token is not None  # the filter on lease_token already rules None out
        }
    return owned


def expire_leases(
    *, limit: int | None = None, now: datetime | None = None, using: str = "default"
) -> int:
    """Recover up to ``limit`` claims whose lease expired (their worker died or hung).

    Each gets a ``lease_expired`` receipt; its occurrence is retried at once as the next
    attempt, or given up after ``max_attempts`` (at-least-once execution, B03). Returns the
    number recovered.
    """
    limit = limit or app_settings.BATCH_SIZE
    with transaction.atomic(using=using):
        _lock_for_write(using)
        now = _resolve_now(now, using)
        qs = Schedule.objects.using(using).lease_expired(now).order_by("lease_expires_at")
        rows = list(_locked(qs, using, skip_locked=True)[:limit])
        if not rows:
            return 0
        attempts: dict[uuid.UUID | None, RunAttempt] = {
            a.lease_token: a
            for a in RunAttempt.objects.using(using).filter(
                lease_token__in=[r.lease_token for r in rows]
            )
        }
        receipts = []
        for row in rows:
            attempt = attempts.get(row.lease_token)
            row.lease_token = row.lease_expires_at = None
            if attempt is None:  # pragma: no cover - an attempt is always written with its lease
                continue
            receipts.append(
                _fail_attempt(
                    row,
                    attempt.occurrence,
                    attempt.attempt,
                    attempt.scheduled_for,
                    attempt.id,
                    now,
                    ReceiptStatus.LEASE_EXPIRED,
                    "LeaseExpired",
                    "the lease expired before the run reported an outcome",
                    retry_after=0.0,
                )
            )
            logger.warning(
                "lease expired: %s occurrence %s attempt %s",
                row.name,
                attempt.occurrence,
                attempt.attempt,
                extra={"schedule": row.name, "occurrence": attempt.occurrence},
            )
        _insert_rows(RunReceipt, [r.model() for r in receipts], using)
        _update_rows(rows, _FINISH_FIELDS, using)
    return len(rows)


# ---------------------------------------------------------------------------------------
# Completion
# ---------------------------------------------------------------------------------------


def complete(
    outcomes: Sequence[Outcome], *, now: datetime | None = None, using: str = "default"
) -> CompletionReport:
    """Record the outcome of each claim (one receipt per attempt) and move its schedule on.

    Fencing: an outcome is applied only while its exact lease token still owns a live
    lease. A late outcome whose lease expired is receipted ``lease_expired`` (and the
    occurrence retried); one whose token was replaced is receipted ``lease_lost`` unless a
    receipt was already written by the recovery. Never raises for a fenced outcome.
    An outcome carrying ``enqueue`` (a task for a database queue) enqueues here, in this
    transaction and only once its lease is confirmed (see :class:`Outcome`).

    Totality: every outcome is bounded first (:func:`bound_outcome`); an outcome that
    cannot be applied to its row (its definition was made invalid behind ``save()`` while
    it ran) is receipted with its own status and the schedule paused as degraded; if the
    database still refuses the batch (``IntegrityError``, ``DataError``, a driver's
    ``ValueError``), each outcome is retried in its own transaction, then once without its
    result and message, and only then dropped (``report.dropped``, logged). An outcome
    whose attempt retention has pruned meanwhile is dropped with a log line. A row locked
    by another transaction (e.g. by the callback itself) is not waited for: its outcome
    is returned in ``report.deferred``. Database errors of the connection itself
    (``OperationalError``: the server is gone) propagate, and nothing is written.
    """
    if not outcomes:
        return CompletionReport()
    if now is not None:  # a caller's naive instant is its error, never an outcome's
        now = timing.require_aware(now, "now")
    bounded = [bound_outcome(o) for o in outcomes]
    try:
        report = _complete_batch(bounded, now, using)
    except _REFUSED as exc:
        if connections[using].in_atomic_block:
            raise  # inside the caller's transaction nothing can be retried here
        logger.warning("a completion batch was refused (%s); retrying outcome by outcome", exc)
        report = CompletionReport()
        for outcome in bounded:
            report.extend(_complete_alone(outcome, now, using))
    for outcome in report.fenced:
        logger.warning(
            "fenced late outcome of %s occurrence %s attempt %s (%s)",
            outcome.claim.schedule_name,
            outcome.claim.occurrence,
            outcome.claim.attempt,
            outcome.status,
            extra={"schedule": outcome.claim.schedule_name, "occurrence": outcome.claim.occurrence},
        )
    return report


def _complete_alone(outcome: Outcome, now: datetime | None, using: str) -> CompletionReport:
    """:func:`complete` of one outcome after its batch was refused: as given, then stripped
    of its result and message, then dropped (logged; its lease expires and the occurrence
    is recovered)."""
    try:
        return _complete_batch([outcome], now, using)
    except _REFUSED as exc:
        first = exc
    stripped = replace(
        outcome,
        result=None,
        error_message=f"the outcome could not be stored as reported ({type(first).__name__})",
        enqueue=None,
    )
    try:
        return _complete_batch([stripped], now, using)
    except _REFUSED as exc:
        logger.error(
            "dropped the outcome of %s occurrence %s attempt %s: the database refused it "
            "(%s; %s); its lease will expire and the occurrence be recovered",
            outcome.claim.schedule_name,
            outcome.claim.occurrence,
            outcome.claim.attempt,
            type(first).__name__,
            type(exc).__name__,
            extra={"schedule": outcome.claim.schedule_name, "occurrence": outcome.claim.occurrence},
        )
        return CompletionReport(dropped=[outcome])


def _complete_batch(
    outcomes: Sequence[Outcome], now: datetime | None, using: str
) -> CompletionReport:
    """One completion transaction over bounded outcomes (see :func:`complete`)."""
    report = CompletionReport()
    with transaction.atomic(using=using):
        _lock_for_write(using)
        ids = {o.claim.schedule_id for o in outcomes}
        qs = Schedule.objects.using(using).filter(id__in=ids)
        read_clock = now is None and connections[using].vendor == "postgresql"
        if read_clock:  # the database clock in the same round trip (statement_timestamp())
            qs = qs.annotate(_db_now=Now())
        rows = {r.id: r for r in _locked(qs, using, skip_locked=True)}
        if read_clock and rows:
            # _db_now: the .annotate() above; the plugin types qs as plain Schedule rows.
            now = next(iter(rows.values()))._db_now.astimezone(UTC)  # type: ignore[attr-defined]
        now = _resolve_now(now, using)
        busy: set[uuid.UUID] = set()
        if len(rows) < len(ids):  # skipped as locked, or deleted: a plain read tells which
            busy = set(
                Schedule.objects.using(using)
                .filter(id__in=ids - set(rows))
                .values_list("id", flat=True)
            )
        receipts: list[_Receipt] = []
        touched: dict[uuid.UUID, Schedule] = {}
        orphans: list[Outcome] = []
        for outcome in outcomes:
            claim = outcome.claim
            if claim.schedule_id in busy:
                report.deferred.append(outcome)
                continue
            row = rows.get(claim.schedule_id)
            if row is None or row.lease_token != claim.lease_token:
                orphans.append(outcome)
                continue
            touched[row.id] = row
            receipts.append(_finish(row, outcome, now, using, report))
        if orphans:
            receipts += _orphan_receipts(orphans, now, using, report)
        models = [r.model() for r in receipts]
        _insert_rows(RunReceipt, models, using)
        if touched:
            _update_rows(list(touched.values()), _FINISH_FIELDS, using)
        report.receipts = models
    return report


def _finish(
    row: Schedule, outcome: Outcome, now: datetime, using: str, report: CompletionReport
) -> _Receipt:
    """The receipt of ``outcome`` on the locked ``row`` that its lease token still owns;
    moves the row on (or pauses it as degraded when its definition cannot be evaluated)."""
    claim = outcome.claim
    row.lease_token = None
    lease_expires_at, row.lease_expires_at = row.lease_expires_at, None
    if lease_expires_at is None or lease_expires_at <= now:
        report.fenced.append(outcome)
        return _fail_attempt(
            row,
            claim.occurrence,
            claim.attempt,
            claim.scheduled_for,
            claim.attempt_id,
            now,
            ReceiptStatus.LEASE_EXPIRED,
            "LeaseExpired",
            f"the run finished ({outcome.status}) after its lease expired",
            retry_after=0.0,
            result=_fenced_result(outcome),
        )
    snapshot = _snapshot(row, _FINISH_FIELDS)
    outcome = _enqueue(outcome, using)
    try:
        return _apply(row, outcome, now)
    except Exception as exc:  # noqa: BLE001 - the row's own bad value: pause that row only
        _restore(row, snapshot)
        reason = f"{UNEVALUABLE_PREFIX}{describe_problem(exc)}"
        _pause_degraded(row, reason)
        status = outcome.status if outcome.status in ReceiptStatus.values else "failed"
        message = outcome.error_message
        note = f"the schedule was paused: {reason}"
        return _receipt(
            row,
            claim,
            status,
            now,
            replace(
                outcome, error_message=bound_text(f"{message}; {note}" if message else note, 1000)
            ),
        )


def _orphan_receipts(
    orphans: list[Outcome], now: datetime, using: str, report: CompletionReport
) -> list[_Receipt]:
    """Receipts of outcomes whose lease token no longer owns its row: ``lease_lost``, unless
    the recovery already receipted the attempt. An attempt that retention pruned meanwhile
    (a worker stalled past its lease, then ``prune_runs``) has nothing left to receipt: its
    outcome is dropped with a log line (``report.dropped``)."""
    known = dict(
        RunAttempt.objects.using(using)
        .filter(id__in=[o.claim.attempt_id for o in orphans])
        .values_list("id", "receipt__id")
    )
    receipts = []
    for outcome in orphans:
        claim = outcome.claim
        if claim.attempt_id not in known:
            report.dropped.append(outcome)
            logger.warning(
                "dropped the late outcome (%s) of %s occurrence %s attempt %s: its attempt "
                "was pruned by retention",
                outcome.status,
                claim.schedule_name,
                claim.occurrence,
                claim.attempt,
                extra={"schedule": claim.schedule_name, "occurrence": claim.occurrence},
            )
            continue
        report.fenced.append(outcome)
        if known[claim.attempt_id] is not None:
            continue
        receipts.append(
            _Receipt(
                attempt_id=claim.attempt_id,
                schedule_id=claim.schedule_id,
                occurrence=claim.occurrence,
                status=ReceiptStatus.LEASE_LOST,
                finished_at=now,
                error_type="LeaseLost",
                error_message=f"the lease was lost before the run reported {outcome.status}",
                result=_fenced_result(outcome),
            )
        )
    return receipts


def _enqueue_hook(stage: str, outcome: Outcome) -> None:
    """Called inside the completion transaction just ``"before"`` and ``"after"`` an
    in-transaction enqueue (a test seam: the crash tests stop the process here)."""


def _enqueue(outcome: Outcome, using: str) -> Outcome:
    """Run ``outcome.enqueue`` (if any) in a savepoint of the completion transaction and
    return the outcome with its result, or a ``failed`` outcome if the enqueue raised (the
    savepoint is rolled back, so the completion itself still commits)."""
    if outcome.enqueue is None:
        return outcome
    try:
        with transaction.atomic(using=using):
            _enqueue_hook("before", outcome)
            result = outcome.enqueue()
            _enqueue_hook("after", outcome)
    except Exception as exc:  # noqa: BLE001 - a failed enqueue is an outcome, not a crash
        error_type, message = project_error(exc, app_settings.ERROR_MESSAGE_MAX_CHARS)
        return Outcome(outcome.claim, "failed", error_type=error_type, error_message=message)
    return replace(outcome, result=result, enqueue=None)


def _fenced_result(outcome: Outcome) -> Any:
    """A fenced outcome keeps its result only when it records a task that was already
    handed to an engine outside the transaction (so the duplicate can be traced)."""
    if outcome.status == "enqueued" and outcome.enqueue is None:
        return outcome.result
    return None


def _apply(row: Schedule, outcome: Outcome, now: datetime) -> _Receipt:
    claim = outcome.claim
    status = outcome.status
    if status == "released":
        # Handed back unrun at shutdown: the same occurrence is due again at once.
        row.attempt = claim.attempt
        row.retry_scheduled_for = claim.scheduled_for
        row.next_run_at = timing.truncate_to_second(now)
        if row.status == Status.PAUSED:  # a triggered run: still claimable when paused
            row.triggered_at = claim.scheduled_for
        return _receipt(row, claim, ReceiptStatus.RELEASED, now, outcome)
    if status == "degraded":
        # The callback vanished between claim and run: the occurrence awaits its run, as
        # in the claim's own not-registered path.
        row.status = Status.PAUSED
        row.next_run_at = None
        row.attempt = claim.attempt
        row.retry_scheduled_for = claim.scheduled_for
        row.degraded_reason = outcome.error_message[:500]
        return _receipt(row, claim, ReceiptStatus.DEGRADED, now, outcome)
    if status == "failed":
        return _fail_attempt(
            row,
            claim.occurrence,
            claim.attempt,
            claim.scheduled_for,
            claim.attempt_id,
            now,
            ReceiptStatus.FAILED,
            outcome.error_type,
            outcome.error_message,
            terminal=outcome.terminal,
            retry_after=outcome.retry_after,
            result=outcome.result,
        )
    if status in SUCCESS_STATUSES:
        row.failure_count = row.failed_occurrences = 0
        receipt_status = ReceiptStatus(status)
    elif status == "skipped":
        receipt_status = ReceiptStatus.SKIPPED
    else:  # pragma: no cover - programming error
        raise ValueError(f"unknown outcome status {status!r}")
    skipped = _move_on(row, claim.occurrence, now)
    return _receipt(row, claim, receipt_status, now, outcome, slots_skipped=skipped)


def _receipt(
    row: Schedule,
    claim: Claim,
    status: str,
    now: datetime,
    outcome: Outcome,
    slots_skipped: int = 0,
) -> _Receipt:
    return _Receipt(
        attempt_id=claim.attempt_id,
        schedule_id=row.id,
        occurrence=claim.occurrence,
        status=status,
        finished_at=now,
        result=outcome.result,
        error_type=outcome.error_type,
        error_message=outcome.error_message,
        failure_count_after=row.failure_count,
        next_run_at=row.next_run_at,
        slots_skipped=slots_skipped,
    )


def _fail_attempt(
    row: Schedule,
    occurrence: int,
    attempt: int,
    scheduled_for: datetime,
    attempt_id: uuid.UUID,
    now: datetime,
    status: str,
    error_type: str,
    error_message: str,
    *,
    terminal: bool = False,
    retry_after: float | None = None,
    result: Any = None,
) -> _Receipt:
    """A failed attempt: retry the same occurrence with backoff, give it up after
    ``max_attempts``, or (``terminal``) fail the schedule."""
    row.failure_count += 1
    skipped = 0
    if terminal:
        row.status = Status.FAILED
        row.next_run_at = None
        row.retry_scheduled_for = None
    elif attempt < _max_attempts(row) and row.status == Status.ACTIVE:
        if retry_after is None:
            retry_after = backoff_for(row, attempt)
        retry_after = min(
            _bounded_seconds(retry_after, 0.0, app_settings.RETRY_AFTER_MAX_SECONDS) or 0.0,
            app_settings.RETRY_AFTER_MAX_SECONDS,
        )
        row.attempt = attempt
        row.retry_scheduled_for = scheduled_for
        row.next_run_at = _ceil_second(now + timedelta(seconds=retry_after))
    else:
        # The occurrence is given up.
        row.failed_occurrences += 1
        if row.kind == Kind.ONCE:
            row.retry_scheduled_for = None
            row.next_run_at = None
            if row.status == Status.ACTIVE:
                row.status = Status.FAILED
        else:
            skipped = _move_on(row, occurrence, now)
            limit = row.pause_after_failures
            if limit and row.failed_occurrences >= limit and row.status == Status.ACTIVE:
                row.status = Status.PAUSED
                row.next_run_at = None
                row.pause_reason = (
                    f"paused after {row.failed_occurrences} consecutive failed occurrences"
                )
                logger.warning(
                    "schedule %s %s",
                    row.name,
                    row.pause_reason,
                    extra={"schedule": row.name, "occurrence": occurrence},
                )
    return _Receipt(
        attempt_id=attempt_id,
        schedule_id=row.id,
        occurrence=occurrence,
        status=status,
        finished_at=now,
        result=result,
        error_type=error_type,
        error_message=error_message,
        failure_count_after=row.failure_count,
        next_run_at=row.next_run_at,
        slots_skipped=skipped,
    )


def backoff_for(row: Schedule, attempt: int) -> float:
    """Seconds before retry number ``attempt`` of ``row``: the exponential backoff
    (:func:`.timing.backoff_seconds`) of the row's base and cap (else the
    ``BACKOFF_BASE_SECONDS`` / ``BACKOFF_CAP_SECONDS`` settings), each bounded first as
    ``Schedule.save()`` bounds them, so a row written behind ``save()`` (``1e12``, NaN,
    negative) cannot overflow a datetime."""
    base = _bounded_seconds(
        row.backoff_base_seconds, app_settings.BACKOFF_BASE_SECONDS, BACKOFF_BASE_MAX_SECONDS
    )
    cap = _bounded_seconds(
        row.backoff_cap_seconds, app_settings.BACKOFF_CAP_SECONDS, BACKOFF_CAP_MAX_SECONDS
    )
    return timing.backoff_seconds(max(1, attempt), base or 0.0, cap or 0.0)


def _move_on(row: Schedule, occurrence: int, now: datetime) -> int:
    """The occurrence is finished: plan the next slot (or complete the schedule). Slots that
    passed while it ran are skipped, not replayed; returns how many (R6 overlap)."""
    row.retry_scheduled_for = None
    if row.status != Status.ACTIVE:
        return 0  # paused/cancelled while running: leave it as the operator set it
    if row.kind == Kind.ONCE or (row.max_runs is not None and occurrence >= row.max_runs):
        row.status, row.next_run_at = Status.COMPLETED, None
        return 0
    spec = row.spec()
    skipped = 0
    nxt = row.next_run_at
    if nxt is not None and nxt <= now:
        skipped = timing.count_slots(spec, nxt, now + ONE_SECOND)
        nxt = row.due_at(timing.next_slot_after(spec, now))
    row.missed_count += skipped
    row.next_run_at = nxt
    if nxt is None:
        row.status = Status.COMPLETED
    return skipped


# ---------------------------------------------------------------------------------------
# Operator transitions
# ---------------------------------------------------------------------------------------


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if hasattr(value, "pk"):
        return value.pk
    return value


def _as_changes(before: dict[str, Any], after: dict[str, Any]) -> dict[str, list[Any]]:
    """``{field: [old, new]}`` for the fields of ``after`` (JSON-ready)."""
    return {
        k: [_json_value(before.get(k)), _json_value(v)]
        for k, v in after.items()
        if before.get(k) != v
    }


def record_event(
    row: Schedule,
    action: str,
    *,
    now: datetime | None = None,
    actor: Any = None,
    source: str = "code",
    changes: dict[str, Any] | None = None,
    using: str = "default",
) -> ScheduleEvent:
    """Append one :class:`~.models.ScheduleEvent` (called inside the transition's
    transaction, so the action and its record commit together). ``signals.schedule_changed``
    is sent once that transaction commits (only built when a receiver is connected)."""
    event = ScheduleEvent.objects.using(using).create(
        schedule_id=row.pk,
        schedule_name=row.name,
        action=action,
        at=_resolve_now(now, using),
        actor=actor if getattr(actor, "pk", None) else None,
        actor_repr=str(actor)[:200] if actor is not None else "",
        source=source[:32],
        changes=changes or {},
    )
    if signals.schedule_changed.has_listeners(ScheduleEvent):
        transaction.on_commit(
            lambda: signals.send_robust(signals.schedule_changed, ScheduleEvent, event=event),
            using=using,
        )
    return event


def _get_locked(schedule_id: Any, using: str) -> Schedule:
    _lock_for_write(using)
    return _locked(
        Schedule.objects.using(using).filter(pk=schedule_id), using, skip_locked=False
    ).get()


def enable(
    schedule_id: Any,
    *,
    now: datetime | None = None,
    run_at: datetime | None = None,
    actor: Any = None,
    source: str = "code",
    using: str = "default",
) -> Schedule:
    """Make a paused (or failed) schedule active again. Clears ``degraded_reason``, the
    pause reason and (for a failed schedule) the consecutive failure count.

    Recurring: the next run is the first slot strictly after now; time spent paused
    produces no catch-up (R10). ``once``: it is re-armed, never completed without a run:
    due at ``run_at`` if that is still ahead, else due at once (a failed one-shot runs
    again as a new occurrence); ``run_at`` (aware) moves it to a new instant first.

    Raises :class:`StateConflict` for a cancelled or completed schedule, and for one whose
    stored definition cannot be evaluated (written behind ``save()``: correct it first);
    ``ValidationError`` (``run_at``) for a ``run_at`` that is naive, or given to a
    schedule that is not ``once``."""
    with transaction.atomic(using=using):
        row = _get_locked(schedule_id, using)
        if row.status == Status.ACTIVE and run_at is None:
            return row
        if row.status not in (Status.PAUSED, Status.FAILED):
            raise StateConflict(f"a {row.status} schedule cannot be enabled")
        instant = _resolve_now(now, using)
        now = timing.truncate_to_second(instant)
        before = row.status
        changes: dict[str, list[Any]] = {"status": [before, Status.ACTIVE]}
        if run_at is not None:
            if row.kind != Kind.ONCE:
                raise ValidationError({"run_at": ["Only a once schedule takes run_at."]})
            try:
                new_run_at = timing.truncate_to_second(run_at, "run_at")
            except timing.InvalidSchedule as exc:
                raise ValidationError({"run_at": [exc.message]}) from None
            changes["run_at"] = [_json_value(row.run_at), _json_value(new_run_at)]
            row.run_at = new_run_at
            row.definition_hash = _safe_hash(row)  # planned here, not re-planned by save()
        if row.status == Status.FAILED:
            row.failure_count = 0
        row.status = Status.ACTIVE
        row.degraded_reason = row.pause_reason = ""
        row.failed_occurrences = 0
        row.retry_scheduled_for = row.triggered_at = None
        if row.kind == Kind.ONCE:
            _rearm_once(row, now)
        else:
            try:
                row.next_run_at = plan_next(row, now)
            except Exception as exc:  # noqa: BLE001 - a definition made invalid behind save()
                raise StateConflict(
                    f"the stored definition cannot be evaluated ({describe_problem(exc)}): "
                    "correct it first"
                ) from None
            if row.next_run_at is None:
                row.status = Status.COMPLETED
                changes["status"] = [before, Status.COMPLETED]
        row.save(
            update_fields=[
                "status",
                "degraded_reason",
                "retry_scheduled_for",
                "triggered_at",
                "failure_count",
                "failed_occurrences",
                "pause_reason",
                "next_run_at",
                "run_at",
                "definition_hash",
                "updated_at",
            ]
        )
        record_event(
            row,
            EventAction.ENABLED,
            now=instant,
            actor=actor,
            source=source,
            changes=changes,
            using=using,
        )
    return row


def _rearm_once(row: Schedule, now: datetime) -> None:
    """A ``once`` being enabled: due at its ``run_at`` while that is ahead (or when it
    never ran), else at once as a manual run of a new occurrence (``triggered_at``), so a
    catch-up window (``misfire_grace_seconds``) does not turn it into a miss."""
    if row.run_at is None:
        raise StateConflict("the stored definition cannot be evaluated (run_at: missing)")
    run_at = timing.truncate_to_second(row.run_at, "run_at")
    if run_at > now or row.occurrence == 0:
        row.next_run_at = run_at
    else:
        row.triggered_at = row.next_run_at = now


def disable(
    schedule_id: Any, *, actor: Any = None, source: str = "code", using: str = "default"
) -> Schedule:
    """Pause an active schedule: no next run until :func:`enable` (a pending retry is
    dropped); a run in progress finishes and is receipted normally. A paused schedule can
    still be run by hand with :func:`trigger`.
    Raises :class:`StateConflict` for a cancelled, completed or failed schedule."""
    with transaction.atomic(using=using):
        row = _get_locked(schedule_id, using)
        if row.status == Status.PAUSED:
            return row
        if row.status != Status.ACTIVE:
            raise StateConflict(f"a {row.status} schedule cannot be disabled")
        row.status = Status.PAUSED
        row.next_run_at = row.retry_scheduled_for = row.triggered_at = None
        row.save(
            update_fields=[
                "status",
                "next_run_at",
                "retry_scheduled_for",
                "triggered_at",
                "updated_at",
            ]
        )
        record_event(
            row,
            EventAction.DISABLED,
            actor=actor,
            source=source,
            changes={"status": [Status.ACTIVE, Status.PAUSED]},
            using=using,
        )
    return row


def trigger(
    schedule_id: Any,
    *,
    now: datetime | None = None,
    actor: Any = None,
    source: str = "code",
    using: str = "default",
) -> Schedule:
    """Request a manual run now, as its own occurrence, without disturbing the grid: the
    next claim runs it (``scheduled_for`` = the trigger instant) and the schedule then goes
    on with its next slot after that. Works on active and paused schedules (a paused
    schedule plus triggers is a manual-only job). Raises :class:`StateConflict` while the
    schedule is running, and for a cancelled, completed or failed schedule."""
    with transaction.atomic(using=using):
        row = _get_locked(schedule_id, using)
        if row.status not in (Status.ACTIVE, Status.PAUSED):
            raise StateConflict(f"a {row.status} schedule cannot be triggered")
        if row.lease_token is not None:
            raise StateConflict("the schedule is running (it holds a lease)")
        instant = _resolve_now(now, using)
        now = timing.truncate_to_second(instant)
        row.triggered_at = now
        row.retry_scheduled_for = None
        row.next_run_at = now
        row.save(update_fields=["triggered_at", "retry_scheduled_for", "next_run_at", "updated_at"])
        record_event(
            row, EventAction.TRIGGERED, now=instant, actor=actor, source=source, using=using
        )
    return row


def cancel(
    schedule_id: Any, *, actor: Any = None, source: str = "code", using: str = "default"
) -> Schedule:
    """Cancel for good: no further runs (a run in progress still gets its receipt).
    Raises :class:`StateConflict` if already cancelled or completed."""
    with transaction.atomic(using=using):
        row = _get_locked(schedule_id, using)
        if row.status in (Status.CANCELLED, Status.COMPLETED):
            raise StateConflict(f"a {row.status} schedule cannot be cancelled")
        before = row.status
        row.status = Status.CANCELLED
        row.next_run_at = row.retry_scheduled_for = row.triggered_at = None
        row.save(
            update_fields=[
                "status",
                "next_run_at",
                "retry_scheduled_for",
                "triggered_at",
                "updated_at",
            ]
        )
        record_event(
            row,
            EventAction.CANCELLED,
            actor=actor,
            source=source,
            changes={"status": [before, Status.CANCELLED]},
            using=using,
        )
    return row


def delete_schedule(
    schedule_id: Any,
    *,
    now: datetime | None = None,
    actor: Any = None,
    source: str = "code",
    using: str = "default",
) -> None:
    """Delete a schedule. Refused (:class:`StateConflict`) while it holds a live lease or
    has an attempt without a receipt. Its attempts and receipts stay (the audit trail
    outlives the schedule) until retention prunes them."""
    with transaction.atomic(using=using):
        row = _get_locked(schedule_id, using)
        if row.lease_token is not None:
            raise StateConflict("the schedule is running (it holds a lease)")
        if (
            RunAttempt.objects.using(using)
            .filter(schedule_id=row.id, receipt__isnull=True)
            .exists()
        ):
            raise StateConflict("the schedule has an open attempt without a receipt")
        record_event(row, EventAction.DELETED, now=now, actor=actor, source=source, using=using)
        row.delete(using=using)


# ---------------------------------------------------------------------------------------
# Definitions: create and edit (the API and the admin call these)
# ---------------------------------------------------------------------------------------

#: Fields a caller may set through :func:`create_schedule` / :func:`update_schedule`; run
#: state (status, counters, leases, ``next_run_at``) changes only through :mod:`.state`.
EDITABLE_FIELDS = frozenset(
    {
        "name",
        "callback",
        "kind",
        "interval_seconds",
        "cron",
        "timezone",
        "run_at",
        "start_at",
        "end_at",
        "max_runs",
        "payload",
        "metadata",
        "misfire_policy",
        "misfire_grace_seconds",
        "max_attempts",
        "backoff_base_seconds",
        "backoff_cap_seconds",
        "pause_after_failures",
        "timeout_seconds",
        "jitter_seconds",
        "owner",
    }
)


def _check_fields(fields: dict[str, Any]) -> None:
    unknown = set(fields) - EDITABLE_FIELDS
    if unknown:
        raise ValueError(f"not editable: {', '.join(sorted(unknown))}")


def _current(row: Schedule, name: str) -> Any:
    return row.owner_id if name == "owner" else getattr(row, name)  # no query for the owner


def _differs(row: Schedule, name: str, value: Any) -> bool:
    if name == "owner":
        return bool(row.owner_id != getattr(value, "pk", value))
    return bool(getattr(row, name) != value)


def validate_schedule(row: Schedule) -> None:
    """``row.full_clean()``, except that the database constraints (a safety net under
    :meth:`Schedule.clean`, with less helpful messages) are checked only once every field
    is valid. Raises ``ValidationError`` with field messages."""
    row.full_clean(validate_constraints=False)
    row.validate_constraints()


def _save_or_explain(row: Schedule, using: str, **kwargs: Any) -> None:
    """``row.save()``; if the database refuses it (a concurrent write took the name between
    validation and save), validate again so the caller gets field messages, not a crash."""
    try:
        with transaction.atomic(using=using):
            row.save(using=using, **kwargs)
    except IntegrityError:
        validate_schedule(row)
        raise


def create_schedule(
    *, actor: Any = None, source: str = "code", using: str = "default", **fields: Any
) -> Schedule:
    """Validate and insert a schedule; ``save()`` plans its first slot. Records a
    ``created`` event (``actor``: a user or None; ``source``: api, admin, command, code).

    ``fields`` are :data:`EDITABLE_FIELDS`. Raises ``ValidationError`` (field messages)
    for an invalid definition and ``ValueError`` for a field that is not editable.
    """
    _check_fields(fields)
    row = Schedule(**fields)
    with transaction.atomic(using=using):
        _lock_for_write(using)  # SQLite: hold the write lock from the start (validate, insert)
        validate_schedule(row)
        _save_or_explain(row, using, force_insert=True)
        record_event(
            row,
            EventAction.CREATED,
            actor=actor,
            source=source,
            changes=_as_changes({}, fields),
            using=using,
        )
    return row


def update_schedule(
    schedule_id: Any,
    *,
    actor: Any = None,
    source: str = "code",
    using: str = "default",
    **changes: Any,
) -> Schedule:
    """Apply ``changes`` (:data:`EDITABLE_FIELDS`) to the locked row, validate, and write
    only those columns. A definition change re-plans ``next_run_at`` from now. Records an
    ``edited`` event with ``{field: [old, new]}`` when something changed.

    Raises ``Schedule.DoesNotExist``, ``ValidationError`` (field messages) or ``ValueError``
    for a field that is not editable.
    """
    _check_fields(changes)
    with transaction.atomic(using=using):
        row = _get_locked(schedule_id, using)
        changed = [name for name, value in changes.items() if _differs(row, name, value)]
        before = {name: _current(row, name) for name in changed}
        for name in changed:
            setattr(row, name, changes[name])
        validate_schedule(row)
        if changed:
            _save_or_explain(row, using, update_fields=[*changed, "updated_at"])
            record_event(
                row,
                EventAction.EDITED,
                actor=actor,
                source=source,
                changes=_as_changes(before, {name: changes[name] for name in changed}),
                using=using,
            )
    return row


# ---------------------------------------------------------------------------------------
# Code-declared schedules and degraded recovery
# ---------------------------------------------------------------------------------------


def declared_fields(reg: Any) -> dict[str, Any]:
    """The schedule fields a registration declares (``register(..., every=/cron=/at=)``)."""
    d = reg.declaration
    assert d is not None
    wanted: dict[str, Any] = {
        "callback": reg.name,
        "kind": d.kind,
        "interval_seconds": d.every,
        "cron": d.cron or "",
        "run_at": d.at,
        "start_at": d.start_at,
        "end_at": d.end_at,
        "max_runs": d.max_runs,
    }
    if d.timezone:
        wanted["timezone"] = d.timezone
    if d.payload is not None:
        wanted["payload"] = d.payload
    return wanted


def _clean_declared(row: Schedule) -> None:
    """``full_clean`` a schedule declared in code; an invalid declaration is a programming
    error, raised as ``ImproperlyConfigured`` naming the schedule (check E008 reports it
    before any command runs)."""
    try:
        row.full_clean()
    except ValidationError as exc:
        raise ImproperlyConfigured(
            f"The schedule declared in code for {row.name!r} is invalid: "
            f"{_messages(exc)}. Fix its register(...) call."
        ) from exc


def _messages(exc: ValidationError) -> str:
    if hasattr(exc, "error_dict"):
        return "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())
    return " ".join(exc.messages)


def sync_declared(*, using: str = "default", now: datetime | None = None) -> list[Schedule]:
    """Create or update the schedules declared with ``register(..., every=/cron=/at=)``.

    A declared schedule is matched by name; only its definition fields are written, so
    occurrence counters, failures and history survive; a changed definition is an edit
    (re-planned from now, R10). Also recovers schedules that were paused as degraded
    because their callback was missing, now that it is registered again.
    Returns the schedules created or changed.
    """
    changed: list[Schedule] = []
    for reg in registry.declared():
        wanted = declared_fields(reg)
        with transaction.atomic(using=using):
            _lock_for_write(using)
            row = _locked(
                Schedule.objects.using(using).filter(name=reg.name), using, skip_locked=False
            ).first()
            if row is None:
                row = Schedule(name=reg.name, **wanted)
                _clean_declared(row)
                row.save(using=using)
                record_event(
                    row,
                    EventAction.CREATED,
                    source="code",
                    using=using,
                    changes=_as_changes({}, wanted),
                )
                changed.append(row)
                continue
            before = {k: getattr(row, k) for k in wanted}
            diff = {k: v for k, v in wanted.items() if before[k] != v}
            if diff:
                for k, v in diff.items():
                    setattr(row, k, v)
                _clean_declared(row)
                row.save(using=using)
                record_event(
                    row,
                    EventAction.EDITED,
                    source="code",
                    using=using,
                    changes=_as_changes(before, diff),
                )
                changed.append(row)
    changed.extend(recover_degraded(using=using, now=now))
    return changed


def recover_degraded(*, using: str = "default", now: datetime | None = None) -> list[Schedule]:
    """Re-activate schedules paused as degraded because their callback was missing, now
    that it is registered again. The occurrence that met the missing callback runs once,
    at once (its next attempt; slots that passed meanwhile are counted as missed, as after
    downtime), then the grid goes on. A schedule paused because its definition cannot be
    evaluated is left alone: it needs a valid edit and :func:`enable`. Records an
    ``enabled`` event (source ``worker``) for each."""
    recovered = []
    candidates = (
        Schedule.objects.using(using)
        .degraded()
        .filter(status=Status.PAUSED)
        .exclude(degraded_reason__startswith=UNEVALUABLE_PREFIX)  # needs a fix and enable()
    )
    for pk, name, callback in candidates.filter(callback__in=registry.names()).values_list(
        "pk", "name", "callback"
    ):
        try:
            recovered.append(_recover_one(pk, now, using))
        except (StateConflict, ValidationError, ValueError, Schedule.DoesNotExist) as exc:
            # Changed meanwhile, or its definition cannot be evaluated: leave it paused.
            logger.warning(
                "schedule %s not recovered: %s",
                name,
                describe_problem(exc),
                extra={"schedule": name},
            )
            continue
        logger.info(
            "schedule %s recovered: callback %r is registered again",
            name,
            callback,
            extra={"schedule": name},
        )
    return recovered


def _recover_one(pk: Any, now: datetime | None, using: str) -> Schedule:
    with transaction.atomic(using=using):
        row = _get_locked(pk, using)
        if row.status != Status.PAUSED or not row.degraded_reason:
            raise StateConflict(f"the schedule is {row.status} now")
        if row.retry_scheduled_for is None:  # degraded before the occurrence was kept
            return enable(pk, now=now, source="worker", using=using)
        instant = _resolve_now(now, using)
        row.status = Status.ACTIVE
        row.degraded_reason = row.pause_reason = ""
        row.triggered_at = None
        row.next_run_at = timing.truncate_to_second(instant)  # the kept occurrence, at once
        row.save(
            update_fields=[
                "status",
                "degraded_reason",
                "pause_reason",
                "triggered_at",
                "next_run_at",
                "updated_at",
            ]
        )
        record_event(
            row,
            EventAction.ENABLED,
            now=instant,
            source="worker",
            changes={"status": [Status.PAUSED, Status.ACTIVE]},
            using=using,
        )
    return row


# ---------------------------------------------------------------------------------------
# Worker bookkeeping
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Wakeup:
    """The next instants a worker must act at (aware UTC, None when there is none)."""

    due: datetime | None
    lease_expiry: datetime | None

    @property
    def earliest(self) -> datetime | None:
        candidates = [t for t in (self.due, self.lease_expiry) if t is not None]
        return min(candidates) if candidates else None


def next_wakeup(*, using: str = "default") -> Wakeup:
    """The next due slot of an unleased active schedule and the next lease expiry (two
    index-ordered ``LIMIT 1`` reads)."""
    due = (
        Schedule.objects.using(using)
        .waiting()  # as claim_due: runnable and unleased
        .order_by("next_run_at")
        .values_list("next_run_at", flat=True)
        .first()
    )
    expiry = (
        Schedule.objects.using(using)
        .filter(lease_expires_at__isnull=False)
        .order_by("lease_expires_at")
        .values_list("lease_expires_at", flat=True)
        .first()
    )
    return Wakeup(due=due, lease_expiry=expiry)


def heartbeat(
    worker_id: str,
    *,
    in_flight: int = 0,
    runs_finished: int = 0,
    stopping: bool = False,
    started_at: datetime | None = None,
    using: str = "default",
) -> datetime:
    """Upsert the worker's heartbeat row (database clock) and return the database time.
    Records host-minus-database clock skew for health (B24)."""
    import os

    host_now = dj_timezone.now()
    now = db_now(using)
    values = {
        "hostname": socket.gethostname()[:200],
        "pid": os.getpid(),
        "last_seen_at": now,
        "in_flight": in_flight,
        "runs_finished": runs_finished,
        "clock_skew_seconds": round((host_now - now).total_seconds(), 3),
        "stopped_at": now if stopping else None,
    }
    updated = WorkerHeartbeat.objects.using(using).filter(worker_id=worker_id).update(**values)
    if not updated:
        WorkerHeartbeat.objects.using(using).create(
            worker_id=worker_id, started_at=started_at or now, **values
        )
    return now


def seconds_until(when: datetime | None, now: datetime) -> float:
    """Seconds from ``now`` to ``when`` (``inf`` for None, 0 if past); never overflows."""
    if when is None:
        return math.inf
    return max(0.0, (when - now).total_seconds())
