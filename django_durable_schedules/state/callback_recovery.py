"""Schedules paused as degraded because their callback was missing, active again once it
is registered (:func:`recover_degraded`; :func:`.declared.sync_declared` calls it at
``migrate`` and at worker start).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from .. import timing
from ..db.clock import resolve_now
from ..db.locks import get_locked
from ..exceptions import StateConflict
from ..models import DegradedKind, EventAction, Schedule, Status
from ..registry import registry
from .bounds import describe_problem
from .enabling import enable
from .events import record_event
from .machine import recover_callback
from .transitions import implements

logger = logging.getLogger(__name__)


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
        recover_callback(row)
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
