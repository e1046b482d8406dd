"""Counting big tables without reading them: :func:`bounded_count` (exact up to a limit)
and :func:`planner_estimate` (PostgreSQL's own row estimate for a query, from the
statistics ``ANALYZE`` keeps: ``pg_class.reltuples`` and the column histograms).

Read-only helpers for the admin's lists; no transactions, no locks.
"""

from __future__ import annotations

import json
from typing import Any

from django.db import connections
from django.db.models import QuerySet


def bounded_count(queryset: QuerySet[Any], limit: int) -> int:
    """The rows of ``queryset``, counted exactly up to ``limit + 1`` (``SELECT COUNT(*)
    FROM (... LIMIT limit + 1)``): the cost is at most ``limit + 1`` rows read, and a
    result above ``limit`` means "more than ``limit``"."""
    return queryset.order_by()[: limit + 1].count()


def planner_estimate(queryset: QuerySet[Any]) -> int | None:
    """PostgreSQL's estimate of the rows ``queryset`` returns (``EXPLAIN (FORMAT JSON)``'s
    top ``Plan Rows``: planning only, nothing read), or None on other databases or when
    the plan cannot be had. As good as the table's statistics: after ``ANALYZE`` (or
    autovacuum's) an unfiltered table's figure is ``pg_class.reltuples``, a filtered one's
    is the histograms' guess, often off by a few percent, sometimes by more."""
    connection = connections[queryset.db]
    if connection.vendor != "postgresql":
        return None
    sql, params = queryset.order_by().query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
        (document,) = cursor.fetchone()
    if isinstance(document, str):
        document = json.loads(document)
    try:
        return int(document[0]["Plan"]["Plan Rows"])
    except (KeyError, IndexError, TypeError, ValueError):
        return None
