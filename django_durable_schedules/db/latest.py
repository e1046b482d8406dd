"""The latest receipts of several schedules at once, bounded by the number asked for,
not by each schedule's history: :func:`latest_receipts`.

PostgreSQL: one ``LATERAL`` join, a ``LIMIT n`` scan of the ``(schedule, finished_at)``
index per schedule, planned once. Elsewhere: one window query (``ROW_NUMBER()`` per
schedule), which numbers every receipt of those schedules; fine at the sizes those
databases serve here.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from django.db import connections, router
from django.db.models import F, Window
from django.db.models.functions import RowNumber

from ..models import RunReceipt

#: The receipt columns read (what an outcome strip shows).
FIELDS = ("id", "schedule_id", "occurrence", "status", "finished_at", "error_type", "error_message")


class ReceiptSummary(NamedTuple):
    """What an outcome strip shows of a receipt, with a receipt's attribute names (a
    page's 2,000 of them cost a tenth of model instances)."""

    pk: Any
    schedule_id: Any
    occurrence: int
    status: str
    finished_at: datetime
    error_type: str
    error_message: str


def latest_receipts(schedule_ids: Sequence[Any], length: int) -> list[ReceiptSummary]:
    """The newest ``length`` receipts (by ``finished_at``, then ``occurrence``) of each
    schedule in ``schedule_ids``, in one query, in no particular order; reads at most
    ``len(schedule_ids) * length`` index entries on PostgreSQL."""
    if not schedule_ids:
        return []
    using = router.db_for_read(RunReceipt)
    connection = connections[using]
    if connection.vendor == "postgresql":
        table = connection.ops.quote_name(RunReceipt._meta.db_table)
        columns = ", ".join(f"r.{connection.ops.quote_name(c)}" for c in FIELDS)
        sql = (
            f"SELECT {columns} FROM unnest(%s::uuid[]) AS s(id) CROSS JOIN LATERAL "
            f"(SELECT * FROM {table} WHERE schedule_id = s.id "
            "ORDER BY finished_at DESC, occurrence DESC LIMIT %s) AS r"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, [list(schedule_ids), length])
            return [ReceiptSummary(*row) for row in cursor.fetchall()]
    rank = Window(
        RowNumber(),
        partition_by=F("schedule_id"),
        order_by=(F("finished_at").desc(), F("occurrence").desc()),
    )
    rows = (
        RunReceipt.objects.using(using)
        .filter(schedule_id__in=list(schedule_ids))
        .annotate(dds_rank=rank)
        .filter(dds_rank__lte=length)
        .values_list(*FIELDS)
    )
    return [ReceiptSummary(*row) for row in rows]
