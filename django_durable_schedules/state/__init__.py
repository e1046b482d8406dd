"""The state machine: every transition of a schedule and every transaction lives here.

Transitions (all take an optional injected ``now``, an aware UTC datetime; by default the
*database* clock decides):

* :func:`claim_due` - lock due schedules (``SELECT ... FOR UPDATE SKIP LOCKED`` where the
  database has it, a write-locking transaction on SQLite), write one append-only
  :class:`~.models.RunAttempt` per claim with a fresh lease token, and advance
  ``next_run_at`` - all committed *before* any callback runs.
* :func:`renew_leases` - extend the leases a worker still holds; tells it which it lost.
* :func:`complete` - write the one :class:`~.models.RunReceipt` of each attempt and move the
  schedule on, but only while the exact lease token still owns the row (fencing).
* :func:`expire_leases` - recover claims whose lease ran out (a dead worker): receipt
  ``lease_expired``, the occurrence is retried (at-least-once).
* :func:`resume_paused` - resume the schedules whose pause (``disable(until=...)``) ended,
  by enable's rule (a worker's duty).
* :func:`enable`, :func:`disable`, :func:`trigger`, :func:`cancel`,
  :func:`delete_schedule` (allowed from the statuses of :data:`.control.ALLOWED`),
  :func:`rerun` (a new attempt of an earlier occurrence, :mod:`.reruns`),
  :func:`restore_definition` (an earlier version of the definition made current again, as
  an edit: :mod:`.restores`, with the pure :mod:`.version_rules`),
  :func:`create_schedule`, :func:`update_schedule` (a definition built and validated
  once by :func:`prepare`), :func:`sync_declared`,
  :func:`heartbeat`.

Callers (worker, admin, API, commands) never open transactions themselves.

On PostgreSQL every ``Schedule.save()`` here that leaves a next run also queues a NOTIFY in
the same transaction, waking idle workers when it commits (:mod:`.db.wakeups`).

The package, by transition family: :mod:`.values` (what passes between it and the worker),
:mod:`.bounds`, :mod:`.rules` (with :mod:`.slot_rules` and :mod:`.attempt_rules`) and
:mod:`.outcomes` (pure row arithmetic, no database),
:mod:`.runs` (claims, leases), :mod:`.completion`, :mod:`.control`, :mod:`.candidates`
(:func:`prepare`: a definition built and validated once), :mod:`.definitions`,
:mod:`.declared` (the schedules declared in code, synced), :mod:`.callback_recovery`
(schedules degraded for a missing callback, active again once it is registered),
:mod:`.backfills` (with its pure :mod:`.backfill_rules`), :mod:`.calendars` (exclusion
calendars, with the pure :mod:`.exclusion_rules`), :mod:`.blackouts` (blackout windows,
with the pure :mod:`.blackout_rules`; a schedule's list changed by name,
:mod:`.window_links`),
:mod:`.group_defs` (concurrency groups saved and deleted by name; the claim's side is
:mod:`.groups` and :mod:`.group_rules`),
:mod:`.events` (the audit trail), :mod:`.alert_rules` and :mod:`.alerts` (deadlines and
the engine's alert events, :func:`sweep_deadlines`), :mod:`.pause_rules` and :mod:`.pauses` (pauses with a note and
an end), :mod:`.workers`, and :mod:`.transitions` (the table of
every transition, rendered in docs/concepts.md).
"""

from ..db.clock import db_now
from ..exceptions import StateConflict
from ..limits import BACKOFF_BASE_MAX_SECONDS, BACKOFF_CAP_MAX_SECONDS, TIMEOUT_MAX_SECONDS
from .alert_rules import Owed, deadline_of, owed_occurrence
from .alerts import DeadlineSweep, sweep_deadlines
from .backfills import (
    BACKFILL_FROM,
    BackfillPlan,
    cancel_backfill,
    latest_backfill,
    open_backfill,
    plan_backfill,
    request_backfill,
)
from .blackouts import delete_window, resolve_windows, save_window
from .bounds import (
    UNEVALUABLE_PREFIX,
    bound_outcome,
    bound_retry_after,
    describe_problem,
)
from .calendars import (
    add_dates,
    calendars_changed,
    delete_calendar,
    remove_dates,
    save_calendar,
    set_schedule_calendars,
)
from .callback_recovery import recover_degraded
from .candidates import EDITABLE_FIELDS, Prepared, prepare
from .claim_order import worker_pools
from .completion import complete
from .control import ALLOWED, allowed_actions, cancel, delete_schedule, disable, trigger
from .declared import declared_fields, sync_declared
from .definitions import (
    create_schedule,
    update_schedule,
    validate_schedule,
    write_transaction,
)
from .deliveries import (
    ClaimedDelivery,
    claim_deliveries,
    enqueue_deliveries,
    finish_delivery,
    release_deliveries,
)
from .duplicates import duplicate_schedule
from .enabling import enable
from .events import record_event
from .group_defs import declared_group, delete_group, save_group, with_usage
from .leases import expire_leases, renew_leases
from .outcomes import backoff_for
from .pause_rules import NOTE_MAX_CHARS, check_pause
from .pauses import resume_paused
from .regrid import regrid_other_rules
from .reruns import rerun
from .restores import current_definition, definition_versions, restore_definition
from .rules import ONE_SECOND, idempotency_key
from .runs import claim_due
from .values import Claim, CompletionReport, Outcome, OutcomeStatus, Previous, Wakeup
from .window_links import change_windows
from .workers import heartbeat, next_wakeup, seconds_until

__all__ = [
    "ClaimedDelivery",
    "claim_deliveries",
    "enqueue_deliveries",
    "finish_delivery",
    "release_deliveries",
    "ALLOWED",
    "BACKFILL_FROM",
    "BACKOFF_BASE_MAX_SECONDS",
    "BACKOFF_CAP_MAX_SECONDS",
    "EDITABLE_FIELDS",
    "ONE_SECOND",
    "TIMEOUT_MAX_SECONDS",
    "UNEVALUABLE_PREFIX",
    "BackfillPlan",
    "DeadlineSweep",
    "Owed",
    "Claim",
    "CompletionReport",
    "Outcome",
    "OutcomeStatus",
    "Prepared",
    "Previous",
    "StateConflict",
    "Wakeup",
    "add_dates",
    "change_windows",
    "delete_window",
    "declared_group",
    "delete_group",
    "save_group",
    "with_usage",
    "resolve_windows",
    "save_window",
    "allowed_actions",
    "calendars_changed",
    "delete_calendar",
    "remove_dates",
    "save_calendar",
    "set_schedule_calendars",
    "backoff_for",
    "bound_outcome",
    "bound_retry_after",
    "cancel",
    "cancel_backfill",
    "claim_due",
    "complete",
    "create_schedule",
    "duplicate_schedule",
    "db_now",
    "deadline_of",
    "declared_fields",
    "delete_schedule",
    "describe_problem",
    "disable",
    "enable",
    "expire_leases",
    "heartbeat",
    "idempotency_key",
    "next_wakeup",
    "latest_backfill",
    "open_backfill",
    "owed_occurrence",
    "plan_backfill",
    "prepare",
    "recover_degraded",
    "regrid_other_rules",
    "record_event",
    "renew_leases",
    "request_backfill",
    "seconds_until",
    "sweep_deadlines",
    "resume_paused",
    "check_pause",
    "NOTE_MAX_CHARS",
    "sync_declared",
    "write_transaction",
    "trigger",
    "rerun",
    "restore_definition",
    "definition_versions",
    "current_definition",
    "update_schedule",
    "worker_pools",
    "validate_schedule",
]
