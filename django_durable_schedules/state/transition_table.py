"""The rows of the transition table: every way a schedule's status, next run and receipts
change, each under a stable id that the rule implementing it declares
(:func:`.transitions.implements`).

Each row is one event on a schedule in one of its ``sources`` statuses: the status it
leaves the row in, what ``next_run_at`` becomes and which receipt is written (the prose
docs/concepts.md shows), and, for the checks, the statuses it may leave (``moves_to``;
:data:`SAME`: the one it had) and the worker steps it is seen as (``seen_as``, see
:data:`.transitions.STEPS`). Data only: :mod:`.transitions` reads it.
"""

from __future__ import annotations

from ..models import Status
from .transition_claims import CLAIMS
from .transition_terms import (
    ACTIVE,
    ACTIVE_OR_COMPLETED,
    AFTER_LAST,
    ANY,
    ANY_RECEIPT,
    AS_FAILED,
    DEGRADED,
    HALTED,
    KEEPS,
    LEASED,
    NEW,
    NEXT_OR_COMPLETED,
    PAUSED,
    RUNNABLE,
    TO_PAUSED,
    T,
    Transition,
    seen,
)

_COMPLETE_ANY = seen("complete", *ANY_RECEIPT)
_SUCCESS_OR_SKIP = ("succeeded", "enqueued", "skipped")

