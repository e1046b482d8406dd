"""PNG plots for the bench scripts (matplotlib, Agg backend: no display needed).

    from plots import throughput_vs_workers, lateness_histogram   # bench/ is on sys.path

``pip install matplotlib`` (the ``bench`` extra). Not a benchmark itself.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # after the backend is chosen

DPI = 120


def _save(fig: plt.Figure, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values``, nearest-rank; NaN when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def throughput_vs_workers(
    series: Mapping[str, Mapping[int, float | None]],
    path: Path,
    title: str,
    floor: float | None = None,
    unit: str = "runs/s",
) -> Path:
    """Line plot of throughput against worker count, one line per ``series`` entry
    (label -> {workers: rate}; a None rate is left out), each point labelled with its
    value, and a dashed horizontal ``floor`` line when given. Writes a PNG to ``path``
    (parent directories created) and returns it."""
    fig, ax = plt.subplots(figsize=(7, 5))
    counts: set[int] = set()
    values = [r for rates in series.values() for r in rates.values() if r is not None]
    top = 1.12 * max([*values, floor or 0, 1])
    for index, (label, rates) in enumerate(series.items()):
        points = sorted((n, r) for n, r in rates.items() if r is not None)
        if not points:
            continue
        xs, ys = zip(*points, strict=True)
        counts.update(xs)
        ax.plot(xs, ys, marker="o", label=label)
        for x, y in points:
            ax.annotate(
                f"{y:,.0f}",
                (x, y),
                textcoords="offset points",
                # Alternate above / below, so close lines stay legible; above near the axis.
                xytext=(0, 6 if index % 2 == 0 or y < 0.08 * top else -14),
                ha="center",
            )
    if floor is not None:
        ax.axhline(floor, linestyle="--", color="grey", label=f"floor {floor:,.0f} {unit}")
    ax.set_xticks(sorted(counts) or [1])
    ax.set_xlabel("worker processes")
    ax.set_ylabel(unit)
    ax.set_ylim(0, top)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), frameon=False)  # below
    return _save(fig, path)


def lateness_histogram(values_ms: list[float], path: Path, title: str) -> Path:
    """Histogram (left) and empirical CDF (right) of lateness values in milliseconds,
    with p50 / p95 / p99 / max marked and stated in the legend. Writes a PNG to ``path``
    (parent directories created) and returns it. Raises ValueError when ``values_ms`` is
    empty."""
    if not values_ms:
        raise ValueError("no lateness values to plot")
    ordered = sorted(values_ms)
    marks = {
        "p50": percentile(ordered, 50),
        "p95": percentile(ordered, 95),
        "p99": percentile(ordered, 99),
        "max": ordered[-1],
    }
    styles = {"p50": "-", "p95": "--", "p99": "-.", "max": ":"}
    fig, (hist, cdf) = plt.subplots(1, 2, figsize=(11, 4.5))
    hist.hist(ordered, bins=min(60, max(10, len(ordered) // 20)), color="tab:blue", alpha=0.8)
    hist.set_xlabel("lateness (ms)")
    hist.set_ylabel("runs")
    hist.set_title(f"histogram ({len(ordered):,} runs)")
    n = len(ordered)
    cdf.step(ordered, [(i + 1) / n for i in range(n)], where="post", color="tab:blue")
    cdf.set_xlabel("lateness (ms)")
    cdf.set_ylabel("fraction of runs at most this late")
    cdf.set_ylim(0, 1.02)
    cdf.set_title("cumulative distribution")
    for ax in (hist, cdf):
        for name, value in marks.items():
            ax.axvline(
                value,
                color="tab:red",
                linestyle=styles[name],
                linewidth=1,
                label=f"{name} {value:,.1f} ms",
            )
        ax.grid(True, alpha=0.3)
    cdf.legend(loc="lower right")
    fig.suptitle(title)
    return _save(fig, path)
