"""Create and edit schedules from outside the worker (API, admin, code), safely.

The state machine (:mod:`.state`) owns run-state transitions; these two functions own the
*definition* writes. Both validate with the model's own ``full_clean()`` (see
:func:`validate_schedule`; it raises ``django.core.exceptions.ValidationError`` with field
messages) and record the write in the audit trail (``created``/``edited`` events). An edit
locks the row and writes only the fields it changes, so it can never overwrite a worker's
concurrent claim (lease, occurrence, ``next_run_at``) with stale values; ``Schedule.save()``
re-plans ``next_run_at`` when the definition changed and never fires a run by itself (R10).
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction

from .models import EventAction, Schedule
from .state import _as_changes, _get_locked, _lock_for_write, record_event

#: Fields a caller may set through :func:`create_schedule` / :func:`update_schedule`; run
#: state (status, counters, leases, ``next_run_at``) changes only through :mod:`.state`.
EDITABLE_FIELDS = frozenset(
    {
        "name",
        "callback",
        "kind",
        "interval_seconds",
        "cron",
        "timezone",
        "run_at",
        "start_at",
        "end_at",
        "max_runs",
        "payload",
        "metadata",
        "misfire_policy",
        "misfire_grace_seconds",
        "max_attempts",
        "backoff_base_seconds",
        "backoff_cap_seconds",
        "pause_after_failures",
        "timeout_seconds",
        "jitter_seconds",
        "owner",
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
        return row.owner_id != getattr(value, "pk", value)
    return getattr(row, name) != value


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


def create_schedule(
    *, actor: Any = None, source: str = "code", using: str = "default", **fields: Any
) -> Schedule:
    """Validate and insert a schedule; ``save()`` plans its first slot. Records a
    ``created`` event (``actor``: a user or None; ``source``: api, admin, command, code).

    ``fields`` are :data:`EDITABLE_FIELDS`. Raises ``ValidationError`` (field messages)
    for an invalid definition and ``ValueError`` for a field that is not editable.
    """
    _check_fields(fields)
    row = Schedule(**fields)
    with transaction.atomic(using=using):
        _lock_for_write(using)  # SQLite: hold the write lock from the start (validate, insert)
        validate_schedule(row)
        _save_or_explain(row, using, force_insert=True)
        record_event(
            row,
            EventAction.CREATED,
            actor=actor,
            source=source,
            changes=_as_changes({}, fields),
            using=using,
        )
    return row


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
    with transaction.atomic(using=using):
        row = _get_locked(schedule_id, using)
        changed = [name for name, value in changes.items() if _differs(row, name, value)]
        before = {name: _current(row, name) for name in changed}
        for name in changed:
            setattr(row, name, changes[name])
        validate_schedule(row)
        if changed:
            _save_or_explain(row, using, update_fields=[*changed, "updated_at"])
            record_event(
                row,
                EventAction.EDITED,
                actor=actor,
                source=source,
                changes=_as_changes(before, {name: changes[name] for name in changed}),
                using=using,
            )
    return row
