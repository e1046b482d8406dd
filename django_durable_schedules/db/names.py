"""The names of each schedule's exclusion calendars, blackout windows and chain links (the
schedules it runs after and before) inside the query that lists schedules
(a correlated subquery), so a page of the API's list stays one query whatever it holds.

Calendar names are slugs (no comma), joined with commas by the database's own string
aggregate: ``STRING_AGG`` on PostgreSQL, ``GROUP_CONCAT`` on MariaDB/MySQL and SQLite.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Aggregate, CharField, OuterRef, QuerySet, Subquery


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
    queryset: QuerySet[Any], relation: str, target: str, attribute: str
) -> QuerySet[Any]:
    """``queryset`` of schedules annotated with ``attribute``: the names of each row's
    ``relation`` (a many-to-many of ``Schedule``; ``target``: its model's lookup name on
    the link table) joined by commas, in the same statement (None: none)."""
    from ..models import Schedule

    through: Any = getattr(Schedule, relation).through
    names = (
        through.objects.filter(schedule_id=OuterRef("pk"))
        .order_by()
        .values("schedule_id")
        .annotate(names=_JoinNames(f"{target}__name"))
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
    row's exclusion calendars joined by commas (None: none). Read it with
    :func:`calendar_names`."""
    return _annotate_names(queryset, "exclusion_calendars", "exclusioncalendar", "_calendar_names")


def calendar_names(row: Any) -> list[str] | None:
    """The sorted calendar names annotated by :func:`with_calendar_names`, or None when
    ``row`` was not annotated."""
    return _read_names(row, "_calendar_names")


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
