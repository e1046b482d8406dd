"""The start-up sweep of schedules planned under other zone rules (issue #24 item 9).

A worker reads the zone rules once, when it starts. A cron or rrule schedule in a zone
other than UTC whose fingerprint names other rules than this process reads (planned
before a tzdata update, or by a host of the fleet with other tzdata) has a ``next_run_at``
that may not be a slot of the current grid. The claim checks that when the row is due
(:func:`.zone_rules.regrid_due`), which is too late for a slot the update moved
*earlier*: it would run late by the change. :func:`regrid_other_rules`, called when a
worker starts, re-plans those rows while their slot is still ahead.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction

from .. import timing
from ..db.clock import resolve_now
from ..db.locks import lock_for_write, locked
from ..models import Kind, Schedule, Status, load_exclusions
from ..models.definition import same_definition
from .transitions import implements

logger = logging.getLogger(__name__)


def _candidates(now: datetime, using: str) -> Any:
    """Active cron and rrule rows outside UTC, unleased, whose next run is ahead and
    nothing else (a retry, a trigger, a buffered slot) is pending: the claim owns those."""
    return (
        Schedule.objects.using(using)
        .filter(
            status=Status.ACTIVE,
            kind__in=[Kind.CRON, Kind.RRULE],
            lease_token__isnull=True,
            next_run_at__gt=now,
            retry_scheduled_for__isnull=True,
            triggered_at__isnull=True,
            buffered_for__isnull=True,
        )
        .exclude(timezone="UTC")
    )


def regrid_other_rules(*, now: datetime | None = None, using: str = "default") -> list[str]:
    """Re-plan each schedule planned under other zone rules than this process reads whose
    next run is still ahead (aware UTC ``now``, default: the database clock): its
    ``next_run_at`` moves to the slot of the current grid nearest to it
    (:func:`.timing.nearest_slot`: the same wall time under the current rules; never one
    at or before its last run) and its fingerprint names the current rules. A slot the
    update moved earlier then runs at its new time instead of late, one it moved later is
    waited for; a slot the move put at or before ``now`` is due at once (the claim runs
    it, late by the sweep only). A row whose definition changed since (an edit behind
    ``save()``) is left to the claim's re-plan, as is a row with a lease or something
    pending. Returns the names re-planned.

    Cost: one query for the zones in use, one per zone whose rules this process can read,
    and one short transaction per row re-planned (after a tzdata update, once).
    """
    now = resolve_now(now, using)
    zones = set(_candidates(now, using).values_list("timezone", flat=True).distinct())
    replanned = []
    for zone in sorted(z for z in zones if isinstance(z, str)):
        rules = timing.zone_rules_id(zone)
        if not rules:
            continue  # UTC-like, unknown, or unreadable: its rows are the claim's to judge
        stale = (
            _candidates(now, using)
            .filter(timezone=zone)
            .exclude(definition_hash__endswith=f"@{rules}")
            .values_list("pk", flat=True)
        )
        for pk in list(stale):
            try:
                name = _regrid_one(pk, now, using)
            except Exception as exc:  # noqa: BLE001 - that row's problem: the claim judges it
                logger.warning(
                    "schedule %s not re-planned under the current zone rules: %s", pk, exc
                )
                continue
            if name is not None:
                replanned.append(name)
    return replanned


@implements("recovery.regrid")
def _regrid_one(pk: Any, now: datetime, using: str) -> str | None:
    """Re-plan the row ``pk`` (see :func:`regrid_other_rules`); its name, or None when it
    changed meanwhile or needs nothing."""
    with transaction.atomic(using=using):
        lock_for_write(using)
        rows = list(locked(_candidates(now, using).filter(pk=pk), using, skip_locked=True))
        if not rows:
            return None
        row = rows[0]
        current = row.compute_definition_hash()
        if row.definition_hash == current or not same_definition(row.definition_hash, current):
            return None  # planned under these rules already, or edited: the claim re-plans
        load_exclusions([row], using)
        spec = row.spec()
        stored = row.next_run_at
        earliest = stored - timedelta(seconds=row.jitter_bound())
        after = timing.truncate_to_second(row.last_run_at) if row.last_run_at else None
        planned = row.due_at(timing.nearest_slot(spec, earliest, after=after))
        if planned is None:
            return None  # no slot left: the claim's re-plan completes it, counting its slots
        Schedule.objects.using(using).filter(pk=pk).update(
            next_run_at=planned, definition_hash=current
        )
    logger.info(
        "schedule %s: next_run_at %s was planned under other zone rules (%s now reads "
        "tzdata %s); re-planned to %s at start-up",
        row.name,
        stored.isoformat(),
        row.timezone,
        timing.rules_version(),
        planned.isoformat(),
        extra={"schedule": row.name},
    )
    return str(row.name)
