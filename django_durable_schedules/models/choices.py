"""The enumerations of the models (kinds, statuses, receipt statuses, misfire policies,
audit actions) and the field groups that define a schedule.
"""

from __future__ import annotations

from django.core.validators import RegexValidator
from django.db import models

from ..declarations import NAME_RE, POOL_MESSAGE
from ..declarations import POOL_RE as POOL_RE  # re-exported: the models' names for them
from ..declarations import PRIORITY_MAX as PRIORITY_MAX
from ..declarations import PRIORITY_MIN as PRIORITY_MIN


class Kind(models.TextChoices):
    INTERVAL = "interval", "interval"
    CRON = "cron", "cron"
    ONCE = "once", "once"
    RRULE = "rrule", "rrule"
    #: No spec: never due by itself, runs only when triggered (each trigger its own
    #: occurrence), never completed for having no slot left.
    MANUAL = "manual", "manual"
    #: No spec: runs each nominal instant of its upstream schedules (``Schedule.upstream``)
    #: once every one of them succeeded for it (chaining); counted missed past
    #: ``wait_seconds``.
    AFTER = "after", "after (runs after its upstream schedules)"


#: The kinds with no grid of their own (never due by themselves, never completed for
#: having no slot left): ``manual`` runs when triggered, ``after`` when its upstreams
#: succeeded for an instant.
NO_GRID = (Kind.MANUAL, Kind.AFTER)


class Status(models.TextChoices):
    ACTIVE = "active", "active"
    PAUSED = "paused", "paused"
    COMPLETED = "completed", "completed"
    CANCELLED = "cancelled", "cancelled"
    FAILED = "failed", "failed"


class ReceiptStatus(models.TextChoices):
    SUCCEEDED = "succeeded", "succeeded"
    ENQUEUED = "enqueued", "enqueued"
    SKIPPED = "skipped", "skipped"
    FAILED = "failed", "failed"
    DEGRADED = "degraded", "degraded"
    LEASE_EXPIRED = "lease_expired", "lease expired"
    LEASE_LOST = "lease_lost", "lease lost"
    RELEASED = "released", "released"
    MISSED = "missed", "missed"
    REPLACED = "replaced", "replaced by the next slot (overlap_policy replace)"


#: Receipt statuses that finish an occurrence successfully: the callback returned
#: (``succeeded``) or its task was handed to an execution engine (``enqueued``).
SUCCESS_STATUSES = (ReceiptStatus.SUCCEEDED, ReceiptStatus.ENQUEUED)


class MisfirePolicy(models.TextChoices):
    COALESCE = "coalesce", "coalesce missed slots into one late run"
    SKIP = "skip", "skip missed slots"
    ALL = "all", "run every missed slot, oldest first (at most CATCH_UP_MAX)"


class OverlapPolicy(models.TextChoices):
    SKIP = "skip", "skip slots that come due while it runs"
    BUFFER_ONE = "buffer_one", "run one of them right after the run, skip the others"
    BUFFER_ALL = "buffer_all", "run each of them after the run, oldest first (at most BUFFER_MAX)"
    REPLACE = "replace", "stop the running one (receipt replaced) and run the new slot"
    ALLOW = "allow", "run it beside the running ones (at most max_parallel at once)"


class ExclusionPolicy(models.TextChoices):
    """What a schedule does with a slot whose local date a calendar excludes."""

    SKIP = "skip", "skip: count the excluded slot, run none"
    PREVIOUS_BUSINESS_DAY = (
        "previous_business_day",
        "previous business day: run it on the nearest business day before, same wall time",
    )
    NEXT_BUSINESS_DAY = (
        "next_business_day",
        "next business day: run it on the nearest business day after, same wall time",
    )


class BlackoutPolicy(models.TextChoices):
    """What a schedule does with its slots inside one of its blackout windows."""

    SKIP = "skip", "skip: count the slots inside a window, run none of them"
    DEFER = "defer", "defer: run the slots inside a window once, at the window's end"


class AttemptOrigin(models.TextChoices):
    """Why an attempt was claimed (shown with it, so a late run says where it came from)."""

    SCHEDULED = "scheduled", "scheduled"
    TRIGGERED = "triggered", "triggered"
    BUFFERED = "buffered", "buffered (overlap_policy buffer_one)"
    BACKFILL = "backfill", "backfill"
    RERUN = "rerun", "re-run of an earlier occurrence"
    DEFERRED = "deferred", "deferred to a blackout window's end"


