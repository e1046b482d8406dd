"""Batch writes of the state machine: one round trip per batch of schedules, attempts or
receipts (PostgreSQL: one ``unnest`` statement of array parameters; others: ``executemany``
or ``bulk_create``). Called only inside a transaction that :mod:`..state` opened.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import date, datetime, timedelta
from decimal import Decimal
from operator import is_, itemgetter
from typing import Any

from django.db import DataError, IntegrityError, connections
from django.db.models import (
    NOT_PROVIDED,
    DateField,
    DateTimeField,
    Field,
    ForeignObjectRel,
    JSONField,
    Model,
    TimeField,
)

from ..models import Schedule
from .loaded import forget_reads, positions_of, read_of

#: What the database (or its driver) raises for a value it refuses to store: a batch that
#: meets one is retried row by row, so one bad row or outcome never blocks the others.
REFUSED = (IntegrityError, DataError, ValueError)
#: What a row written behind ``save()`` can make a read or a rule raise besides: a value
#: the driver or Django cannot convert (PostgreSQL ``-infinity``, a year beyond 9999, SQLite
#: text where an instant belongs: ``DataError``, ``ValueError``, ``AttributeError``), a value
#: of another type (SQLite: ``TypeError``), an instant or a count that overflows
#: (``OverflowError``), a stored list too short (``LookupError``). A worker's batch that
#: meets one is retried row by row, and a row that raises it alone is quarantined.
ROW_PROBLEMS = (*REFUSED, TypeError, AttributeError, ArithmeticError, LookupError)


def update_rows(rows: Sequence[Schedule], fields: Sequence[str], using: str) -> None:
    """Write ``fields`` of each row in one round trip: those of them that some row changed
    since its locking read (:func:`written_columns`; none: no statement).

    PostgreSQL: one ``UPDATE ... FROM unnest(%s::uuid[], %s::integer[], ...)`` per batch,
    one array parameter per column, so the statement text is the same for every batch with
    the same columns and the client caches its parsing. Others: one parameterised ``UPDATE
    ... WHERE id = %s`` sent through ``executemany``. (``QuerySet.bulk_update`` builds a CASE
    expression per row and field, about 10 ms of Python per row here; see
    docs/benchmarks.md.)
    """
    if not rows:
        return
    conn = connections[using]
    pk, pk_column = _column_field(Schedule._meta.pk)
    column_of = dict(_column_field(Schedule._meta.get_field(name)) for name in fields)
    values = {c: [getattr(r, c.attname) for r in rows] for c in column_of}
    columns = written_columns(rows, values)
    forget_reads(rows)  # written now: a later write of these rows writes every column
    if not columns:
        return
    with conn.cursor() as cursor:
        if conn.vendor == "postgresql":
            cursor.execute(
                _unnest_sql(conn, Schedule, "update", (pk, *columns)),
                [_pg_array(pk, [r.pk for r in rows], conn)]
                + [_pg_array(c, values[c], conn) for c in columns],
            )
        else:
            qn = conn.ops.quote_name
            sets = ", ".join(f"{qn(column_of[c])} = %s" for c in columns)
            cursor.executemany(
                f"UPDATE {qn(Schedule._meta.db_table)} SET {sets} WHERE {qn(pk_column)} = %s",
                [
                    [c.get_db_prep_save(values[c][i], conn) for c in columns]
                    + [pk.get_db_prep_save(row.pk, conn)]
                    for i, row in enumerate(rows)
                ],
            )


def written_columns(
    rows: Sequence[Model], values: dict[Field[Any, Any], list[Any]]
) -> list[Field[Any, Any]]:
    """The columns of ``values`` (``{field: each row's value}``) an ``UPDATE`` of ``rows``
    must write: all of them, unless every row still knows what it was loaded with, the
    same columns for each (:func:`.loaded.read_of`; a row built, or written once since,
    does not); then only those some row changed. A column is unchanged when each row's
    value is of the type it was read as, equal to it, and of an immutable type (``None``,
    a number, a text, an instant, a UUID: a value changed in place, a JSON document, is
    always written). Every caller's rows are locked since their read (the claim's, the
    completion's, a lease recovery's ``FOR UPDATE``), so a column left out holds that
    very value: the statement writes less, not otherwise."""
    columns = list(values)
    reads = [read_of(r) for r in rows]
    first = reads[0]
    if first is None or any(r is None or r[0] is not first[0] for r in reads):
        return columns
    positions = positions_of(first[0])
    loaded = [r[1] for r in reads if r is not None]
    written = []
    for column in columns:
        pos = positions.get(column.attname)
        now = values[column]
        if pos is None:
            written.append(column)
            continue
        then = list(map(itemgetter(pos), loaded))
        if not (
            now == then
            and _IMMUTABLE.issuperset(map(type, now))
            and all(map(is_, map(type, now), map(type, then)))
        ):
            written.append(column)
    return written


#: The types of values a column may be left out of an ``UPDATE`` for (see
#: :func:`written_columns`): none can change in place.
_IMMUTABLE = frozenset(
    {type(None), bool, int, float, str, datetime, date, timedelta, uuid.UUID, Decimal}
)


def insert_rows(model: type[Model], objs: Sequence[Model], using: str) -> None:
    """Insert new rows of ``model`` (attempts, receipts) in one round trip.

    PostgreSQL: ``INSERT ... SELECT * FROM unnest(%s::uuid[], ...)`` with one array
    parameter per column (constant statement text; no per-row SQL compilation). Others:
    ``QuerySet.bulk_create``. Primary keys must be set (every model here has a UUID default).
    """
    if not objs:
        return
    conn = connections[using]
    if conn.vendor != "postgresql":
        model._default_manager.using(using).bulk_create(objs)
        return
    every = {
        f: [f.pre_save(o, True) for o in objs]
        if _computes_on_save(f)
        else [getattr(o, f.attname) for o in objs]
        for f in model._meta.concrete_fields
    }
    # A column of NULLs only is left out: it has no default of its own in the database
    # (no field here has a ``db_default``), so it is NULL all the same, for nothing sent.
    fields = tuple(
        f for f, v in every.items() if v.count(None) != len(v) or f.db_default is not NOT_PROVIDED
    )
    params = [_pg_array(f, every[f], conn) for f in fields]
    with conn.cursor() as cursor:
        cursor.execute(_unnest_sql(conn, model, "insert", fields), params)
    for o in objs:
        o._state.adding, o._state.db = False, using


# These read the attribute unless the field has auto_now or auto_now_add.
_PLAIN_PRE_SAVE = (Field.pre_save, DateField.pre_save, DateTimeField.pre_save, TimeField.pre_save)


def _computes_on_save(field: Field[Any, Any]) -> bool:
    """Whether ``field.pre_save`` does more than read the attribute (``auto_now``,
    ``auto_now_add``, or a field class of its own)."""
    return bool(
        getattr(field, "auto_now", False)
        or getattr(field, "auto_now_add", False)
        or type(field).pre_save not in _PLAIN_PRE_SAVE
    )


def _pg_array(field: Field[Any, Any], values: list[Any], conn: Any) -> Any:
    """One column of a batch as the parameter of an ``unnest`` statement (PostgreSQL).

    Plain values (``None``, ``str``, ``bool``, ``int``, ``uuid.UUID``, aware ``datetime``)
    are written straight into an array literal (``{"a\\"b",NULL,42}``; format: PostgreSQL
    docs, "Arrays", 8.15.6): psycopg's per-element array dumping and Django's per-value
    ``get_db_prep_save`` cost ~15% of the worker's CPU per run. A JSON column of NULLs
    only is a literal too; other JSON columns, and any other value, go through the field's
    ``get_db_prep_save`` as a list.
    """
    kind = _array_kind(field)
    if kind is not None:
        try:
            return _ARRAY_LITERAL[kind](values)
        except (AttributeError, TypeError):  # a value of another type: the general path
            pass
    if isinstance(field, JSONField) and all(v is None for v in values):
        # The usual JSON column of a batch (a pending trigger's override, an attempt's own
        # payload): all SQL NULL, no per-value conversion.
        return "{" + ",".join(["NULL"] * len(values)) + "}"
    if not isinstance(field, JSONField):
        parts: list[str] = []
        for v in values:
            if v is None:
                parts.append("NULL")
            elif isinstance(v, str):
                parts.append('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"')
            elif isinstance(v, bool):
                parts.append("t" if v else "f")
            elif isinstance(v, int | uuid.UUID):
                parts.append(str(v))
            elif isinstance(v, datetime) and v.tzinfo is not None:
                parts.append(v.isoformat())
            else:
                break
        else:
            return "{" + ",".join(parts) + "}"
    return [field.get_db_prep_save(v, conn) for v in values]


def _uuid_literal(values: list[Any]) -> str:
    # ``.hex`` (no dashes) is a valid uuid input and cheaper than ``str``; a value that is
    # not a UUID has no ``hex`` (AttributeError): the general path takes it.
    return "{" + ",".join("NULL" if v is None else v.hex for v in values) + "}"


def _datetime_literal(values: list[Any]) -> str:
    # A batch repeats its instants (the claim's ``now``, its lease's end): each distinct
    # one is formatted once (``isoformat`` costs about ten times a dict look-up). Equal
    # aware instants are the same instant whatever their zone, so either text is the same
    # value to PostgreSQL; a naive instant never equals an aware one, so it is never
    # taken for one: it reaches the check below.
    texts: dict[Any, str] = {}
    parts = []
    for v in values:
        if v is None:
            parts.append("NULL")
            continue
        text = texts.get(v)
        if text is None:
            if v.tzinfo is None:  # naive: the field's conversion decides (general path)
                raise TypeError
            text = texts[v] = v.isoformat()
        parts.append(text)
    return "{" + ",".join(parts) + "}"


def _int_literal(values: list[Any]) -> str:
    parts = []
    for v in values:
        if v is None:
            parts.append("NULL")
        elif type(v) is int:
            parts.append(str(v))
        else:
            raise TypeError
    return "{" + ",".join(parts) + "}"


_ARRAY_LITERAL = {"uuid": _uuid_literal, "datetime": _datetime_literal, "int": _int_literal}
_ARRAY_KINDS: dict[Field[Any, Any], str | None] = {}


def _array_kind(field: Field[Any, Any]) -> str | None:
    """Which fast literal builder suits ``field``'s column (cached), or ``None``."""
    try:
        return _ARRAY_KINDS[field]
    except KeyError:
        pass
    internal = field.get_internal_type()
    if internal == "ForeignKey" or internal == "OneToOneField":
        target = field.target_field  # type: ignore[attr-defined]
        internal = target.get_internal_type()
    kind = {
        "UUIDField": "uuid",
        "DateTimeField": "datetime",
        "IntegerField": "int",
        "PositiveIntegerField": "int",
        "BigIntegerField": "int",
        "PositiveBigIntegerField": "int",
        "SmallIntegerField": "int",
        "PositiveSmallIntegerField": "int",
    }.get(internal)
    _ARRAY_KINDS[field] = kind
    return kind


_UNNEST_SQL: dict[tuple[Any, ...], str] = {}


def _unnest_sql(conn: Any, model: type[Model], verb: str, fields: Sequence[Field[Any, Any]]) -> str:
    """The PostgreSQL statement of :func:`update_rows` (``fields[0]`` is the key) or of
    :func:`insert_rows`, built once per model, verb and column list (at most 256 kept)."""
    key = (conn.alias, model, verb, tuple(f.column for f in fields))
    sql = _UNNEST_SQL.get(key)
    if sql is None:
        qn = conn.ops.quote_name
        table = qn(model._meta.db_table)
        names = ", ".join(qn(f.column) for f in fields)
        # varchar(n) arrays as text[]: an explicit cast to varchar(n) would silently cut a
        # long value; the assignment to the column rejects it instead, as an INSERT would.
        types = [str(f.db_type(conn)) for f in fields]
        arrays = ", ".join(f"%s::{'text' if t.startswith('varchar') else t}[]" for t in types)
        if verb == "insert":
            sql = f"INSERT INTO {table} ({names}) SELECT * FROM unnest({arrays})"
        else:
            key_column = qn(fields[0].column)
            sets = ", ".join(f"{qn(f.column)} = v.{qn(f.column)}" for f in fields[1:])
            sql = (
                f"UPDATE {table} AS t SET {sets} FROM unnest({arrays}) AS v ({names}) "
                f"WHERE t.{key_column} = v.{key_column}"
            )
        if len(_UNNEST_SQL) >= 256:  # one per column list written: a few in practice
            _UNNEST_SQL.clear()
        _UNNEST_SQL[key] = sql
    return sql


def _column_field(field: Field[Any, Any] | ForeignObjectRel | None) -> tuple[Field[Any, Any], str]:
    """A concrete field of ``Schedule`` and its column (``update_rows`` writes no other)."""
    if not isinstance(field, Field) or field.column is None:
        raise ValueError(f"{field!r} is not a concrete column of {Schedule._meta.db_table}")
    return field, field.column