# fmt: off
OUTCOMES: tuple[Transition, ...] = (
    # -- complete() (and expire_leases), on the row the lease token owns ---------------------
    T("outcome.succeeded", ACTIVE, "succeeded / enqueued", AFTER_LAST,
      "the next slot on the grid (slots passed while it ran are counted)",
      "`succeeded` / `enqueued` (`failure_count` reset; the row's previous run, "
      "`ctx.previous`, moves to it unless a later slot's success is held)",
      ACTIVE_OR_COMPLETED, seen("complete", "succeeded", "enqueued")),
    T("outcome.skipped", ACTIVE, "skipped", AFTER_LAST,
      "the next slot on the grid (slots passed while it ran are counted)",
      "`skipped` (`failure_count` kept)", ACTIVE_OR_COMPLETED, seen("complete", "skipped")),
    T("outcome.buffered", ACTIVE,
      "succeeded / enqueued / skipped / given up, slots passed while it ran, "
      "`overlap_policy` buffer_one", "active",
      "now: the first passed slot is buffered (`buffered_for`), the others are counted",
      "its own status (`slots_skipped`: the passed slots but the buffered one)",
      frozenset({Status.ACTIVE}), seen("complete", *_SUCCESS_OR_SKIP, "failed")),
    T("outcome.buffered_all", ACTIVE,
      "succeeded / enqueued / skipped / given up, slots passed while it ran (or queued "
      "before), `overlap_policy` buffer_all", "active",
      "now: the oldest of the newest `BUFFER_MAX` passed slots is buffered "
      "(`buffered_for`); the ones after it stay queued on the grid, each buffered in turn "
      "by the completion before it; the older ones are counted",
      "its own status (`slots_skipped`: the passed slots before the newest `BUFFER_MAX`); "
      "a buffered run retried, handed back or degraded counts the queue behind it",
      frozenset({Status.ACTIVE}), seen("complete", *_SUCCESS_OR_SKIP, "failed")),
    T("outcome.replaced", LEASED,
      "replaced: the next slot came due while it ran (`overlap_policy` replace, with "
      "`timeout_seconds`); the worker killed its child process as at a timeout",
      "unchanged (active: completed when no slot is left)",
      "the newest passed slot, due at once (the earlier passed slots are counted); paused "
      "or cancelled meanwhile: unchanged",
      "`replaced` (no failure: no retry, `failure_count` kept; `slots_skipped`)",
      KEEPS | ACTIVE_OR_COMPLETED, seen("complete", "replaced")),
    T("outcome.halted", HALTED,
      "succeeded / enqueued / skipped (paused or cancelled while it ran)", "unchanged",
      "unchanged (as the operator left it)", "`succeeded` / `enqueued` / `skipped`",
      KEEPS, seen("complete", *_SUCCESS_OR_SKIP)),
    T("outcome.retried", ACTIVE, "failed, retried (attempt < `max_attempts`)", "active",
      "now + `after_seconds`, else the backoff (the same occurrence)", "`failed`",
      frozenset({Status.ACTIVE}), seen("complete", "failed")),
    T("outcome.given_up", ACTIVE, "failed, given up (`max_attempts` reached)",
      "recurring: active (paused after `pause_after_failures` failed occurrences); "
      "`once`: failed", "recurring: the next slot; `once`: none", "`failed`",
      AS_FAILED, seen("complete", "failed")),
    T("outcome.failed_halted", HALTED,
      "failed or lease expired (paused or cancelled while it ran)", "unchanged",
      "unchanged (no retry: the occurrence is given up, `failed_occurrences` counted)",
      "`failed` / `lease_expired`",
      KEEPS, seen("complete", "failed", "lease_expired") | seen("expire", "lease_expired")),
    T("outcome.parallel_succeeded", LEASED,
      "succeeded / enqueued / skipped / replaced, of an occurrence of an `overlap_policy` "
      "allow schedule (its own lease)",
      "unchanged; `completed` when its grid has no slot left", "unchanged (its claim moved "
      "the grid on); none when completed",
      "its own status (a success: `failure_count` reset, an open alert closed, the "
      "previous run moves to it; `skipped`: `failure_count` kept)",
      KEEPS | {Status.COMPLETED}, seen("complete", *_SUCCESS_OR_SKIP)),
    T("outcome.parallel_failed", LEASED,
      "failed (or its lease expired), of an occurrence of an `overlap_policy` allow "
      "schedule", "unchanged, or paused after `pause_after_failures` failed occurrences "
      "in a row, or failed (`FailRun`, a `once`)",
      "unchanged (never retried: later slots run beside it); none when paused or failed",
      "`failed` / `lease_expired` (`failure_count` and `failed_occurrences` + 1)",
      AS_FAILED | KEEPS, seen("complete", "failed") | seen("expire", "lease_expired")),
    T("outcome.parallel_unrun", LEASED,
      "released (handed back unrun) or degraded (its callback vanished), of an occurrence "
      "of an `overlap_policy` allow schedule", "unchanged; released: `completed` when its "
      "grid has no slot left; degraded: " + DEGRADED,
      "unchanged", "`released` / `degraded`; its slot counted in `missed_count` (later "
      "slots already run beside it)", KEEPS | TO_PAUSED | {Status.COMPLETED},
      seen("complete", "released", "degraded")),
    T("outcome.backfill", LEASED, "any outcome of a backfill slot",
      "unchanged; `completed` when the slot's occurrence was the last of `max_runs` "
      "(backfill occurrences count towards it)",
      "unchanged (no retry, no backoff, `failure_count` kept); none when completed",
      "its own status; the backfill moves to its next slot, except after `released` "
      "(and `lease_expired` while attempts are left): the same slot's next attempt; "
      "after its last slot the backfill is completed (event `backfill_done`); a success "
      "moves the previous run only when no later slot's success is held",
      KEEPS | {Status.COMPLETED}, _COMPLETE_ANY | seen("expire", "lease_expired")),
    T("outcome.rerun", LEASED, "any outcome of a re-run (`FailRun`, a lease expiry "
      "included)", "unchanged", "unchanged (one attempt: no retry, no backoff, "
      "`failure_count` and `failed_occurrences` kept, no pause after failures)",
      "its own status; a success of an occurrence that had succeeded before (a forced "
      "re-run): `forced`, no `succeeded_occurrence`; a success moves the previous run "
      "only when no later slot's success is held",
      KEEPS, _COMPLETE_ANY | seen("expire", "lease_expired")),
    T("outcome.terminal", LEASED, "failed, terminal (`FailRun`)", "failed", "none",
      "`failed`", frozenset({Status.FAILED}), seen("complete", "failed")),
    T("outcome.degraded", LEASED, "degraded (the callback vanished before it ran)", DEGRADED,
      "none (the occurrence is kept)", "`degraded`", TO_PAUSED, seen("complete", "degraded")),
    T("outcome.released", LEASED,
      "released (handed back unrun: at a stop, after waiting too long for a thread, or past "
      "its group rate's start deadline)",
      "unchanged", "now: the same occurrence, its next attempt", "`released`",
      KEEPS, seen("complete", "released")),
    T("outcome.lease_expired", ACTIVE, "lease expired (the worker died, or reported too late)",
      "as failed, retried at once; given up after `max_attempts`",
      "now: the same occurrence, its next attempt", "`lease_expired`",
      AS_FAILED, seen("complete", "lease_expired") | seen("expire", "lease_expired")),
    T("outcome.lease_lost", ANY, "lease lost (the token no longer owns the row)", "unchanged",
      "unchanged", "`lease_lost`, unless the recovery receipted the attempt",
      KEEPS, seen("complete", "lease_lost")),
    T("outcome.unappliable", LEASED,
      "cannot be applied, or the recovery cannot move it on (definition made invalid "
      "while it ran), or the row its lease still owns cannot be read at all (a value no "
      "conversion reads, written behind `save()` while it ran)", DEGRADED, "none",
      "the outcome's own status, noting the pause",
      TO_PAUSED, _COMPLETE_ANY | seen("expire", "lease_expired")),
    T("outcome.backfill_ended", LEASED,
      "any outcome that leaves the schedule completed or failed, with an open backfill",
      "as the outcome's own row says (completed or failed)", "none",
      "its own status; the open backfill is cancelled (event `backfill_cancel` by the "
      "worker, the schedule's status as the reason)"),
    T("outcome.manual_no_slot", RUNNABLE,
      "a `manual` schedule left without a slot (after its triggered run, an edit, an enable "
      "or a claim; `max_runs` and calendars are refused for it)",
      "unchanged: never `completed` for want of a slot (it has none and needs none)",
      "none until the next trigger", "its own (the outcome's)",
      KEEPS, seen("complete", *_SUCCESS_OR_SKIP, "failed")),
    T("outcome.chain_done", LEASED,
      "succeeded / enqueued, of an occurrence of the live grid or a backfill slot (not a "
      "trigger or a re-run) of a schedule others run after",
      "as the outcome's own row says", "as the outcome's own row says",
      "its own; each direct downstream's chain slot for the occurrence's nominal instant "
      "notes the upstream (a first attempt of the live grid creates it when missing: a "
      "link added since the claim) and is `ready` once every current upstream is in; a "
      "slot already run or missed stays so",
      KEEPS, seen("complete", "succeeded", "enqueued")),
)
# fmt: on

