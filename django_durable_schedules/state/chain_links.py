"""A schedule's links to the schedules it runs after (``Schedule.upstream``, issue #30 item
1), as the definition's faces write them (the API and the command by name, the admin and
code by row): :func:`resolve_upstreams` turns what a caller gives into rows,
:func:`check_links` checks the graph an edit would leave (read from the database, only the
part it needs) with the pure rules of :mod:`.chain_rules`, and :func:`write_links` writes
them. :func:`.definitions.create_schedule` and :func:`.definitions.update_schedule` call
these inside their transaction, the downstream row locked (a new row: not yet visible);
:func:`.candidates.prepare` calls them too, so a form shows the messages on its field.

The rules (docs/concepts.md, *Chaining*): a schedule of kind ``after`` runs after one or
more upstream schedules; any other kind runs after none. No self link, no manual upstream,
no cycle, and every upstream of a schedule (its own grid, or an ``after`` upstream's
roots') on one grid. An edit of a schedule that others run after is refused when its new
grid (or kind, or for an ``after`` one its new upstreams) would leave one of them (the
whole closure downstream) with upstreams on different grids or a manual upstream; a
downstream whose only root changes grid follows it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from django.core.exceptions import ValidationError

from ..exceptions import validation_text
from ..models import DEFINITION_FIELDS, Kind, Schedule
from ..models.chains import ScheduleLink
from .chain_rules import UPSTREAM_FIELD, grid_of, link_problems
from .chains import relink_slots

logger = logging.getLogger(__name__)

FIELD = UPSTREAM_FIELD
#: The refusal of upstreams on a schedule of another kind.
ONLY_AFTER = "only a schedule of kind 'after' runs after others"
#: The columns :func:`.chain_rules.grid_of` reads (``anchor`` is ``start_at`` or
#: ``created_at``), and the name the messages give.
GRID_COLUMNS = (
    "id",
    "name",
    "kind",
    "interval_seconds",
    "cron",
    "rrule",
    "extra_specs",
    "timezone",
    "run_at",
    "start_at",
    "created_at",
)


def resolve_upstreams(values: Iterable[Any], using: str = "default") -> list[Schedule]:
    """The schedules named by ``values`` (names, primary keys or ``Schedule`` instances,
    read again with :data:`GRID_COLUMNS`), each once, in name order; one query for the
    names and one for the keys and instances given. Raises
    ``ValidationError`` (``upstream``) for a name no schedule has."""
    values = list(values)
    names = [v for v in values if isinstance(v, str)]
    pks = [v.pk if isinstance(v, Schedule) else v for v in values if not isinstance(v, str)]
    if not all(isinstance(pk, uuid.UUID) for pk in pks):
        raise ValidationError({FIELD: ["Give upstream schedules by name."]})
    rows = Schedule.objects.using(using).only(*GRID_COLUMNS)  # instances read again: whole
    found = list(rows.filter(name__in=names)) if names else []
    found += list(rows.filter(pk__in=pks)) if pks else []
    missing = sorted(set(names) - {s.name for s in found})
    missing += sorted(str(pk) for pk in set(pks) - {s.pk for s in found})
    if missing:
        listed = ", ".join(repr(m) for m in missing)
        raise ValidationError({FIELD: [f"No schedule named {listed}."]})
    return sorted({s.pk: s for s in found}.values(), key=lambda s: s.name)


def current_upstreams(row: Schedule, using: str) -> list[Schedule]:
    """The schedules ``row`` runs after now, in name order (one query)."""
    return list(row.upstream.using(using).only(*GRID_COLUMNS).order_by("name"))


def check_links(
    candidate: Schedule,
    before: Schedule | None,
    given: Sequence[Schedule] | None,
    using: str = "default",
) -> None:
    """Check the links ``candidate`` (a create's row, or an edit's copy of ``before``, the
    row as stored) would have: ``given`` its upstreams (None: not edited, the row's own).
    Reads nothing for an edit that changes no kind, grid or upstream; else the upstreams'
    ancestors (a query a level) and, for an edit, the schedules downstream of it (a query
    a level). Raises ``ValidationError`` with messages on ``upstream`` (a kind other than
    ``after`` with upstreams, :func:`.chain_rules.link_problems`), or, when the edit would
    leave a schedule downstream of it with upstreams it cannot follow, on ``kind`` or the
    first definition field it changes."""
    creating = before is None
    kind_changed = before is not None and before.kind != candidate.kind
    regridded = before is not None and grid_of(before) != grid_of(candidate)
    after = candidate.kind == Kind.AFTER
    ups: list[Schedule] | None = list(given) if given is not None else None
    if ups is None and before is None:
        ups = []  # a create naming none
    elif ups is None and before is not None and kind_changed:
        held = Kind.AFTER in (before.kind, candidate.kind)  # else no kind that holds links
        ups = current_upstreams(before, using) if held else []
    if ups and not after:
        hint = "" if given is not None else ": remove its upstream schedules"
        raise ValidationError({FIELD: [ONLY_AFTER + hint]})
    own = after and ups is not None
    downstream = not creating and (regridded or kind_changed or (after and given is not None))
    if not own and not downstream:
        return
    if ups is None:
        ups = current_upstreams(before, using) if after and before is not None else []
    below = _closure_below(candidate.pk, using) if downstream else []
    upstreams_of, rows = _ancestry([*ups, *below], using)
    rows[candidate.pk] = candidate
    upstreams_of[candidate.pk] = [u.pk for u in ups]
    grids = {pk: grid_of(r) for pk, r in rows.items()}
    kinds = {pk: str(r.kind) for pk, r in rows.items()}
    names = {pk: r.name for pk, r in rows.items()}
    if own:
        problems = link_problems(
            candidate.pk, upstreams_of[candidate.pk], upstreams_of, grids, kinds, names
        )
        if problems:
            raise ValidationError({FIELD: problems})
    found: list[str] = []
    for pk in (r.pk for r in below):
        for message in link_problems(
            pk, upstreams_of.get(pk, []), upstreams_of, grids, kinds, names
        ):
            text = f"{names[pk]!r} runs after this schedule: {message}"
            if text not in found:
                found.append(text)
    if found:
        raise ValidationError({_changed_field(candidate, before, given): found})


def write_links(row: Schedule, upstreams: Sequence[Schedule], using: str) -> None:
    """Make ``row`` (locked, or new) run after exactly ``upstreams`` (checked by
    :func:`check_links`): the links it no longer has deleted, the new ones inserted. Its
    open chain slots follow (:func:`.chains.relink_slots`): with no upstream left they are
    deleted (nothing is waited for), a waiting one every remaining upstream succeeded for
    is ready."""
    row.upstream.set(upstreams, through_defaults={})
    if row.pk is not None:
        relink_slots(row.pk, [str(u.pk) for u in upstreams], using)


def link_change(
    row: Schedule,
    given: Sequence[Schedule] | None,
    before: dict[str, Any],
    after: dict[str, Any],
    using: str,
) -> None:
    """An edit's ``upstream`` (``given``: the schedules named, in name order; None: not
    edited): ``before["upstream"]``/``after["upstream"]`` set to the sorted names when they
    differ from the links ``row`` has (one query when given)."""
    if given is None:
        return
    old = [u.name for u in current_upstreams(row, using)]
    new = sorted(u.name for u in given)
    if new != old:
        before[FIELD], after[FIELD] = old, new


def declared_links(
    row: Schedule, old: Schedule | None, names: Sequence[str], using: str
) -> tuple[bool, list[Schedule] | None]:
    """The links of a schedule declared in code, ``row`` with its declaration's definition
    (``old``: as stored, None for a create; ``names``: its ``register(after=)``, empty for
    another kind), checked (:func:`check_links`). Returns ``(True, upstreams)``: the rows
    to link it to, in name order (``[]`` for a stored ``after`` row declared another kind
    now: its links go; None: left as they are), or ``(False, None)`` when a name no
    schedule has or the graph check refuses it: the error is logged, naming the schedule
    and why, and the caller (:func:`.declared.sync_declared`) skips that declaration."""
    try:
        given: list[Schedule] | None = None
        if names:
            given = resolve_upstreams(names, using)
            held = [] if old is None else current_upstreams(old, using)
            if (
                old is not None
                and old.kind == Kind.AFTER
                and [u.pk for u in held] == [u.pk for u in given]
            ):
                given = None  # unchanged: not edited (no check of its own graph)
        elif old is not None and old.kind == Kind.AFTER:
            given = []
        check_links(row, old, given, using)
    except ValidationError as exc:
        logger.error(
            "the schedule declared in code for %r was not synced: %s",
            row.name,
            validation_text(exc),
            extra={"schedule": row.name},
        )
        return False, None
    return True, given


def _changed_field(candidate: Schedule, before: Schedule | None, given: Any) -> str:
    """The field a refusal for the schedules downstream is reported on: ``upstream`` when
    it was edited, else ``kind`` or the first definition field the edit changes."""
    if given is not None or before is None:
        return FIELD
    for name in DEFINITION_FIELDS:
        if getattr(before, name) != getattr(candidate, name):
            return name
    return FIELD


def _closure_below(pk: Any, using: str) -> list[Schedule]:
    """Every schedule downstream of ``pk`` (transitively, each once, ``pk`` left out): one
    query a level, the rows with :data:`GRID_COLUMNS`."""
    seen: dict[Any, Schedule] = {}
    frontier = {pk}
    while frontier:
        links = (
            ScheduleLink.objects.using(using)
            .filter(upstream_id__in=frontier)
            .exclude(downstream_id__in=[pk, *seen])
            .select_related("downstream")
            .only(*(f"downstream__{c}" for c in GRID_COLUMNS), "upstream_id")
        )
        fresh = {link.downstream_id: link.downstream for link in links}
        seen.update(fresh)
        frontier = set(fresh)
    return list(seen.values())


def _ancestry(
    starts: Sequence[Schedule], using: str
) -> tuple[dict[Any, list[Any]], dict[Any, Schedule]]:
    """The graph above ``starts``: ``upstreams_of`` (each schedule read -> its upstreams'
    keys) and the rows (:data:`GRID_COLUMNS`) of ``starts`` and every schedule upstream of
    them, read level by level through the links (one query a level)."""
    rows: dict[Any, Schedule] = {s.pk: s for s in starts}
    upstreams_of: dict[Any, list[Any]] = {}
    frontier = set(rows)
    while frontier:
        links = (
            ScheduleLink.objects.using(using)
            .filter(downstream_id__in=frontier)
            .select_related("upstream")
            .only(*(f"upstream__{c}" for c in GRID_COLUMNS), "downstream_id")
        )
        for pk in frontier:
            upstreams_of.setdefault(pk, [])
        fresh: set[Any] = set()
        for link in links:
            upstreams_of[link.downstream_id].append(link.upstream_id)
            if link.upstream_id not in rows:
                rows[link.upstream_id] = link.upstream
                fresh.add(link.upstream_id)
        frontier = fresh
    return upstreams_of, rows
