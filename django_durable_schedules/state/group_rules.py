"""The rule of concurrency groups (issue #28, item 1), pure: which due rows of a claim may
start now, and what the claim writes on their groups (:func:`admit`).

A row whose schedule names a group starts only while the group has room: fewer than
``max_running`` of the group's runs hold a live lease (the ones the claim counted, under
the group's row lock, plus the ones it has just admitted), and fewer than ``rate``'s count
of starts fell in the last window (lengthened by :func:`rate_window`'s margin, so that the
callbacks' own start times, a few milliseconds after the claim's, keep the rate too). A
row held back is left as it was read: unleased and due, taken by a later claim once the
group has room; nothing is written on it and no slot is lost. The group records how a
later claim can skip its rows without reading them: ``full_until`` while it is at
``max_running`` (a finished run of the group clears it; it lapses after
:data:`RECHECK_SECONDS` in case a lease vanished another way), ``rate_until`` when the
rate's window lets the next start in.

The group keeps its latest ``rate``-count starts, not only the ones of the last window: a
claim reads its ``now`` before it waits for the group's lock, so claims are admitted in
an order their instants need not follow, and a claim whose ``now`` is older than starts
already recorded counts every start after its own ``now`` minus the window (the window
before and after it: conservative, never over the rate). The latest count starts are all
such a claim can need: any older one is at least a window before the count-th latest.

A group whose values cannot be read (a rate written behind ``save()`` that does not
parse) starts nothing: its rows wait, due, and health names the group.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from ..limits import RATE_MARGIN, RATE_MARGIN_MAX_SECONDS, RECHECK_SECONDS
from .transitions import implements

_R = TypeVar("_R")

__all__ = [
    "RECHECK_SECONDS",
    "GroupRoom",
    "admit",
    "give_back",
    "group_columns",
    "rate_margin",
    "rate_window",
]


@dataclass
class GroupRoom:
    """A group as a claim found it under its row lock: its limits (``rate_count`` per
    ``rate_seconds``; None: no such limit), the live leases it holds (``running``), its
    recent starts (``starts``: POSIX seconds, oldest first) and ``unreadable``: why its
    values cannot be read ("" when they can)."""

    max_running: int | None
    rate_count: int | None
    rate_seconds: int | None
    running: int
    starts: list[float] = field(default_factory=list)
    unreadable: str = ""


def rate_margin(seconds: int) -> float:
    """The margin of a rate of ``seconds``, in seconds: :data:`RATE_MARGIN` of it, at most
    :data:`RATE_MARGIN_MAX_SECONDS`. Claims keep the rate over ``seconds`` plus the margin
    (:func:`rate_window`) and each run starts within the margin of its claim
    (``Claim.start_by``), so the callbacks' own starts keep it over ``seconds``: a window
    of starts ``[a, a + seconds)`` holds only claims of ``(a - margin, a + seconds)``."""
    return min(seconds * RATE_MARGIN, RATE_MARGIN_MAX_SECONDS)


def rate_window(seconds: int) -> float:
    """The window a rate of ``seconds`` is enforced over: ``seconds`` plus its margin
    (:func:`rate_margin`)."""
    return seconds + rate_margin(seconds)


def _recent(room: GroupRoom, at: float) -> list[float]:
    """The starts of ``room`` inside the rate's window ending at ``at``."""
    if room.rate_count is None or room.rate_seconds is None:
        return []
    since = at - rate_window(room.rate_seconds)
    return [t for t in room.starts if t > since]


def has_room(room: GroupRoom, at: float) -> bool:
    """Whether one more run of the group may start at ``at`` (POSIX seconds)."""
    if room.unreadable:
        return False
    if room.max_running is not None and room.running >= room.max_running:
        return False
    return room.rate_count is None or len(_recent(room, at)) < room.rate_count


@implements("claim.group_held")
def admit(
    rows: Sequence[_R], group_of: Any, rooms: dict[Any, GroupRoom], now: datetime
) -> tuple[list[_R], list[_R], dict[Any, dict[str, Any]]]:
    """Split ``rows`` (in claim order) into the ones that start now and the ones held back
    by their group: ``(admitted, held, changes)``; ``changes``: per group id of ``rooms``
    touched, the columns to write (``full_until``, ``rate_until``, ``starts``).
    ``group_of(row)``: the row's group id (None: no group, always admitted). ``rooms``:
    the groups found (updated in place as rows are admitted)."""
    at = now.timestamp()
    admitted: list[_R] = []
    held: list[_R] = []
    touched: set[Any] = set()
    for row in rows:
        group = group_of(row)
        room = rooms.get(group) if group is not None else None
        if room is None:
            admitted.append(row)
            continue
        touched.add(group)
        if not has_room(room, at):
            held.append(row)
            continue
        room.running += 1
        if room.rate_count is not None:
            room.starts.append(at)
        admitted.append(row)
    return admitted, held, {group: group_columns(rooms[group], now) for group in touched}


def group_columns(room: GroupRoom, now: datetime) -> dict[str, Any]:
    """What a claim writes on a group it admitted into or held back from (its
    ``full_until``, ``rate_until`` and ``starts`` as ``room`` now stands)."""
    at = now.timestamp()
    full = room.unreadable or (room.max_running is not None and room.running >= room.max_running)
    kept: list[float] = []
    rate_until = None
    if room.rate_count is not None and room.rate_seconds is not None:
        # The latest starts, however old, never the ones inside this claim's window only:
        # claims are admitted in the order of the group's lock, their instants in any
        # order (each reads ``now`` before it waits for the lock). A claim whose ``now``
        # is older than a start recorded before it must still count the starts of its own
        # window, which a claim at a later instant would have dropped as outside its own.
        kept = sorted(room.starts)[-room.rate_count :]
        recent = [t for t in kept if t > at - rate_window(room.rate_seconds)]
        if len(recent) >= room.rate_count:
            rate_until = datetime.fromtimestamp(recent[0] + rate_window(room.rate_seconds), tz=UTC)
    return {
        "full_until": now + timedelta(seconds=RECHECK_SECONDS) if full else None,
        "rate_until": rate_until,
        "starts": kept,
    }


def give_back(room: GroupRoom, now: datetime) -> None:
    """Return the place of a row admitted at ``now`` that took no lease (its slot was
    missed, skipped, excluded or blacked out, or the row degraded): one running less, and
    its start at ``now`` removed from the rate's record."""
    room.running = max(room.running - 1, 0)
    at = now.timestamp()
    if at in room.starts:
        room.starts.remove(at)
