"""The transaction of a read that aggregates whole tables (the health snapshot): on
PostgreSQL without the JIT, whose compiling of such plans' expressions cost more than
running them (docs/benchmarks.md, health at 10 M). Writes nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from django.db import connections, transaction

T = TypeVar("T")


def read_without_jit(read: Callable[[], T], using: str) -> T:
    """``read()``'s value: on PostgreSQL, outside a caller's transaction, inside one of its
    own with ``SET LOCAL jit = off`` (the setting ends with it); elsewhere, or inside a
    caller's transaction (whose settings it leaves alone), as it is."""
    connection = connections[using]
    if connection.vendor != "postgresql" or connection.in_atomic_block:
        return read()
    with transaction.atomic(using=using):
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL jit = off")
        return read()
