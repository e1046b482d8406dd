"""The schedule list's :class:`ScheduleChangeList`: the outcome strip's receipts of a whole
page in one query (:func:`attach_recent_receipts`, which the health page uses too), and the
concurrency groups of the page's schedules in one more when any names one
(:func:`attach_group_waits`: "waiting for group reports (2 of 2 running)"). Its count is
the admin's :class:`.pagination.EstimatedCountPaginator`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.admin.views.main import ChangeList
from django.db.models import Prefetch
from django.http import HttpRequest

from ..db.latest import ReceiptSummary, latest_receipts
from ..group_health import group_rooms, group_wait
from ..models import RunReceipt, Schedule
from .display import STRIP_LENGTH


def _recent_receipts(length: int = STRIP_LENGTH) -> Prefetch:
    """The latest ``length`` receipts of every schedule of a queryset, as a prefetch (a
    window function per schedule, which numbers every receipt of those schedules, so its
    cost grows with their history; the admin's pages use :func:`attach_recent_receipts`)."""
    fields = (
        "id",
        "schedule",
        "occurrence",
        "status",
        "finished_at",
        "error_type",
        "error_message",
    )
    receipts = RunReceipt.objects.order_by("-finished_at", "-occurrence").only(*fields)
    return Prefetch("receipts", queryset=receipts[:length], to_attr="dds_recent_receipts")


def attach_recent_receipts(
    schedules: Iterable[Schedule], length: int = STRIP_LENGTH
) -> list[Schedule]:
    """Set ``dds_recent_receipts`` (newest first, at most ``length``) on each schedule, in
    one query whose cost is bounded by ``len(schedules) * length``, however long each
    schedule's history is (:func:`..db.latest.latest_receipts`: summaries, not model
    instances). Returns the schedules."""
    schedules = list(schedules)
    by_schedule: dict[Any, list[ReceiptSummary]] = {s.pk: [] for s in schedules}
    for receipt in latest_receipts(list(by_schedule), length):
        by_schedule[receipt.schedule_id].append(receipt)
    for schedule in schedules:
        recent = by_schedule[schedule.pk]
        recent.sort(key=lambda r: (r.finished_at, r.occurrence), reverse=True)
        schedule.dds_recent_receipts = recent  # type: ignore[attr-defined]
    return schedules


def attach_group_waits(schedules: Iterable[Schedule]) -> list[Schedule]:
    """Set ``dds_group_wait`` on each schedule: the words of :func:`..group_health.group_wait`
    for a due schedule its concurrency group holds back, else ``""``. One query for the
    groups of all of them (none when no schedule names a group). Returns the schedules."""
    schedules = list(schedules)
    using = next((s._state.db for s in schedules if s._state.db), None) or "default"
    rooms = group_rooms((s.concurrency_group_id for s in schedules), using)
    for schedule in schedules:
        schedule.dds_group_wait = group_wait(schedule, rooms)  # type: ignore[attr-defined]
    return schedules


class ScheduleChangeList(ChangeList):
    """Adds the outcome strip's receipts to the page's schedules (one query per page) and
    their concurrency groups' waits (one more when a schedule of the page names a group)."""

    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        self.result_list = attach_group_waits(attach_recent_receipts(self.result_list))
