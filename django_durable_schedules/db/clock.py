"""The database clock: what is due, and when a lease has expired, is decided by the
database server's time, read here; an injected ``now`` replaces it in tests and tools.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from django.db import connections
from django.utils import timezone as dj_timezone
from django.utils.dateparse import parse_datetime

from .. import timing

_NOW_SQL = {
    "postgresql": "SELECT statement_timestamp()",
    "mysql": "SELECT UTC_TIMESTAMP(6)",
    "sqlite": "SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')",
    "oracle": "SELECT SYS_EXTRACT_UTC(SYSTIMESTAMP) FROM DUAL",
}


# The same clocks as SQL expressions, for the due test inside claim_due's locking SELECT.
DUE_NOW_SQL = {"postgresql": "statement_timestamp()", "mysql": "UTC_TIMESTAMP(6)"}
# ... and SQLite's, for a read that judges "now" inside one statement (the wake-up read);
# RawSQL text, so its "%" are doubled.
CLOCK_SQL = {**DUE_NOW_SQL, "sqlite": "strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now')"}


def db_now(using: str = "default") -> datetime:
    """The database server's current time as an aware UTC datetime.

    PostgreSQL ``statement_timestamp()``, MySQL/MariaDB ``UTC_TIMESTAMP(6)``, SQLite
    ``strftime('%f', 'now')`` (millisecond precision; SQLite's clock is the host's own).
    """
    conn = connections[using]
    sql = _NOW_SQL.get(conn.vendor)
    if sql is None:  # pragma: no cover - unknown backend
        return dj_timezone.now()
    with conn.cursor() as cursor:
        cursor.execute(sql)
        value = cursor.fetchone()[0]
    if isinstance(value, str):
        value = parse_datetime(value.replace(" ", "T"))
    assert isinstance(value, datetime)
    if dj_timezone.is_naive(value):
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def resolve_now(now: datetime | None, using: str) -> datetime:
    if now is None:
        return db_now(using)
    return timing.require_aware(now, "now")


def instant_after_read(
    now: datetime | None, using: str = "default", *, fresh: bool = False
) -> Callable[[], datetime]:
    """The instant of rows a transaction reads after it took ``now``: ``now``, or the
    database clock read at each call when ``fresh`` (rows lock: a row another transaction
    released after ``now`` is seen only once that commit happened, so an instant read after
    the row is never before what the row follows) or when ``now`` is None. A claim's
    backfill and chain slots (tests/test_chain_claim_clock.py) and the rows it reads to
    fill places held back (tests/test_parallel_claim_clock.py)."""
    if fresh or now is None:
        return lambda: db_now(using)
    return lambda: now
