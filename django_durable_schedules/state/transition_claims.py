"""The claim rows of the transition table (:mod:`.transition_table`): what a claim
(``claim_due``, one locked row at a time) does to a due schedule. Data only."""

from __future__ import annotations

from ..models import Status
from .transition_terms import (
    ACTIVE,
    ACTIVE_OR_COMPLETED,
    DEGRADED,
    KEEPS,
    LEASED_ATTEMPT,
    NEXT_OR_COMPLETED,
    OVERRIDE_TAKEN,
    PAUSED,
    RUNNABLE,
    TO_PAUSED,
    T,
    Transition,
    seen,
)

# fmt: off
CLAIMS: tuple[Transition, ...] = (
    # -- claim_due, one locked row at a time -------------------------------------------------
    T("claim.run", ACTIVE, "due (or triggered)", "active, leased",
      "the next slot after now (`once`: none)", LEASED_ATTEMPT + OVERRIDE_TAKEN,
      frozenset({Status.ACTIVE}), seen("claim", "leased")),
    T("claim.retry", RUNNABLE,
      "a retry due (after a failure, a release, a lease expiry, or a degraded occurrence "
      "recovered)", "unchanged, leased", "the next slot after now (`once` or paused: none)",
      "none yet: an attempt (the same occurrence, its next attempt) with a live lease; the "
      "grid slots passed while it waited are counted (`missed_count`); a triggered "
      "occurrence's retry runs with the trigger's payload override, as the first attempt did",
      KEEPS, seen("claim", "leased")),
    T("claim.buffered", ACTIVE,
      "a slot buffered while the previous run ran (`overlap_policy` buffer_one or "
      "buffer_all)",
      "active, leased", "buffer_one: the next slot after now (the slots due since the "
      "buffering counted); buffer_all: the slot after the buffered one (still due while "
      "the queue lasts)",
      "none yet: an attempt (origin `buffered`, `scheduled_for` = that slot) with a live lease",
      frozenset({Status.ACTIVE}), seen("claim", "leased")),
    T("claim.backfill", RUNNABLE,
      "free (no lease, no live slot due, no retry, trigger or buffered slot), with an "
      "open backfill", "unchanged, leased", "unchanged (the live grid keeps its next slot)",
      "none yet: an attempt (origin `backfill`, `scheduled_for` = the backfill's next "
      "slot, its own occurrence) with a live lease; a backfill with `cascade` opens the "
      "slot's instant again on every schedule downstream (`waiting`, due by the claim "
      "plus its `wait_seconds`)",
      KEEPS, seen("claim", "leased")),
    T("claim.rerun", RUNNABLE, "a re-run pending (`rerun`)",
      "unchanged, leased (its `occurrence`/`attempt` counters, buffered slot and "
      "`missed_count` kept: they describe the grid)",
      "the grid's: a slot due before the request kept, else its next slot after the "
      "request (`once`: its `run_at`; paused: none)",
      "none yet: an attempt (origin `rerun`, occurrence N, attempt `rerun_attempt`, "
      "`scheduled_for` = the request's instant, N's own idempotency key) with a live "
      "lease; a callback no longer registered: `degraded` at once, the row not paused",
      KEEPS, seen("claim", "leased", "degraded")),
    T("claim.group_held", RUNNABLE,
      "due (or a retry, trigger, buffered or backfill slot), its concurrency group at "
      "`max_running` live leases or out of its `rate` (or its values unreadable)",
      "unchanged, not leased (claimed once the group has room)",
      "unchanged (it stays due; no slot is lost)",
      "none (the wait shows in the run's lateness when it starts); the group's "
      "`full_until` / `rate_until` let later claims skip it until then"),
    T("claim.parallel", RUNNABLE,
      "due (or triggered), `overlap_policy` allow, fewer than `max_parallel` of its "
      "occurrences running", "unchanged, not leased (claimable while the occurrence runs)",
      "the next slot after now, as `claim.run`",
      "none yet: an attempt whose live lease is a row of its own (`OccurrenceLease`), "
      "renewed, recovered and fenced like a row's", KEEPS, seen("claim", "leased")),
    T("claim.parallel_held", RUNNABLE,
      "due (or triggered), `overlap_policy` allow, `max_parallel` of its occurrences "
      "running", "unchanged, not leased (claimed once one of them ends)",
      "unchanged (it stays due; no slot is lost: once claimed, the slots passed follow "
      "`misfire_policy`)",
      "none; `parallel_full_until` (the earliest expiry of their leases) lets later "
      "claims skip it until then or until one of them ends"),
    T("claim.triggered_paused", PAUSED, "triggered", "paused, leased", "none",
      LEASED_ATTEMPT + OVERRIDE_TAKEN, TO_PAUSED, seen("claim", "leased")),
    T("claim.missed", ACTIVE, "missed beyond `misfire_grace_seconds`", NEXT_OR_COMPLETED,
      "the next slot", "`missed`", ACTIVE_OR_COMPLETED, seen("claim", "missed")),
    T("claim.skip_missed", ACTIVE, "missed slots, `misfire_policy` skip", NEXT_OR_COMPLETED,
      "the next slot", "none (counted in `missed_count`)",
      ACTIVE_OR_COMPLETED, seen("claim", "none")),
    T("claim.catch_up", ACTIVE, "missed slots, `misfire_policy` all", "active, leased",
      "the slot after the one it runs: still due while the backlog lasts (its completion "
      "keeps it; only slots due after the claim follow `overlap_policy`)",
      LEASED_ATTEMPT + " for the oldest pending slot; the ones before the newest "
      "`CATCH_UP_MAX` and those older than `misfire_grace_seconds` are counted "
      "(`missed_count`); if it is retried, handed back or degraded, the backlog due at its "
      "claim is counted", ACTIVE, seen("claim", "leased")),
    # Exclusion calendars (state.exclusion_rules): the slots of excluded dates are counted.
    T("claim.excluded_counted", ACTIVE,
      "slots of dates its exclusion calendars exclude passed since the last claim",
      "unchanged", "unchanged (its plans skipped them)",
      "none (`excluded_count`; event `excluded` per date: calendar, date, reason)"),
    T("claim.excluded_moved", ACTIVE,
      "slots of excluded dates passed since the last claim, `exclusion_policy` "
      "previous_business_day or next_business_day",
      "unchanged", "unchanged (its plans moved each to the nearest business day before or "
      "after, at its wall time)",
      "none (a moved slot runs at its moved instant; one that lands on an instant another "
      "slot runs at is coalesced into that run, or left without a business day: counted in "
      "`excluded_count`; event `excluded` per date with `policy`, `moved`, `moved_to`)"),
    T("claim.excluded_now", ACTIVE,
      "due slot on a date a calendar excludes now (added after it was planned)",
      NEXT_OR_COMPLETED, "the next slot no calendar excludes",
      "none (`excluded_count`, to the grid's end when no slot is left; event `excluded`)",
      ACTIVE_OR_COMPLETED, seen("claim", "none")),
    # Blackout windows (state.blackout_rules): no run starts inside a window of the row.
    T("claim.blackout_skip", ACTIVE,
      "grid slots inside a blackout window, `blackout_policy` skip", NEXT_OR_COMPLETED,
      "the first grid slot no window covers (unchanged after the window: a slot no window "
      "covers runs)",
      "none (`blackout_count`; event `blackout` per window: window, start, end, slots)",
      ACTIVE_OR_COMPLETED, seen("claim", "none", "leased")),
    T("claim.blackout_defer", ACTIVE,
      "grid slots inside a blackout window, `blackout_policy` defer", "unchanged",
      "the window's end (where the window follows others that overlap or touch it, the "
      "last one's)",
      "none yet (`blackout_count`, `blackout_deferred`; event `blackout`); at the end an "
      "attempt (origin `deferred`, `missed_slots` = the slots it stands for) with a live lease",
      frozenset({Status.ACTIVE}), seen("claim", "none", "leased")),
    T("claim.blackout_wait", RUNNABLE,
      "a retry, trigger, buffered or backfill slot due while a blackout window covers now "
      "(a trigger with `ignore_blackout` runs)", "unchanged",
      "the window's end (the retry, trigger or slot kept pending)", "none",
      KEEPS, seen("claim", "none")),
    T("claim.regrid", ACTIVE,
      "due instant planned under other zone rules (a tzdata update, another host's), no "
      "slot of the current grid due", NEXT_OR_COMPLETED,
      "that slot under the current rules (its wall time), ahead", "none",
      ACTIVE_OR_COMPLETED, seen("claim", "none")),
    T("claim.unregistered", RUNNABLE, "callback not registered", DEGRADED,
      "none (the occurrence is kept: it runs once the callback is registered again)",
      "`degraded`; a catch-up run (`misfire_policy` all) has the backlog due behind it "
      "counted (`missed_count`)", TO_PAUSED, seen("claim", "degraded")),
    T("claim.unevaluable", RUNNABLE,
      "definition cannot be evaluated, or a counter is no count (its attempt numbered "
      "from the ledger)", DEGRADED, "none (a valid edit and enable bring it back)",
      "`degraded`", TO_PAUSED, seen("claim", "degraded")),
    T("claim.refused", RUNNABLE, "the database refused the claim", DEGRADED, "none",
      "none (the reason is in `degraded_reason`)", TO_PAUSED, seen("claim", "none")),
    T("claim.edited", ACTIVE, "edited behind `save()` (fingerprint differs)",
      NEXT_OR_COMPLETED, "the first slot of the new definition after now", "none",
      ACTIVE_OR_COMPLETED, seen("claim", "none")),
    T("claim.edited_paused", PAUSED, "triggered, edited behind `save()`", "paused",
      "none (the trigger is dropped)", "none", TO_PAUSED, seen("claim", "none")),
    T("claim.backfill_unregistered", RUNNABLE,
      "free, with an open backfill, callback not registered", "unchanged (no lease)",
      "unchanged", "`degraded` (the backfill slot's attempt); the backfill moves to its "
      "next slot (the live claim pauses the schedule)",
      KEEPS, seen("claim", "degraded")),
    T("claim.backfill_cancelled", RUNNABLE,
      "free, with an open backfill whose next slot cannot be claimed (a stored slot no "
      "instant, a counter no count, an occurrence its attempts contradict, refused by the "
      "database)", "unchanged (no lease)", "unchanged",
      "none: the backfill is cancelled (event `backfill_cancel` by the worker, with the "
      "reason)", KEEPS, seen("claim", "none")),
    # Manual schedules (kind `manual`): no grid, they run only when triggered.
    T("claim.manual_never_due", RUNNABLE,
      "a `manual` schedule due with nothing pending (no trigger, retry or buffered slot: a "
      "next run written behind `save()`, by an edit or a resume)", "unchanged",
      "none (a manual schedule is never due by itself: it waits for a trigger)", "none",
      KEEPS, seen("claim", "none")),
    # Chaining (kind `after`, issue #30): slots that wait for upstream successes.
    T("claim.chain_slots", RUNNABLE,
      "a slot of a schedule that others run after is claimed or receipted missed (origin "
      "scheduled, buffered or deferred; first attempt)", "as the claim's own row says",
      "as the claim's own row says",
      "none more: every schedule downstream of it (the whole closure) gets a `waiting` "
      "chain slot for that nominal instant, due by the instant plus its `wait_seconds` "
      "(one per instant: a second upstream or a retry adds none)",
      KEEPS, seen("claim", "leased", "missed", "degraded")),
    T("claim.chain_run", ACTIVE,
      "a kind `after` schedule, free (no lease, retry, trigger or buffered slot), with a "
      "`ready` chain slot (every upstream succeeded for its instant)", "active, leased",
      "none (it has no grid of its own)",
      "none yet: an attempt (its own occurrence, `scheduled_for` = the oldest ready "
      "instant, whatever still waits before it) with a live lease; the chain slot is `run`",
      frozenset({Status.ACTIVE}), seen("claim", "leased")),
    T("claim.chain_missed", ACTIVE,
      "a kind `after` schedule, free, with `waiting` chain slots past their deadline",
      "unchanged (leased too when a ready slot runs in the same claim)", "none",
      "`missed` for each such instant (its own occurrence, `missed_count` + 1, the reason: "
      "which upstreams had not succeeded within `wait_seconds`); the chain slots are "
      "`missed`", frozenset({Status.ACTIVE}), seen("claim", "missed", "leased")),
)
# fmt: on
