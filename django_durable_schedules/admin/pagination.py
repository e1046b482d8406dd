"""The admin lists' paginator: :class:`EstimatedCountPaginator`, whose count never reads a
whole big table (Django's counts every matching row on every page).
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from django.core.paginator import Paginator
from django.db.models import QuerySet

from ..db.counts import bounded_count, planner_estimate

#: Up to this many matching rows, a list's count is exact (at most this many rows read).
EXACT_COUNT_LIMIT = 10_000


class EstimatedCountPaginator(Paginator):
    """Exact up to :data:`EXACT_COUNT_LIMIT` rows; beyond, PostgreSQL's planner estimate
    (never below the limit), and the ``estimated`` flag set for the page to say "about".
    Other databases count exactly (their lists are small; an estimate would be a guess).

    With an estimate the last page number may be a little off: a page past the real end
    is empty (the admin then shows its "invalid page" notice), and rows past an estimate
    that is short are reached by a filter or an ordering rather than by page number."""

    estimated = False

    @cached_property
    def count(self) -> int:
        """The number of matching rows (exact, or estimated: see the class)."""
        if not isinstance(self.object_list, QuerySet):  # a list: its length
            return len(self.object_list)
        queryset: QuerySet[Any] = self.object_list
        exact = bounded_count(queryset, EXACT_COUNT_LIMIT)
        if exact <= EXACT_COUNT_LIMIT:
            return exact
        estimate = planner_estimate(queryset)
        if estimate is None:
            return int(queryset.count())
        self.estimated = True
        return max(estimate, exact)
