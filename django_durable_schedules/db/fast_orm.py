"""The hot path's two shortcuts through Django's non-public ORM API, in one module.

The worker's use of Django's non-public API lives here (``tests/test_fast_orm.py`` names
the only two other places, neither on the hot path: the row-by-row reader of a batch with
an unreadable row in ``models/queries.py``, and ``db/counts.planner_estimate``), and that
test pins each internal this module reads, so a Django release that changes one fails a
named test on its tox cell rather than a worker:

* ``Query.get_compiler`` / ``SQLCompiler.as_sql``, ``select``, ``klass_info``,
  ``annotation_col_map``, ``col_count``, ``get_converters`` (compiled statements);
* ``ModelState``, ``DeferredAttribute``, ``ForeignKeyDeferredAttribute`` (row loading).

Why they stay (issue #25, item 7; measured in docs/benchmarks.md, "The hot path's ORM"):
the alternative, named SQL per database read into a slotted row value, would duplicate
the ``ScheduleQuerySet`` predicates as text on three databases, and the ORM as it is
(``bench/experiment_worker.py plain-orm``) costs the worker more CPU per run.

**Compiled statements.**
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
value each time; a row limit that changes from call to call (a claim takes as many rows as
its worker has room for) is sliced as ``[:LIMIT]`` and passed as ``limit=``, so one
statement serves every claim size. The cache is bounded (:data:`MAX_STATEMENTS`; emptied
when full).

**Row loading.** The worker loads every claimed and completed schedule row as a
``Schedule`` (about 40 columns), and the admin lists load 100 rows a page. ``Model.__init__`` sends ``pre_init``
and ``post_init`` and sets each field through ``setattr``: about a tenth of a worker's
CPU per run (``bench/profile_cycle.py --cprofile``). A full row read from the database
needs neither: :meth:`FastLoading.from_db` fills the instance's ``__dict__`` in one step,
which is what ``__init__`` leaves there for such a row.

It does so only where that is exactly equivalent, and otherwise calls Django's
``from_db``: when every value names a concrete field (a deferred field is left out of the
``__dict__``, as ``__init__`` leaves it out), when nobody listens
to ``pre_init`` or ``post_init`` for the model, and when every field's attribute on the
class is Django's plain deferred-attribute descriptor (no custom descriptor that
``setattr`` would run).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from datetime import UTC
from functools import cache
from typing import Any, Self, TypeVar

from django.db import connections
from django.db.models import JSONField, Model, QuerySet
from django.db.models.base import ModelState
from django.db.models.fields.related_descriptors import ForeignKeyDeferredAttribute
from django.db.models.query_utils import DeferredAttribute
from django.db.models.signals import post_init, pre_init

from .loaded import READ

_M = TypeVar("_M", bound=Model)

#: A stand-in parameter: each occurrence in the compiled parameters is replaced by the
#: value the call passes (``read_rows(..., value=...)``).
PLACEHOLDER: Any = ["durable_schedules: the parameter of this call"]

#: A stand-in row limit: a cached statement's queryset sliced ``[:LIMIT]`` reads as many
#: rows as each call's ``limit=`` (the SQL's ``LIMIT`` becomes a parameter).
LIMIT = 987_654_321_013
_LIMIT_SQL = f" LIMIT {LIMIT}"

#: How many compiled statements are kept (pools, levels and aliases make the keys).
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
    #: Whether the SQL's ``LIMIT`` is its last parameter (sliced ``[:LIMIT]``).
    limited: bool = False


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
    sql, limited = _limit_parameter(sql, qs.query.low_mark, qs.query.high_mark)
    select = compiler.select
    converters = tuple(
        (pos, _quick(tuple(convs)), expression)
        for pos, (convs, expression) in compiler.get_converters(
            [column[0] for column in select[: compiler.col_count]]
        ).items()
    )
    info = compiler.klass_info
    if not models:  # values_list(): tuples
        return Compiled(sql, tuple(params), converters, limited=limited)
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
        limited=limited,
    )


def _limit_parameter(sql: str, low: int, high: int | None) -> tuple[str, bool]:
    """``sql`` with its ``LIMIT`` of :data:`LIMIT` made a parameter (``LIMIT %s``), and
    whether it was: the queryset's own slice (``low``, ``high``: its ``Query`` marks) takes
    ``LIMIT`` rows, after any offset (``[3:][:LIMIT]``). Refused with ``TypeError``: the
    stand-in moved by a later offset (``[:LIMIT][1:]``), in a subquery only, elsewhere in
    the text, or followed by another parameter (the limit must be the last)."""
    if high is not None and high == LIMIT and low > 0:
        raise TypeError(f"the row limit {LIMIT} is moved by an offset: slice [:LIMIT] last")
    if high is None or high - low != LIMIT:
        if str(LIMIT) in sql:
            raise TypeError(f"the row limit {LIMIT} is not the statement's LIMIT: {sql}")
        return sql, False
    head, found, tail = sql.partition(_LIMIT_SQL)
    if not found or str(LIMIT) in head or str(LIMIT) in tail or "%s" in tail:
        raise TypeError(f"the row limit {LIMIT} is not the statement's last parameter: {sql}")
    return f"{head} LIMIT %s{tail}", True


#: The JSON texts most columns hold (a default ``{}`` or ``[]``, a JSON ``null``): what
#: ``json.loads`` makes of each, made without parsing (a new object each time).
_JSON_LITERALS: dict[str, Callable[[], Any]] = {"{}": dict, "[]": list, "null": type(None)}


def _quick(convs: tuple[Callable[..., Any], ...]) -> tuple[Callable[..., Any], ...]:
    """``convs``, a column's converters, with a lone ``JSONField.from_db_value`` of a field
    without a ``decoder`` of its own given a shortcut for :data:`_JSON_LITERALS` (about a
    microsecond a value less; a claim reads three JSON columns a row); any other text goes
    to the converter itself."""
    if len(convs) != 1:
        return convs
    convert = convs[0]
    field: Any = getattr(convert, "__self__", None)
    if getattr(convert, "__func__", None) is not JSONField.from_db_value or field.decoder:
        return convs

    def json_value(value: Any, expression: Any, connection: Any) -> Any:
        make = _JSON_LITERALS.get(value) if type(value) is str else None
        return make() if make is not None else convert(value, expression, connection)

    return (json_value,)


def _fetch(found: Compiled, using: str, value: Any, limit: int | None) -> list[list[Any]]:
    params = found.params
    if value is not None:
        params = tuple(value if p is PLACEHOLDER else p for p in params)
    if found.limited != (limit is not None):
        raise TypeError(
            "a statement sliced [:LIMIT] needs limit=, and only such a statement takes one"
        )
    if limit is not None:
        if type(limit) is not int or limit < 1:  # as Django: no negative slice, [:0] reads none
            raise ValueError(f"a row limit is a whole number of rows, at least 1: {limit!r}")
        params = (*params, limit)
    conn = connections[using]
    with conn.cursor() as cursor:
        if conn.vendor == "postgresql":
            native_timestamps(cursor, conn)
        cursor.execute(found.sql, params)
        rows = [list(row) for row in cursor.fetchall()]
    for pos, convs, expression in found.converters:
        for row in rows:
            converted = row[pos]
            for converter in convs:
                converted = converter(converted, expression, conn)
            row[pos] = converted
    return rows


def native_timestamps(cursor: Any, conn: Any) -> None:
    """Have the PostgreSQL cursor ``cursor`` (of the Django connection ``conn``) load its
    ``timestamptz`` values with psycopg's own loader where that gives what Django's does.

    Django's psycopg 3 backend loads every ``timestamptz`` through a Python loader that
    calls psycopg's (C) one and then sets the value's zone to the connection's
    (``.replace(tzinfo=...)``): about a microsecond a value, and a claim or a completion
    reads a dozen instants a row. When the connection's zone is UTC on both sides
    (Django's ``conn.timezone``, the default with ``USE_TZ``, and the session's
    ``TimeZone``), psycopg's loader alone already returns the same value (an aware
    instant whose ``tzinfo`` is ``datetime.timezone.utc``). Otherwise, or with psycopg 2,
    nothing changes. Only this cursor is changed (its own copy of the adapters)."""
    raw: Any = getattr(cursor, "cursor", None)
    adapters = getattr(raw, "adapters", None)
    if adapters is None or conn.timezone is not UTC:
        return
    if raw.connection.info.parameter_status("TimeZone") != "UTC":
        return
    loader = _native_loader()
    if loader is not None:
        adapters.register_loader(_TIMESTAMPTZ, loader)


_TIMESTAMPTZ = "timestamptz"


@cache
def _native_loader() -> Any:
    """psycopg's own text loader of ``timestamptz`` (None if psycopg 3 is not there)."""
    try:
        import psycopg
        from psycopg.pq import Format
    except ImportError:  # pragma: no cover - psycopg 2
        return None
    oid = psycopg.postgres.types[_TIMESTAMPTZ].oid
    return psycopg.adapters.get_loader(oid, Format.TEXT)


