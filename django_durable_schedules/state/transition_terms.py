"""The vocabulary of the transition table (:mod:`.transition_table`): the
:class:`Transition` row, the sets of statuses its rows name and the phrases they share.
Data only."""

from __future__ import annotations

from dataclasses import dataclass

from ..models import ReceiptStatus, Status

ANY = frozenset(Status)
ACTIVE = frozenset({Status.ACTIVE})
PAUSED = frozenset({Status.PAUSED})
RUNNABLE = frozenset({Status.ACTIVE, Status.PAUSED})  # paused: only by a trigger
#: A row a run holds a lease on: claimed active or triggered, or paused or cancelled since.
LEASED = frozenset({Status.ACTIVE, Status.PAUSED, Status.CANCELLED})
HALTED = frozenset({Status.PAUSED, Status.CANCELLED})
#: A row not yet stored (its creation).
NEW: frozenset[str] = frozenset()

#: In ``moves_to``: the row keeps the status it had.
SAME = "="
KEEPS = frozenset({SAME})
ACTIVE_OR_COMPLETED = frozenset({Status.ACTIVE, Status.COMPLETED})
#: Where a failed attempt of an active row leads (retried, given up, paused after
#: ``pause_after_failures``, a ``once`` failed, the grid's end completed).
AS_FAILED = frozenset({Status.ACTIVE, Status.PAUSED, Status.FAILED, Status.COMPLETED})
TO_PAUSED = frozenset({Status.PAUSED})

DEGRADED = "paused, degraded"
NEXT_OR_COMPLETED = "active (completed when no slot is left)"
AFTER_LAST = "active (completed after the last slot, `max_runs`, or a `once`)"


def seen(step: str, *what: str) -> frozenset[str]:
    """The worker steps ``step:what`` a row is seen as (:data:`.transitions.STEPS`)."""
    return frozenset(f"{step}:{w}" for w in what)


#: Every receipt status a completion may write for a backfill slot or an unappliable one.
ANY_RECEIPT = tuple(ReceiptStatus.values)


@dataclass(frozen=True)
class Transition:
    """One row: ``event`` on a row in a status of ``sources``; ``id`` is
    ``"<family>.<name>"`` (family: claim, outcome, recovery, control, alert)."""

    id: str
    sources: frozenset[str]
    event: str
    target: str
    next_run_at: str
    receipt: str
    moves_to: frozenset[str] = KEEPS
    seen_as: frozenset[str] = frozenset()
    #: For a control row, the key of :data:`.control.ALLOWED` it describes.
    action: str = ""

    @property
    def family(self) -> str:
        return self.id.split(".", 1)[0]


T = Transition
LEASED_ATTEMPT = "none yet: an attempt with a live lease"
#: What a triggered claim's attempt runs with (issue #27).
OVERRIDE_TAKEN = (
    "; a trigger's payload override is merged over the payload (the attempt records it when "
    "it differs; one that is no JSON object is ignored, event `triggered` says why) and "
    "kept as the occurrence's, for its retries"
)
