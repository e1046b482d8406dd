"""A schedule's statistics over the last 24 hours and the last 7 days (issue #29, item 2),
as the change page, the API (``schedules/{id}/stats/``) and ``schedules show`` report them:
runs, success rate, duration p50/p95/max and lateness p50/p95, in seconds.

:func:`schedule_stats` reads them with a fixed number of queries whatever the number of
receipts: the database clock (none when the caller gives ``now``), one aggregate for both
windows (the counts per status and the longest run, over the latest :data:`COUNT_MAX`
receipts of the 7-day window: exact below it), and the latest
:data:`STATS_SAMPLE` receipts of the 7-day window, from which the percentiles of both
windows are computed in Python (:mod:`.stats_math`; no percentile function is portable to
SQLite and MariaDB). Both read the receipts' ``(schedule, finished_at)`` index; the sample
is bounded, so a schedule with more than :data:`STATS_SAMPLE` receipts in a window gets its
percentiles "over the latest :data:`STATS_SAMPLE` receipts of the window". The aggregate
reads at most :data:`COUNT_MAX` receipts (a subquery with its ``LIMIT``). Read-only.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, DurationField, ExpressionWrapper, F, Max, Q

from .db.clock import resolve_now
from .models import ReceiptStatus, RunReceipt
from .stats_math import NO_LATENESS_ORIGINS, WindowStats, window_stats

#: The windows, (name, seconds), shortest first: every longer one holds the shorter ones.
STATS_WINDOWS = (("last_24h", 86400), ("last_7d", 7 * 86400))
#: Most receipts whose durations and lateness the percentiles read (the latest of the
#: longest window; the shorter windows read the latest of them that fall inside).
STATS_SAMPLE = 1000
#: Most receipts the counts and the longest run read: the latest of the longest window
#: (a schedule that runs every minute has 10,080 in 7 days: counted exactly).
COUNT_MAX = 20_000

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
    count_max: int = COUNT_MAX,
) -> ScheduleStats:
    """The statistics of the schedule ``schedule_id`` over each window of
    :data:`STATS_WINDOWS` ending at ``now`` (aware; default the database clock), the
    percentiles over the latest ``sample`` receipts of each window (``sample >= 1``), the
    counts and the longest run over the latest ``count_max`` (``>= 1``). An unknown id
    has no receipts: every count is 0 (the caller checks that the schedule exists). Two
    queries, three without ``now``, whatever the number of receipts."""
    if sample < 1 or count_max < 1:
        raise ValueError("sample and count_max must be at least 1")
    as_of = resolve_now(now, using)
    starts = {name: as_of - timedelta(seconds=s) for name, s in STATS_WINDOWS}
    oldest = min(starts.values())
    receipts = RunReceipt.objects.using(using).filter(
        schedule_id=schedule_id, finished_at__gte=oldest, finished_at__lte=as_of
    )
    started = Q(started_at__isnull=False)
    figures: dict[str, Any] = {}
    for name, start in starts.items():
        inside = Q(finished_at__gte=start)
        for status in ReceiptStatus.values:
            figures[f"n_{name}_{status}"] = Count("pk", filter=inside & Q(status=status))
        figures[f"max_{name}"] = Max(_DURATION, filter=inside & started)
    # One statement over the latest COUNT_MAX receipts of the longest window (a subquery
    # with its LIMIT, read through the (schedule, finished_at) index): bounded.
    counted = receipts.order_by("-finished_at")[:count_max].aggregate(**figures)
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
            outcomes={
                status: n
                for status in ReceiptStatus.values
                if (n := counted[f"n_{name}_{status}"] or 0)
            },
            duration_max=_seconds(counted[f"max_{name}"]),
            durations=[v for at, v in durations if at >= starts[name]],
            lateness=[v for at, v in lateness if at >= starts[name]],
        )
        for name, seconds in STATS_WINDOWS
    }
    return ScheduleStats(as_of=as_of, sample_limit=sample, windows=windows)
