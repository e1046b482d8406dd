"""``Schedule``: the definition of when and what to run, and its run state (written only
by :mod:`..state`); ``save()`` plans ``next_run_at``. What the definition means in time and
its fingerprint: :mod:`.definition`; its normalisation and validation: :mod:`.validation`;
its indexes and constraints: :mod:`.schedule_meta`.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models, router

from .. import timing
from ..db.fast_orm import FastLoading
from ..limits import CHAIN_WAIT_MAX_SECONDS, MAX_PARALLEL_MAX
from .blackouts import BlackoutsMixin
from .calendars import ExclusionsMixin
from .choices import (
    DEFAULT_POOL,
    EXCLUSION_POLICY_HELP,
    EXTRA_SPECS_HELP,
    PRIORITY_MAX,
    PRIORITY_MIN,
    RRULE_BUSINESS_DAYS_HELP,
    RRULE_HELP,
    BlackoutPolicy,
    DegradedKind,
    ExclusionPolicy,
    Kind,
    MisfirePolicy,
    OverlapPolicy,
    Status,
    name_validator,
    pool_validator,
)
from .definition import DefinitionMixin, same_definition
from .queries import ScheduleQuerySet
from .schedule_meta import schedule_constraints, schedule_indexes
from .validation import ValidationMixin, default_timezone

__all__ = ["Schedule", "default_timezone"]


class Schedule(
    DefinitionMixin, ValidationMixin, BlackoutsMixin, ExclusionsMixin, FastLoading, models.Model
):
    """A named, durable schedule of a registered callback.

    ``next_run_at`` (aware UTC, whole seconds) is the single source of what is due; the
    state machine advances it on the nominal grid. ``lease_token``/``lease_expires_at`` are
    set together while a worker holds the current attempt.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=128, validators=[name_validator])  # unique: Meta
    callback = models.CharField(max_length=128, help_text="Name of a registered callback.")
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.INTERVAL)
    interval_seconds = models.PositiveBigIntegerField(null=True, blank=True)
    cron = models.CharField(
        max_length=200,
        blank=True,
        default="",
        help_text="Five fields, minute hour day-of-month month day-of-week, in the schedule's "
        "zone: '30 2 * * *' (02:30 daily), '0 9 * * 1-5' (09:00 on weekdays), '*/15 * * * *' "
        "(every 15 minutes), '0 0 1 * *' (monthly); or @daily, @hourly, @weekly, @monthly.",
    )
    rrule = models.CharField(max_length=500, blank=True, default="", help_text=RRULE_HELP)
    extra_specs = models.JSONField(default=list, blank=True, help_text=EXTRA_SPECS_HELP)
    timezone = models.CharField(
        max_length=64,
        default=default_timezone,
        blank=True,
        help_text="IANA time zone the cron, the rule and the instants are read in: "
        "'Europe/Paris', 'America/New_York', 'Asia/Tokyo', 'UTC' (any case). Blank: the "
        "TIME_ZONE setting.",
    )
    run_at = models.DateTimeField(null=True, blank=True)
    start_at = models.DateTimeField(null=True, blank=True)
    end_at = models.DateTimeField(null=True, blank=True)
    max_runs = models.PositiveIntegerField(null=True, blank=True, validators=[MinValueValidator(1)])
    payload = models.JSONField(default=dict, blank=True)
    metadata = models.JSONField(default=dict, blank=True)

    misfire_policy = models.CharField(
        max_length=16, choices=MisfirePolicy.choices, default=MisfirePolicy.COALESCE
    )
    overlap_policy = models.CharField(
        max_length=16,
        choices=OverlapPolicy.choices,
        default=OverlapPolicy.SKIP,
        help_text="Slots that come due while a run is still running: 'skip' counts them and "
        "waits for the next slot; 'buffer_one' runs the first of them right after the run "
        "(as its own occurrence) and counts the others as skipped; 'buffer_all' runs each "
        "of them in turn, oldest first (at most BUFFER_MAX queued, older ones counted); "
        "'replace' stops the running one (needs timeout_seconds) and runs the new slot; "
        "'allow' runs it beside the running ones, at most max_parallel at once.",
    )
    #: ``overlap_policy`` allow: the row was held back at its ``max_parallel`` running
    #: occurrences; claims skip it until this instant (the earliest expiry of their
    #: leases then) or until one of them ends (which clears it). Written by the state
    #: package only (state/parallel.py).
    parallel_full_until = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="overlap_policy allow: held at max_parallel running occurrences until then.",
    )
    #: ``overlap_policy`` allow: how many occurrences may run at once (each with its own
    #: lease, :class:`.parallel.OccurrenceLease`); ignored by the other policies.
    max_parallel = models.PositiveSmallIntegerField(
        default=2,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_PARALLEL_MAX)],
        help_text="With overlap_policy 'allow': at most this many occurrences run at once "
        f"(1-{MAX_PARALLEL_MAX}); a slot due while they all run waits, due.",
    )
    jitter_seconds = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Delay each occurrence by a deterministic offset in [0, jitter] seconds "
        "(the same on every worker), to spread load. At most half the shortest gap between slots.",
    )
    misfire_grace_seconds = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Catch-up window: a slot later than this when claimed is receipted 'missed' "
        "instead of run (seconds; blank = no limit).",
    )
    max_attempts = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Attempts per occurrence; blank = the MAX_ATTEMPTS setting.",
    )
    backoff_base_seconds = models.FloatField(
        null=True, blank=True, help_text="First retry delay (seconds); blank = the setting."
    )
    backoff_cap_seconds = models.FloatField(
        null=True, blank=True, help_text="Longest retry delay (seconds); blank = the setting."
    )
    pause_after_failures = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Pause after this many consecutive failed occurrences (blank = never).",
    )
    timeout_seconds = models.FloatField(
        null=True,
        blank=True,
        help_text="Longest run (seconds): the callback runs in a child process that is "
        "killed at the deadline (receipt failed, Timeout). Blank = no limit.",
    )

    deadline_seconds = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1)],
        help_text="Each occurrence must succeed within this many seconds of its slot; when "
        "it does not, a deadline_missed event is written (blank = no deadline).",
    )

    priority = models.SmallIntegerField(
        default=0,
        validators=[MinValueValidator(PRIORITY_MIN), MaxValueValidator(PRIORITY_MAX)],
        help_text="Among schedules due at once, a claim takes higher priorities first, then "
        f"the earliest due ({PRIORITY_MIN} to {PRIORITY_MAX}; default 0).",
    )
    pool = models.CharField(
        max_length=64,
        default=DEFAULT_POOL,
        validators=[pool_validator],
        help_text="The worker pool that runs it: only workers started with "
        "'run_scheduler --pool NAME' for this name claim it (a worker without --pool "
        "claims the pool 'default').",
    )

    concurrency_group = models.ForeignKey(
        "durable_schedules.ConcurrencyGroup",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="schedules",
        db_index=False,  # the partial index of Meta (dds_sched_group_lease_idx) serves it
        help_text="A limit shared with other schedules: at most its max_running runs at "
        "once and its rate of starts; a slot held back waits, due, and is never lost.",
    )

    upstream = models.ManyToManyField(
        "self",
        through="durable_schedules.ScheduleLink",
        through_fields=("downstream", "upstream"),
        symmetrical=False,
        related_name="downstream",
        blank=True,
        editable=False,  # written by the state package (links are checked as a graph)
        help_text="Schedules this one runs after (kind 'after'): it runs each nominal "
        "instant once every one of them succeeded for it.",
    )
    wait_seconds = models.PositiveIntegerField(
        default=3600,
        validators=[MinValueValidator(1), MaxValueValidator(CHAIN_WAIT_MAX_SECONDS)],
        help_text="Kind 'after': how long after a nominal instant it waits for its upstreams' "
        "successes; past it the instant is counted missed, with the reason (seconds, 1 to "
        "31 days; default one hour).",
    )

    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    degraded_reason = models.CharField(max_length=500, blank=True, default="")
    #: Why it is degraded, as data (:class:`.choices.DegradedKind`); set and cleared with
    #: ``degraded_reason`` by the state package only.
    degraded_kind = models.CharField(
        max_length=16, choices=DegradedKind.choices, blank=True, default="", editable=False
    )
    next_run_at = models.DateTimeField(null=True, blank=True)
    last_run_at = models.DateTimeField(null=True, blank=True)
    occurrence = models.PositiveIntegerField(default=0, help_text="Occurrences fired so far.")
    attempt = models.PositiveIntegerField(
        default=0, help_text="Attempts made on the current occurrence."
    )
    retry_scheduled_for = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Set while the current occurrence awaits a retry: its slot.",
    )
    triggered_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="A manual run was requested at this instant; the next claim runs it as its own occurrence.",
    )
    buffered_for = models.DateTimeField(  # overlap_policy buffer_one, see plan_overlap
        null=True, blank=True, editable=False, help_text="A slot buffered while a run ran."
    )
    #: ``overlap_policy`` buffer_all: the last slot of the queue whose first is
    #: ``buffered_for`` (the slots between them run after it, in turn); None for a slot
    #: buffered alone (buffer_one). Set with ``buffered_for`` by the state package only
    #: (state/overlap_rules.py), read only while ``buffered_for`` is set.
    buffered_through = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="The last slot queued behind the buffered one (overlap_policy buffer_all).",
    )
    #: What the pending trigger (or re-run) runs with: set with ``triggered_at`` by the
    #: state package only (issue #27), cleared when it is claimed.
    trigger_payload = models.JSONField(
        null=True,
        blank=True,
        editable=False,
        help_text="The pending trigger's payload override (merged over payload at the top "
        "level), kept for the retries of the occurrence it started; blank: none.",
    )
    trigger_ignores_blackout = models.BooleanField(
        default=False,
        editable=False,
        help_text="The pending trigger may start inside a blackout window.",
    )
    rerun_occurrence = models.PositiveIntegerField(
        null=True,
        blank=True,
        editable=False,
        help_text="The pending trigger is a re-run of this earlier occurrence (its own "
        "idempotency key), as attempt rerun_attempt.",
    )
    rerun_attempt = models.PositiveIntegerField(
        null=True, blank=True, editable=False, help_text="The attempt number of the re-run."
    )
    pause_reason = models.CharField(
        max_length=500,
        blank=True,
        default="",
        help_text="Why it is paused: the scheduler's reason, or the operator's note.",
    )
    paused_until = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="A pause with an end: at this instant a worker resumes the schedule "
        "(as enable does: no catch-up). Blank: paused until enabled.",
    )
    failed_occurrences = models.PositiveIntegerField(
        default=0,
        help_text="Consecutive occurrences given up after failing (for pause_after_failures).",
    )
    failure_count = models.PositiveIntegerField(default=0, help_text="Consecutive failed attempts.")
    #: The last occurrence whose deadline was reported missed (each is reported once).
    deadline_missed_occurrence = models.PositiveIntegerField(
        null=True, blank=True, editable=False, help_text="The last occurrence reported late."
    )
    #: Alert episodes open until the next success (space-separated :class:`.choices.Alert`
    #: values); set and cleared by the state package only.
    open_alerts = models.CharField(
        max_length=64,
        blank=True,
        default="",
        editable=False,
        help_text="Alert episodes open until the next success: late, failing, degraded.",
    )
    missed_count = models.PositiveBigIntegerField(
        default=0, help_text="Slots passed over in total."
    )
    exclusion_calendars = models.ManyToManyField(
        "durable_schedules.ExclusionCalendar",
        blank=True,
        related_name="schedules",
        help_text="Calendars whose dates (local dates, in this schedule's zone) it must not "
        "fire on. Not for a once schedule.",
    )
    excluded_count = models.PositiveBigIntegerField(
        default=0, help_text="Slots not run because a calendar excluded their date."
    )
    exclusions_checked_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="Slots up to this instant were checked against the exclusion calendars "
        "(the excluded ones counted); blank: since the last claim.",
    )
    exclusion_policy = models.CharField(
        max_length=24,
        choices=ExclusionPolicy.choices,
        default=ExclusionPolicy.SKIP,
        help_text=EXCLUSION_POLICY_HELP,
    )
    rrule_business_days = models.BooleanField(default=False, help_text=RRULE_BUSINESS_DAYS_HELP)
    blackout_windows = models.ManyToManyField(
        "durable_schedules.BlackoutWindow",
        blank=True,
        related_name="schedules",
        help_text="Windows in which no run of it may start (see blackout_policy).",
    )
    blackout_policy = models.CharField(
        max_length=16,
        choices=BlackoutPolicy.choices,
        default=BlackoutPolicy.SKIP,
        help_text="Slots inside one of its blackout windows: 'skip' counts them and runs "
        "none; 'defer' runs them once, at the window's end.",
    )
    blackout_count = models.PositiveBigIntegerField(
        default=0, help_text="Slots not run (or deferred) because a blackout window covered them."
    )
    blackout_deferred = models.PositiveIntegerField(
        default=0,
        editable=False,
        help_text="Policy defer: the run waiting for next_run_at (a blackout window's end) "
        "stands for this many slots inside the window; 0: none waits.",
    )
    #: The last successful run (``succeeded`` or ``enqueued``) by nominal instant: what a
    #: callback reads as ``ctx.previous`` (issue #30, item 2). Set by the state package only
    #: (state/previous_rules.py), by the completion's write of the row; read by the claim's.
    previous_occurrence = models.PositiveIntegerField(
        null=True,
        blank=True,
        editable=False,
        help_text="The last successful occurrence (the latest nominal instant that succeeded).",
    )
    previous_scheduled_for = models.DateTimeField(
        null=True, blank=True, editable=False, help_text="Its nominal instant."
    )
    previous_finished_at = models.DateTimeField(
        null=True, blank=True, editable=False, help_text="When it finished."
    )
    previous_result = models.JSONField(
        null=True,
        blank=True,
        editable=False,
        help_text="Its result, bounded as its receipt stores it (RESULT_MAX_BYTES).",
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="durable_schedules",
        db_index=False,  # dds_sched_owner_idx: partial, rows with an owner only
    )
    lease_token = models.UUIDField(null=True, blank=True, editable=False)
    lease_expires_at = models.DateTimeField(null=True, blank=True, editable=False)
    definition_hash = models.CharField(max_length=40, blank=True, default="", editable=False)
    created_at = models.DateTimeField(
        editable=False,
        help_text="When the row was created, by the database clock (the interval grid's origin "
        "when start_at is blank). Set by save() and bulk_create() when not given.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    objects = ScheduleQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        indexes = schedule_indexes()
        constraints = schedule_constraints()

    def __str__(self) -> str:
        return self.name

    def save(
        self,
        *args: Any,
        now: datetime | None = None,
        planned: bool = False,
        audit: bool = True,
        **kwargs: Any,
    ) -> None:
        """Normalise instants to whole UTC seconds, fingerprint the definition and plan
        ``next_run_at``, by the database clock.

        Raises ``ValidationError`` for a duration outside its bounds (backoff, timeout,
        catch-up window: see ``clean()``), since the engine could not use it.

        When the definition changed (a new row, or an edit of a definition field) it reads
        the database clock once (:func:`.db.clock.db_now`: one query) and plans with the
        state kernel's :func:`~..state.machine.plan_definition`, the plan the claim of an
        edit made behind ``save()`` uses: a new active schedule gets its first slot (an
        interval is due at once, its grid anchored at ``created_at``); an edit re-plans to
        the first slot of the new definition strictly after now, so an edit never fires a
        run by itself. An active schedule with no slot left (``end_at`` already past,
        ``max_runs`` reached) is ``completed``. A new row without ``created_at`` gets the
        database clock's time. An edit of other fields (name, payload, policies) plans
        nothing and reads no clock.

        ``now``: the database clock's time already read in the caller's transaction (a state
        function reads it once for the row, its plan and its event), read instead of the
        clock's. ``planned``: the caller (a state function: :func:`~..state.enable`)
        planned ``next_run_at`` itself, for the definition as it is now; ``save()`` then
        plans nothing and only stores the definition's fingerprint when the definition
        changed (so the next claim does not take the row for one edited behind ``save()``).

        A new row (an ``INSERT``) is recorded as a ``created`` event, source ``code``, in
        its transaction (:mod:`..state.code_events`: the database's audit trigger muted,
        three statements more). ``audit=False``: the caller (a state function) records the
        event itself, with who and from where.
        """
        self._normalize()
        bound_errors = self._bound_errors()
        if bound_errors:  # never store a value the engine would overflow on (1e12 s, NaN)
            raise ValidationError(bound_errors)
        new_hash = self.compute_definition_hash()
        # The same definition fingerprinted under other zone rules is no edit: the stored
        # fingerprint stays, for the claim to check next_run_at against the current grid.
        edited = not same_definition(self.definition_hash, new_hash)
        update_fields = kwargs.get("update_fields")
        if planned and edited:
            self.definition_hash, edited = new_hash, False
            if update_fields is not None:
                kwargs["update_fields"] = update_fields = {*update_fields, "definition_hash"}
        using = kwargs.get("using") or router.db_for_write(type(self), instance=self)
        db_time = now
        if edited or self.created_at is None:
            from ..db import clock

            db_time = now if now is not None else clock.db_now(using)
            if self.created_at is None:
                self.created_at = db_time
                if update_fields is not None:
                    update_fields = set(update_fields) | {"created_at"}
            if edited:
                from ..state.machine import plan_definition

                first = self._state.adding and self.occurrence == 0
                plan_definition(self, timing.truncate_to_second(db_time), new_hash, first=first)
            if update_fields is not None:
                planned_fields = {"definition_hash", "next_run_at", "buffered_for", "status"}
                kwargs["update_fields"] = set(update_fields) | planned_fields
        inserting_row = (self._state.adding or kwargs.get("force_insert")) and not (
            kwargs.get("force_update") or update_fields is not None
        )
        if not inserting_row:
            super().save(*args, **kwargs)
            return
        from ..state.code_events import inserting

        with inserting([self], using, now=db_time, audit_rows=audit):
            super().save(*args, **kwargs)

    def delete(
        self, using: str | None = None, keep_parents: bool = False, *, audit: bool = True
    ) -> tuple[int, dict[str, int]]:
        """Delete the row as ``Model.delete()`` does, recorded as a ``deleted`` event
        (source ``code``) in its transaction (:mod:`..state.code_events`); none when the
        row was already gone. ``audit=False``: the caller (a state function) recorded the
        event itself. Its attempts, receipts and events stay (no foreign key constraint)."""
        from ..state.code_events import delete_rows

        if self.pk is None:
            raise ValueError(
                f"{self._meta.object_name} object can't be deleted because its id is None."
            )
        using = using or router.db_for_write(type(self), instance=self)
        return delete_rows([self], using, origin=self, keep_parents=keep_parents, audit_rows=audit)
