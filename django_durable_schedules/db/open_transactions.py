"""Is a connection inside a transaction that Django does not know about?

Django tracks the transactions it opens (``atomic``, ``set_autocommit(False)``). A raw
``BEGIN`` (``connection.cursor().execute("BEGIN")``) opens one behind its back: Django
still says autocommit, the server session is in a transaction, and every later statement
on that connection lands in it until something commits. :func:`server_in_transaction` asks
the driver or the server:

* PostgreSQL (psycopg 3 and psycopg2): ``connection.info.transaction_status`` (no round
  trip): in a transaction (``INTRANS``) or in a failed one (``INERROR``);
* MariaDB: ``SELECT @@in_transaction`` (one round trip);
* MySQL: ``information_schema.innodb_trx`` for ``CONNECTION_ID()`` (one round trip; needs
  the ``PROCESS`` privilege, without it the answer is "unknown");
* SQLite: ``sqlite3.Connection.in_transaction`` (no round trip).
"""

from __future__ import annotations

from typing import Any

# libpq's PQTRANS_INTRANS and PQTRANS_INERROR (psycopg 3's pq.TransactionStatus, psycopg2's
# extensions.TRANSACTION_STATUS_*): idle in a transaction, idle in a failed transaction.
_PG_IN_TRANSACTION = (2, 3)


def server_in_transaction(connection: Any) -> bool | None:
    """Whether the open connection of the Django connection ``connection`` is inside a
    transaction as its driver or server sees it: True, False, or None when it cannot be
    told (a driver without the attribute, a MySQL account without ``PROCESS``, a broken
    connection). A connection not open is False. Never raises; sends at most one
    statement (MariaDB/MySQL), outside Django's execute wrappers."""
    raw = connection.connection
    if raw is None:
        return False
    vendor = connection.vendor
    try:
        if vendor == "postgresql":
            status = getattr(getattr(raw, "info", None), "transaction_status", None)
            return None if status is None else int(status) in _PG_IN_TRANSACTION
        if vendor == "sqlite":
            value = getattr(raw, "in_transaction", None)
            return None if value is None else bool(value)
        if vendor == "mysql":
            if getattr(connection, "mysql_is_mariadb", False):
                sql = "SELECT @@in_transaction"
            else:
                sql = (
                    "SELECT COUNT(*) FROM information_schema.innodb_trx"
                    " WHERE trx_mysql_thread_id = CONNECTION_ID()"
                )
            with raw.cursor() as cursor:
                cursor.execute(sql)
                row = cursor.fetchone()
            return None if row is None else bool(int(row[0]))
    except Exception:  # noqa: BLE001 - the driver's own errors, not Django's
        return None
    return None


def roll_back(connection: Any) -> None:
    """Send ``ROLLBACK`` on the open connection of ``connection`` (in autocommit: ends a
    transaction a raw ``BEGIN`` opened, a no-op otherwise), bypassing Django's execute
    wrappers; a connection that fails it is closed. Never raises."""
    raw = connection.connection
    if raw is None:
        return
    try:
        with raw.cursor() as cursor:
            cursor.execute("ROLLBACK")
    except Exception:  # noqa: BLE001 - the driver's own errors: drop the connection
        try:
            connection.close()
        except Exception:  # noqa: BLE001 - already broken: forgotten all the same
            pass
