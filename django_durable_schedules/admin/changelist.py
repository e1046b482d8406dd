"""The schedule list's :class:`ScheduleChangeList`: the outcome strip's receipts of a whole
page in one query (:func:`_recent_receipts`, which the health page uses too).
"""

from __future__ import annotations

from typing import Any

from django.contrib.admin.views.main import ChangeList
from django.db.models import Prefetch, QuerySet
from django.http import HttpRequest

from ..models import RunReceipt
from .display import STRIP_LENGTH


def _recent_receipts(length: int = STRIP_LENGTH) -> Prefetch:
    """The latest ``length`` receipts of every schedule of a page, in one query (a window
    function per schedule, served by the ``(schedule, finished_at)`` index)."""
    receipts = RunReceipt.objects.order_by("-finished_at", "-occurrence").only(
        "id", "schedule", "occurrence", "status", "finished_at", "error_type", "error_message"
    )
    return Prefetch("receipts", queryset=receipts[:length], to_attr="dds_recent_receipts")


class ScheduleChangeList(ChangeList):
    """Adds the outcome strip's receipts to the page's schedules: one query per page."""

    def get_queryset(self, request: HttpRequest, exclude_parameters: Any = None) -> QuerySet:
        qs = super().get_queryset(request, exclude_parameters)
        return qs.prefetch_related(_recent_receipts())
