"""The admin timeline's density band, pure (no database, no Django): the buckets that cover
an axis (:func:`bucket_seconds`, their frames in pixels, :func:`bucket_frames`, shared by the
band and each row's strip) and the band's columns (:func:`density`), with their tooltips'
words. The axis and the instants' words are :mod:`.timeline_geometry`'s.

x positions and widths are pixels from the left edge of the plot (floats rounded to 0.1 px),
never outside ``[0, axis.width]``; heights are pixels of a band, columns growing upwards.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from .timeline_geometry import Axis, fmt_instant


def bucket_seconds(axis: Axis, buckets: int) -> int:
    """The width in whole seconds of each of ``buckets`` equal buckets that cover the axis
    (the last may reach past its end). Raises ``ValueError`` for ``buckets < 1``."""
    if buckets < 1:
        raise ValueError("buckets must be at least 1")
    return max(1, math.ceil(axis.seconds / buckets))


@dataclass(frozen=True)
class Column:
    """A density column: ``x``, ``width``, ``y`` and ``height`` (px, in a band
    ``band_height`` tall, bars grow upwards), its ``runs`` and ``failures`` (with
    ``failure_height``, the darker part at the bottom), and its ``title``."""

    x: float
    width: float
    y: float
    height: float
    failure_height: float
    runs: int
    failures: int
    title: str

    @property
    def failure_y(self) -> float:
        """The top of the failures' part (px): it sits at the bottom of the column."""
        return round(self.y + self.height - self.failure_height, 1)


@functools.lru_cache(maxsize=16)
def bucket_frames(axis: Axis, seconds: int, count: int) -> tuple[tuple[float, float, str], ...]:
    """``(x, width, "begin to finish")`` of the first ``count`` buckets of ``seconds`` on
    ``axis``: the same for every row of a page (each row's strip and the band), worked out
    once."""
    frames = []
    for i in range(count):
        begin = axis.start + timedelta(seconds=i * seconds)
        finish = min(begin + timedelta(seconds=seconds), axis.end)
        left, right = axis.x(begin), axis.x(finish)
        frames.append(
            (
                left,
                round(max(right - left, 1.0), 1),
                f"{fmt_instant(begin)} to {fmt_instant(finish)}",
            )
        )
    return tuple(frames)


def density(
    axis: Axis,
    counts: Sequence[tuple[int, int]],
    seconds: int,
    band_height: float,
) -> list[Column]:
    """The columns of a density band: ``counts[i]`` is ``(runs, failures)`` of the bucket
    ``[start + i * seconds, start + (i + 1) * seconds)``; heights are relative to the
    busiest bucket; empty buckets are left out. Raises ``ValueError`` for ``seconds < 1``."""
    if seconds < 1:
        raise ValueError("seconds must be at least 1")
    peak = max((runs for runs, _ in counts), default=0)
    frames = bucket_frames(axis, seconds, len(counts))
    columns = []
    for (runs, failures), (left, width, span) in zip(counts, frames, strict=True):
        if runs <= 0:
            continue
        height = round(max(1.0, band_height * runs / peak), 1)
        failure_height = round(height * min(failures, runs) / runs, 1)
        what = f"{runs} run{'s' if runs != 1 else ''}"
        if failures:
            what += f", {failures} failed"
        columns.append(
            Column(
                x=left,
                width=width,
                y=round(band_height - height, 1),
                height=height,
                failure_height=failure_height,
                runs=runs,
                failures=failures,
                title=f"{span}: {what}",
            )
        )
    return columns