# fmt: off
RECOVERY: tuple[Transition, ...] = (
    # -- renew_leases, expire_leases, recover_degraded ----------------------------------------
    T("recovery.renew", LEASED, "lease renewed by its worker while live", "unchanged",
      "unchanged", "none (`lease_expires_at` = now + `lease_seconds`; a lost lease is "
      "reported to the worker)"),
    T("recovery.foreign_lease", LEASED,
      "lease expired whose token no attempt holds (written behind `save()`), displacing "
      "a run: the schedule's latest attempt, open or `lease_lost`",
      "as lease expired (a backfill slot's: as its outcome)",
      "now: the displaced occurrence, its next attempt",
      "`lease_expired` for the displaced attempt, unless it was receipted `lease_lost`",
      AS_FAILED | KEEPS, seen("expire", "lease_expired", "none")),
    T("recovery.foreign_lease_idle", LEASED,
      "lease expired whose token no attempt holds, on a row whose latest attempt is "
      "settled", "unchanged", "unchanged", "none (the lease is cleared)",
      KEEPS, seen("expire", "none")),
    T("recovery.lease_unrecoverable", LEASED,
      "lease expired that cannot be recovered (a value the engine cannot read, or the "
      "database refused the recovery)", DEGRADED, "none",
      "`lease_expired` for the attempt that held the lease, unless receipted (not "
      "retried), noting the pause; its open backfill is cancelled (a cancelled, "
      "completed or failed row keeps its status)",
      TO_PAUSED | KEEPS, seen("expire", "lease_expired", "none")),
    T("recovery.degraded", PAUSED,
      "callback registered again (`recover_degraded`, `sync_declared`), its occurrence "
      "kept", "active",
      "now: the kept occurrence, its next attempt; it runs once (the retry claim), then "
      "the grid goes on (slots passed meanwhile counted as missed)",
      "none (event `enabled`, source `worker`)",
      frozenset({Status.ACTIVE}), seen("recover", "none")),
    T("recovery.degraded_unkept", PAUSED,
      "callback registered (`recover_degraded`), degraded because its callback was "
      "missing (`degraded_kind` `callback`) before the occurrence was kept; a schedule "
      "degraded for another cause (`definition`, `lease`, `claim`) waits for an operator",
      "as enable", "as enable", "none (event `enabled`, source `worker`)",
      ACTIVE_OR_COMPLETED, seen("recover", "none")),
    T("recovery.regrid", ACTIVE,
      "worker start (`regrid_other_rules`): next run planned under other zone rules (a "
      "tzdata update), still ahead, nothing pending, definition unchanged", "unchanged",
      "the slot of the current grid nearest to it (its wall time under the current "
      "rules); one the update moved earlier runs on time", "none",
      KEEPS, seen("regrid", "none")),
)
# fmt: on

