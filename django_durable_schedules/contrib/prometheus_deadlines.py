"""The ``durable_schedules_next_deadline_timestamp_seconds{schedule}`` gauge: when the
occurrence each schedule owes must have succeeded by (Unix seconds), read from the database
at scrape time (never on a worker's hot path).

For each active schedule with a ``deadline_seconds`` that has a label of its own
(:class:`.labels.ScheduleLabels`; schedules beyond ``METRICS_MAX_SCHEDULES`` have no series:
a timestamp does not sum), the owed slot is the earliest of a pending retry's slot, a
triggered or buffered run's slot and, while an attempt runs, that attempt's slot; else the
next run (``next_run_at``, which includes a jitter offset). The gauge is that slot plus
``deadline_seconds``. Every worker reports the same database-wide value: aggregate with
``max by (schedule)``.

Two or three queries per scrape (the owned schedules, chunked by :data:`CHUNK`; the running
attempts' slots; while labels are left, the oldest schedules not labelled yet). A database
error is logged and the gauge is left out of that scrape: a scrape never fails.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

from django.db import connections
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from .labels import ScheduleLabels

logger = logging.getLogger(__name__)

NAME = "durable_schedules_next_deadline_timestamp_seconds"
#: Names per ``IN (...)`` list (every backend's parameter limit is far above it).
CHUNK = 500
_FIELDS = (
    "id",
    "name",
    "kind",
    "deadline_seconds",
    "next_run_at",
    "retry_scheduled_for",
    "triggered_at",
    "buffered_for",
    "lease_expires_at",
    "occurrence",
    "attempt",
)


class DeadlineCollector(Collector):
    """Collects the next-deadline gauge of the schedules ``labels`` gives a label of
    their own, from database ``using``."""

    def __init__(self, labels: ScheduleLabels, using: str = "default"):
        self.labels = labels
        self.using = using

    def describe(self) -> list[Any]:
        """The family, without samples (no query at registration)."""
        return [GaugeMetricFamily(NAME, _HELP, labels=["schedule"])]

    def collect(self) -> Iterator[Any]:
        """One gauge family; empty when the database cannot be read."""
        family = GaugeMetricFamily(NAME, _HELP, labels=["schedule"])
        conn = connections[self.using]
        opened = conn.connection is None  # a scrape thread's own connection: closed after
        try:
            for name, at in sorted(self.deadlines().items()):
                family.add_metric([name], at)
        except Exception as exc:  # noqa: BLE001 - a scrape must answer whatever happened
            logger.warning("next-deadline gauge left out of this scrape: %s", exc)
        finally:
            if opened and not conn.in_atomic_block:
                conn.close()
        yield family

    def deadlines(self) -> dict[str, float]:
        """``{label: Unix seconds}`` of the labelled schedules with a deadline."""
        from ..models import Schedule

        watched = Schedule.objects.using(self.using).deadline_watched()
        rows: list[dict[str, Any]] = []
        owned = sorted(self.labels.owned())
        for start in range(0, len(owned), CHUNK):
            chunk = owned[start : start + CHUNK]
            rows += watched.filter(name__in=chunk).values(*_FIELDS)
        if not self.labels.full():
            room = self.labels.cap - len(owned)
            fresh = watched.exclude(name__in=owned[:CHUNK]).order_by("created_at", "pk")
            rows += [r for r in fresh.values(*_FIELDS)[: room + CHUNK] if r["name"] not in owned]
        running = self._running_slots([r for r in rows if r["lease_expires_at"] is not None])
        found: dict[str, float] = {}
        for row in rows:
            label = self.labels(row["name"])
            owed = owed_slot(row, running.get(row["id"]))
            if owed is None or label == "_other" or label in found:
                continue
            found[label] = (owed + timedelta(seconds=row["deadline_seconds"])).timestamp()
        return found

    def _running_slots(self, rows: list[dict[str, Any]]) -> dict[Any, datetime]:
        """The slot of the attempt each leased row runs (one query for them all)."""
        if not rows:
            return {}
        from ..models import RunAttempt

        wanted = {(r["id"], r["occurrence"], r["attempt"]) for r in rows}
        attempts = RunAttempt.objects.using(self.using).filter(
            schedule_id__in={r["id"] for r in rows},
            occurrence__in={r["occurrence"] for r in rows},
        )
        return {
            sid: slot
            for sid, occ, number, slot in attempts.values_list(
                "schedule_id", "occurrence", "attempt", "scheduled_for"
            )
            if (sid, occ, number) in wanted
        }


def owed_slot(row: dict[str, Any], running: datetime | None) -> datetime | None:
    """The slot (aware UTC) of the earliest occurrence ``row`` owes: the running attempt's
    ``running`` slot, a pending retry, trigger or buffered slot, else ``next_run_at``
    (never for a ``manual`` schedule: it owes only a triggered occurrence); None when it
    owes none (no next run)."""
    pending = [row["retry_scheduled_for"], row["triggered_at"], row["buffered_for"], running]
    known: list[datetime] = [at for at in pending if at is not None]
    if known:
        return min(known)
    if row.get("kind") in ("manual", "after"):
        return None
    nxt: datetime | None = row["next_run_at"]
    return nxt


_HELP = (
    "When the occurrence a schedule owes must have succeeded by (Unix time, seconds): its "
    "slot plus deadline_seconds. Database-wide: take max by (schedule)."
)