def read_rows(
    model: type[_M],
    key: Hashable,
    using: str,
    build: Callable[[], QuerySet[_M]],
    *,
    value: Any = None,
    limit: int | None = None,
) -> list[_M]:
    """The model instances of the queryset ``build()`` returns (annotations as attributes;
    no ``select_related``), from its SQL compiled once per ``key`` (:func:`compiled`);
    ``value`` replaces each :data:`PLACEHOLDER` among its parameters, and ``limit`` (a
    number of rows, at least 1: else ``ValueError``) the :data:`LIMIT` of a queryset
    sliced ``[:LIMIT]`` (needed then, refused otherwise: ``TypeError``; so is a stand-in
    moved by an offset, ``[:LIMIT][1:]``, or followed by another parameter)."""
    found = compiled(key, using, build)
    if found.model is not model:
        raise TypeError(f"the statement {key!r} reads {found.model!r}, not {model!r}")
    assert found.model is not None
    from_db = model.from_db
    names, start, end, annotations = found.names, found.start, found.end, found.annotations
    objs = []
    for row in _fetch(found, using, value, limit):
        obj = from_db(using, names, row[start:end])
        for attr, pos in annotations:
            setattr(obj, attr, row[pos])
        objs.append(obj)
    return objs


def read_values(
    key: Hashable,
    using: str,
    build: Callable[[], QuerySet[Any]],
    *,
    value: Any = None,
    limit: int | None = None,
) -> list[tuple[Any, ...]]:
    """The rows of the ``values_list()`` queryset ``build()`` returns, as tuples, from its
    SQL compiled once per ``key`` (:func:`compiled`); ``value`` and ``limit`` as in
    :func:`read_rows`."""
    found = compiled(key, using, build, models=False)
    return [tuple(row) for row in _fetch(found, using, value, limit)]


