"""The backfills' share of a claim batch (issue #24 item 15).

When live slots and backfill slots both wait, a claim batch of ``B`` keeps
``floor(B x BACKFILL_SHARE)`` of its places for backfill slots; the live grid takes the
rest, and capacity either side does not use goes to the other. The fraction a batch cannot
give (a batch of 1 at 0.25 gives a quarter of a slot) is carried to the next batch of the
same worker, so small batches give backfills their share over time (every fourth batch of
one): :func:`backfill_reserve` is the rule (pure), :func:`take_reserve` and
:func:`keep_carry` keep the carry per worker process and worker name; :func:`batch_reserve`
is a claim's use of them.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

from ..conf import app_settings
from ..models import backfills_open

#: Rounding slack: shares such as 0.1 add up to 0.9999999999 after ten batches.
_EPSILON = 1e-9

#: Most (alias, worker) carries kept (emptied when full: at worst one batch gives less).
_MAX_CARRIES = 1024

_CARRY: dict[tuple[str, str], float] = {}
_LOCK = threading.Lock()


def backfill_reserve(limit: int, share: float, carry: float = 0.0) -> tuple[int, float]:
    """``(reserve, carry)``: how many places of a batch of ``limit`` go to backfill slots
    when both kinds wait, ``floor(limit x share + carry)`` (at most ``limit``), and the
    fraction left to carry to the next batch (in ``[0, 1)``). ``share`` is bounded to
    ``[0, 1]``; a share of 0 (or NaN) reserves nothing and carries nothing; a ``carry``
    outside ``[0, 1)`` counts as 0."""
    if limit <= 0 or not share > 0:
        return 0, 0.0
    carry = float(carry) if 0.0 <= carry < 1.0 else 0.0  # NaN too
    want = limit * min(float(share), 1.0) + carry
    reserve = min(limit, int(want + _EPSILON))
    left = want - reserve
    return reserve, (left if _EPSILON < left < 1.0 else 0.0)


def take_reserve(using: str, worker: str, limit: int, share: float) -> tuple[int, float]:
    """The :func:`backfill_reserve` of this batch with the carry of ``(using, worker)``;
    the caller stores the new carry with :func:`keep_carry` once the batch is planned."""
    with _LOCK:
        carry = _CARRY.get((using, worker), 0.0)
    return backfill_reserve(limit, share, carry)


def keep_carry(using: str, worker: str, carry: float) -> None:
    """Remember the fraction ``(using, worker)``'s next batch starts from (0 forgets it)."""
    with _LOCK:
        if not carry:
            _CARRY.pop((using, worker), None)
            return
        if len(_CARRY) >= _MAX_CARRIES:
            _CARRY.clear()
        _CARRY[(using, worker)] = carry


def reset_carry() -> None:
    """Forget every carry (tests)."""
    with _LOCK:
        _CARRY.clear()


__all__ = ["backfill_reserve", "keep_carry", "reset_carry", "take_reserve"]


def batch_reserve(
    read: list[Any], only: uuid.UUID | None, worker: str, limit: int, using: str
) -> tuple[bool | None, int]:
    """The backfills' share of a claim batch (:mod:`.backfill_share`): ``(open_, reserve)``,
    whether a backfill is open (known from the live ``read``'s flag, None: unknown, so a
    batch with no open backfill pays no query for them) and how many of the ``limit``
    slots are reserved for backfill slots (none for a claim of ``only`` one row)."""
    open_ = backfills_open(read)
    reserve = 0
    if only is None and open_ is not None:
        reserve, carry = take_reserve(using, worker, limit, app_settings.BACKFILL_SHARE)
        keep_carry(using, worker, carry if open_ else 0.0)
    return open_, reserve
