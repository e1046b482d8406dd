"""Claims and leases: :func:`claim_due`, :func:`renew_leases`, :func:`expire_leases`.

Each opens its own transaction and takes the row locks; the arithmetic of a claim is
:mod:`.rules`, that of a recovered attempt :mod:`.outcomes`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import connections, transaction
from django.db.models import DateTimeField, QuerySet
from django.db.models.expressions import RawSQL

from .. import timing
from ..conf import app_settings
from ..db.batch import ROW_PROBLEMS
from ..db.clock import DUE_NOW_SQL, db_now, instant_after_read, resolve_now
from ..db.fast_orm import LIMIT, PLACEHOLDER, read_rows
from ..db.locks import lock_for_write, locked
from ..models import (
    RunAttempt,
    RunReceipt,
    Schedule,
    ScheduleEvent,
    links_exist,
    load_blackouts,
    load_exclusions,
    with_backfill_flag,
    with_blackout_flag,
    with_calendar_flag,
    with_links_flag,
)
from .backfill_claims import claim_backfills
from .backfill_share import batch_reserve, take_reserve
from .chain_claims import chain_reserve, claim_chains
from .chain_rules import chain_pairs
from .chains import write_chain_slots
from .claim_order import take_in_order, top_level, worker_pools
from .claim_reads import GroupRooms, due_in_level, no_groups, of_group, read_level, ungrouped
from .claim_writes import plan_rows, write_claim
from .columns import CLAIM_UNREAD
from .groups import Admission
from .parallel import ParallelAdmission
from .quarantine import (
    quarantine_refused,
    quarantine_refused_backfill,
)
from .transitions import implements
from .values import Claim

logger = logging.getLogger(__name__)


def _claim_committing() -> None:
    """Called as the last statement inside the claim transaction (a test seam: a crash
    here must leave nothing claimed and nothing run)."""


def claim_due(
    *,
    worker: str,
    limit: int | None = None,
    lease_seconds: float | None = None,
    now: datetime | None = None,
    using: str = "default",
    pools: Sequence[str] | None = None,
) -> list[Claim]:
    """Claim up to ``limit`` due schedules of ``pools`` (default: ``("default",)``, the
    pool a worker started without ``--pool`` claims) for ``worker`` in one transaction.

    Due means ``status = active``, no lease, ``next_run_at <= now`` (database clock); the
    higher ``priority`` first, then the earliest due (:mod:`.claim_order`: bounded index
    scans at any size). A row whose concurrency group has no room (``max_running`` live
    leases, its ``rate`` used up: :mod:`.group_rules`) is left unleased and due, and later
    claims skip it until the group has room. For each row taken: a schedule edited behind
    ``save()`` is re-planned instead; an unregistered callback is receipted ``degraded``
    and paused; a row the engine cannot evaluate (an unknown zone, a cron that can never
    fire, a value out of range, written behind ``save()``) is receipted ``degraded`` with
    the field and the reason, and paused; otherwise missed slots are coalesced into one
    run of the latest slot (``misfire_policy`` all: the oldest runs first), an attempt
    row is written with a fresh lease of ``lease_seconds`` (default setting
    ``LEASE_SECONDS``) and ``next_run_at`` moves to the next slot. The next slot of an
    open backfill is claimed on schedules that are free (see
    ``ScheduleQuerySet.backfill_ready``; :mod:`.backfills`), with the capacity the live
    rows leave and, while both wait, at least the backfills' share of the batch
    (``BACKFILL_SHARE``; :mod:`.backfill_share`); a share no backfill slot uses goes to
    the live rows. Returns the committed claims.

    If the database refuses the batch (``IntegrityError``/``DataError``: a row whose stored
    counters clash with its attempts, ...) or a row's value cannot be read at all
    (:data:`.db.batch.ROW_PROBLEMS`), the due rows are claimed one transaction each, then
    the backfill slots one schedule each; a row refused on its own is paused as degraded
    with the reason, a backfill slot refused on its own cancels that backfill with the
    reason (:mod:`.quarantine`), so one row never blocks every claim nor is retried at
    every pass. Other database errors propagate and nothing is claimed.
    """
    limit = limit or app_settings.BATCH_SIZE
    lease = timedelta(seconds=lease_seconds or app_settings.LEASE_SECONDS)
    if now is not None:  # a caller's naive instant is its error, never a row's
        now = timing.require_aware(now, "now")
    pools = worker_pools(pools)
    try:
        claims = _claim_batch(worker, limit, lease, now, using, only=None, pools=pools)
    except ROW_PROBLEMS as exc:
        if connections[using].in_atomic_block:
            raise  # inside the caller's transaction nothing can be retried here
        logger.warning("a claim batch was refused (%s); claiming row by row", exc)
        claims = _claim_one_by_one(worker, limit, lease, now, using, pools)
    for claim in claims:
        logger.debug(
            "claimed %s occurrence %s attempt %s",
            claim.schedule_name,
            claim.occurrence,
            claim.attempt,
            extra={"schedule": claim.schedule_name, "occurrence": claim.occurrence},
        )
    return claims


def _read_due(
    using: str,
    due_before: Any,
    limit: int,
    only: uuid.UUID | None,
    pools: Sequence[str],
    *,
    cached: bool,
    skip: tuple[list[Any], list[Any]] | None = None,
) -> list[Schedule]:
    """The locking read of a claim: up to ``limit`` due rows of ``pools`` in claim order
    (:func:`.claim_order.take_in_order`; ``only``: that row alone, if it is due), locked
    ``SKIP LOCKED``, each flagged with whether it links a calendar or a blackout window.
    ``cached``: the statement judges "due" by the database clock (no parameter of this
    call), so it is compiled once per pool and level, its row limit a parameter
    (:func:`.db.fast_orm.read_rows`). ``skip``: ``(ids, group ids)`` left out (rows this
    claim read already, groups it found without room: :func:`_fill_held`), uncached."""

    rooms = GroupRooms(using, due_before, cached=cached)
    held = frozenset(skip[1]) if skip is not None else frozenset()

    def read(pool: str, level: int, n: int, group: Any = None) -> list[Schedule]:
        """One range: the rows of no group (``group`` None), or of ``group``."""

        def build(value: Any = PLACEHOLDER, limit: int = LIMIT) -> QuerySet[Schedule]:
            due = due_in_level(using, due_before, pool, level).defer(*CLAIM_UNREAD)
            due = ungrouped(due, using) if group is None else of_group(due, value)
            qs: QuerySet[Schedule] = with_links_flag(
                with_backfill_flag(with_blackout_flag(with_calendar_flag(due)))
            )
            if skip is not None:
                qs = qs.exclude(pk__in=skip[0])
            return locked(qs, using, skip_locked=True)[:limit]

        if cached and skip is None:
            # One statement for every claim size: the limit is its parameter.
            key = ("claim_due", pool, level, group is None)
            return read_rows(Schedule, key, using, build, value=group, limit=n)
        return list(build(group, n))

    def read_level_rows(pool: str, level: int, n: int) -> list[Schedule]:
        return read_level(
            n,
            lambda: rooms.found(pool, level),
            lambda k: read(pool, level, k),
            lambda group, k: read(pool, level, k, group),
            lambda row: row.next_run_at,
            no_groups,
            held,
        )

    if only is not None:
        return _read_only(using, due_before, only, pools)
    return take_in_order(
        pools,
        limit,
        lambda pool, below: top_level(pool, below, using),
        read_level_rows,
        lambda row: row.next_run_at,
    )


def _read_only(
    using: str, due_before: Any, only: uuid.UUID, pools: Sequence[str]
) -> list[Schedule]:
    """The locking read of the one due row ``only`` if it is in ``pools`` (the claim of a
    row on its own)."""
    qs: QuerySet[Schedule] = with_backfill_flag(
        with_blackout_flag(
            with_calendar_flag(
                Schedule.objects.using(using)
                .claimable(due_before)
                .filter(pk=only, pool__in=pools)
                .defer(*CLAIM_UNREAD)
            )
        )
    )
    return list(locked(qs, using, skip_locked=True)[:1])


#: The columns the row-by-row claim reads of each due row.
_IDS = ("pk", "next_run_at")


@implements("claim.refused", "claim.backfill_cancelled")
def _claim_one_by_one(
    worker: str,
    limit: int,
    lease: timedelta,
    now: datetime | None,
    using: str,
    pools: Sequence[str],
) -> list[Claim]:
    """The due rows, each claimed in its own transaction, then the backfill slots of the
    schedules free to run one (their share of ``limit`` kept for them as in a batch), each
    in its own transaction; a row the database refuses on
    its own is paused as degraded (:func:`.quarantine.quarantine_refused`), a backfill
    slot refused on its own cancels that backfill
    (:func:`.quarantine.quarantine_refused_backfill`)."""
    due_before = now if now is not None else db_now(using)
    claims: list[Claim] = []
    ready = (
        Schedule.objects.using(using)
        .backfill_ready(due_before)
        .filter(pool__in=pools)
        .order_by("pk")
    )
    waiting = list(ready.values_list("pk", flat=True)[:limit])
    share = take_reserve(using, worker, limit, app_settings.BACKFILL_SHARE)[0]
    rooms = GroupRooms(using, due_before)

    def level_ids(pool: str, level: int, n: int) -> list[tuple[Any, Any]]:
        due = due_in_level(using, due_before, pool, level)
        return read_level(
            n,
            lambda: rooms.found(pool, level),
            lambda k: list(ungrouped(due, using).values_list(*_IDS)[:k]),
            lambda group, k: list(of_group(due, group).values_list(*_IDS)[:k]),
            lambda found: found[1],
            lambda rows: False,
        )

    due = take_in_order(
        pools,
        limit - min(share, len(waiting)),
        lambda pool, below: top_level(pool, below, using),
        level_ids,
        lambda found: found[1],
    )
    for pk, _ in due:
        try:
            claims += _claim_batch(worker, limit, lease, now, using, only=pk, pools=pools)
        except ROW_PROBLEMS as exc:
            quarantine_refused(pk, exc, using)
    room = limit - len(due)
    for pk in waiting[:room]:
        try:
            claims += _claim_batch(
                worker, 1, lease, now, using, only=None, backfill=pk, pools=pools
            )
        except ROW_PROBLEMS as exc:
            quarantine_refused_backfill(pk, exc, using)
    return claims


def _claim_batch(
    worker: str,
    limit: int,
    lease: timedelta,
    now: datetime | None,
    using: str,
    *,
    only: uuid.UUID | None,
    backfill: uuid.UUID | None = None,
    pools: Sequence[str],
) -> list[Claim]:
    """One claim transaction (see :func:`claim_due`); ``only``: that row alone (no
    backfill slot); ``backfill``: the backfill slot of that schedule alone (no live row)."""
    claims: list[Claim] = []
    with transaction.atomic(using=using):
        lock_for_write(using)
        clock_after, due_before, now = _due_clock(now, using)
        cached = clock_after and only is None
        read = [] if backfill else _read_due(using, due_before, limit, only, pools, cached=cached)
        if not read and only is not None:
            return []
        if clock_after and read:
            now = db_now(using)
        load_exclusions(read, using)  # every row's calendars: one query, two with any
        load_blackouts(read, using)  # and windows: none when no row links one, else one
        attempts: list[RunAttempt] = []
        receipts: list[RunReceipt] = []
        events: list[ScheduleEvent] = []
        plan = (now, lease, worker, attempts, receipts, claims, events, using)
        open_, reserve = batch_reserve(read, only, worker, limit, using)
        links = links_exist(read)  # None: not known from the live read
        chains = only is None and backfill is None and links is not False
        found, kept = chain_reserve(read, limit, due_before, using) if chains else (None, 0)
        head = read[: limit - reserve - kept] if open_ or kept else list(read)
        # Rows held back (allow: at max_parallel running; by their group) wait, due.
        parallel, groups = admissions = (ParallelAdmission(using), Admission(using))
        now_of = instant_after_read(now, using, fresh=clock_after)  # rows read after now
        parts, more = _fill_held(admissions, head, now, now_of, using, due_before, pools)
        rows: list[Schedule] = []
        for part, at in parts:  # each part planned at an instant after its read
            plan_rows(part, at, *plan[1:])
            rows += part
        sink = (lease, worker, attempts, receipts, claims, using)  # where claims are written
        filled = chained = []
        if only is None and open_ is not False:  # backfill slots on schedules left free
            room = limit - len(head) - kept
            filled = claim_backfills(due_before, room, read + more, now_of, *sink,
                                     only=backfill, pools=pools, admit=groups.admit)  # fmt: skip
        if chains:  # chain slots ready or past their deadline, on schedules left free
            room = limit - len(head) - len(filled)
            chained = claim_chains(due_before, room, read + more + filled, now_of, *sink,
                                   pools, admit=groups.admit, found=found)  # fmt: skip
        # The shares unused by backfill and chain slots: to the live rows read (the rest:
        # claimed next time).
        rows += _spare(read[len(head) : limit - len(filled) - len(chained)], admissions, plan)
        rows += filled + chained
        write_claim(rows, attempts, receipts, claims, events, using, admissions, now)
        if links is not False and attempts:  # their downstream schedules' waiting slots
            write_chain_slots(chain_pairs(attempts), using)
        claims[:] = groups.start_deadlines(claims, rows)  # a rate: each start's deadline
        if rows:
            _claim_committing()
    return claims


def _spare(
    rows: list[Schedule], admissions: tuple[ParallelAdmission, Admission], plan: tuple[Any, ...]
) -> list[Schedule]:
    """The live ``rows`` read beyond the head of a claim batch that the backfill and chain
    slots left places for: the ones ``admissions`` admit (``max_parallel``, then the
    concurrency groups), planned (``plan``: the arguments of
    :func:`.claim_writes.plan_rows` after the rows)."""
    now = plan[0]
    parallel, groups = admissions
    rows = groups.admit(parallel.admit(rows, now), now) if rows and now is not None else []
    plan_rows(rows, *plan)
    return rows


#: How many more reads a claim makes to fill the places of rows their concurrency group
#: held back (each leaves out the rows read and the groups found without room).
FILL_ROUNDS = 3


def _fill_held(
    admissions: tuple[ParallelAdmission, Admission],
    head: list[Schedule],
    now: datetime | None,
    now_of: Callable[[], datetime],
    using: str,
    due_before: Any,
    pools: Sequence[str],
) -> tuple[list[tuple[list[Schedule], datetime]], list[Schedule]]:
    """The rows of ``head`` that start now (:meth:`.groups.Admission.admit`), and when
    their groups held some back, as many more due rows of other groups or none as fill
    the places (at most :data:`FILL_ROUNDS` more reads): ``(parts, more)``, ``parts`` the
    rows admitted, each list with the instant it is admitted and planned at (``now`` for
    ``head``; for a fill read's rows, ``now_of()`` after that read: where rows lock, an
    instant read after their lock, so what another worker ended before it is never
    after their ``claimed_at``: tests/test_parallel_claim_clock.py), ``more`` every row
    read beyond ``head`` (locked; the ones admitted are in ``parts``, their calendars and
    windows loaded). A full group never costs the others their place in the batch, nor
    does an ``allow`` row at its ``max_parallel`` (``admissions``: the claim's
    :class:`.parallel.ParallelAdmission`, then its groups')."""
    if not head or now is None:
        return [], []
    parallel, groups = admissions
    parts = [(groups.admit(parallel.admit(head, now), now), now)]
    taken = len(parts[0][0])
    more: list[Schedule] = []
    for _ in range(FILL_ROUNDS):
        if taken >= len(head) or not (groups.held or parallel.held):
            break
        skip = ([r.pk for r in head + more], sorted(groups.held, key=str))
        found = _read_due(
            using, due_before, len(head) - taken, None, pools, cached=False, skip=skip
        )
        if not found:
            break
        load_exclusions(found, using)
        load_blackouts(found, using)
        more += found
        at = now_of()
        parts.append((groups.admit(parallel.admit(found, at), at), at))
        taken += len(parts[-1][0])
    return parts, more


def _due_clock(now: datetime | None, using: str) -> tuple[bool, Any, datetime | None]:
    """How a claim judges "due": ``(clock_after, due_before, now)``. With row locks (not
    SQLite) and no ``now`` given, ``due_before`` is the database clock read inside the
    locking SELECT and the claim time is read after it (``clock_after``; ``now`` stays
    None): a row released or completed by another worker is visible only once that commit
    happened, so its next attempt's ``claimed_at`` can never precede the previous
    attempt's ``finished_at``. SQLite serialises writers with ``lock_for_write``, so
    reading its clock first is already ordered: ``due_before`` is ``now``, resolved."""
    vendor = connections[using].vendor
    if now is None and vendor in DUE_NOW_SQL:
        return True, RawSQL(DUE_NOW_SQL[vendor], (), output_field=DateTimeField()), None
    now = resolve_now(now, using)
    return False, now, now
