"""The attempts without a receipt, for the health snapshot (issue #32 item 3).

The engine writes an attempt and its schedule's lease in one transaction, and its receipt
and the lease's release in another, so on a table only the engine wrote every attempt
without a receipt is *in flight*: its ``lease_token`` is its schedule's. Any other one
(*stray*: no receipt, no lease) was left by an edit behind the engine (a receipt deleted,
an attempt inserted, a lease token overwritten): nothing will ever receipt it.

:func:`open_attempts` counts both with reads bounded by indexes, whatever the size of the
history:

* in flight: the leased schedules (the partial index ``dds_sched_lease_idx``), each joined
  to its attempt by the attempts' unique ``lease_token`` index and to its receipt by the
  receipts' unique ``attempt_id`` index: one probe per leased schedule;
* stray: among the newest :data:`RECENT_CLAIMS_CHECKED` claims (a backward range of
  ``dds_attempt_claimed_idx``), those without a receipt whose schedule does not hold their
  lease token (a primary-key probe each).

A stray attempt *older* than the newest :data:`RECENT_CLAIMS_CHECKED` claims (a receipt
deleted long after its run, an attempt inserted with an old ``claimed_at``) is not seen by
this count: ``exact=True`` counts the strays over the whole table instead (an anti-join of
every attempt with the receipts: seconds at ten million attempts; ``manage.py schedules
health --exact``, the admin health page's "exact count" link, ``health/?exact=1``).
When the table holds no more than :data:`RECENT_CLAIMS_CHECKED` attempts, the bounded
count is the exact one.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Exists, OuterRef, Q

from .models import OccurrenceLease, RunAttempt, Schedule

#: The newest claims the bounded count looks at for attempts without a receipt that hold
#: no lease (one index entry, one receipt probe and one schedule probe each).
RECENT_CLAIMS_CHECKED = 1_000


@dataclass(frozen=True)
class OpenAttempts:
    """What :func:`open_attempts` counted."""

    #: Attempts without a receipt that hold their schedule's lease (runs in flight).
    in_flight: int
    #: Attempts without a receipt that hold no lease (left by an edit behind the engine),
    #: among the attempts checked.
    stray: int
    #: Whether ``stray`` covers every attempt (an exact count, or a table no larger than
    #: :data:`RECENT_CLAIMS_CHECKED`); False: the newest ``checked`` claims only.
    exact: bool
    #: How many of the newest claims were checked for strays (None when exact).
    checked: int | None

    @property
    def total(self) -> int:
        """Every attempt without a receipt counted: in flight plus stray."""
        return self.in_flight + self.stray


def open_attempts(*, exact: bool = False, using: str = "default") -> OpenAttempts:
    """The attempts without a receipt (see the module docstring): in flight, counted
    whole on indexes; stray, among the newest :data:`RECENT_CLAIMS_CHECKED` claims, or
    over the whole table when ``exact`` (an anti-join of every attempt: its cost grows with
    the history). Three queries (two when ``exact``)."""
    attempts = RunAttempt.objects.using(using)
    leased = Schedule.objects.using(using).filter(lease_expires_at__isnull=False)
    # overlap_policy allow: an occurrence's lease is a row of its own (OccurrenceLease).
    occurrences = OccurrenceLease.objects.using(using).values("lease_token")
    in_flight = attempts.filter(
        Q(lease_token__in=leased.values("lease_token")) | Q(lease_token__in=occurrences),
        receipt__isnull=True,
    ).count()
    holds_lease = Exists(
        Schedule.objects.using(using).filter(
            pk=OuterRef("schedule_id"), lease_token=OuterRef("lease_token")
        )
    ) | Exists(OccurrenceLease.objects.using(using).filter(lease_token=OuterRef("lease_token")))
    unreceipted = attempts.filter(receipt__isnull=True).filter(~holds_lease)
    checked: int | None = None
    if not exact:
        newest = attempts.order_by("-claimed_at").values_list("claimed_at", flat=True)
        cutoff = next(iter(newest[RECENT_CLAIMS_CHECKED - 1 : RECENT_CLAIMS_CHECKED]), None)
        if cutoff is not None:  # more attempts than checked: the newest ones only
            unreceipted = unreceipted.filter(claimed_at__gte=cutoff)
            checked = RECENT_CLAIMS_CHECKED
    return OpenAttempts(
        in_flight=in_flight, stray=unreceipted.count(), exact=checked is None, checked=checked
    )
