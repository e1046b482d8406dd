"""The schedule columns each step of the state machine reads and writes: a claim
(:mod:`.runs`), a completion (:mod:`.completion`) and a lease recovery (:mod:`.leases`)
write only these, and their locking reads leave out those no rule of theirs reads."""

from __future__ import annotations

#: Schedule columns a claim writes.
CLAIM_FIELDS = [
    "occurrence",
    "attempt",
    "retry_scheduled_for",
    "lease_token",
    "lease_expires_at",
    "next_run_at",
    "triggered_at",
    "trigger_payload",
    "trigger_ignores_blackout",
    "rerun_occurrence",
    "rerun_attempt",
    "buffered_for",
    "last_run_at",
    "missed_count",
    "excluded_count",
    "exclusions_checked_at",
    "blackout_count",
    "blackout_deferred",
    "status",
    "degraded_reason",
    "degraded_kind",
    "definition_hash",
]
#: Schedule columns a claim's locking read leaves out (no rule of a claim reads them).
CLAIM_UNREAD = ("metadata", "owner", "updated_at")
#: ... and those a completion's leaves out.
FINISH_UNREAD = ("payload", "metadata", "owner", "updated_at")
#: Schedule columns a completion or a recovery writes.
FINISH_FIELDS = [
    "attempt",
    "retry_scheduled_for",
    "triggered_at",
    "trigger_payload",
    "trigger_ignores_blackout",
    "rerun_occurrence",
    "rerun_attempt",
    "buffered_for",
    "buffered_through",
    "lease_token",
    "lease_expires_at",
    "next_run_at",
    "failure_count",
    "failed_occurrences",
    "missed_count",
    "status",
    "degraded_reason",
    "degraded_kind",
    "pause_reason",
    "excluded_count",
    "exclusions_checked_at",
]
#: The previous run's columns (issue #30, item 2): written by a completion only
#: (:func:`.previous_rules.note_success`, a success's changes), read by the claim
#: (:func:`.previous_rules.previous_of`); a lease recovery never moves them.
PREVIOUS_FIELDS = [
    "previous_occurrence",
    "previous_scheduled_for",
    "previous_finished_at",
    "previous_result",
]
#: Schedule columns a completion writes: those of a recovery and the previous run's.
COMPLETE_FIELDS = [*FINISH_FIELDS, *PREVIOUS_FIELDS]