# fmt: off
CONTROL: tuple[Transition, ...] = (
    # -- the operator actions (state.control) and edits ---------------------------------------
    T("control.enable", frozenset({Status.PAUSED, Status.FAILED}), "enable", NEXT_OR_COMPLETED,
      "the first slot after now (`once`: `run_at` while ahead, else now); a pending "
      "trigger is kept and runs first", "none (event `enabled`)",
      ACTIVE_OR_COMPLETED, seen("enable", "none"), action="enable"),
    T("control.disable", ACTIVE,
      "disable, with an optional `note` (`pause_reason`) and `until` (`paused_until`: "
      "aware, later than now); on a row already paused by an operator (not degraded) a "
      "note or until updates them (event `disabled` with the changes)", "paused",
      "none (a pending retry is dropped; a pending trigger is kept and runs; a buffered "
      "slot is dropped and counted)", "none (event `disabled`)",
      TO_PAUSED, seen("disable", "none"), action="disable"),
    T("control.resume_until", PAUSED,
      "its pause's end (`paused_until`) passed by the database clock, not degraded "
      "(`resume_paused`: a worker's duty)", NEXT_OR_COMPLETED,
      "as enable: the first slot after now (no catch-up for the time paused); a pending "
      "trigger is kept and runs first", "none (event `enabled` by the worker; a "
      "definition it cannot evaluate: paused, degraded)",
      ACTIVE_OR_COMPLETED | KEEPS, seen("resume", "none")),
    T("control.trigger", RUNNABLE,
      "trigger, with an optional payload override, note and `ignore_blackout` (refused "
      "while it holds a lease; while a trigger is pending: a no-op with the same override, "
      "refused with another)",
      "unchanged", "now, as its own occurrence (the override kept in `trigger_payload`)",
      "none (event `triggered`: who, the note and the override)",
      KEEPS, seen("trigger", "none"), action="trigger"),
    T("control.rerun", RUNNABLE,
      "re-run occurrence N (`rerun`; refused while it holds a lease, while a trigger, "
      "re-run or retry is pending, while N has an open attempt or is an open backfill's "
      "slot, for an N that never ran, and for a succeeded N without `force`)",
      "unchanged", "now (a grid slot due earlier: kept)",
      "none (event `rerun`: occurrence, attempt, force, note, idempotency key)"),
    T("control.cancel", frozenset({Status.ACTIVE, Status.PAUSED, Status.FAILED}), "cancel",
      "cancelled", "none", "none (event `cancelled`)",
      frozenset({Status.CANCELLED}), seen("cancel", "none"), action="cancel"),
    T("control.backfill", RUNNABLE,
      "backfill `[start, end)` (`request_backfill`; refused while another is open)",
      "unchanged", "unchanged", "none (event `backfill`); cancel: event `backfill_cancel` "
      "(a schedule's cancel cancels it too)"),
    T("control.delete", ANY, "delete (refused while it holds a lease or an open attempt)",
      "deleted (its attempts and receipts stay)", "-", "none (event `deleted`)",
      frozenset(), action="delete"),
    T("control.create", NEW, "create (`create_schedule`, `sync_declared`, `save()`, "
      "`bulk_create()`)",
      "active (or paused, when created disabled; completed when no slot is left "
      "after now, e.g. an `end_at` already past)",
      "active: the first slot at or after now by the database clock (an interval: now, "
      "its grid anchored at `created_at`, the same reading; a `once`: `run_at`, even if "
      "past); paused: none",
      "none (event `created`: who and where by the state functions; source `code` by "
      "`save()` and `bulk_create()`)",
      frozenset({Status.ACTIVE, Status.PAUSED, Status.COMPLETED})),
    T("control.edit", ANY, "edit (`update_schedule`, `sync_declared`, `save()`)",
      "unchanged (active: completed when the new definition has no slot after now)",
      "active: the first slot of the new definition after now (the database clock); "
      "else unchanged", "none (event `edited`)", KEEPS | {Status.COMPLETED}),
    T("control.calendars", ANY,
      "exclusion calendars changed: a calendar's dates or holiday "
      "codes, or the schedule's calendars (`state.calendars`, `update_schedule`)",
      "unchanged (completed when no slot is left)",
      "active, its next slot ahead: "
      "the first slot after now no calendar excludes (now when they cannot be "
      "evaluated: the claim degrades it); else unchanged",
      "none (event `calendars` or `edited` for the schedule's calendars)",
      KEEPS | {Status.COMPLETED}),
    T("control.edit_behind_save", ACTIVE,
      "edit behind `save()` (`QuerySet.update()`, raw SQL), unleased", "active",
      "now; the next claim re-plans it (see the claim rows)", "none"),
    T("control.pause_behind_save", ACTIVE, "bulk pause behind `save()` (status set to paused)",
      "paused", "none, unless a trigger is pending", "none", TO_PAUSED),
    T("control.resume_behind_save", PAUSED,
      "bulk resume behind `save()` (status set to active, no next run)", "active",
      "now; the next claim re-plans it from now (no catch-up)", "none",
      frozenset({Status.ACTIVE})),
)
# fmt: on

