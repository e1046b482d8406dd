"""Definitions: create and edit schedules (the API, the admin, the importers and the
other state functions call these), and the write transaction the admin's pages validate in.

The schedules declared in code are synced by :mod:`.declared`; schedules degraded for a
missing callback are recovered by :mod:`.callback_recovery`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import IntegrityError, transaction

from ..db.clock import resolve_now
from ..db.locks import get_locked, lock_for_write
from ..models import EventAction, Schedule, Status
from .calendars import (
    record_excluded_to_end,
    replan,
    share_exclusions,
)
from .candidates import Prepared, check_editable, explain_refusal, prepare
from .chain_links import check_links, link_change, write_links
from .events import as_changes, record_event
from .transitions import implements


def _current(row: Schedule, name: str) -> Any:
    return row.owner_id if name == "owner" else getattr(row, name)  # no query for the owner


def _differs(row: Schedule, name: str, value: Any) -> bool:
    if name == "owner":
        return bool(row.owner_id != getattr(value, "pk", value))
    return bool(getattr(row, name) != value)


def validate_schedule(row: Schedule) -> None:
    """``row.full_clean()``, except that the database constraints (a safety net under
    :meth:`Schedule.clean`, with less helpful messages) are checked only once every field
    is valid. Raises ``ValidationError`` with field messages."""
    row.full_clean(validate_constraints=False)
    row.validate_constraints()


def _save_or_explain(row: Schedule, using: str, **kwargs: Any) -> None:
    """``row.save()`` in a savepoint; if the database refuses it (a name taken since the
    candidate was validated, a ``CHECK``: constraints are not probed before the write),
    raise the field messages the constraint probes give (:func:`.candidates.explain_refusal`)."""
    try:
        with transaction.atomic(using=using):
            row.save(using=using, **kwargs)
    except IntegrityError:
        explain_refusal(row)
        raise


@implements("control.create")
def create_schedule(
    prepared: Prepared | None = None,
    *,
    actor: Any = None,
    source: str = "code",
    paused: bool = False,
    using: str = "default",
    extra_changes: dict[str, Any] | None = None,
    **fields: Any,
) -> Schedule:
    """Insert a schedule; ``save()`` plans its first slot. Records a ``created`` event
    (``actor``: a user or None; ``source``: api, admin, command, code, import). ``paused``:
    insert it paused (no next run until enabled) in the same transaction, so no worker can
    run it in between (an import of a disabled source). ``extra_changes``: more entries
    for the ``created`` event's changes (a duplicate's ``duplicated_from``).

    ``prepared``: a create built and validated by :func:`.candidates.prepare` (the API and
    the admin), applied without validating again; else ``fields`` (:data:`EDITABLE_FIELDS`)
    are prepared here. One database clock read (the row's ``created_at``, its first slot
    and the event's instant). Raises ``ValidationError`` (field messages) for an invalid
    definition or a name taken, and ``ValueError`` for a field that is not editable.
    """
    if prepared is None:
        prepared = prepare(fields, using=using)
    elif fields:
        raise TypeError("give a prepared create or fields, not both")
    if prepared.schedule_id is not None:
        raise ValueError("the prepared definition is an edit: use update_schedule")
    row = prepared.row
    changes = dict(prepared.fields)
    if paused:
        row.status = Status.PAUSED
        changes["status"] = Status.PAUSED
    with transaction.atomic(using=using):
        lock_for_write(using)  # SQLite: hold the write lock from the start (insert, event)
        check_links(row, None, prepared.upstream, using)  # the graph as this transaction sees it
        now = resolve_now(None, using)
        _save_or_explain(row, using, force_insert=True, now=now, audit=False)
        if prepared.upstream:
            write_links(row, prepared.upstream, using)
            changes["upstream"] = sorted(u.name for u in prepared.upstream)
        if prepared.calendars:
            row.exclusion_calendars.set(prepared.calendars)
            changes["exclusion_calendars"] = [c.name for c in prepared.calendars]
        if prepared.windows:
            row.blackout_windows.set(prepared.windows)
            changes["blackout_windows"] = [w.name for w in prepared.windows]
        record_event(
            row,
            EventAction.CREATED,
            now=now,
            actor=actor,
            source=source,
            changes={**as_changes({}, changes), **(extra_changes or {})},
            using=using,
        )
    return row


@implements("control.edit", "control.calendars")
def update_schedule(
    schedule_id: Any,
    *,
    actor: Any = None,
    source: str = "code",
    using: str = "default",
    extra_changes: dict[str, Any] | None = None,
    **changes: Any,
) -> Schedule:
    """Apply ``changes`` (:data:`EDITABLE_FIELDS`) to the locked row, validated, and write
    only those columns. A definition change re-plans ``next_run_at`` from now. Records an
    ``edited`` event with ``{field: [old, new]}`` when something changed (and
    ``extra_changes``' entries: a restore's ``restored_from``). One database clock read
    when something changed, none otherwise.

    ``schedule_id`` may be an edit built and validated by :func:`.candidates.prepare` (the
    API and the admin; no ``changes`` then): it is applied without validating again,
    unless the row's editable columns changed since (an edit committed in between), when
    it is validated again against the locked row.

    Raises ``Schedule.DoesNotExist``, ``ValidationError`` (field messages) or ``ValueError``
    for a field that is not editable.
    """
    pk, prepared = _edit_of(schedule_id, changes)
    with transaction.atomic(using=using):
        row = get_locked(pk, using)
        prepared = _prepared_against(row, prepared, changes, using)
        candidate = prepared.row
        check_links(candidate, row, prepared.upstream, using)  # the graph under the row's lock
        changed = [n for n, value in prepared.fields.items() if _differs(row, n, value)]
        before = {name: _current(row, name) for name in changed}
        after = {name: prepared.fields[name] for name in changed}
        for name in changed:
            attname = "owner_id" if name == "owner" else name  # no query for the owner
            setattr(row, attname, getattr(candidate, attname))  # the cleaned value
        share_exclusions(row, candidate)  # the plans below see the calendars validated
        cals = prepared.calendars
        _relation_change(row.exclusion_calendars, cals, "exclusion_calendars", before, after)
        _relation_change(row.blackout_windows, prepared.windows, "blackout_windows", before, after)
        link_change(row, prepared.upstream, before, after, using)
        now = resolve_now(None, using) if after else None  # the edit's one clock read
        if after:  # a relation alone changed too: ``updated_at`` says when it was edited
            _save_or_explain(row, using, update_fields=[*changed, "updated_at"], now=now)
        _write_relations(row, prepared, after, using)
        if now is not None and "exclusion_calendars" in after:
            row.exclusion_calendars.set(cals or [])
            if replan(row, now):
                row.save(using=using, update_fields=["next_run_at", "status"])
        if now is not None:  # an edit that left no slot to run: the rest of the grid is counted
            record_excluded_to_end(row, now, using)
            record_event(
                row,
                EventAction.EDITED,
                now=now,
                actor=actor,
                source=source,
                changes={**as_changes(before, after), **(extra_changes or {})},
                using=using,
            )
    return row


def _write_relations(row: Schedule, prepared: Any, after: dict[str, Any], using: str) -> None:
    """An edit's upstream links and blackout windows, written when they changed (neither
    re-plans: the chain has no grid of its own, the claim reads the windows)."""
    if "upstream" in after:
        write_links(row, prepared.upstream or (), using)
    if "blackout_windows" in after:
        row.blackout_windows.set(prepared.windows or [])
        row.forget_blackouts()


def _relation_change(
    manager: Any, given: Any, name: str, before: dict[str, Any], after: dict[str, Any]
) -> None:
    """A many-to-many field of an edit (``given``: the objects named, in name order; None:
    not edited): ``before[name]``/``after[name]`` set to the names when they differ from
    those ``manager`` (the row's relation) holds."""
    if given is None:
        return
    old = [o.name for o in manager.all()]
    if [o.name for o in given] != old:
        before[name], after[name] = old, [o.name for o in given]


def _edit_of(schedule_id: Any, changes: dict[str, Any]) -> tuple[Any, Prepared | None]:
    """The id of the row :func:`update_schedule` edits and its prepared edit, if given.
    Raises ``TypeError`` for both a prepared edit and changes, ``ValueError`` for a
    prepared create or a field that is not editable."""
    prepared = schedule_id if isinstance(schedule_id, Prepared) else None
    if prepared is not None and changes:
        raise TypeError("give a prepared edit or changes, not both")
    if prepared is None:
        check_editable(changes)
        return schedule_id, None
    if prepared.schedule_id is None:
        raise ValueError("the prepared definition is a create: use create_schedule")
    return prepared.schedule_id, prepared


def _prepared_against(
    row: Schedule, prepared: Prepared | None, changes: dict[str, Any], using: str
) -> Prepared:
    """``prepared`` when the locked ``row`` did not change since it was prepared, else the
    edit (``prepared``'s fields, or ``changes``) prepared again against ``row``."""
    if prepared is not None and prepared.unchanged_since(row):
        return prepared
    given = dict(prepared.fields) if prepared is not None else changes
    if prepared is not None and prepared.calendars is not None:
        given["exclusion_calendars"] = prepared.calendars
    if prepared is not None and prepared.windows is not None:
        given["blackout_windows"] = prepared.windows
    if prepared is not None and prepared.upstream is not None:
        given["upstream"] = prepared.upstream
    return prepare(given, row, using=using)


@contextmanager
def write_transaction(using: str = "default") -> Iterator[None]:
    """A transaction that holds the database write lock from its first statement, for a
    caller that reads and validates before it calls a state function in the same
    transaction (the admin's add, change and delete pages, which Django runs in one
    ``atomic``). On SQLite a transaction that has read cannot wait for the write lock: the
    upgrade fails at once with "database is locked" when another writer holds it; taking
    the lock first waits for it instead (``OPTIONS["timeout"]``). Elsewhere it is a plain
    ``transaction.atomic``."""
    with transaction.atomic(using=using):
        lock_for_write(using)
        yield
