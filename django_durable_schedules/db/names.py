"""The names of each schedule's exclusion calendars (and their weekend days), blackout
windows and chain links (the schedules it runs after and before) inside the query that
lists schedules (correlated subqueries), so a page of the API's list stays one query
whatever it holds.

Calendar names are slugs (no comma), joined with commas by the database's own string
aggregate: ``STRING_AGG`` on PostgreSQL, ``GROUP_CONCAT`` on MariaDB/MySQL and SQLite.
The calendars' ``weekend_days`` (JSON) are joined the same way, as their JSON texts: in
brackets they read as one JSON list of the calendars' values.
"""

from __future__ import annotations

import json
from typing import Any

from django.db.models import Aggregate, CharField, OuterRef, QuerySet, Subquery, TextField
from django.db.models.functions import Cast


class _JoinNames(Aggregate):
    function = "GROUP_CONCAT"
    template = "%(function)s(%(expressions)s)"
    output_field = CharField()

    def as_postgresql(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(
            compiler,
            connection,
            function="STRING_AGG",
            template="%(function)s(%(expressions)s, ',')",
        )


def _annotate_names(
    queryset: QuerySet[Any], relation: str, target: str, attribute: str, column: str = "name"
) -> QuerySet[Any]:
    """``queryset`` of schedules annotated with ``attribute``: the ``column`` (as text) of
    each row's ``relation`` (a many-to-many of ``Schedule``; ``target``: its model's lookup
    name on the link table) joined by commas, in the same statement (None: none)."""
    from ..models import Schedule

    through: Any = getattr(Schedule, relation).through
    value: Any = f"{target}__{column}"
    if column != "name":  # a JSON column: its text
        value = Cast(value, TextField())
    names = (
        through.objects.filter(schedule_id=OuterRef("pk"))
        .order_by()
        .values("schedule_id")
        .annotate(names=_JoinNames(value))
        .values("names")
    )
    annotated: QuerySet[Any] = queryset.annotate(
        **{attribute: Subquery(names, output_field=CharField())}
    )
    return annotated


def _read_names(row: Any, attribute: str) -> list[str] | None:
    """The sorted names :func:`_annotate_names` put in ``attribute``, or None when ``row``
    was not annotated."""
    if attribute not in row.__dict__:
        return None
    joined = row.__dict__[attribute] or ""
    return sorted(n for n in joined.split(",") if n)


def with_calendar_names(queryset: QuerySet[Any]) -> QuerySet[Any]:
    """``queryset`` of schedules annotated with ``_calendar_names``: the names of each
    row's exclusion calendars joined by commas (None: none), and ``_calendar_weekends``:
    their ``weekend_days`` as JSON texts joined by commas. Read them with
    :func:`calendar_names` and :func:`calendar_weekends`."""
    named = _annotate_names(queryset, "exclusion_calendars", "exclusioncalendar", "_calendar_names")
    return _annotate_names(
        named, "exclusion_calendars", "exclusioncalendar", "_calendar_weekends", "weekend_days"
    )


def calendar_names(row: Any) -> list[str] | None:
    """The sorted calendar names annotated by :func:`with_calendar_names`, or None when
    ``row`` was not annotated."""
    return _read_names(row, "_calendar_names")


def calendar_weekends(row: Any) -> list[Any] | None:
    """The ``weekend_days`` values (as stored: normally lists of ISO weekday numbers) of
    ``row``'s exclusion calendars, one per calendar, from what :func:`with_calendar_names`
    annotated or :func:`read_calendar_links` read; ``[]`` for no calendar; None when the
    row holds neither or the joined text is no JSON (a value written behind ``save()``)."""
    if "_calendar_weekends" not in row.__dict__:
        return None
    joined = row.__dict__["_calendar_weekends"] or ""
    try:
        values = json.loads(f"[{joined}]")
    except ValueError:
        return None
    return values if isinstance(values, list) else None


def read_calendar_links(row: Any) -> None:
    """Read the names and ``weekend_days`` of a saved ``row``'s exclusion calendars in
    one query and keep them on the row as :func:`with_calendar_names` would have (so
    :func:`calendar_names` and :func:`calendar_weekends` read them)."""
    links = sorted(row.exclusion_calendars.values_list("name", "weekend_days"))
    row.__dict__["_calendar_names"] = ",".join(name for name, _ in links) or None
    texts = [json.dumps(days) for _, days in links]
    row.__dict__["_calendar_weekends"] = ",".join(texts) or None


def with_window_names(queryset: QuerySet[Any]) -> QuerySet[Any]:
    """``queryset`` of schedules annotated with ``_window_names``: the names of each row's
    blackout windows joined by commas (None: none). Read it with :func:`window_names`."""
    return _annotate_names(queryset, "blackout_windows", "blackoutwindow", "_window_names")


def window_names(row: Any) -> list[str] | None:
    """The sorted window names annotated by :func:`with_window_names`, or None when
    ``row`` was not annotated."""
    return _read_names(row, "_window_names")


def with_link_names(queryset: QuerySet[Any], owner: Any = None) -> QuerySet[Any]:
    """``queryset`` of schedules annotated with ``_upstream_names`` and
    ``_downstream_names``: the names of the schedules each row runs after and of those
    that run after it (chaining), joined by commas (None: none), in the same statement.
    ``owner``: only the schedules of that user are named (an owner-scoped user's view).
    Read them with :func:`link_names`."""
    from ..models import ScheduleLink

    def names(this: str, other: str) -> Subquery:
        links = ScheduleLink.objects.filter(**{f"{this}_id": OuterRef("pk")})
        if owner is not None:
            links = links.filter(**{f"{other}__owner": owner})
        joined = (
            links.order_by()
            .values(f"{this}_id")
            .annotate(names=_JoinNames(f"{other}__name"))
            .values("names")
        )
        return Subquery(joined, output_field=CharField())

    annotated: QuerySet[Any] = queryset.annotate(
        _upstream_names=names("downstream", "upstream"),
        _downstream_names=names("upstream", "downstream"),
    )
    return annotated


def link_names(row: Any, direction: str) -> list[str] | None:
    """The sorted names :func:`with_link_names` annotated (``direction``: ``upstream`` or
    ``downstream``), or None when ``row`` was not annotated."""
    return _read_names(row, f"_{direction}_names")