# fmt: off
ALERTS: tuple[Transition, ...] = (
    # -- the engine's alerts (issue #26; state.alert_rules): status and next run unchanged --
    T("alert.deadline_missed", ACTIVE,
      "the deadline of the occurrence it owes (its slot + `deadline_seconds`) passed by the "
      "database clock, not yet reported (`sweep_deadlines`: a worker's duty, and at its "
      "start)", "unchanged", "unchanged",
      "none (event `deadline_missed` by the worker, once per occurrence: "
      "`deadline_missed_occurrence`; alert `late` opens)"),
    T("alert.failing", ACTIVE, "failed attempts in a row reach `FAILING_AFTER`",
      "as the failure's own row", "as the failure's own row",
      "its own (event `failing` by the worker, once per episode; alert `failing` opens)"),
    T("alert.degraded", LEASED, "paused as degraded by the engine (any `degraded` row)",
      DEGRADED, "as the degrading row",
      "its own (event `degraded` by the worker, once per episode; alert `degraded` opens)",
      TO_PAUSED | KEEPS),
    T("alert.paused", ACTIVE, "paused after `pause_after_failures` failed occurrences",
      "paused", "none", "its own (event `paused` by the worker)", TO_PAUSED),
    T("alert.recovered", LEASED, "succeeded / enqueued with an alert open", "as succeeded",
      "as succeeded", "its own (event `recovered` by the worker, the closed episodes; "
      "every alert closes)", ACTIVE_OR_COMPLETED | KEEPS),
)
# fmt: on

#: Every row, by family, in the order docs/concepts.md shows them.
TABLE: tuple[Transition, ...] = CLAIMS + OUTCOMES + RECOVERY + CONTROL + ALERTS
