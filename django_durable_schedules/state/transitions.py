"""The transition table: every way a schedule's status, next run and receipts change.

Each row is one event on a schedule in one of its ``sources`` statuses: the status it
leaves the row in, what ``next_run_at`` becomes and which receipt is written. It is the
state machine described, not driving it: :mod:`.control` drives the operator actions from
:data:`.control.ALLOWED` (a test holds the two together), and docs/concepts.md shows the
table as :func:`render_markdown` renders it (a test holds that too).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..models import Status

ANY = frozenset(Status)
ACTIVE = frozenset({Status.ACTIVE})
PAUSED = frozenset({Status.PAUSED})
RUNNABLE = frozenset({Status.ACTIVE, Status.PAUSED})  # paused: only by a trigger
#: A row a run holds a lease on: claimed active or triggered, or paused or cancelled since.
LEASED = frozenset({Status.ACTIVE, Status.PAUSED, Status.CANCELLED})

#: A row not yet stored (its creation).
NEW: frozenset[str] = frozenset()

DEGRADED = "paused, degraded"
NEXT_OR_COMPLETED = "active (completed when no slot is left)"


@dataclass(frozen=True)
class Transition:
    """One row: ``event`` on a row in a status of ``sources``."""

    family: str  # "claim", "outcome" or "control"
    sources: frozenset[str]
    event: str
    target: str
    next_run_at: str
    receipt: str
    #: For a control row, the key of :data:`.control.ALLOWED` it describes.
    action: str = ""


TABLE: tuple[Transition, ...] = (
    # -- claims: claim_due, one locked row at a time ---------------------------------------
    Transition(
        "claim",
        ACTIVE,
        "due (or triggered)",
        "active, leased",
        "the next slot after now (`once`: none)",
        "none yet: an attempt with a live lease",
    ),
    Transition(
        "claim",
        ACTIVE,
        "a slot buffered while the previous run ran (`overlap_policy` buffer_one)",
        "active, leased",
        "the next slot after now",
        "none yet: an attempt (origin `buffered`, `scheduled_for` = that slot) with a live lease",
    ),
    Transition(
        "claim",
        RUNNABLE,
        "free (no lease, no live slot due, no retry, trigger or buffered slot), with an "
        "open backfill",
        "unchanged, leased",
        "unchanged (the live grid keeps its next slot)",
        "none yet: an attempt (origin `backfill`, `scheduled_for` = the backfill's next "
        "slot, its own occurrence) with a live lease",
    ),
    Transition(
        "claim",
        PAUSED,
        "triggered",
        "paused, leased",
        "none",
        "none yet: an attempt with a live lease",
    ),
    Transition(
        "claim",
        ACTIVE,
        "missed beyond `misfire_grace_seconds`",
        NEXT_OR_COMPLETED,
        "the next slot",
        "`missed`",
    ),
    Transition(
        "claim",
        ACTIVE,
        "missed slots, `misfire_policy` skip",
        NEXT_OR_COMPLETED,
        "the next slot",
        "none (counted in `missed_count`)",
    ),
    # Exclusion calendars (state.exclusion_rules): the slots of excluded dates are counted.
    Transition(
        "claim",
        ACTIVE,
        "slots of dates its exclusion calendars exclude passed since the last claim",
        "unchanged",
        "unchanged (its plans skipped them)",
        "none (`excluded_count`; event `excluded` per date: calendar, date, reason)",
    ),
    Transition(
        "claim",
        ACTIVE,
        "due slot on a date a calendar excludes now (added after it was planned)",
        NEXT_OR_COMPLETED,
        "the next slot no calendar excludes",
        "none (`excluded_count`, to the grid's end when no slot is left; event `excluded`)",
    ),
    Transition(
        "claim",
        RUNNABLE,
        "callback not registered",
        DEGRADED,
        "none (the occurrence is kept: it runs once the callback is registered again)",
        "`degraded`",
    ),
    Transition(
        "claim",
        RUNNABLE,
        "definition cannot be evaluated",
        DEGRADED,
        "none (a valid edit and enable bring it back)",
        "`degraded`",
    ),
    Transition(
        "claim",
        RUNNABLE,
        "the database refused the claim",
        DEGRADED,
        "none",
        "none (the reason is in `degraded_reason`)",
    ),
    Transition(
        "claim",
        ACTIVE,
        "edited behind `save()` (fingerprint differs)",
        NEXT_OR_COMPLETED,
        "the first slot of the new definition after now",
        "none",
    ),
    Transition(
        "claim",
        PAUSED,
        "triggered, edited behind `save()`",
        "paused",
        "none (the trigger is dropped)",
        "none",
    ),
    # -- outcomes: complete() (and expire_leases), on the row the lease token owns ---------
    Transition(
        "outcome",
        ACTIVE,
        "succeeded / enqueued",
        "active (completed after the last slot, `max_runs`, or a `once`)",
        "the next slot on the grid (slots passed while it ran are counted)",
        "`succeeded` / `enqueued` (`failure_count` reset)",
    ),
    Transition(
        "outcome",
        ACTIVE,
        "skipped",
        "active (completed after the last slot, `max_runs`, or a `once`)",
        "the next slot on the grid (slots passed while it ran are counted)",
        "`skipped` (`failure_count` kept)",
    ),
    Transition(
        "outcome",
        ACTIVE,
        "succeeded / enqueued / skipped / given up, slots passed while it ran, "
        "`overlap_policy` buffer_one",
        "active",
        "now: the first passed slot is buffered (`buffered_for`), the others are counted",
        "its own status (`slots_skipped`: the passed slots but the buffered one)",
    ),
    Transition(
        "outcome",
        frozenset({Status.PAUSED, Status.CANCELLED}),
        "succeeded / enqueued / skipped (paused or cancelled while it ran)",
        "unchanged",
        "unchanged (as the operator left it)",
        "`succeeded` / `enqueued` / `skipped`",
    ),
    Transition(
        "outcome",
        ACTIVE,
        "failed, retried (attempt < `max_attempts`)",
        "active",
        "now + `after_seconds`, else the backoff (the same occurrence)",
        "`failed`",
    ),
    Transition(
        "outcome",
        ACTIVE,
        "failed, given up (`max_attempts` reached)",
        "recurring: active (paused after `pause_after_failures` failed occurrences); "
        "`once`: failed",
        "recurring: the next slot; `once`: none",
        "`failed`",
    ),
    Transition(
        "outcome",
        LEASED,
        "any outcome of a backfill slot",
        "unchanged; `completed` when the slot's occurrence was the last of `max_runs` "
        "(backfill occurrences count towards it)",
        "unchanged (no retry, no backoff, `failure_count` kept); none when completed",
        "its own status; the backfill moves to its next slot, except after `released` "
        "(and `lease_expired` while attempts are left): the same slot's next attempt; "
        "after its last slot the backfill is completed (event `backfill_done`)",
    ),
    Transition(
        "outcome",
        LEASED,
        "failed, terminal (`FailRun`)",
        "failed",
        "none",
        "`failed`",
    ),
    Transition(
        "outcome",
        LEASED,
        "degraded (the callback vanished before it ran)",
        DEGRADED,
        "none (the occurrence is kept)",
        "`degraded`",
    ),
    Transition(
        "outcome",
        LEASED,
        "released (handed back unrun: at a stop, or after waiting too long for a thread)",
        "unchanged",
        "now: the same occurrence, its next attempt",
        "`released`",
    ),
    Transition(
        "outcome",
        ACTIVE,
        "lease expired (the worker died, or reported too late)",
        "as failed, retried at once; given up after `max_attempts`",
        "now: the same occurrence, its next attempt",
        "`lease_expired`",
    ),
    Transition(
        "outcome",
        LEASED,
        "lease lost (the token no longer owns the row)",
        "unchanged",
        "unchanged",
        "`lease_lost`, unless the recovery receipted the attempt",
    ),
    Transition(
        "outcome",
        LEASED,
        "cannot be applied (definition made invalid while it ran)",
        DEGRADED,
        "none",
        "the outcome's own status, noting the pause",
    ),
    # -- control: the operator actions (state.control) and edits ----------------------------
    Transition(
        "control",
        frozenset({Status.PAUSED, Status.FAILED}),
        "enable",
        NEXT_OR_COMPLETED,
        "the first slot after now (`once`: `run_at` while ahead, else now); a pending "
        "trigger is kept and runs first",
        "none (event `enabled`)",
        action="enable",
    ),
    Transition(
        "control",
        ACTIVE,
        "disable",
        "paused",
        "none (a pending retry is dropped; a pending trigger is kept and runs; a buffered "
        "slot is dropped and counted)",
        "none (event `disabled`)",
        action="disable",
    ),
    Transition(
        "control",
        RUNNABLE,
        "trigger (refused while it holds a lease; a no-op while a trigger is pending)",
        "unchanged",
        "now, as its own occurrence",
        "none (event `triggered`)",
        action="trigger",
    ),
    Transition(
        "control",
        frozenset({Status.ACTIVE, Status.PAUSED, Status.FAILED}),
        "cancel",
        "cancelled",
        "none",
        "none (event `cancelled`)",
        action="cancel",
    ),
    Transition(
        "control",
        RUNNABLE,
        "backfill `[start, end)` (`request_backfill`; refused while another is open)",
        "unchanged",
        "unchanged",
        "none (event `backfill`); cancel: event `backfill_cancel` (a schedule's cancel "
        "cancels it too)",
    ),
    Transition(
        "control",
        ANY,
        "delete (refused while it holds a lease or an open attempt)",
        "deleted (its attempts and receipts stay)",
        "-",
        "none (event `deleted`)",
        action="delete",
    ),
    Transition(
        "control",
        NEW,
        "create (`create_schedule`, `save()`, `bulk_create()`)",
        "active (or paused, when created disabled; completed when no slot is left "
        "after now, e.g. an `end_at` already past)",
        "active: the first slot at or after now by the database clock (an interval: now, "
        "its grid anchored at `created_at`, the same reading; a `once`: `run_at`, even if "
        "past); paused: none",
        "none (event `created`, except by `save()` and `bulk_create()`)",
    ),
    Transition(
        "control",
        ANY,
        "edit (`update_schedule`, `save()`)",
        "unchanged (active: completed when the new definition has no slot after now)",
        "active: the first slot of the new definition after now (the database clock); "
        "else unchanged",
        "none (event `edited`)",
    ),
    Transition(
        "control",
        ANY,
        "exclusion calendars changed: a calendar's dates or holiday "
        "codes, or the schedule's calendars (`state.calendars`, `update_schedule`)",
        "unchanged (completed when no slot is left)",
        "active, its next slot ahead: "
        "the first slot after now no calendar excludes (now when they cannot be "
        "evaluated: the claim degrades it); else unchanged",
        "none (event `calendars` or `edited` for the schedule's calendars)",
    ),
    Transition(
        "control",
        ACTIVE,
        "edit behind `save()` (`QuerySet.update()`, raw SQL), unleased",
        "active",
        "now; the next claim re-plans it (see the claim rows)",
        "none",
    ),
    Transition(
        "control",
        ACTIVE,
        "bulk pause behind `save()` (status set to paused)",
        "paused",
        "none, unless a trigger is pending",
        "none",
    ),
    Transition(
        "control",
        PAUSED,
        "bulk resume behind `save()` (status set to active, no next run)",
        "active",
        "now; the next claim re-plans it from now (no catch-up)",
        "none",
    ),
)


def render_markdown() -> str:
    """:data:`TABLE` as the Markdown that docs/concepts.md shows between its markers
    (:mod:`.transition_docs`)."""
    from .transition_docs import render_markdown as render

    return render()
