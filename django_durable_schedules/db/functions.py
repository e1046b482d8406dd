"""Database functions Django does not ship, written once per vendor."""

from __future__ import annotations

from typing import Any

from django.db.models import Func, IntegerField


class JSONArrayLength(Func):
    """The number of elements of a JSON array column, computed by the database (so a list
    page can show a count without loading the array): ``json_array_length`` on SQLite,
    ``jsonb_array_length`` on PostgreSQL, ``JSON_LENGTH`` on MariaDB/MySQL. An integer;
    NULL for a NULL column."""

    function = "JSON_ARRAY_LENGTH"
    output_field = IntegerField()
    arity = 1

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(compiler, connection, function="JSONB_ARRAY_LENGTH", **extra)

    def as_mysql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(compiler, connection, function="JSON_LENGTH", **extra)
