"""A schedule's statistics over the last 24 hours and the last 7 days (issue #29, item 2),
as the change page, the API (``schedules/{id}/stats/``) and ``schedules show`` report them:
runs, success rate, duration p50/p95/max and lateness p50/p95, in seconds.

:func:`schedule_stats` reads them with a fixed number of queries whatever the number of
receipts: the database clock (none when the caller gives ``now``), one aggregate per status
for both windows (exact counts and the exact longest run), and the latest
:data:`STATS_SAMPLE` receipts of the 7-day window, from which the percentiles of both
windows are computed in Python (:mod:`.stats_math`; no percentile function is portable to
SQLite and MariaDB). Both read the receipts' ``(schedule, finished_at)`` index; the sample
is bounded, so a schedule with more than :data:`STATS_SAMPLE` receipts in a window gets its
percentiles "over the latest :data:`STATS_SAMPLE` receipts of the window". The aggregate
reads every receipt of the schedule's 7-day window (exact counts): linear in them, about
60 ms on PostgreSQL for 100,000 (docs/api.md). Read-only.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from django.db.models import Count, DurationField, ExpressionWrapper, F, Max, Q

from .db.clock import resolve_now
from .models import RunReceipt
from .stats_math import NO_LATENESS_ORIGINS, WindowStats, window_stats

#: The windows, (name, seconds), shortest first: every longer one holds the shorter ones.
STATS_WINDOWS = (("last_24h", 86400), ("last_7d", 7 * 86400))
#: Most receipts whose durations and lateness the percentiles read (the latest of the
#: longest window; the shorter windows read the latest of them that fall inside).
STATS_SAMPLE = 1000

_DURATION = ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField())


@dataclass(frozen=True)
class ScheduleStats:
    """A schedule's figures at ``as_of`` (aware UTC, the database clock): one
    :class:`.stats_math.WindowStats` per window of :data:`STATS_WINDOWS`, by name;
    ``sample_limit`` is the bound of the percentiles (receipts per window)."""

    as_of: datetime
    sample_limit: int
    windows: dict[str, WindowStats]

    def as_dict(self) -> dict[str, Any]:
        """``{"as_of", "sample_limit", "last_24h": {...}, "last_7d": {...}}``."""
        shape: dict[str, Any] = {"as_of": self.as_of, "sample_limit": self.sample_limit}
        shape.update({name: w.as_dict() for name, w in self.windows.items()})
        return shape


def _seconds(value: Any) -> float | None:
    return value.total_seconds() if isinstance(value, timedelta) else None


def schedule_stats(
    schedule_id: Any,
    now: datetime | None = None,
    using: str = "default",
    sample: int = STATS_SAMPLE,
) -> ScheduleStats:
    """The statistics of the schedule ``schedule_id`` over each window of
    :data:`STATS_WINDOWS` ending at ``now`` (aware; default the database clock), the
    percentiles over the latest ``sample`` receipts of each window (``sample >= 1``). An
    unknown id has no receipts: every count is 0 (the caller checks that the schedule
    exists). Two queries, three without ``now``, whatever the number of receipts."""
    if sample < 1:
        raise ValueError("sample must be at least 1")
    as_of = resolve_now(now, using)
    starts = {name: as_of - timedelta(seconds=s) for name, s in STATS_WINDOWS}
    oldest = min(starts.values())
    receipts = RunReceipt.objects.using(using).filter(
        schedule_id=schedule_id, finished_at__gte=oldest, finished_at__lte=as_of
    )
    started = Q(started_at__isnull=False)
    per_window: dict[str, Any] = {}
    for name, start in starts.items():
        inside = Q(finished_at__gte=start)
        per_window[f"n_{name}"] = Count("pk", filter=inside)
        per_window[f"max_{name}"] = Max(_DURATION, filter=inside & started)
    # {"status", "n_<window>", "max_<window>"} per status (the keys are built above).
    rows = cast(
        list[dict[str, Any]], list(receipts.order_by().values("status").annotate(**per_window))
    )
    latest = receipts.order_by("-finished_at").values_list(
        "finished_at",
        "started_at",
        "attempt__claimed_at",
        "attempt__scheduled_for",
        "attempt__origin",
    )[:sample]
    durations: list[tuple[datetime, float]] = []
    lateness: list[tuple[datetime, float]] = []
    for finished, began, claimed, slot, origin in latest:
        if began is None:  # the callback never ran: no duration, no lateness
            continue
        durations.append((finished, (finished - began).total_seconds()))
        if origin not in NO_LATENESS_ORIGINS:
            lateness.append((finished, (claimed - slot).total_seconds()))
    windows = {
        name: window_stats(
            window_seconds=seconds,
            outcomes={row["status"]: row[f"n_{name}"] for row in rows},
            duration_max=max(
                (s for row in rows if (s := _seconds(row[f"max_{name}"])) is not None),
                default=None,
            ),
            durations=[v for at, v in durations if at >= starts[name]],
            lateness=[v for at, v in lateness if at >= starts[name]],
        )
        for name, seconds in STATS_WINDOWS
    }
    return ScheduleStats(as_of=as_of, sample_limit=sample, windows=windows)
