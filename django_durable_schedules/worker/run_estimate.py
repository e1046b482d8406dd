"""Claiming ahead's arithmetic (pure functions of :class:`.inflight.RunsInFlight`'s
figures): the estimate of how long one callback runs, and how many runs the worker's slots
are expected to start within ``claim_ahead_seconds``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

#: Weight of the newest run in the run-time estimate when runs get faster (a slower run
#: replaces the estimate at once: claiming ahead backs off on the first slow callback).
RUN_TIME_WEIGHT = 0.2


def folded(last: float | None, seconds: float) -> float:
    """The run-time estimate (seconds) after a run of ``seconds``: ``seconds`` if slower
    than ``last`` (or none yet), else ``last`` moved by ``RUN_TIME_WEIGHT`` towards it."""
    if last is None or seconds >= last:
        return seconds
    return last + RUN_TIME_WEIGHT * (seconds - last)


def runs_ahead(
    concurrency: int,
    claim_ahead_seconds: float,
    estimate: float,
    running_since: Iterable[float],
    now: float,
    batch_size: int,
) -> int:
    """How many runs the slots not taken by a long run (one running, since a monotonic
    instant of ``running_since``, for longer than ``claim_ahead_seconds``) are expected to
    start within ``claim_ahead_seconds`` at ``estimate`` seconds a run; at most
    ``batch_size``."""
    long_runs = sum(1 for start in running_since if now - start > claim_ahead_seconds)
    slots = max(0, concurrency - long_runs)
    per_slot = claim_ahead_seconds / max(estimate, 1e-4)
    return min(batch_size, math.floor(slots * per_slot))
