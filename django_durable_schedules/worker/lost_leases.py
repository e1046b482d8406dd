"""Runs whose lease the worker found lost (:func:`stop_lost`): the worker was stalled (a
long pause, SIGSTOP, a swapped-out host) past a lease, and another worker recovered it and
may run the occurrence again - or another run of its concurrency group.

A run in a child process (``timeout_seconds`` with hard timeouts: :mod:`.execution.isolation`)
is stopped at once: its child and process group are killed and the run reports ``failed`` /
``LeaseLost``, an outcome the completion fences (the row is another attempt's now: the
attempt keeps the ``lease_expired`` receipt its recovery wrote, else it gets ``lease_lost``).
A run in a thread cannot be stopped: it is only logged, and runs on until it returns.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable

from .. import state
from .execution import isolation

# The worker's logger: every line the worker package logs about its loop carries this name.
logger = logging.getLogger("django_durable_schedules.worker")


def stop_lost(
    worker_id: str,
    lost: Iterable[tuple[state.Claim, float | None]],
    pool: isolation.IsolationPool | None,
    stopped: set[uuid.UUID],
) -> None:
    """Stop the runs of ``lost`` (each claim with the seconds since its lease was last
    renewed or claimed, ``None``: not known) that run in a child of ``pool``
    (:meth:`.IsolationPool.stop`), once per lease token (``stopped``, updated); log the
    others once each: their callback runs on in its thread."""
    for claim, stalled in lost:
        token = claim.lease_token
        if token in stopped:
            continue
        stopped.add(token)
        how_long = f" (the worker was stalled {stalled:.1f} s)" if stalled is not None else ""
        reason = f"the lease was lost{how_long}"
        extra = {"schedule": claim.schedule_name, "occurrence": claim.occurrence}
        if pool is not None and pool.stop(token, reason):
            logger.warning(
                "worker %s lost the lease of %s occurrence %s%s: its process is killed",
                worker_id,
                claim.schedule_name,
                claim.occurrence,
                how_long,
                extra=extra,
            )
            continue
        logger.warning(
            "worker %s lost the lease of %s occurrence %s%s",
            worker_id,
            claim.schedule_name,
            claim.occurrence,
            how_long,
            extra=extra,
        )
