"""The worker's hot reads, compiled to SQL once per connection alias and shape.

Every claim and every completion reads its schedule rows with a locking ``SELECT`` that the
ORM builds from the named predicates (``ScheduleQuerySet.claimable``, ``with_calendar_flag``,
``select_for_update``). Building and compiling that queryset costs about 1.5 ms of Python a
batch, about a seventh of a no-op run's worker CPU (``bench/profile_cycle.py``), for SQL
that is the same text every time. :func:`read_rows` compiles the queryset the first time
and afterwards runs the SQL it produced, through Django's raw queries (``Manager.raw``:
the same model instances, field converters and annotations as attributes).

A cached statement must not depend on anything but its key: its parameters are the
constants of the predicates, and a value that changes per call (the ids a completion reads)
is passed as :data:`PLACEHOLDER` when the queryset is built and replaced by the call's own
value each time. The cache is bounded (:data:`MAX_STATEMENTS`; emptied when full).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar

from django.db import connections
from django.db.models import Model, QuerySet

_M = TypeVar("_M", bound=Model)

#: A stand-in parameter: each occurrence in the compiled parameters is replaced by the
#: value the call passes (``read_rows(..., value=...)``).
PLACEHOLDER: Any = ["durable_schedules: the parameter of this call"]

#: How many compiled statements are kept (batch sizes and aliases make the keys).
MAX_STATEMENTS = 512

_STATEMENTS: dict[tuple[Hashable, ...], tuple[str, tuple[Any, ...]]] = {}


def compiled(
    key: Hashable, using: str, build: Callable[[], QuerySet[Any]]
) -> tuple[str, tuple[Any, ...]]:
    """``(sql, params)`` of the queryset ``build()`` returns, compiled on ``using`` the first
    time ``key`` is asked for there (inside the caller's transaction, as ``select_for_update``
    requires) and taken from the cache afterwards."""
    conn = connections[using]
    cache_key = (conn.alias, conn.vendor, key)
    found = _STATEMENTS.get(cache_key)
    if found is None:
        qs = build()
        sql, params = qs.query.get_compiler(using=using).as_sql()
        found = (sql, tuple(params))
        if len(_STATEMENTS) >= MAX_STATEMENTS:
            _STATEMENTS.clear()
        _STATEMENTS[cache_key] = found
    return found


def read_rows(
    model: type[_M],
    key: Hashable,
    using: str,
    build: Callable[[], QuerySet[_M]],
    *,
    value: Any = None,
) -> list[_M]:
    """The rows of the queryset ``build()`` returns (model instances, annotations as
    attributes), from its SQL compiled once per ``key`` (:func:`compiled`); ``value``
    replaces each :data:`PLACEHOLDER` among its parameters."""
    sql, params = compiled(key, using, build)
    if value is not None:
        params = tuple(value if p is PLACEHOLDER else p for p in params)
    return list(model._default_manager.raw(sql, params, using=using))


def clear() -> None:
    """Forget every compiled statement (tests that change a backend's SQL)."""
    _STATEMENTS.clear()


def placeholder_count(params: Sequence[Any]) -> int:
    """How many parameters are :data:`PLACEHOLDER` (a check for callers' tests)."""
    return sum(1 for p in params if p is PLACEHOLDER)