class DegradedKind(models.TextChoices):
    """Why a schedule was paused as degraded (``Schedule.degraded_kind``), the data the
    engine reads; ``degraded_reason`` is the same in words, for people. Only ``callback``
    comes back by itself (when the callback is registered again); every other kind waits
    for an operator (a valid edit where needed, then ``enable``)."""

    CALLBACK = "callback", "its callback is not registered"
    DEFINITION = "definition", "its definition cannot be evaluated"
    LEASE = "lease", "its expired lease could not be recovered"
    CLAIM = "claim", "the database refused its claim"


class BackfillStatus(models.TextChoices):
    ACTIVE = "active", "active"
    COMPLETED = "completed", "completed"
    CANCELLED = "cancelled", "cancelled"


class EventAction(models.TextChoices):
    CREATED = "created", "created"
    EDITED = "edited", "edited"
    ENABLED = "enabled", "enabled"
    DISABLED = "disabled", "disabled"
    CANCELLED = "cancelled", "cancelled"
    TRIGGERED = "triggered", "triggered"
    DELETED = "deleted", "deleted"
    BACKFILL = "backfill", "backfill requested"
    BACKFILL_CANCEL = "backfill_cancel", "backfill cancelled"
    BACKFILL_DONE = "backfill_done", "backfill completed"
    EXCLUDED = "excluded", "excluded by a calendar"
    CALENDARS = "calendars", "exclusion calendars changed"
    # Written by the engine (source ``worker``), the alerts NOTIFIERS deliver:
    DEADLINE_MISSED = "deadline_missed", "deadline missed"
    FAILING = "failing", "failing (the failure streak reached its threshold)"
    DEGRADED = "degraded", "degraded (paused by the engine)"
    PAUSED = "paused", "paused by the engine"
    RECOVERED = "recovered", "recovered (succeeded after an alert)"
    # Operator control (issue #27):
    RERUN = "rerun", "re-run of an occurrence requested"
    BLACKOUT = "blackout", "slots blacked out by a window"
    BLACKOUTS = "blackouts", "blackout windows changed"
    GROUP = "group", "concurrency group changed"


class Alert(models.TextChoices):
    """An alert episode open on a schedule (``Schedule.open_alerts``) until its next
    success, which writes one ``recovered`` event."""

    LATE = "late", "an occurrence missed its deadline"
    FAILING = "failing", "the failure streak reached its threshold"
    DEGRADED = "degraded", "paused by the engine as degraded"


name_validator = RegexValidator(
    NAME_RE, "1-128 of letters, digits, '_', '.', ':' or '-', starting with a letter or digit."
)

#: The pool of a schedule that names none, and the pool a worker started without
#: ``--pool`` claims.
DEFAULT_POOL = "default"
#: A pool's name (``POOL_RE``, defined in :mod:`..registry`, which checks ``register(pool=)``
#: against it too): 1-64 of letters, digits, '_', '.', ':' or '-', starting with a letter
#: or digit (the names of schedules, shorter). ``PRIORITY_MIN``/``PRIORITY_MAX``:
#: ``Schedule.priority``'s range (a 16-bit integer on every database).
pool_validator = RegexValidator(POOL_RE, POOL_MESSAGE)

#: Fields that define *when* a schedule fires; a change to any of them is an edit. In the
#: order of the definition's fingerprint (``Schedule.definition_hash``, stored on every
#: row; ``rrule`` and ``extra_specs``, added later, last): never reorder it (tests/test_field_groups.py).
DEFINITION_FIELDS = (
    "kind",
    "interval_seconds",
    "cron",
    "timezone",
    "run_at",
    "start_at",
    "end_at",
    "rrule",
    "extra_specs",
    "exclusion_policy",
    "rrule_business_days",
)

# The fields a caller may set, in named groups: the one list of them. The admin's form and
# fieldsets, the API's writable fields and ``state.EDITABLE_FIELDS`` are derived from (or,
# for the API's order, checked against) these (tests/test_field_groups.py). Every other
# field of a schedule is run state, written only by the state package.

