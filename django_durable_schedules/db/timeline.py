"""The admin timeline's two reads of the receipts, each one query whatever the number of
schedules or runs (issue #29, item 1):

* :func:`timeline_runs`: the newest ``per_row`` receipts of each schedule that finished in a
  range, with their attempt's claim, number and origin. PostgreSQL: one ``LATERAL`` join,
  a ``LIMIT per_row`` range scan of the receipts' ``(schedule, finished_at)`` index
  (``dds_receipt_sched_idx``) per schedule. Elsewhere: one window query (``ROW_NUMBER()``
  per schedule) over the same index range, which numbers every receipt of the range.
* :func:`bucket_counts`: the runs and failures per schedule and per time bucket of the range
  (``GROUP BY`` schedule and bucket, the bucket computed by the database:
  :class:`SecondsSince`), over the same index range; at most ``schedules * buckets`` rows
  come back. PostgreSQL: a ``LATERAL`` subquery per schedule, one range scan of that index
  each (its plan for ``IN`` read every receipt of the range and filtered them).

Both are read-only and use the database the router gives for receipts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from django.db import connections, router
from django.db.models import (
    BigIntegerField,
    Count,
    DateTimeField,
    F,
    FloatField,
    Func,
    Q,
    Value,
    Window,
)
from django.db.models.functions import Cast, Floor, RowNumber

from ..models import ReceiptStatus, RunReceipt

#: Receipt statuses a timeline counts as failures (its density band's darker part).
FAILURE_STATUSES = (
    ReceiptStatus.FAILED,
    ReceiptStatus.DEGRADED,
    ReceiptStatus.LEASE_EXPIRED,
    ReceiptStatus.LEASE_LOST,
    ReceiptStatus.MISSED,
)

#: The columns read: the receipt's, then its attempt's.
_RECEIPT_FIELDS = ("id", "schedule_id", "status", "started_at", "finished_at", "forced")
_ATTEMPT_FIELDS = ("claimed_at", "attempt", "origin")


class TimelineRun(NamedTuple):
    """One finished run as the timeline draws it: its receipt (``pk``, ``status``,
    ``started_at``: None when the callback never ran, ``finished_at``, ``forced``) and its
    attempt (``claimed_at``, ``attempt``: 1 for a first try, ``origin``)."""

    pk: Any
    schedule_id: Any
    status: str
    started_at: datetime | None
    finished_at: datetime
    forced: bool
    claimed_at: datetime | None
    attempt: int
    origin: str


def _native_instants(cursor: Any) -> None:
    """Have psycopg 3's own (compiled) ``timestamptz`` loader read this cursor's instants:
    Django's wraps it in a Python call a value to set the ``tzinfo`` it already has (the
    session's zone is UTC with ``USE_TZ``, which this app requires); 9,000 instants a
    timeline page, 20 ms. Aware datetimes either way, in the session's zone; nothing
    changes on psycopg 2."""
    adapters = getattr(cursor.cursor, "adapters", None)
    if adapters is not None:
        from psycopg import adapters as defaults
        from psycopg.postgres import types
        from psycopg.pq import Format

        oid = types["timestamptz"].oid
        adapters.register_loader(oid, defaults.get_loader(oid, Format.TEXT))


def timeline_runs(
    schedule_ids: Sequence[Any], start: datetime, end: datetime, per_row: int
) -> list[TimelineRun]:
    """The newest ``per_row`` receipts (by ``finished_at``) of each schedule of
    ``schedule_ids`` with ``start <= finished_at <= end`` (aware datetimes), joined to their
    attempts, in one query, in no particular order. Reads at most
    ``len(schedule_ids) * per_row`` index entries on PostgreSQL."""
    if not schedule_ids or per_row <= 0:
        return []
    using = router.db_for_read(RunReceipt)
    connection = connections[using]
    if connection.vendor == "postgresql":
        qn = connection.ops.quote_name
        receipts = qn(RunReceipt._meta.db_table)
        attempts = qn(RunReceipt._meta.get_field("attempt").related_model._meta.db_table)
        columns = ", ".join(
            [f"r.{qn(c)}" for c in _RECEIPT_FIELDS] + [f"a.{qn(c)}" for c in _ATTEMPT_FIELDS]
        )
        sql = (
            f"SELECT {columns} FROM unnest(%s::uuid[]) AS s(id) CROSS JOIN LATERAL "
            f"(SELECT * FROM {receipts} WHERE schedule_id = s.id "
            "AND finished_at >= %s AND finished_at <= %s "
            "ORDER BY finished_at DESC LIMIT %s) AS r "
            f"JOIN {attempts} AS a ON a.id = r.attempt_id"
        )
        with connection.cursor() as cursor:
            _native_instants(cursor)
            cursor.execute(sql, [list(schedule_ids), start, end, per_row])
            return [TimelineRun(*row) for row in cursor.fetchall()]
    rank = Window(
        RowNumber(),
        partition_by=F("schedule_id"),
        order_by=(F("finished_at").desc(), F("occurrence").desc()),
    )
    rows = (
        RunReceipt.objects.using(using)
        .filter(schedule_id__in=list(schedule_ids), finished_at__gte=start, finished_at__lte=end)
        .annotate(dds_rank=rank)
        .filter(dds_rank__lte=per_row)
        .values_list(*_RECEIPT_FIELDS, *(f"attempt__{c}" for c in _ATTEMPT_FIELDS))
    )
    return [TimelineRun(*row) for row in rows]


class SecondsSince(Func):
    """Seconds from ``since`` (an aware datetime) to the datetime column ``expression``,
    computed by the database (a number, fractional where the backend keeps fractions):
    PostgreSQL ``EXTRACT(EPOCH FROM (col - since))``, SQLite
    ``(julianday(col) - julianday(since)) * 86400``, MariaDB/MySQL
    ``TIMESTAMPDIFF(SECOND, since, col)``. No session time zone is involved: both sides are
    stored instants."""

    arity = 2
    output_field = FloatField()
    arg_joiner = ") - julianday("
    template = "((julianday(%(expressions)s)) * 86400.0)"

    def __init__(self, expression: Any, since: datetime, **extra: Any) -> None:
        super().__init__(expression, Value(since, output_field=DateTimeField()), **extra)

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(
            compiler,
            connection,
            template="EXTRACT(EPOCH FROM (%(expressions)s))",
            arg_joiner=" - ",
            **extra,
        )

    def as_mysql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        clone = self.copy()
        clone.set_source_expressions(list(reversed(self.get_source_expressions())))
        return clone.as_sql(
            compiler,
            connection,
            template="TIMESTAMPDIFF(SECOND, %(expressions)s)",
            arg_joiner=", ",
            **extra,
        )


def bucket_counts(
    schedule_ids: Sequence[Any], start: datetime, end: datetime, bucket_seconds: int
) -> dict[tuple[Any, int], tuple[int, int]]:
    """``{(schedule_id, bucket): (runs, failures)}`` for the receipts of ``schedule_ids``
    with ``start <= finished_at <= end``: bucket ``i`` holds those that finished in
    ``[start + i * bucket_seconds, start + (i + 1) * bucket_seconds)`` (the last one also
    takes ``end``); failures are the :data:`FAILURE_STATUSES`. One query (:func:`row_counts`);
    empty buckets are absent. Raises ``ValueError`` for ``bucket_seconds < 1``."""
    if bucket_seconds < 1:
        raise ValueError("bucket_seconds must be at least 1")
    last = max(0, int((end - start).total_seconds() // bucket_seconds))
    rows = row_counts(schedule_ids, start, end, bucket_seconds, last + 1)
    return {
        (pk, bucket): cell
        for pk, cells in zip(schedule_ids, rows, strict=True)
        for bucket, cell in enumerate(cells)
        if cell[0]
    }


def row_counts(
    schedule_ids: Sequence[Any], start: datetime, end: datetime, bucket_seconds: int, buckets: int
) -> list[list[tuple[int, int]]]:
    """The runs and failures (the :data:`FAILURE_STATUSES`) of each schedule of
    ``schedule_ids`` per bucket, in their order: ``rows[k][i]`` is ``(runs, failures)`` of
    ``schedule_ids[k]``'s receipts that finished in ``[start + i * bucket_seconds, start +
    (i + 1) * bucket_seconds)`` (aware datetimes; ``start <= finished_at <= end``), for
    ``i`` in ``range(buckets)``; a receipt past the last bucket counts in it. One query; at
    most ``len(schedule_ids) * buckets`` rows come back. Raises ``ValueError`` for
    ``bucket_seconds < 1`` or ``buckets < 1``."""
    if bucket_seconds < 1 or buckets < 1:
        raise ValueError("bucket_seconds and buckets must be at least 1")
    rows: list[list[tuple[int, int]]] = [[(0, 0)] * buckets for _ in schedule_ids]
    if not schedule_ids:
        return rows
    using = router.db_for_read(RunReceipt)
    found: Iterable[tuple[int, Any, int, int]]
    if connections[using].vendor == "postgresql":
        found = _bucket_rows_postgresql(using, schedule_ids, start, end, bucket_seconds, buckets)
    else:
        position = {pk: k for k, pk in enumerate(schedule_ids)}
        found = (
            (position[pk], bucket, runs, failures)
            for pk, bucket, runs, failures in _bucket_rows(
                using, schedule_ids, start, end, bucket_seconds
            )
        )
    last = buckets - 1
    for k, bucket, runs, failures in found:
        cells, i = rows[k], min(max(0, int(bucket)), last)  # rounding at the edges
        before = cells[i]
        cells[i] = (before[0] + runs, before[1] + failures)
    return rows


def _bucket_rows_postgresql(
    using: str,
    schedule_ids: Sequence[Any],
    start: datetime,
    end: datetime,
    seconds: int,
    buckets: int,
) -> list[tuple[int, int, int, int]]:
    """:func:`row_counts`'s rows on PostgreSQL, ``(k, bucket, runs, failures)`` with ``k``
    the schedule's position in ``schedule_ids`` (an integer: no id to load and hash per
    row) and the bucket clamped to ``[0, buckets)``, one row per pair: each schedule's
    receipts of the range read by its own ``(schedule_id, finished_at)`` index scan (a
    lateral subquery kept apart by ``OFFSET 0``), so the read is the rows of the page's
    schedules, not every receipt of the range filtered by schedule (the plan PostgreSQL
    picks for ``IN``: 45 ms against 15 ms for 50 busy schedules among 1,000 over 7 days,
    10 M receipts). The bucket is float arithmetic (``date_part``; ``EXTRACT`` is a
    ``numeric``, several times slower a row)."""
    connection = connections[using]
    receipts = connection.ops.quote_name(RunReceipt._meta.db_table)
    sql = (
        "SELECT s.k - 1, r.bucket, COUNT(*), COUNT(*) FILTER (WHERE r.status = ANY(%s)) "
        "FROM unnest(%s::uuid[]) WITH ORDINALITY AS s(id, k) CROSS JOIN LATERAL "
        "(SELECT LEAST(GREATEST(FLOOR(date_part('epoch', finished_at - %s) / %s), 0), %s)::int"
        " AS bucket, status "
        f"FROM {receipts} WHERE schedule_id = s.id AND finished_at >= %s AND finished_at <= %s "
        "OFFSET 0) AS r GROUP BY 1, 2"
    )
    params: list[Any] = [
        [str(f) for f in FAILURE_STATUSES],
        list(schedule_ids),
        start,
        float(seconds),
        buckets - 1,
        start,
        end,
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


def _bucket_rows(
    using: str, schedule_ids: Sequence[Any], start: datetime, end: datetime, seconds: int
) -> Any:
    """:func:`bucket_counts`'s rows on the other backends (the ORM)."""
    return (
        RunReceipt.objects.using(using)
        .filter(schedule_id__in=list(schedule_ids), finished_at__gte=start, finished_at__lte=end)
        # An integer from the database: PostgreSQL's FLOOR of EXTRACT is a numeric, a Decimal
        # each row in Python, then a float (a few thousand rows a page: half the read's time).
        .annotate(
            dds_bucket=Cast(
                Floor(SecondsSince(F("finished_at"), start) / Value(seconds)),
                BigIntegerField(),
            )
        )
        .values("schedule_id", "dds_bucket")
        .order_by()
        .annotate(
            runs=Count("id"),
            failures=Count("id", filter=Q(status__in=FAILURE_STATUSES)),
        )
        .values_list("schedule_id", "dds_bucket", "runs", "failures")
    )
