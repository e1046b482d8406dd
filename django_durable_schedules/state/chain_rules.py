"""The pure rules of chaining (issue #30 item 1; the tables: :mod:`..models.chains`).

* :func:`grid_of`: the grid a schedule's occurrences fall on, as a value two schedules
  share exactly when their nominal instants are the same;
* :func:`link_problems`: why a set of upstreams cannot be linked to a downstream (a self
  link, a cycle, upstreams on different grids, an upstream with no grid), as field messages;
* :func:`closure`: every schedule downstream of some schedules, upstreams first;
* :func:`note_done`: an upstream's success noted on a slot, and whether the slot is ready;
* :func:`settle_slots`: which open slots of a downstream a claim counts missed and which
  one it runs; :func:`plan_chain`: the attempts and receipts that makes.

Pure: plain values in, plain values out (:func:`plan_chain`: a locked row's attributes
and unsaved attempts and receipts, as :mod:`.rules`), no database access. The state package locks the
rows, reads the links and writes what these return.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..models import AttemptOrigin, ReceiptStatus, RunAttempt
from .attempt_rules import new_attempt
from .bounds import check_counters
from .records import build_receipt
from .rules import grant_lease
from .slot_rules import SlotChoice
from .transitions import implements

#: The field the link problems are reported on (``Schedule.upstream``).
UPSTREAM_FIELD = "upstream"
#: The kinds of schedule that run on a grid an ``after`` schedule can follow: ``manual`` has
#: none (each trigger is its own instant), ``after`` takes its upstreams'.
GRID_KINDS = ("interval", "cron", "rrule", "once")


#: The origins of an occurrence of the live grid: the ones whose nominal instant the
#: schedules downstream wait for (a trigger is no instant of the grid, a re-run or a
#: backfill slot one decided before).
CHAIN_ORIGINS = frozenset({AttemptOrigin.SCHEDULED, AttemptOrigin.BUFFERED, AttemptOrigin.DEFERRED})


def chain_pairs(attempts: Iterable[RunAttempt]) -> list[tuple[Any, datetime]]:
    """The ``(schedule id, nominal instant)`` of each first attempt of an occurrence of the
    live grid in ``attempts`` (run, or receipted missed or degraded at the claim): its
    nominal instant is ``nominal_for`` when an exclusion policy moved it, else
    ``scheduled_for``."""
    return [
        (a.schedule_id, a.nominal_for or a.scheduled_for)
        for a in attempts
        if a.attempt == 1 and a.origin in CHAIN_ORIGINS
    ]


@dataclass(frozen=True, slots=True)
class Grid:
    """The nominal instants of a schedule as a value: two schedules on equal grids have the
    same instants (the same kind, spec, zone and anchor; window bounds and exclusions only
    leave instants out, so they are not part of it)."""

    kind: str
    spec: tuple[Any, ...]
    timezone: str
    anchor: datetime | None


def grid_of(row: Any) -> Grid | None:
    """The :class:`Grid` of ``row`` (a ``Schedule``, or any object with its timing fields),
    None for a kind with no grid of its own (``manual``, ``after``). An interval grid is
    anchored at ``start_at`` or the creation instant; an rrule grid at ``start_at`` or
    creation too (its DTSTART); a cron grid has no anchor; a once grid is its ``run_at``."""
    kind = row.kind
    if kind not in GRID_KINDS:
        return None
    extra = row.extra_specs if isinstance(row.extra_specs, list) else []
    if kind == "once":
        return Grid(kind, (row.run_at,), "UTC", None)
    if kind == "interval":
        return Grid(kind, (row.interval_seconds,), "UTC", row.anchor)
    anchor = row.anchor if kind == "rrule" or extra else None
    spec = (row.cron or row.rrule, *sorted(str(s) for s in extra))
    return Grid(kind, spec, str(row.timezone or "UTC"), anchor)


def closure(starts: Iterable[Any], links: Mapping[Any, Sequence[Any]]) -> list[Any]:
    """Every schedule downstream of ``starts`` (``links``: upstream -> its direct
    downstreams), each once, in breadth-first order from ``starts`` (``starts`` themselves
    left out unless one is downstream of another). Terminates on any ``links``, cyclic
    or not."""
    seen: set[Any] = set()
    order: list[Any] = []
    frontier = list(starts)
    while frontier:
        nxt: list[Any] = []
        for node in frontier:
            for down in links.get(node, ()):
                if down not in seen:
                    seen.add(down)
                    order.append(down)
                    nxt.append(down)
        frontier = nxt
    return order


def _upstream_grids(
    start: Any, upstreams_of: Mapping[Any, Sequence[Any]], grids: Mapping[Any, Grid | None]
) -> set[Grid]:
    """The grids of the root schedules (those with a grid) upstream of ``start``."""
    found: set[Grid] = set()
    seen: set[Any] = set()
    stack = [start]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        grid = grids.get(node)
        if grid is not None:
            found.add(grid)
        else:
            stack.extend(upstreams_of.get(node, ()))
    return found


def link_problems(
    downstream: Any,
    upstreams: Sequence[Any],
    upstreams_of: Mapping[Any, Sequence[Any]],
    grids: Mapping[Any, Grid | None],
    kinds: Mapping[Any, str],
    names: Mapping[Any, str],
) -> list[str]:
    """Why ``downstream`` cannot run after ``upstreams`` (an empty list: it can). The
    graph is every other link as it stands (``upstreams_of``: downstream -> its upstreams;
    ``downstream``'s own entry is replaced by ``upstreams``); ``grids``, ``kinds`` and
    ``names`` describe every schedule named. Refused, each with a message naming the
    schedules: no upstream at all; ``downstream`` itself; an upstream of kind ``manual``
    (no grid to share); a cycle (``downstream`` upstream of one of its upstreams); and
    upstreams whose grids (their own, or for an ``after`` upstream its roots') differ."""
    if not upstreams:
        return ["a schedule of kind 'after' needs at least one upstream schedule"]
    problems: list[str] = []
    if downstream in upstreams:
        problems.append("a schedule cannot run after itself")
    for up in upstreams:
        if kinds.get(up) == "manual":
            problems.append(
                f"{names.get(up, up)!r} is a manual schedule: it has no grid of nominal "
                "instants to follow (trigger the downstream schedule instead)"
            )
    graph = {**upstreams_of, downstream: list(upstreams)}
    for up in upstreams:
        if up != downstream and downstream in _ancestors(up, graph):
            problems.append(
                f"a cycle: {names.get(up, up)!r} already runs after "
                f"{names.get(downstream, downstream)!r}"
            )
    roots = _upstream_grids(downstream, graph, {**grids, downstream: None})
    if len(roots) > 1:
        problems.append(
            "the upstream schedules are on different grids (their nominal instants differ): "
            + ", ".join(sorted(repr(names.get(u, u)) for u in upstreams))
        )
    return problems


def _ancestors(start: Any, upstreams_of: Mapping[Any, Sequence[Any]]) -> set[Any]:
    """Every schedule upstream of ``start`` (transitively), ``start`` only on a cycle."""
    seen: set[Any] = set()
    stack = list(upstreams_of.get(start, ()))
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        stack.extend(upstreams_of.get(node, ()))
    return seen


def note_done(done: Any, upstream: str, upstreams: Iterable[str]) -> tuple[list[str], bool]:
    """``done`` (a slot's list of upstream keys, as text, that succeeded for it; a value
    written behind ``save()`` that is no list of texts counts as empty) with ``upstream``
    added once, and whether every one of ``upstreams`` (the downstream's current links) is
    now in it. An upstream noted twice (a re-run, a backfill of a slot it already ran)
    changes nothing."""
    held = [d for d in done if isinstance(d, str)] if isinstance(done, list) else []
    if upstream not in held:
        held.append(upstream)
    wanted = set(upstreams)
    return held, bool(wanted) and wanted <= set(held)


@dataclass(frozen=True, slots=True)
class OpenSlot:
    """An open chain slot as a claim reads it: its key, nominal instant, deadline (aware
    UTC) and whether every upstream succeeded for it (``ready``)."""

    key: Any
    scheduled_for: datetime
    deadline: datetime
    ready: bool
    #: How many upstreams had succeeded for it when it was read.
    done: int = 0


@dataclass(frozen=True, slots=True)
class Settled:
    """What a claim at ``now`` does with a downstream's open slots: ``missed`` (still
    waiting at their deadline, oldest first) and ``run`` (the oldest ready slot, None for
    none)."""

    missed: tuple[OpenSlot, ...]
    run: OpenSlot | None


def settle_slots(slots: Sequence[OpenSlot], now: datetime) -> Settled:
    """Of a downstream's open ``slots``: the waiting ones whose deadline is at or before
    ``now`` are missed; the oldest ready one (by nominal instant) runs, whatever waits
    before it (an instant whose upstream still retries does not hold back a later one that
    is ready; it runs or is counted on its own). A ready slot past its deadline still runs:
    its upstreams succeeded in time."""
    ordered = sorted(slots, key=lambda s: s.scheduled_for)
    missed = tuple(s for s in ordered if not s.ready and s.deadline <= now)
    run = next((s for s in ordered if s.ready), None)
    return Settled(missed, run)


def missed_reason(slot: OpenSlot, wait_seconds: int) -> str:
    """The reason a chain slot is receipted ``missed``, in words."""
    return (
        f"its upstream schedules had not all succeeded for {slot.scheduled_for:%Y-%m-%d %H:%M:%S} "
        f"UTC within wait_seconds={wait_seconds} ({slot.done} had)"
    )


@implements("claim.chain_run", "claim.chain_missed")
def plan_chain(
    row: Any,
    settled: Settled,
    now: datetime,
    lease: timedelta,
    worker: str,
    attempts: list[Any],
    receipts: list[Any],
    claims: list[Any],
) -> None:
    """The claim of the kind ``after`` ``row`` (locked, free) at ``now`` after its chain
    slots were ``settled``: each missed instant its own occurrence with one attempt and a
    ``missed`` receipt giving the reason (``missed_count`` + 1 each), then the ready
    instant, if any, run as the next occurrence (:func:`.rules.grant_lease`: its attempt
    leased to ``worker`` for ``lease``, ``scheduled_for`` = the instant). The row has no
    grid: its next run stays None."""
    check_counters(row)
    for slot in settled.missed:
        occurrence = row.occurrence + 1
        attempt = new_attempt(row, occurrence, 1, slot.scheduled_for, now, now, worker)
        attempts.append(attempt)
        row.occurrence, row.attempt = occurrence, 1
        row.missed_count += 1
        receipts.append(
            build_receipt(
                attempt,
                ReceiptStatus.MISSED,
                now,
                row=row,
                error_type="UpstreamNotDone",
                error_message=missed_reason(slot, row.wait_seconds),
            ).model()
        )
    if settled.run is not None:
        choice = SlotChoice(row.occurrence + 1, 1, settled.run.scheduled_for, None)
        grant_lease(row, choice, now, lease, worker, attempts, receipts, claims)