#: What a schedule is: its unique name and the registered callback it runs.
IDENTITY_FIELDS = ("name", "callback")
#: When it fires: the definition (:data:`DEFINITION_FIELDS`, in the order the admin and
#: the API show them), its run limit, the schedules a kind ``after`` runs after
#: (``upstream``, a relation) and the exclusion calendars (a relation).
TIMING_FIELDS = (
    "kind",
    "upstream",
    "interval_seconds",
    "cron",
    "rrule",
    "extra_specs",
    "timezone",
    "run_at",
    "start_at",
    "end_at",
    "max_runs",
    "exclusion_calendars",
    "exclusion_policy",
    "rrule_business_days",
    "blackout_windows",
)
#: What a run is given (``payload``), what it is labelled with, and whose it is.
INPUT_FIELDS = ("payload", "metadata", "owner")
#: How runs are treated: missed and overlapping slots, retries and backoff, pausing,
#: timeouts, jitter, and how long a kind ``after`` waits for its upstreams (the order of the
#: admin's "Policies"). ``wait_seconds`` is a policy, not part of :data:`DEFINITION_FIELDS`:
#: it moves no nominal instant (an ``after`` schedule's grid is its upstreams'), only when
#: an instant still waiting is counted missed, so it neither changes the definition's
#: fingerprint nor re-plans the row.
POLICY_FIELDS = (
    "misfire_policy",
    "overlap_policy",
    "max_parallel",
    "max_attempts",
    "jitter_seconds",
    "misfire_grace_seconds",
    "backoff_base_seconds",
    "backoff_cap_seconds",
    "pause_after_failures",
    "timeout_seconds",
    "deadline_seconds",
    "blackout_policy",
    "priority",
    "pool",
    "concurrency_group",
    "wait_seconds",
)
#: Every editable field, in group order (the admin form's order).
EDITABLE_ORDER = IDENTITY_FIELDS + TIMING_FIELDS + INPUT_FIELDS + POLICY_FIELDS
#: Fields a caller may set (``state.create_schedule`` / ``state.update_schedule``, the
#: admin, the API): the union of the groups; run state (status, counters, leases,
#: ``next_run_at``) changes only through the state package.
EDITABLE_FIELDS = frozenset(EDITABLE_ORDER)

#: The timing fields a ``manual`` schedule refuses (``Schedule.clean()``): it has no spec,
#: no window and no run limit (exclusion calendars are refused by its spec).
MANUAL_REFUSES = ("interval_seconds", "cron", "rrule", "run_at", "start_at", "end_at", "max_runs")

#: Schedule instants: stored as whole UTC seconds.
INSTANT_FIELDS = ("run_at", "start_at", "end_at", "next_run_at")

#: The help text of ``Schedule.extra_specs`` (the admin and the schema show it).
EXTRA_SPECS_HELP = (
    "Further specs for a cron or rrule schedule, each a cron expression or a rule "
    "(starting with FREQ= or RRULE:), read in the same zone, window and exclusion calendars: "
    "the schedule fires on the union, once at an instant several of them share. "
    "['0 9 * * 1-5', 'FREQ=MONTHLY;BYMONTHDAY=1;BYHOUR=9;BYMINUTE=0']; at most 10."
)

#: The help texts of ``Schedule.exclusion_policy`` and ``Schedule.rrule_business_days``.
EXCLUSION_POLICY_HELP = (
    "A slot whose local date one of its exclusion calendars excludes: 'skip' counts it and "
    "runs none; 'previous_business_day' / 'next_business_day' run it on the nearest business "
    "day (not excluded, not a weekend day of its calendars) before / after it, at the same "
    "wall time (cron and rrule schedules). A moved slot that lands on another slot runs once."
)
#: (The admin's form and the API's schema show the model's help text; migration 0034 made it
#: name FREQ=YEARLY too.)
RRULE_BUSINESS_DAYS_HELP = (
    "Count the rule's BYMONTHDAY and BYSETPOS over business days only (FREQ=MONTHLY, or "
    "FREQ=YEARLY with BYMONTH): 'FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1' is then the "
    "last business day of the month, 'FREQ=YEARLY;BYMONTH=12;BYDAY=MO,TU,WE,TH,FR;"
    "BYSETPOS=-1' that of December, its calendars' holidays removed before the pick."
)

#: The help text of ``Schedule.rrule`` (the admin and the schema show it).
RRULE_HELP = (
    "An RFC 5545 recurrence rule in the schedule's zone: "
    "'FREQ=WEEKLY;INTERVAL=2;BYDAY=TU;BYHOUR=9;BYMINUTE=0' (every other Tuesday at 09:00), "
    "'FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1' (the last weekday of the month). "
    "Times it leaves out come from start_at, else midnight of the creation day. No COUNT "
    "(use max_runs), DTSTART or TZID."
)
