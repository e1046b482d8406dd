"""A whole number of seconds held in a column, as an SQL duration: the deadline arithmetic
(``slot + deadline_seconds``) of the schedules' named predicates, on every supported
database, so that "late" is judged in the statement by the database clock."""

from __future__ import annotations

from typing import Any

from django.db.models import DurationField, Func


class Seconds(Func):
    """``expression`` (an integer count of seconds) as a duration that Django adds to a
    datetime: PostgreSQL ``expression * INTERVAL '1 second'``; SQLite and MariaDB/MySQL,
    which store durations as microseconds, ``expression * 1000000``. Pure SQL; the
    caller bounds the count (a schedule's ``deadline_seconds`` is at least 1 by a
    constraint)."""

    output_field = DurationField()
    template = "(%(expressions)s * 1000000)"
    arity = 1

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(
            compiler, connection, template="(%(expressions)s * INTERVAL '1 second')", **extra
        )
