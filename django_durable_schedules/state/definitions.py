"""Definitions: create and edit schedules (the API, the admin and the importers call
these), sync the schedules declared in code, and recover degraded ones.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.db import IntegrityError, transaction

from .. import timing
from ..db.clock import resolve_now
from ..db.locks import get_locked, lock_for_write, locked
from ..declarations import sync_order
from ..exceptions import StateConflict, validation_text
from ..models import DegradedKind, EventAction, Schedule, Status
from ..registry import registry
from .bounds import describe_problem
from .calendars import (
    record_excluded_to_end,
    replan,
    share_exclusions,
)
from .candidates import Prepared, check_editable, explain_refusal, prepare
from .chain_links import check_links, declared_links, link_change, write_links
from .enabling import enable
from .events import as_changes, record_event
from .group_defs import UnknownGroup, declared_group
from .machine import clear_trigger
from .transitions import implements

logger = logging.getLogger(__name__)


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


# ---------------------------------------------------------------------------------------
# Code-declared schedules and degraded recovery
# ---------------------------------------------------------------------------------------


def declared_fields(reg: Any, *, using: str | None = None) -> dict[str, Any]:
    """The schedule fields a registration declares (``register(..., every=/cron=/rrule=/at=)``);
    ``timezone``, ``payload``, ``pool``, ``priority`` and ``concurrency_group`` only when
    given (else a new row takes the model's default and an existing row keeps its value).
    The group is resolved by name in the database ``using`` (sync); without ``using`` it
    is not read and None stands in its place (the fields' names, a check without the
    database). A name no group has raises :class:`.group_defs.UnknownGroup` (an
    ``ImproperlyConfigured``) naming the schedule and the group."""
    d = reg.declaration
    assert d is not None
    wanted: dict[str, Any] = {
        "callback": reg.name,
        "kind": d.kind,
        "interval_seconds": d.every,
        "cron": d.cron or "",
        "rrule": d.rrule or "",
        "extra_specs": list(d.extra_specs),
        "run_at": d.at,
        "start_at": d.start_at,
        "end_at": d.end_at,
        "max_runs": d.max_runs,
    }
    if d.exclusion_policy is not None:
        wanted["exclusion_policy"] = d.exclusion_policy
    if d.rrule_business_days is not None:
        wanted["rrule_business_days"] = d.rrule_business_days
    if d.timezone:
        wanted["timezone"] = d.timezone
    if d.payload is not None:
        wanted["payload"] = d.payload
    if d.wait_seconds is not None:
        wanted["wait_seconds"] = d.wait_seconds
    if d.flow.pool is not None:
        wanted["pool"] = d.flow.pool
    if d.flow.priority is not None:
        wanted["priority"] = d.flow.priority
    group = d.flow.concurrency_group
    if group is not None:
        wanted["concurrency_group"] = declared_group(reg.name, group, using) if using else None
    return wanted


def _clean_declared(row: Schedule) -> None:
    """``full_clean`` a schedule declared in code; an invalid declaration is a programming
    error, raised as ``ImproperlyConfigured`` naming the schedule (check E008 reports it
    before any command runs)."""
    try:
        row.full_clean()
    except ValidationError as exc:
        raise ImproperlyConfigured(
            f"The schedule declared in code for {row.name!r} is invalid: "
            f"{validation_text(exc)}. Fix its register(...) call."
        ) from exc


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


@implements("control.create", "control.edit", "recovery.degraded")
def sync_declared(*, using: str = "default", now: datetime | None = None) -> list[Schedule]:
    """Create or update the schedules declared with ``register(..., every=/cron=/rrule=/at=)``.

    A declared schedule is matched by name; only its definition fields are written, so
    occurrence counters, failures and history survive; a changed definition is an edit
    (re-planned from now). Also recovers schedules that were paused as degraded
    because their callback was missing, now that it is registered again.
    Chaining: a declaration of kind ``after`` (``register(after=[...])``) is synced after
    those it names (:func:`..declarations.sync_order`) and linked to them (a changed
    ``after=``: links replaced, an ``edited`` event); links the checks refuse, or a new grid
    that leaves a downstream on mixed grids, are logged and that declaration skipped.
    A declaration that names a concurrency group no row has is logged (an error naming
    both, check W005) and skipped: its schedule is neither created nor changed, the others
    are synced (a worker starting, ``migrate``, goes on).
    Returns the schedules created or changed.
    """
    changed: list[Schedule] = []
    for reg in sync_order(registry.declared()):
        try:
            wanted = declared_fields(reg, using=using)
        except UnknownGroup as exc:  # that declaration's error (check W005), not the sync's
            logger.error("%s", exc, extra={"schedule": reg.name})
            continue
        after_names = reg.declaration.after
        with transaction.atomic(using=using):
            lock_for_write(using)
            row = locked(
                Schedule.objects.using(using).filter(name=reg.name), using, skip_locked=False
            ).first()
            if row is None:
                made = _create_declared(reg.name, wanted, after_names, using)
                changed += [made] if made is not None else []
                continue
            before = {k: getattr(row, k) for k in wanted}
            diff = {k: v for k, v in wanted.items() if before[k] != v}
            old = copy.copy(row)
            for k, v in diff.items():
                setattr(row, k, v)
            if diff:
                _clean_declared(row)
            kept, ups = declared_links(row, old, after_names, using)
            if not kept:
                continue
            link_change(row, ups, before, diff, using)
            if diff:
                row.save(using=using)
                if ups is not None and "upstream" in diff:
                    write_links(row, ups, using)
                record_event(
                    row,
                    EventAction.EDITED,
                    source="code",
                    using=using,
                    changes=as_changes(before, diff),
                )
                changed.append(row)
    changed.extend(recover_degraded(using=using, now=now))
    return changed


def _create_declared(
    name: str, wanted: dict[str, Any], after_names: Any, using: str
) -> Schedule | None:
    """Inside :func:`sync_declared`'s transaction: the schedule declared as ``name`` with
    the fields ``wanted``, created with its ``created`` event, linked to the schedules
    ``after_names`` names (kind ``after``); None when the chaining checks refuse its links
    (:func:`.chain_links.declared_links` logged why)."""
    row = Schedule(name=name, **wanted)
    _clean_declared(row)
    kept, ups = declared_links(row, None, after_names, using)
    if not kept:
        return None
    row.save(using=using, audit=False)  # its own event, with the declaration
    changes = as_changes({}, wanted)
    if ups:
        write_links(row, ups, using)
        changes["upstream"] = [None, sorted(u.name for u in ups)]
    record_event(row, EventAction.CREATED, source="code", using=using, changes=changes)
    return row


@implements("recovery.degraded", "recovery.degraded_unkept")
def recover_degraded(*, using: str = "default", now: datetime | None = None) -> list[Schedule]:
    """Re-activate schedules paused as degraded because their callback was missing, now
    that it is registered again. The occurrence that met the missing callback runs once,
    at once (its next attempt; slots that passed meanwhile are counted as missed, as after
    downtime), then the grid goes on. A schedule paused because its definition cannot be
    evaluated is left alone: it needs a valid edit and :func:`enable`. Records an
    ``enabled`` event (source ``worker``) for each."""
    recovered = []
    candidates = (
        Schedule.objects.using(using)
        .degraded()
        .filter(status=Status.PAUSED, degraded_kind=DegradedKind.CALLBACK)
    )
    for pk, name, callback in candidates.filter(callback__in=registry.names()).values_list(
        "pk", "name", "callback"
    ):
        try:
            recovered.append(_recover_one(pk, now, using))
        except (StateConflict, ValidationError, ValueError, Schedule.DoesNotExist) as exc:
            # Changed meanwhile, or its definition cannot be evaluated: leave it paused.
            logger.warning(
                "schedule %s not recovered: %s",
                name,
                describe_problem(exc),
                extra={"schedule": name},
            )
            continue
        logger.info(
            "schedule %s recovered: callback %r is registered again",
            name,
            callback,
            extra={"schedule": name},
        )
    return recovered


@implements("recovery.degraded", "recovery.degraded_unkept")
def _recover_one(pk: Any, now: datetime | None, using: str) -> Schedule:
    with transaction.atomic(using=using):
        row = get_locked(pk, using)
        if row.status != Status.PAUSED or not row.degraded_reason:
            raise StateConflict(f"the schedule is {row.status} now")
        if row.retry_scheduled_for is None:  # degraded before the occurrence was kept
            return enable(pk, now=now, source="worker", using=using)
        instant = resolve_now(now, using)
        row.status = Status.ACTIVE
        row.degraded_reason = row.degraded_kind = row.pause_reason = ""
        clear_trigger(row)
        row.next_run_at = timing.truncate_to_second(instant)  # the kept occurrence, at once
        row.save(
            update_fields=[
                "status",
                "degraded_reason",
                "degraded_kind",
                "pause_reason",
                "triggered_at",
                "trigger_payload",
                "trigger_ignores_blackout",
                "rerun_occurrence",
                "rerun_attempt",
                "next_run_at",
                "updated_at",
            ]
        )
        record_event(
            row,
            EventAction.ENABLED,
            now=instant,
            source="worker",
            changes={"status": [Status.PAUSED, Status.ACTIVE]},
            using=using,
        )
    return row
