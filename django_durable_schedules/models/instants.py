"""Instants the engine's predicates bound a stored value with: the range of a lease
expiry it may have granted, the latest slot the deadline arithmetic considers, and that
arithmetic (:func:`deadline_after`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.db.models import Value
from django.db.models.functions import Least

from ..db.durations import Seconds
from ..limits import DEADLINE_MAX_SECONDS

#: A lease expiry outside ``[LEASE_FLOOR, LEASE_CEILING]`` was never granted by the engine
#: (a lease is the database clock's now plus ``LEASE_SECONDS``): it was written behind
#: ``save()``, and may be a value no ``datetime`` holds (PostgreSQL ``-infinity`` and
#: ``infinity``, a year beyond 9999; on SQLite, text or a number that sorts outside them).
LEASE_FLOOR = datetime(1000, 1, 1, tzinfo=UTC)
LEASE_CEILING = datetime(9000, 1, 1, tzinfo=UTC)
#: A slot the deadline predicates consider is before this instant, and the deadline they
#: add is at most ``DEADLINE_MAX_SECONDS``: the sum never leaves the range a database's
#: datetime (or SQLite's Python function behind it) holds, whatever a row written behind
#: ``save()`` stores.
SLOT_CEILING = LEASE_CEILING


def deadline_after(slot: Any, seconds: Any) -> Any:
    """``slot + seconds`` as SQL, the seconds (a column) bounded to ``DEADLINE_MAX_SECONDS``."""
    return slot + Seconds(Least(seconds, Value(DEADLINE_MAX_SECONDS)))