def clear() -> None:
    """Forget every compiled statement (tests that change a backend's SQL)."""
    _STATEMENTS.clear()


_ATTNAMES: dict[type, tuple[str, ...] | None] = {}
_ATTNAME_SETS: dict[type, frozenset[str]] = {}


def _attnames(cls: type) -> tuple[str, ...] | None:
    """The attribute names of ``cls``'s concrete fields in column order, or ``None`` when
    one of them has a descriptor other than Django's deferred attribute (cached).

    Django's own descriptors (``DeferredAttribute``, and ``ForeignKeyDeferredAttribute``
    for a foreign key's ``*_id``) read the instance's ``__dict__``; setting ``__dict__`` on
    a new instance is what ``setattr`` does through them (the foreign key's ``__set__``
    also forgets a cached related object, which a new instance does not have)."""
    try:
        return _ATTNAMES[cls]
    except KeyError:
        pass
    plain = (DeferredAttribute, ForeignKeyDeferredAttribute)
    names = tuple(f.attname for f in cls._meta.concrete_fields)  # type: ignore[attr-defined]
    ok = all(type(getattr(cls, name, None)) in plain for name in names)
    _ATTNAMES[cls] = names if ok else None
    _ATTNAME_SETS[cls] = frozenset(names)
    return _ATTNAMES[cls]


