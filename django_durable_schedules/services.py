"""Create and edit schedules from outside the worker (API, admin, code), safely.

The state machine (:mod:`.state`) owns run-state transitions; these two functions own the
*definition* writes. Both validate with the model's own ``full_clean()`` (:func:`validate_schedule`) (which raises
``django.core.exceptions.ValidationError`` with field messages). An edit locks the row and
writes only the fields it changes, so it can never overwrite a worker's concurrent claim
(lease, occurrence, ``next_run_at``) with stale values; ``Schedule.save()`` re-plans
``next_run_at`` when the definition changed and never fires a run by itself (R10).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from .models import Schedule
from .state import _get_locked

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
        "max_attempts",
        "owner",
    }
)


def _check_fields(fields: dict[str, Any]) -> None:
    unknown = set(fields) - EDITABLE_FIELDS
    if unknown:
        raise ValueError(f"not editable: {', '.join(sorted(unknown))}")


def _differs(row: Schedule, name: str, value: Any) -> bool:
    if name == "owner":  # compare keys: no query for the current owner
        return row.owner_id != getattr(value, "pk", value)
    return getattr(row, name) != value


def validate_schedule(row: Schedule) -> None:
    """``row.full_clean()``, except that the database constraints (a safety net under
    :meth:`Schedule.clean`, with less helpful messages) are checked only once every field
    is valid. Raises ``ValidationError`` with field messages."""
    row.full_clean(validate_constraints=False)
    row.validate_constraints()


def create_schedule(*, using: str = "default", **fields: Any) -> Schedule:
    """Validate and insert a schedule; ``save()`` plans its first slot.

    ``fields`` are :data:`EDITABLE_FIELDS`. Raises ``ValidationError`` (field messages)
    for an invalid definition and ``ValueError`` for a field that is not editable.
    """
    _check_fields(fields)
    row = Schedule(**fields)
    with transaction.atomic(using=using):
        validate_schedule(row)
        row.save(using=using, force_insert=True)
    return row


def update_schedule(schedule_id: Any, *, using: str = "default", **changes: Any) -> Schedule:
    """Apply ``changes`` (:data:`EDITABLE_FIELDS`) to the locked row, validate, and write
    only those columns. A definition change re-plans ``next_run_at`` from now.

    Raises ``Schedule.DoesNotExist``, ``ValidationError`` (field messages) or ``ValueError``
    for a field that is not editable.
    """
    _check_fields(changes)
    with transaction.atomic(using=using):
        row = _get_locked(schedule_id, using)
        changed = [name for name, value in changes.items() if _differs(row, name, value)]
        for name in changed:
            setattr(row, name, changes[name])
        validate_schedule(row)
        if changed:
            row.save(using=using, update_fields=[*changed, "updated_at"])
    return row
