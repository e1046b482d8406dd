"""Labels: a schedule's ``metadata`` keys and values as a filter, one rule for the API
(``?label=team:data``), the admin (the "label" list filter) and the CLI
(``schedules list --label team:data``).

A label is ``key`` (the key is present, with any value, ``null`` included) or
``key:value`` (split at the first ``:``; a key holding ``:`` cannot be filtered on). Several
labels must all match. Values compare as text: ``team:data`` matches the JSON string
``"data"``; a label value that is a JSON number (``5``, ``-2``, ``1.5``) also matches that
number (so ``k:5`` matches both ``"5"`` and ``5``), ``true`` / ``false`` also match the
booleans and ``null`` also matches JSON ``null`` (each JSON scalar compares as the text
that spells it). ``05`` or ``1e999`` match only those strings. Keys compare exactly
(case-sensitive), including keys made of digits, which Django's ``metadata__5`` would read
as an array index on every backend.

:func:`parse_label` is pure; :func:`labels_filter` builds the filter
(:meth:`.queries.ScheduleQuerySet.with_labels` applies it) from :class:`ObjectKey`, its
:class:`Present` lookup and Django's ``exact`` on a key transform, which compile on SQLite,
PostgreSQL and MariaDB/MySQL. No index serves it yet: on PostgreSQL a later migration would
add ``GinIndex(fields=["metadata"], opclasses=["jsonb_path_ops"])`` (with ``metadata @>``
containment) for large tables.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any, cast

from django.core.exceptions import ValidationError
from django.db.models import Lookup, Q
from django.db.models.fields.json import KeyTransform

from ..limits import METADATA_MAX_VALUE_CHARS
from ..payloads import json_problem

_JSONNull: Any
try:  # Django 6.1+: JSON null in a key lookup is spelled JSONNull()
    from django.db.models import JSONNull as _JSONNull
except ImportError:  # Django < 6.1: an exact None on a key transform matches JSON null
    _JSONNull = None


def json_null() -> Any:
    """The right-hand side that matches JSON ``null`` in an exact key lookup, on every
    supported Django (``JSONNull()`` from 6.1, ``None`` before)."""
    return _JSONNull() if _JSONNull is not None else None


#: The longest label key: ``metadata`` keys are at most this long (:func:`..payloads.metadata_errors`).
LABEL_MAX_KEY_CHARS = 100
#: The most labels one filter combines.
LABEL_MAX_COUNT = 20
#: Integers beyond this magnitude match as text only (every backend holds them exactly).
_INT_MAX = 2**53

#: A parsed label: ``(key, value)``; value None means "the key is present".
Label = tuple[str, str | None]


def parse_label(text: Any) -> Label:
    """``"team:data"`` → ``("team", "data")``; ``"team"`` → ``("team", None)``;
    ``"team:"`` → ``("team", "")`` (the empty string). Raises ``ValidationError`` (code
    ``invalid_label``, the message naming the rule) for anything else: not a string, an
    empty key, a key holding ``"``, ``\\`` or a control character (SQLite's JSON path
    cannot name it), a key over :data:`LABEL_MAX_KEY_CHARS` or a value over
    ``METADATA_MAX_VALUE_CHARS`` characters (no stored row could match), a NUL character or
    an unpaired surrogate (no backend can compare them)."""
    if not isinstance(text, str):
        raise ValidationError("A label must be text, key or key:value.", code="invalid_label")
    key, sep, value = text.partition(":")
    if not key:
        raise ValidationError(
            f"{text[:40]!r}: a label needs a key before the ':' (key or key:value).",
            code="invalid_label",
        )
    if len(key) > LABEL_MAX_KEY_CHARS:
        raise ValidationError(
            f"A label's key is at most {LABEL_MAX_KEY_CHARS} characters.", code="invalid_label"
        )
    if len(value) > METADATA_MAX_VALUE_CHARS:
        raise ValidationError(
            f"A label's value is at most {METADATA_MAX_VALUE_CHARS} characters.",
            code="invalid_label",
        )
    if any(c in '"\\' or ord(c) < 0x20 for c in key):
        raise ValidationError(
            "A label's key cannot hold a double quote, a backslash or a control character.",
            code="invalid_label",
        )
    problem = json_problem(text)
    if problem:
        raise ValidationError(f"The label {problem}.", code="invalid_label")
    return key, (value if sep else None)


def parse_labels(texts: Iterable[Any]) -> list[Label]:
    """Each of ``texts`` parsed (:func:`parse_label`), at most :data:`LABEL_MAX_COUNT`;
    raises ``ValidationError`` with the first problem."""
    texts = list(texts)
    if len(texts) > LABEL_MAX_COUNT:
        raise ValidationError(f"At most {LABEL_MAX_COUNT} labels.", code="invalid_label")
    return [parse_label(text) for text in texts]


def typed_values(value: str) -> list[Any]:
    """The JSON values the label value ``value`` matches: the string itself, and the number
    or boolean it spells (``"5"`` → ``["5", 5]``, ``"true"`` → ``["true", True]``) or JSON
    null (``"null"`` → ``["null", json_null()]``)."""
    values: list[Any] = [value]
    if value == "null":
        values.append(json_null())
        return values
    if value in ("true", "false"):
        values.append(value == "true")
        return values
    try:
        number = json.loads(value)
    except ValueError:
        return values
    if isinstance(number, bool) or not isinstance(number, int | float):
        return values
    if isinstance(number, int) and abs(number) <= _INT_MAX:
        values.append(number)
    elif isinstance(number, float) and math.isfinite(number):
        values.append(number)
    return values


class ObjectKey(KeyTransform):
    """``metadata -> key`` that always reads ``key`` as an object key, never as an array
    index (Django's ``KeyTransform`` turns ``"5"`` into ``$[5]`` / ``-> 5``). On Django
    6.1 and later; before 6.1 SQLite and MariaDB compile the path without this hook, so
    a key of digits is read as an array index there (documented in docs/api.md). The path
    quotes the key as JSON does (``$."caf\\u00e9"``), as the field stores it: SQLite's path
    compares the stored text and reads no escape, which is why :func:`parse_label` refuses
    a key with ``"``, ``\\`` or a control character."""

    def _get_json_path(self, connection: Any, key_transforms: Any) -> str:
        return "$." + json.dumps(self.key_name)

    def as_postgresql(self, compiler: Any, connection: Any) -> Any:
        lhs, params = compiler.compile(self.lhs)
        return f"({lhs} -> %s)", (*params, self.key_name)


@ObjectKey.register_lookup
class Present(Lookup):
    """``<alias>__present=True``: the object has the key (any value, JSON ``null``
    included), on the JSON column itself: ``?`` on PostgreSQL, ``JSON_TYPE`` on SQLite,
    ``JSON_CONTAINS_PATH`` on MariaDB/MySQL. ``False``: it does not."""

    lookup_name = "present"
    prepare_rhs = False

    def as_sql(self, compiler: Any, connection: Any) -> Any:
        sql, params = self._present(compiler, connection)
        return (sql, params) if self.rhs else (f"NOT {sql}", params)

    def _present(self, compiler: Any, connection: Any) -> tuple[str, tuple[Any, ...]]:
        key_transform = cast(ObjectKey, self.lhs)
        column, params = compiler.compile(key_transform.lhs)
        path = key_transform._get_json_path(connection, None)
        if connection.vendor == "postgresql":
            # ``?`` also finds a string element of an array: only an object has keys.
            sql = f"(jsonb_typeof({column}) = 'object' AND {column} ? %s)"
            return sql, (*params, *params, key_transform.key_name)
        if connection.vendor == "sqlite":
            return f"(JSON_TYPE({column}, %s) IS NOT NULL)", (*params, path)
        return f"(JSON_CONTAINS_PATH({column}, 'one', %s) = 1)", (*params, path)


def labels_filter(
    labels: Iterable[Label], field: str = "metadata", first: int = 0
) -> tuple[dict[str, Any], Q]:
    """All of ``labels`` (parsed) must match: ``(aliases, q)`` for
    ``queryset.alias(**aliases).filter(q)`` (``({}, Q())`` for none). The aliases
    (``_label_<first>``, ``_label_<first + 1>`` ...: pass the number of the queryset's
    annotations so that a second call names new ones) are the key transforms the lookups
    read (not in the SELECT): a lookup on an alias is compiled with the JSON field resolved,
    as ``metadata__key=value`` is."""
    aliases: dict[str, Any] = {}
    q = Q()
    for number, (key, value) in enumerate(labels, start=first):
        alias = f"_label_{number}"
        aliases[alias] = ObjectKey(key, field)
        q &= Q(**{f"{alias}__present": True})
        if value is None:
            continue
        either = Q()
        for candidate in typed_values(value):
            either |= Q(**{alias: candidate})
        q &= either
    return aliases, q
