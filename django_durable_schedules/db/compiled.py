"""The worker's hot reads, compiled to SQL once per connection alias and shape.

Every claim and every completion reads its schedule rows with a locking ``SELECT`` that the
ORM builds from the named predicates (``ScheduleQuerySet.claimable``, ``with_calendar_flag``,
``select_for_update``), and an idle worker asks when to wake up (``next_wakeup``). Building
and compiling such a queryset costs 1.5-2 ms of Python, about a seventh of a no-op run's
worker CPU at a batch of 96 (``bench/profile_cycle.py``), for SQL that is the same text
every time. :func:`read_rows` and :func:`read_values` compile the queryset the first time
and afterwards run the SQL it produced, fetch every row at once and make of them what the
queryset itself would: model instances (``from_db``, annotations as attributes) or tuples,
each value through the field converters Django applies (JSON, booleans on MariaDB, dates
on SQLite).

A cached statement must depend on nothing but its key: its parameters are the constants of
the predicates, and a value that changes from call to call (the ids a completion reads) is
passed as :data:`PLACEHOLDER` when the queryset is built and replaced by the call's own
value each time. The cache is bounded (:data:`MAX_STATEMENTS`; emptied when full).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, TypeVar

from django.db import connections
from django.db.models import Model, QuerySet

_M = TypeVar("_M", bound=Model)

#: A stand-in parameter: each occurrence in the compiled parameters is replaced by the
#: value the call passes (``read_rows(..., value=...)``).
PLACEHOLDER: Any = ["durable_schedules: the parameter of this call"]

#: How many compiled statements are kept (batch sizes and aliases make the keys).
MAX_STATEMENTS = 512


@dataclass(frozen=True)
class Compiled:
    """A queryset's SQL and what turns its rows into the queryset's results."""

    sql: str
    params: tuple[Any, ...]
    #: Per column position: the converters Django applies, and their expression.
    converters: tuple[tuple[int, tuple[Callable[..., Any], ...], Any], ...]
    #: Model rows: the class, its loaded attribute names and where their values start/end.
    model: type[Model] | None = None
    names: tuple[str, ...] = ()
    start: int = 0
    end: int = 0
    #: Model rows: (attribute, column position) of each annotation.
    annotations: tuple[tuple[str, int], ...] = ()


_STATEMENTS: dict[tuple[Hashable, ...], Compiled] = {}


def compiled(
    key: Hashable, using: str, build: Callable[[], QuerySet[Any]], *, models: bool = True
) -> Compiled:
    """The :class:`Compiled` form of the queryset ``build()`` returns (``models``: model
    instances, else tuples), compiled on ``using`` the first time ``key`` is asked for
    there (inside the caller's transaction, as ``select_for_update`` requires) and taken
    from the cache afterwards."""
    conn = connections[using]
    cache_key = (conn.alias, conn.vendor, models, key)
    found = _STATEMENTS.get(cache_key)
    if found is None:
        found = _compile(build(), using, models)
        if len(_STATEMENTS) >= MAX_STATEMENTS:
            _STATEMENTS.clear()
        _STATEMENTS[cache_key] = found
    return found


def _compile(qs: QuerySet[Any], using: str, models: bool) -> Compiled:
    compiler = qs.query.get_compiler(using=using)
    sql, params = compiler.as_sql()  # fills select, klass_info and annotation_col_map
    select = compiler.select
    converters = tuple(
        (pos, tuple(convs), expression)
        for pos, (convs, expression) in compiler.get_converters(
            [column[0] for column in select[: compiler.col_count]]
        ).items()
    )
    info = compiler.klass_info
    if not models:  # values_list(): tuples
        return Compiled(sql, tuple(params), converters)
    if not info or getattr(qs, "_fields", None) is not None or compiler.query.select_related:
        raise TypeError("read_rows reads whole model rows (no values(), no select_related)")
    fields = info["select_fields"]
    start, end = fields[0], fields[-1] + 1
    return Compiled(
        sql,
        tuple(params),
        converters,
        model=info["model"],
        names=tuple(column[0].target.attname for column in select[start:end]),
        start=start,
        end=end,
        annotations=tuple((compiler.annotation_col_map or {}).items()),
    )


def _fetch(found: Compiled, using: str, value: Any) -> list[list[Any]]:
    params = found.params
    if value is not None:
        params = tuple(value if p is PLACEHOLDER else p for p in params)
    conn = connections[using]
    with conn.cursor() as cursor:
        cursor.execute(found.sql, params)
        rows = [list(row) for row in cursor.fetchall()]
    for pos, convs, expression in found.converters:
        for row in rows:
            converted = row[pos]
            for converter in convs:
                converted = converter(converted, expression, conn)
            row[pos] = converted
    return rows


def read_rows(
    model: type[_M],
    key: Hashable,
    using: str,
    build: Callable[[], QuerySet[_M]],
    *,
    value: Any = None,
) -> list[_M]:
    """The model instances of the queryset ``build()`` returns (annotations as attributes;
    no ``select_related``), from its SQL compiled once per ``key`` (:func:`compiled`);
    ``value`` replaces each :data:`PLACEHOLDER` among its parameters."""
    found = compiled(key, using, build)
    if found.model is not model:
        raise TypeError(f"the statement {key!r} reads {found.model!r}, not {model!r}")
    assert found.model is not None
    from_db = model.from_db
    names, start, end, annotations = found.names, found.start, found.end, found.annotations
    objs = []
    for row in _fetch(found, using, value):
        obj = from_db(using, names, row[start:end])
        for attr, pos in annotations:
            setattr(obj, attr, row[pos])
        objs.append(obj)
    return objs


def read_values(
    key: Hashable, using: str, build: Callable[[], QuerySet[Any]], *, value: Any = None
) -> list[tuple[Any, ...]]:
    """The rows of the ``values_list()`` queryset ``build()`` returns, as tuples, from its
    SQL compiled once per ``key`` (:func:`compiled`)."""
    found = compiled(key, using, build, models=False)
    return [tuple(row) for row in _fetch(found, using, value)]


def clear() -> None:
    """Forget every compiled statement (tests that change a backend's SQL)."""
    _STATEMENTS.clear()


__all__ = ["PLACEHOLDER", "compiled", "read_rows", "read_values", "clear"]
