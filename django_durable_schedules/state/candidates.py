"""A definition prepared once: :func:`prepare` builds the candidate row of a create or an
edit, validates it in one pass and applies the owner policy; :func:`.definitions.create_schedule`
and :func:`.definitions.update_schedule` apply the :class:`Prepared` value it returns.

One pass means: the model's field validation and ``Schedule.clean()`` (the definition's
rules, :mod:`..timing`), run once. The database constraints are not probed in Python where
the database enforces them at the write (the name's uniqueness, the ``CHECK`` constraints):
the write itself is the check, and a refusal (``IntegrityError``) is explained with the
same field messages by :func:`explain_refusal`, which probes only then.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from django.core.exceptions import ValidationError
from django.db import connections
from django.db.models import UniqueConstraint

from ..db.names import calendar_names
from ..models import EDITABLE_FIELDS, BlackoutWindow, ExclusionCalendar, Kind, Schedule
from ..registry import registry
from .blackouts import resolve_windows
from .calendars import attach_calendars, resolve_calendars
from .chain_links import check_links, resolve_upstreams

# EDITABLE_FIELDS: the fields a caller may set through :func:`.definitions.create_schedule`
# / :func:`.definitions.update_schedule` (``state.EDITABLE_FIELDS``), declared once, in
# groups, in :mod:`..models.choices` (the admin's form and the API's fields use them too).
#: The editable columns (``exclusion_calendars``, ``blackout_windows`` and ``upstream`` are
#: relations), by attribute name.
_COLUMNS = tuple(f.attname for f in Schedule._meta.concrete_fields if f.name in EDITABLE_FIELDS)

#: The fields of the unique constraints (the name), and the others.
_UNIQUE = frozenset(
    name for c in Schedule._meta.constraints if isinstance(c, UniqueConstraint) for name in c.fields
)
_NOT_UNIQUE = frozenset(f.name for f in Schedule._meta.concrete_fields) - _UNIQUE


@dataclass(frozen=True)
class Prepared:
    """A create or an edit, built and validated by :func:`prepare`; apply it once.

    ``row``: the candidate (unsaved; for an edit, a copy of the row with the changes), its
    values cleaned and its calendars attached. ``fields``: the editable fields of the
    request as given (for an edit, the changes; the owner policy's ``owner`` included),
    without ``exclusion_calendars`` and ``blackout_windows``. ``calendars``: the calendars resolved, in name order,
    or ``None`` when the request names none (an edit keeps the row's). ``schedule_id``:
    the row edited (``None`` for a create). ``base``: the edited row's editable columns the
    candidate was built from; :func:`.definitions.update_schedule` validates again only
    when the locked row no longer has them (an edit committed in between)."""

    row: Schedule
    fields: Mapping[str, Any]
    calendars: tuple[ExclusionCalendar, ...] | None
    schedule_id: Any = None
    base: Mapping[str, Any] | None = None
    #: The blackout windows resolved, in name order; None: the request names none.
    windows: tuple[BlackoutWindow, ...] | None = None
    #: The schedules it runs after (``upstream``), resolved, in name order; None: the
    #: request names none (an edit keeps the row's).
    upstream: tuple[Schedule, ...] | None = None

    def unchanged_since(self, row: Schedule) -> bool:
        """Whether ``row`` (the edited row, read again under its lock) still has the
        editable columns this edit was validated against."""
        return self.base is not None and self.base == editable_columns(row)


def check_editable(fields: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` naming the fields of ``fields`` that are not editable."""
    unknown = set(fields) - EDITABLE_FIELDS
    if unknown:
        raise ValueError(f"not editable: {', '.join(sorted(unknown))}")


def editable_columns(row: Schedule) -> dict[str, Any]:
    """``row``'s editable columns by attribute name (``owner_id``, not ``owner``)."""
    return {name: getattr(row, name) for name in _COLUMNS}


def prepare(
    fields: Mapping[str, Any],
    instance: Schedule | None = None,
    *,
    owner: Any = None,
    using: str | None = None,
    exclude: Collection[str] = (),
) -> Prepared:
    """Build the candidate of a create (``instance`` None) or of an edit of ``instance``
    with ``fields`` (:data:`EDITABLE_FIELDS`; ``exclusion_calendars``, ``blackout_windows``
    and ``upstream`` by name, primary key or instance), and validate it once: field
    validation and ``Schedule.clean()``, with the calendars it would have (resolved once),
    and the links it would have (:func:`.chain_links.check_links`, again under the row's
    lock when it is applied). Reads no clock (``clean()`` previews slots by
    the host's clock) and runs no constraint probe where the database enforces the
    constraint at the write (:func:`validate_once`).

    ``exclude``: fields not validated, as ``full_clean(exclude=)`` (a form's fields that
    failed its own checks or that it does not show). ``owner``: the user an owner-scoped request acts for (the API with
    ``API_OWNER_SCOPED``): a new schedule is theirs, and the owner policy applies
    (:func:`owner_limits`). ``None``: full access (admin, code, staff).

    Queries: one per calendar named (its dates); for an edit that names none, the row's
    calendars (none when the row was read with the API's calendar names and has none);
    for upstreams named or a grid changed, those :func:`.chain_links.check_links` reads.
    Raises ``ValidationError`` (field messages) or ``ValueError`` (a field not editable).
    """
    check_editable(fields)
    given = dict(fields)
    named = given.pop("exclusion_calendars", None)
    named_windows = given.pop("blackout_windows", None)
    named_upstream = given.pop("upstream", None)
    if owner is not None and instance is None:
        given["owner"] = owner
    using = using or (instance._state.db if instance is not None else None) or "default"
    calendars = tuple(resolve_calendars(named, using)) if named is not None else None
    windows = None if named_windows is None else tuple(resolve_windows(named_windows, using))
    upstream = None if named_upstream is None else tuple(resolve_upstreams(named_upstream, using))
    row = Schedule(**given) if instance is None else _edited_copy(instance, given)
    if calendars is not None:
        attach_calendars(row, calendars)
    elif instance is not None:
        attach_calendars(row, _calendars_of(instance))
    validate_once(row, using, exclude)
    if "upstream" not in exclude and "kind" not in exclude:
        check_links(row, instance, upstream, using)
    if owner is not None:
        owner_limits(row)
    return Prepared(
        row=row,
        fields=MappingProxyType(given),
        calendars=calendars,
        schedule_id=instance.pk if instance is not None else None,
        base=MappingProxyType(editable_columns(instance)) if instance is not None else None,
        windows=windows,
        upstream=upstream,
    )


def _edited_copy(instance: Schedule, changes: Mapping[str, Any]) -> Schedule:
    """An unsaved copy of ``instance`` (every column, not the relations) with ``changes``."""
    row = Schedule(
        **{f.attname: getattr(instance, f.attname) for f in Schedule._meta.concrete_fields}
    )
    row._state.adding = False
    row._state.db = instance._state.db
    for name, value in changes.items():
        setattr(row, name, value)
    return row


def _calendars_of(instance: Schedule) -> Sequence[ExclusionCalendar]:
    """The calendars ``instance`` links: none without a query when it was read with the
    API's calendar names (:func:`..db.names.calendar_names`) and links none."""
    if calendar_names(instance) == []:
        return ()
    return list(instance.exclusion_calendars.all())


def validate_once(row: Schedule, using: str = "default", exclude: Collection[str] = ()) -> None:
    """Field validation and ``row.clean()``; the ``CHECK`` constraints only where the
    database does not enforce them at the write (``supports_table_check_constraints``),
    the uniqueness probes never (the write enforces them: :func:`explain_refusal`).
    Raises ``ValidationError`` with field messages."""
    row.full_clean(exclude=exclude or None, validate_unique=False, validate_constraints=False)
    if not connections[using].features.supports_table_check_constraints:
        row.validate_constraints(exclude={*exclude, *_UNIQUE})  # the CHECKs only


def probe_unique(row: Schedule, exclude: Collection[str] = ()) -> None:
    """The uniqueness probes alone (the name: one query), for a face that must report a
    name taken before the write, as the admin's form does (a refusal at its save could not
    be shown on the form). Raises ``ValidationError`` (the message of ``full_clean()``)."""
    row.validate_constraints(exclude={*exclude, *_NOT_UNIQUE})


def explain_refusal(row: Schedule) -> None:
    """After the database refused to write ``row`` (an ``IntegrityError``, its savepoint
    rolled back): raise the ``ValidationError`` the constraint probes give (a name taken
    in between, a ``CHECK``), the messages of ``full_clean()``, whatever the database's
    own error text. Returns when no probe explains it (the caller re-raises)."""
    row.validate_unique()
    row.validate_constraints()


def _short(value: Any, limit: int = 100) -> str:
    """``repr`` of the first ``limit`` characters of ``value`` (safe to echo in an error)."""
    text = value if isinstance(value, str) else str(value)
    return repr(text[:limit]) + ("..." if len(text) > limit else "")


def owner_limits(row: Schedule) -> None:
    """The owner policy: an owner-scoped user may schedule only a callback registered with
    ``owner_scoped=True``, with no two runs closer than its ``owner_min_interval`` (an
    interval's length; for cron and rrule, the closest two of its next 100 fire times).
    Raises ``ValidationError`` (``callback``, or the field that sets the gap)."""
    if row.callback not in registry.owner_scoped_names():
        raise ValidationError({"callback": [f"{_short(row.callback)} is not open to you."]})
    least = registry.get(row.callback).owner_min_interval
    gap: float | None = None
    field = {"interval": "interval_seconds", "rrule": "rrule"}.get(row.kind, "cron")
    if row.kind == Kind.INTERVAL:
        gap = row.interval_seconds
    elif row.kind in (Kind.CRON, Kind.RRULE):
        times = row.upcoming(100)
        gaps = [(b - a).total_seconds() for a, b in zip(times, times[1:], strict=False)]
        gap = min(gaps) if gaps else None
    if gap is not None and gap < least:
        raise ValidationError(
            {
                field: [
                    f"Runs {gap:g} seconds apart; {row.callback} may run at most "
                    f"every {least} seconds for you."
                ]
            }
        )
