"""The schedules declared in code (``register(..., every=/cron=/rrule=/at=/manual=True/
after=[...])``) synced to their rows: created, or edited when the declaration changed, at
``migrate`` and at worker start (:func:`sync_declared`), then the schedules degraded for a
missing callback recovered (:func:`.callback_recovery.recover_degraded`). The fields a
declaration sets (:func:`declared_fields`) are read by check E008 too, without the database.
"""

from __future__ import annotations

import copy
import logging
from datetime import datetime
from typing import Any

from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.db import transaction

from ..db.locks import lock_for_write, locked
from ..declarations import sync_order
from ..exceptions import validation_text
from ..models import EventAction, Schedule
from ..registry import registry
from .callback_recovery import recover_degraded
from .chain_links import declared_links, link_change, write_links
from .events import as_changes, record_event
from .group_defs import UnknownGroup, declared_group
from .transitions import implements

logger = logging.getLogger(__name__)


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
