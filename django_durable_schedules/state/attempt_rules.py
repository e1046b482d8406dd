"""The attempt of a claim, built (unsaved): its row (:func:`new_attempt`), the key every
attempt of an occurrence shares (:func:`idempotency_key`), the :class:`~.values.Claim` a
worker runs (:func:`claim_of`) and the attempts an occurrence may take
(:func:`max_attempts_of`).

Pure: no database access. :mod:`.rules` and :mod:`.slot_rules` build a claim's attempt
with it, :mod:`.backfill_rules` a backfill slot's; :mod:`.outcomes` reads the attempt
budget, :mod:`.leases` and :mod:`.reruns` the claim and the key.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from ..conf import app_settings
from ..limits import TIMEOUT_MAX_SECONDS
from ..models import AttemptOrigin, RunAttempt, Schedule
from ..uuids import uuid4
from .bounds import bounded_seconds
from .previous_rules import previous_of
from .replace_rules import replace_at
from .values import Claim


def max_attempts_of(schedule: Schedule) -> int:
    """The attempts one occurrence may take: the schedule's ``max_attempts``, else the
    ``MAX_ATTEMPTS`` setting."""
    return schedule.max_attempts or app_settings.MAX_ATTEMPTS


def new_attempt(
    row: Schedule,
    occurrence: int,
    number: int,
    slot: datetime,
    now: datetime,
    lease_expires_at: datetime,
    worker: str,
    missed: int = 0,
    origin: str = AttemptOrigin.SCHEDULED,
    payload: Any = None,
) -> RunAttempt:
    """The attempt row of one claim (unsaved): a fresh lease token until
    ``lease_expires_at`` (``now`` for an attempt receipted at once: missed, degraded);
    ``payload``: what it runs with when that is not the schedule's payload (a trigger's
    override), else None."""
    return RunAttempt.build(
        id=uuid4(),
        schedule_id=row.id,
        schedule_name=row.name,
        occurrence=occurrence,
        attempt=number,
        scheduled_for=slot,
        claimed_at=now,
        lease_token=uuid4(),
        lease_expires_at=lease_expires_at,
        worker=worker[:200],
        idempotency_key=idempotency_key(row.id, occurrence),
        missed_slots=missed,
        origin=origin,
        payload=payload,
    )


def claim_of(row: Schedule, attempt: RunAttempt) -> Claim:
    """The claim a worker runs for ``attempt``, just made for ``row`` by
    :func:`new_attempt` (the timeout bounded as the limits say, blank: none); its payload
    is the attempt's own (a trigger's override merged), else the schedule's; ``previous``
    the row's last success (:func:`.previous_rules.previous_of`: read with the row, no
    statement of its own)."""
    return Claim(
        attempt_id=attempt.id,
        schedule_id=row.id,
        schedule_name=row.name,
        callback=row.callback,
        occurrence=attempt.occurrence,
        attempt=attempt.attempt,
        scheduled_for=attempt.scheduled_for,
        claimed_at=attempt.claimed_at,
        lease_token=attempt.lease_token,
        lease_expires_at=attempt.lease_expires_at,
        idempotency_key=attempt.idempotency_key,
        payload=row.payload if attempt.payload is None else attempt.payload,
        missed_slots=attempt.missed_slots,
        timeout_seconds=bounded_seconds(row.timeout_seconds, None, TIMEOUT_MAX_SECONDS) or None,
        origin=attempt.origin,
        replace_at=replace_at(row, attempt.occurrence, attempt.origin, attempt.claimed_at),
        previous=previous_of(row),
    )


def idempotency_key(schedule_id: uuid.UUID, occurrence: int) -> str:
    """Stable key of one occurrence, the same for every attempt of it: ``"<uuid>:<n>"``."""
    return f"{schedule_id}:{occurrence}"
