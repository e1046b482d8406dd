"""Definitions: create and edit schedules (the API, the admin and the importers call
these), sync the schedules declared in code, and recover degraded ones.
"""

from __future__ import annotations

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
from ..exceptions import StateConflict, validation_text
from ..models import DegradedKind, EventAction, Kind, Schedule, Status
from ..registry import registry
from .bounds import describe_problem
from .calendars import attach_calendars, record_excluded_to_end, replan, resolve_calendars
from .control import enable
from .events import as_changes, record_event
from .transitions import implements

logger = logging.getLogger(__name__)


#: Fields a caller may set through :func:`create_schedule` / :func:`update_schedule`; run
#: state (status, counters, leases, ``next_run_at``) changes only through :mod:`.state`.
EDITABLE_FIELDS = frozenset(
    {
        "name",
        "callback",
        "kind",
        "interval_seconds",
        "cron",
        "rrule",
        "timezone",
        "run_at",
        "start_at",
        "end_at",
        "max_runs",
        "payload",
        "metadata",
        "misfire_policy",
        "overlap_policy",
        "misfire_grace_seconds",
        "max_attempts",
        "backoff_base_seconds",
        "backoff_cap_seconds",
        "pause_after_failures",
        "timeout_seconds",
        "jitter_seconds",
        "owner",
        "exclusion_calendars",
    }
)


def _check_fields(fields: dict[str, Any]) -> None:
    unknown = set(fields) - EDITABLE_FIELDS
    if unknown:
        raise ValueError(f"not editable: {', '.join(sorted(unknown))}")


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
    """``row.save()``; if the database refuses it (a concurrent write took the name between
    validation and save), validate again so the caller gets field messages, not a crash."""
    try:
        with transaction.atomic(using=using):
            row.save(using=using, **kwargs)
    except IntegrityError:
        validate_schedule(row)
        raise


@implements("control.create")
def create_schedule(
    *,
    actor: Any = None,
    source: str = "code",
    paused: bool = False,
    using: str = "default",
    **fields: Any,
) -> Schedule:
    """Validate and insert a schedule; ``save()`` plans its first slot. Records a
    ``created`` event (``actor``: a user or None; ``source``: api, admin, command, code,
    import). ``paused``: insert it paused (no next run until enabled) in the same
    transaction, so no worker can run it in between (an import of a disabled source).

    ``fields`` are :data:`EDITABLE_FIELDS`. Raises ``ValidationError`` (field messages)
    for an invalid definition and ``ValueError`` for a field that is not editable.
    """
    _check_fields(fields)
    calendars = fields.pop("exclusion_calendars", None)
    row = Schedule(**fields)
    if paused:
        row.status = Status.PAUSED
        fields = {**fields, "status": Status.PAUSED}
    with transaction.atomic(using=using):
        lock_for_write(using)  # SQLite: hold the write lock from the start (validate, insert)
        cals = resolve_calendars(calendars or (), using)
        attach_calendars(row, cals)  # save() plans the first slot that no calendar excludes
        validate_schedule(row)
        _save_or_explain(row, using, force_insert=True)
        if cals:
            row.exclusion_calendars.set(cals)
            fields = {**fields, "exclusion_calendars": [c.name for c in cals]}
        record_event(
            row,
            EventAction.CREATED,
            actor=actor,
            source=source,
            changes=as_changes({}, fields),
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
    **changes: Any,
) -> Schedule:
    """Apply ``changes`` (:data:`EDITABLE_FIELDS`) to the locked row, validate, and write
    only those columns. A definition change re-plans ``next_run_at`` from now. Records an
    ``edited`` event with ``{field: [old, new]}`` when something changed.

    Raises ``Schedule.DoesNotExist``, ``ValidationError`` (field messages) or ``ValueError``
    for a field that is not editable.
    """
    _check_fields(changes)
    calendars = changes.pop("exclusion_calendars", None)
    with transaction.atomic(using=using):
        row = get_locked(schedule_id, using)
        changed = [name for name, value in changes.items() if _differs(row, name, value)]
        before = {name: _current(row, name) for name in changed}
        after = {name: changes[name] for name in changed}
        for name in changed:
            setattr(row, name, changes[name])
        cals = resolve_calendars(calendars, using) if calendars is not None else None
        old_names = [c.name for c in row.exclusion_calendars.all()] if cals is not None else []
        if cals is not None and [c.name for c in cals] != old_names:
            attach_calendars(row, cals)  # the plans and checks below see the new calendars
            before["exclusion_calendars"] = old_names
            after["exclusion_calendars"] = [c.name for c in cals]
        elif row.kind == Kind.ONCE and row.exclusions():
            raise ValidationError(
                {"exclusion_calendars": ["A once schedule takes no exclusion calendars."]}
            )
        validate_schedule(row)
        if changed:
            _save_or_explain(row, using, update_fields=[*changed, "updated_at"])
        if "exclusion_calendars" in after:
            row.exclusion_calendars.set(cals or [])
            if replan(row, resolve_now(None, using)):
                row.save(using=using, update_fields=["next_run_at", "status"])
        if after:  # an edit that left no slot to run: the rest of the grid is counted
            record_excluded_to_end(row, resolve_now(None, using), using)
        if after:
            record_event(
                row,
                EventAction.EDITED,
                actor=actor,
                source=source,
                changes=as_changes(before, after),
                using=using,
            )
    return row


# ---------------------------------------------------------------------------------------
# Code-declared schedules and degraded recovery
# ---------------------------------------------------------------------------------------


def declared_fields(reg: Any) -> dict[str, Any]:
    """The schedule fields a registration declares (``register(..., every=/cron=/rrule=/at=)``)."""
    d = reg.declaration
    assert d is not None
    wanted: dict[str, Any] = {
        "callback": reg.name,
        "kind": d.kind,
        "interval_seconds": d.every,
        "cron": d.cron or "",
        "rrule": d.rrule or "",
        "run_at": d.at,
        "start_at": d.start_at,
        "end_at": d.end_at,
        "max_runs": d.max_runs,
    }
    if d.timezone:
        wanted["timezone"] = d.timezone
    if d.payload is not None:
        wanted["payload"] = d.payload
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
    Returns the schedules created or changed.
    """
    changed: list[Schedule] = []
    for reg in registry.declared():
        wanted = declared_fields(reg)
        with transaction.atomic(using=using):
            lock_for_write(using)
            row = locked(
                Schedule.objects.using(using).filter(name=reg.name), using, skip_locked=False
            ).first()
            if row is None:
                row = Schedule(name=reg.name, **wanted)
                _clean_declared(row)
                row.save(using=using)
                record_event(
                    row,
                    EventAction.CREATED,
                    source="code",
                    using=using,
                    changes=as_changes({}, wanted),
                )
                changed.append(row)
                continue
            before = {k: getattr(row, k) for k in wanted}
            diff = {k: v for k, v in wanted.items() if before[k] != v}
            if diff:
                for k, v in diff.items():
                    setattr(row, k, v)
                _clean_declared(row)
                row.save(using=using)
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
        row.triggered_at = None
        row.next_run_at = timing.truncate_to_second(instant)  # the kept occurrence, at once
        row.save(
            update_fields=[
                "status",
                "degraded_reason",
                "degraded_kind",
                "pause_reason",
                "triggered_at",
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
