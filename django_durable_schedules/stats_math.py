"""The arithmetic of a schedule's statistics (issue #29, item 2), pure: percentiles, the
success rate, one window's figures from the values :mod:`.stats` reads, and those figures
as the text rows the admin and ``schedules show`` print.

Units: seconds (floats) for durations and lateness; a success rate is a fraction in
``[0, 1]`` (None when the window holds no run).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .humanize import duration_words

#: Receipt statuses that are a success (``models.SUCCESS_STATUSES``, as plain strings: this
#: module imports no model).
SUCCESSES = frozenset({"succeeded", "enqueued"})
#: Receipt statuses that are no run's outcome: ``released`` (claimed, handed back unrun at
#: shutdown; the slot runs again under a later attempt). Not counted in ``runs``.
NOT_RUNS = frozenset({"released"})
#: Attempt origins whose slot lies in the past on purpose (a backfill, a re-run of an
#: earlier occurrence): their claim-minus-slot is no lateness, so they are left out of it.
NO_LATENESS_ORIGINS = frozenset({"backfill", "rerun"})


def percentile(values: Iterable[float], q: float) -> float | None:
    """The ``q``-quantile (``0 <= q <= 1``) of ``values`` by linear interpolation between
    the closest ranks, as PostgreSQL's ``percentile_cont`` computes it: ``q = 0`` is the
    smallest, ``q = 1`` the largest, ``q = 0.5`` of ``[1, 2, 3, 4]`` is 2.5. None for no
    values. Raises ``ValueError`` for ``q`` outside ``[0, 1]`` or a value that is not
    finite. The result always lies between the two values it interpolates."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be between 0 and 1, not {q!r}")
    ordered = sorted(float(v) for v in values)
    if not ordered:
        return None
    if not all(math.isfinite(v) for v in ordered):
        raise ValueError("values must be finite")
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    fraction = position - low
    below, above = ordered[low], ordered[high]
    if fraction == 0.0 or below == above:
        return below
    # below + (above - below) * fraction, kept inside [below, above] against rounding.
    return min(max(below + (above - below) * fraction, below), above)


def success_rate(succeeded: int, runs: int) -> float | None:
    """``succeeded / runs`` (a fraction in ``[0, 1]``); None when ``runs`` is 0. Raises
    ``ValueError`` for a negative count or more successes than runs."""
    if runs < 0 or succeeded < 0 or succeeded > runs:
        raise ValueError(f"{succeeded} successes of {runs} runs")
    return None if runs == 0 else succeeded / runs


@dataclass(frozen=True)
class WindowStats:
    """One window's figures (``window_seconds`` back from the database clock's now).

    ``runs``: the receipts finished in the window except ``released`` ones; ``succeeded``:
    those ``succeeded`` or ``enqueued``; ``outcomes``: receipts per status (``released``
    included); ``duration_max``: the longest run (seconds, over every receipt of the
    window whose callback started). ``duration_p50``/``duration_p95`` and
    ``lateness_p50``/``lateness_p95`` (seconds, claim minus slot, never negative; backfills
    and re-runs left out) come from the latest ``sample_limit`` receipts of the window;
    ``durations_counted`` and ``lateness_counted`` say how many values they were computed
    from. Every figure is None when it has no value."""

    window_seconds: int
    runs: int
    succeeded: int
    success_rate: float | None
    duration_p50: float | None
    duration_p95: float | None
    duration_max: float | None
    lateness_p50: float | None
    lateness_p95: float | None
    durations_counted: int
    lateness_counted: int
    outcomes: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The figures as a plain dict (the API's shape)."""
        return {
            "window_seconds": self.window_seconds,
            "runs": self.runs,
            "succeeded": self.succeeded,
            "success_rate": self.success_rate,
            "duration_p50": self.duration_p50,
            "duration_p95": self.duration_p95,
            "duration_max": self.duration_max,
            "lateness_p50": self.lateness_p50,
            "lateness_p95": self.lateness_p95,
            "durations_counted": self.durations_counted,
            "lateness_counted": self.lateness_counted,
            "outcomes": dict(self.outcomes),
        }


def window_stats(
    window_seconds: int,
    outcomes: Mapping[str, int],
    duration_max: float | None,
    durations: Sequence[float],
    lateness: Sequence[float],
) -> WindowStats:
    """One window's :class:`WindowStats` from its receipts per status (``outcomes``, exact),
    its longest duration (seconds, exact; None when no run started) and the sampled
    ``durations`` and ``lateness`` (seconds; a negative value, from clock estimates, counts
    as 0). Raises ``ValueError`` for a negative count or a value that is not finite."""
    if any(n < 0 for n in outcomes.values()):
        raise ValueError("a negative count")
    runs = sum(n for status, n in outcomes.items() if status not in NOT_RUNS)
    succeeded = sum(n for status, n in outcomes.items() if status in SUCCESSES)
    spans = [max(0.0, float(v)) for v in durations]
    waits = [max(0.0, float(v)) for v in lateness]
    # The exact maximum bounds the sampled values (max() again: rounding of the backends).
    known = spans + ([] if duration_max is None else [max(0.0, float(duration_max))])
    longest = max(known) if known else None
    return WindowStats(
        window_seconds=window_seconds,
        runs=runs,
        succeeded=succeeded,
        success_rate=success_rate(succeeded, runs),
        duration_p50=percentile(spans, 0.5),
        duration_p95=percentile(spans, 0.95),
        duration_max=longest,
        lateness_p50=percentile(waits, 0.5),
        lateness_p95=percentile(waits, 0.95),
        durations_counted=len(spans),
        lateness_counted=len(waits),
        outcomes={k: n for k, n in sorted(outcomes.items()) if n},
    )


def rate_words(rate: float | None) -> str:
    """A success rate as ``97.5 %`` (``-`` for None)."""
    return "-" if rate is None else f"{rate * 100:.1f} %"


def stats_rows(windows: Sequence[WindowStats]) -> list[tuple[str, list[str]]]:
    """The figures as text, one ``(label, [value per window])`` row each: runs, success
    rate, duration p50/p95/max, lateness p50/p95 (durations in words, ``-`` for none)."""
    return [
        ("runs", [str(w.runs) for w in windows]),
        ("success rate", [rate_words(w.success_rate) for w in windows]),
        ("duration p50", [duration_words(w.duration_p50) for w in windows]),
        ("duration p95", [duration_words(w.duration_p95) for w in windows]),
        ("duration max", [duration_words(w.duration_max) for w in windows]),
        ("lateness p50", [duration_words(w.lateness_p50) for w in windows]),
        ("lateness p95", [duration_words(w.lateness_p95) for w in windows]),
    ]