#: Attribute-name tuples :func:`_loaded_names` found to be ``cls``'s (by identity: each
#: compiled statement's one tuple; held here, so an id is never another tuple's).
_CHECKED: dict[tuple[type, int], tuple[str, ...]] = {}


def _loaded_names(cls: type, field_names: Any) -> bool:
    """Whether every name of ``field_names`` is one of ``cls``'s fields' attribute names;
    a tuple (a compiled statement's, the same object for each of its rows) is checked
    once."""
    if type(field_names) is not tuple:
        return _ATTNAME_SETS[cls].issuperset(field_names)
    key = (cls, id(field_names))
    if _CHECKED.get(key) is field_names:
        return True
    if not _ATTNAME_SETS[cls].issuperset(field_names):
        return False
    if len(_CHECKED) >= MAX_STATEMENTS:
        _CHECKED.clear()
    _CHECKED[key] = field_names
    return True


def _init_listeners(cls: type) -> bool:
    """Whether anyone listens to ``pre_init`` or ``post_init`` for ``cls``."""
    return bool(pre_init.receivers or post_init.receivers) and (
        pre_init.has_listeners(cls) or post_init.has_listeners(cls)
    )


class FastLoading:
    """Mixin for a model: rows read from the database skip ``Model.__init__`` (see the
    module docstring for when, and why it is equivalent)."""

    @classmethod
    def from_db(cls, db: str | None, field_names: Any, values: Any, **kwargs: Any) -> Any:
        """Django's ``Model.from_db`` (``fetch_mode``, Django 6.1+, is kept), filling a
        full row's ``__dict__`` directly where that is equivalent."""
        names = _attnames(cls)
        if names is None or _init_listeners(cls):
            return super().from_db(db, field_names, values, **kwargs)  # type: ignore[misc]
        if len(values) != len(names):
            # Deferred fields (``defer()``, ``only()``): Django leaves them out of the
            # instance's ``__dict__`` (read on first access); ``field_names`` names the
            # values in their order.
            if len(field_names) != len(values) or not _loaded_names(cls, field_names):
                return super().from_db(db, field_names, values, **kwargs)  # type: ignore[misc]
            names = field_names
        new = cls.__new__(cls)
        state = ModelState()
        state.adding = False
        state.db = db
        fetch_mode = kwargs.get("fetch_mode")
        if fetch_mode is not None:
            state.fetch_mode = fetch_mode
        state.__dict__[READ] = (names, values)  # what it was read as (.loaded.read_of)
        new.__dict__["_state"] = state
        new.__dict__.update(zip(names, values, strict=True))
        return new

    @classmethod
    def build(cls, **values: Any) -> Self:
        """A new, unsaved instance: ``cls(**values)`` for keyword arguments that are field
        attribute names (``schedule_id``, not ``schedule``); fields not given get their
        default. Skips ``Model.__init__`` where that is equivalent (as :meth:`from_db`)."""
        names = _attnames(cls)
        if names is None or not _ATTNAME_SETS[cls].issuperset(values) or _init_listeners(cls):
            return cls(**values)
        new = cls.__new__(cls)
        fields = new.__dict__
        fields["_state"] = ModelState()
        if len(values) < len(names):  # (every key is a field's: the superset check above)
            for field in cls._meta.concrete_fields:  # type: ignore[attr-defined]
                if field.attname not in values:
                    fields[field.attname] = field.get_default()
        fields.update(values)
        return new


__all__ = ["LIMIT", "PLACEHOLDER", "FastLoading", "compiled", "read_rows", "read_values", "clear"]
