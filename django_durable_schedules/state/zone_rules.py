"""A claim under other zone rules than the plan's: a ``next_run_at`` planned by a process
that read other tzdata (an update since, or another host of the fleet) may not be a slot
of the current grid. Pure: reads and writes a locked row's attributes (see :mod:`.rules`).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from .. import timing
from ..models import Schedule
from .machine import complete_if_no_slot
from .transitions import implements

logger = logging.getLogger(__name__)


@implements("claim.regrid")
def regrid_due(row: Schedule, spec: timing.Spec, due: datetime, now: datetime) -> datetime | None:
    """``due`` (the row's stored ``next_run_at``, at or before ``now``) was planned under
    other zone rules and no slot of the current grid lies between it (less its jitter)
    and ``now``: it is the old rules' instant of a slot. Re-plan to the slot of the
    current grid nearest to it (:func:`.timing.nearest_slot`: the same wall time under
    the current rules), never one at or before the row's last run.

    Returns that slot's due instant (jitter added) when it is at or before ``now``: the
    claim goes on with it (a slot genuinely due is run, or counted by the catch-up
    rules, never lost). Otherwise sets ``next_run_at`` to it (the row completes when
    there is none) and returns None: nothing runs now, so the old rules' instant never
    fires a run by itself, and the slot runs once, at its time under the current rules."""
    earliest = due - timedelta(seconds=row.jitter_seconds or 0)
    after = timing.truncate_to_second(row.last_run_at) if row.last_run_at else None
    slot = timing.nearest_slot(spec, earliest, after=after)
    planned = row.due_at(slot)
    logger.info(
        "schedule %s: next_run_at %s was planned under other zone rules (%s now reads "
        "tzdata %s); re-planned to %s",
        row.name,
        due.isoformat(),
        row.timezone,
        timing.rules_version(),
        planned.isoformat() if planned else None,
        extra={"schedule": row.name},
    )
    if planned is not None and planned <= now:
        return planned
    row.next_run_at = planned
    complete_if_no_slot(row, require_active=True)
    return None
