"""Models: schedules, their append-only run attempts and receipts, worker heartbeats.

Invariants live in ``Meta.constraints`` (the database enforces them); transitions live in
:mod:`django_durable_schedules.state`. Attempts and receipts are append-only: triggers
installed by the migrations refuse UPDATE and DELETE (see :mod:`.db.guards`).
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models, router
from django.db.models import Q
from django.utils import timezone as dj_timezone

from . import timing
from .limits import DURATION_BOUNDS
from .registry import NAME_RE


class Kind(models.TextChoices):
    INTERVAL = "interval", "interval"
    CRON = "cron", "cron"
    ONCE = "once", "once"


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


#: Receipt statuses that finish an occurrence successfully: the callback returned
#: (``succeeded``) or its task was handed to an execution engine (``enqueued``).
SUCCESS_STATUSES = (ReceiptStatus.SUCCEEDED, ReceiptStatus.ENQUEUED)


class MisfirePolicy(models.TextChoices):
    COALESCE = "coalesce", "coalesce missed slots into one late run"
    SKIP = "skip", "skip missed slots"


name_validator = RegexValidator(
    NAME_RE, "1-128 of letters, digits, '_', '.', ':' or '-', starting with a letter or digit."
)

#: Fields that define *when* a schedule fires; a change to any of them is an edit.
DEFINITION_FIELDS = ("kind", "interval_seconds", "cron", "timezone", "run_at", "start_at", "end_at")
#: Schedule instants: stored as whole UTC seconds.
INSTANT_FIELDS = ("run_at", "start_at", "end_at", "next_run_at")


METADATA_MAX_KEYS = 50
METADATA_MAX_VALUE_CHARS = 500


def _metadata_errors(metadata: Any) -> dict[str, list[str]]:
    """``metadata`` must be a flat JSON object: at most 50 string keys of at most 100
    characters, scalar values, strings at most 500 characters."""
    if metadata in (None, {}):
        return {}
    problems = []
    if not isinstance(metadata, dict):
        problems.append("Must be a JSON object.")
    else:
        if len(metadata) > METADATA_MAX_KEYS:
            problems.append(f"At most {METADATA_MAX_KEYS} keys.")
        for key, value in list(metadata.items())[: METADATA_MAX_KEYS + 1]:
            if not isinstance(key, str) or len(key) > 100:
                problems.append("Keys must be strings of at most 100 characters.")
            if not (value is None or isinstance(value, (bool, int, float, str))):
                problems.append(f"{key!r}: values must be scalars (flat metadata).")
            elif isinstance(value, str) and len(value) > METADATA_MAX_VALUE_CHARS:
                problems.append(f"{key!r}: at most {METADATA_MAX_VALUE_CHARS} characters.")
    return {"metadata": problems} if problems else {}


class ScheduleQuerySet(models.QuerySet["Schedule"]):
    """The named predicates on schedules, one definition each, used by the state machine,
    health, the admin and the API (``Schedule.objects.claimable(now)``). Each has a ``*_q``
    twin returning the ``Q`` object, for aggregates (``Count("id", filter=...)``).
    ``now`` is an aware UTC datetime, or an SQL expression of the database clock."""

    def bulk_create(self, objs: Any, *args: Any, **kwargs: Any) -> list[Schedule]:
        """``QuerySet.bulk_create`` that prepares new rows as ``save()`` does, with one read
        of the database clock for the whole batch: instants normalised, a missing
        ``created_at`` set to the database clock's time, a missing ``definition_hash``
        computed, and an active row without ``next_run_at`` planned to its first slot.
        Values given explicitly are kept (a bench may seed ``next_run_at``). Durations are
        not validated here (as with ``update()``, the engine bounds them when used)."""
        objs = list(objs)
        if any(obj.created_at is None or not obj.definition_hash for obj in objs):
            from .db import clock
            from .state.rules import plan_next

            db_time = clock.db_now(self._db or router.db_for_write(self.model))
            now = timing.truncate_to_second(db_time)
            for obj in objs:
                obj._normalize()
                if obj.created_at is None:
                    obj.created_at = db_time
                if not obj.definition_hash:
                    obj.definition_hash = obj.compute_definition_hash()
                    if obj.status == Status.ACTIVE and obj.next_run_at is None:
                        obj.next_run_at = plan_next(obj, now, first=True)
        return super().bulk_create(objs, *args, **kwargs)

    @staticmethod
    def runnable_q() -> Q:
        """Rows a worker may run when due: active ones, and paused ones that were
        triggered (a paused schedule runs only when triggered, however it was paused)."""
        return Q(status=Status.ACTIVE) | Q(status=Status.PAUSED, triggered_at__isnull=False)

    @classmethod
    def claimable_q(cls, now: Any) -> Q:
        """Runnable, unleased and due: ``next_run_at <= now``."""
        return cls.runnable_q() & Q(lease_token__isnull=True, next_run_at__lte=now)

    def claimable(self, now: Any) -> ScheduleQuerySet:
        """What a claim may take at ``now`` (see :meth:`claimable_q`)."""
        return self.filter(self.claimable_q(now))

    def waiting(self) -> ScheduleQuerySet:
        """Runnable, unleased rows with a next run: what an idle worker waits for."""
        return self.filter(self.runnable_q(), lease_token__isnull=True, next_run_at__isnull=False)

    @staticmethod
    def failing_q() -> Q:
        """Consecutive failed attempts on a schedule that still runs (active or paused); a
        terminally ``failed`` schedule is counted by its status instead."""
        return Q(failure_count__gt=0, status__in=(Status.ACTIVE, Status.PAUSED))

    def failing(self) -> ScheduleQuerySet:
        """See :meth:`failing_q`."""
        return self.filter(self.failing_q())

    @staticmethod
    def degraded_q() -> Q:
        """Paused by the engine because it could not run or evaluate it (a reason is set)."""
        return ~Q(degraded_reason="")

    def degraded(self) -> ScheduleQuerySet:
        """See :meth:`degraded_q`."""
        return self.filter(self.degraded_q())

    @staticmethod
    def leased_q() -> Q:
        """A worker holds (or held, until recovery) the current attempt's lease."""
        return Q(lease_token__isnull=False)

    def leased(self) -> ScheduleQuerySet:
        """See :meth:`leased_q`."""
        return self.filter(self.leased_q())

    @staticmethod
    def lease_live_q(now: Any) -> Q:
        """A lease that has not expired at ``now``."""
        return Q(lease_expires_at__gt=now)

    @staticmethod
    def lease_expired_q(now: Any) -> Q:
        """A lease that expired at or before ``now`` and was not recovered yet."""
        return Q(lease_expires_at__lte=now)

    def lease_expired(self, now: Any) -> ScheduleQuerySet:
        """See :meth:`lease_expired_q`."""
        return self.filter(self.lease_expired_q(now))


def _default_timezone() -> str:
    return settings.TIME_ZONE or "UTC"


class Schedule(models.Model):
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
    cron = models.CharField(max_length=200, blank=True, default="")
    timezone = models.CharField(max_length=64, default=_default_timezone, blank=True)
    run_at = models.DateTimeField(null=True, blank=True)
    start_at = models.DateTimeField(null=True, blank=True)
    end_at = models.DateTimeField(null=True, blank=True)
    max_runs = models.PositiveIntegerField(null=True, blank=True)
    payload = models.JSONField(default=dict, blank=True)
    metadata = models.JSONField(default=dict, blank=True)

    misfire_policy = models.CharField(
        max_length=16, choices=MisfirePolicy.choices, default=MisfirePolicy.COALESCE
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

    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    degraded_reason = models.CharField(max_length=500, blank=True, default="")
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
    pause_reason = models.CharField(
        max_length=500, blank=True, default="", help_text="Why the scheduler paused it by itself."
    )
    failed_occurrences = models.PositiveIntegerField(
        default=0,
        help_text="Consecutive occurrences given up after failing (for pause_after_failures).",
    )
    failure_count = models.PositiveIntegerField(default=0, help_text="Consecutive failed attempts.")
    missed_count = models.PositiveBigIntegerField(
        default=0, help_text="Slots passed over in total."
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="durable_schedules",
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
        indexes = [
            # The due query: status = active AND next_run_at <= now ORDER BY next_run_at LIMIT n.
            models.Index(fields=["status", "next_run_at"], name="dds_sched_due_idx"),
            # Lease recovery: lease_expires_at <= now.
            models.Index(fields=["lease_expires_at"], name="dds_sched_lease_idx"),
        ]
        constraints = [
            # A constraint rather than unique=True: PostgreSQL then gets no extra LIKE index
            # to maintain on every claim and completion (docs/benchmarks.md).
            models.UniqueConstraint(fields=["name"], name="dds_sched_name_unique"),
            models.CheckConstraint(condition=Q(kind__in=Kind.values), name="dds_sched_kind_valid"),
            models.CheckConstraint(
                condition=Q(status__in=Status.values), name="dds_sched_status_valid"
            ),
            models.CheckConstraint(
                condition=Q(lease_token__isnull=True, lease_expires_at__isnull=True)
                | Q(lease_token__isnull=False, lease_expires_at__isnull=False),
                name="dds_sched_lease_paired",
            ),
            models.CheckConstraint(
                condition=~Q(kind=Kind.INTERVAL) | Q(interval_seconds__gte=1),
                name="dds_sched_interval_needs_seconds",
            ),
            models.CheckConstraint(
                condition=~Q(kind=Kind.CRON) | ~Q(cron=""), name="dds_sched_cron_needs_expr"
            ),
            models.CheckConstraint(
                condition=~Q(kind=Kind.ONCE) | Q(run_at__isnull=False),
                name="dds_sched_once_needs_run_at",
            ),
            models.CheckConstraint(
                condition=Q(start_at__isnull=True)
                | Q(end_at__isnull=True)
                | Q(end_at__gte=models.F("start_at")),
                name="dds_sched_window_ordered",
            ),
            models.CheckConstraint(
                condition=(Q(backoff_base_seconds__isnull=True) | Q(backoff_base_seconds__gte=0))
                & (Q(backoff_cap_seconds__isnull=True) | Q(backoff_cap_seconds__gte=0))
                & (Q(timeout_seconds__isnull=True) | Q(timeout_seconds__gt=0)),
                name="dds_sched_durations_positive",
            ),
            models.CheckConstraint(
                condition=Q(max_runs__isnull=True) | Q(max_runs__gte=1),
                name="dds_sched_max_runs_positive",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def save(self, *args: Any, **kwargs: Any) -> None:
        """Normalise instants to whole UTC seconds, fingerprint the definition and plan
        ``next_run_at``, by the database clock.

        Raises ``ValidationError`` for a duration outside its bounds (backoff, timeout,
        catch-up window: see ``clean()``), since the engine could not use it.

        When the definition changed (a new row, or an edit of a definition field) it reads
        the database clock once (:func:`.db.clock.db_now`: one query) and plans with
        :func:`.state.rules.plan_next`: a new active schedule gets its first slot (an
        interval is due at once, its grid anchored at ``created_at``); an edit re-plans to
        the first slot of the new definition strictly after now, so an edit never fires a
        run by itself. A new row without ``created_at`` gets the database clock's time. An
        edit of other fields (name, payload, policies) plans nothing and reads no clock.
        """
        self._normalize()
        bound_errors = self._bound_errors()
        if bound_errors:  # never store a value the engine would overflow on (1e12 s, NaN)
            raise ValidationError(bound_errors)
        new_hash = self.compute_definition_hash()
        if self.definition_hash != new_hash or self.created_at is None:
            from .db import clock
            from .state.rules import plan_next

            using = kwargs.get("using") or router.db_for_write(type(self), instance=self)
            db_time = clock.db_now(using)
            update_fields = kwargs.get("update_fields")
            if self.created_at is None:
                self.created_at = db_time
                if update_fields is not None:
                    update_fields = set(update_fields) | {"created_at"}
            now = timing.truncate_to_second(db_time)
            first = self._state.adding and self.occurrence == 0
            if self.status == Status.ACTIVE and self.definition_hash != new_hash:
                self.next_run_at = plan_next(self, now, first=first)
            self.definition_hash = new_hash
            if update_fields is not None:
                kwargs["update_fields"] = set(update_fields) | {"definition_hash", "next_run_at"}
        super().save(*args, **kwargs)

    # -- validation and normalisation -----------------------------------------------------

    def _normalize(self) -> None:
        if not self.timezone:
            self.timezone = _default_timezone()
        if self.cron:
            self.cron = " ".join(self.cron.split())
        for f in INSTANT_FIELDS:
            value = getattr(self, f)
            if isinstance(value, datetime) and dj_timezone.is_aware(value):
                setattr(self, f, timing.truncate_to_second(value))

    def clean(self) -> None:
        """Validate the definition; raises ``ValidationError`` with field messages."""
        errors: dict[str, list[str]] = {}
        for f in ("run_at", "start_at", "end_at"):
            value = getattr(self, f)
            if isinstance(value, datetime) and dj_timezone.is_naive(value):
                errors.setdefault(f, []).append(
                    "An aware datetime is required (a naive one is neither UTC nor local time)."
                )
        if errors:
            raise ValidationError(errors)
        self._normalize()
        from .registry import registry

        if self.callback and self.callback not in registry:
            errors.setdefault("callback", []).append(
                f"{self.callback!r} is not a registered callback."
            )
        try:
            self.spec().validate()
        except timing.InvalidSchedule as exc:
            errors.setdefault(exc.field, []).append(exc.message)
        for field, messages in self._bound_errors().items():
            errors.setdefault(field, []).extend(messages)
        if self.backoff_base_seconds and self.backoff_cap_seconds is not None:
            if self.backoff_cap_seconds < self.backoff_base_seconds:
                errors.setdefault("backoff_cap_seconds", []).append(
                    "Must not be shorter than backoff_base_seconds."
                )
        errors.update(_metadata_errors(self.metadata))
        if self.jitter_seconds and not errors:
            times = timing.upcoming(self.spec(), dj_timezone.now(), 10)
            gaps = [(b - a).total_seconds() for a, b in zip(times, times[1:], strict=False)]
            if gaps and self.jitter_seconds > min(gaps) / 2:
                errors["jitter_seconds"] = [
                    f"At most half the shortest gap between slots ({min(gaps) / 2:g} seconds)."
                ]
        if errors:
            raise ValidationError(errors)

    def _bound_errors(self) -> dict[str, list[str]]:
        """Field messages for durations outside their bounds (``DURATION_BOUNDS``, in
        seconds; NaN, infinities and non-numbers are outside every bound)."""
        errors: dict[str, list[str]] = {}
        for field, low, high in DURATION_BOUNDS:
            value = getattr(self, field)
            if value is None:
                continue
            valid = isinstance(value, int | float) and not isinstance(value, bool)
            if not (valid and low < value <= high):  # the comparison is also false for NaN
                errors[field] = [f"Must be more than {low:g} and at most {high:g} seconds."]
        return errors

    # -- definition ---------------------------------------------------------------------

    @property
    def anchor(self) -> datetime:
        """Origin of the interval grid: ``start_at``, else creation time (for a row not yet
        saved, the host clock's now: a preview; ``save()`` sets ``created_at``)."""
        return self.start_at or timing.truncate_to_second(self.created_at or dj_timezone.now())

    def spec(self) -> timing.Spec:
        """The pure timing definition of this schedule (see :mod:`.timing`)."""
        return timing.Spec(
            kind=self.kind,
            interval_seconds=self.interval_seconds,
            cron=self.cron or None,
            timezone=self.timezone or "UTC",
            run_at=self.run_at,
            anchor=self.anchor if self.kind == Kind.INTERVAL else None,
            start_at=self.start_at,
            end_at=self.end_at,
        )

    def compute_definition_hash(self) -> str:
        """Fingerprint of the definition fields; lets the worker notice edits made behind
        ``save()`` (``QuerySet.update()``, raw SQL) and re-plan instead of firing."""
        parts = []
        for f in DEFINITION_FIELDS:
            value = getattr(self, f)
            if isinstance(value, datetime):
                value = timing.truncate_to_second(value).isoformat()
            parts.append(f"{f}={value!s}")
        return hashlib.sha1("|".join(parts).encode()).hexdigest()

    def due_at(self, slot: datetime | None) -> datetime | None:
        """When ``slot`` becomes due: the slot plus this schedule's deterministic jitter
        (SHA-256 of ``"<id>:<slot epoch seconds>"``, so every worker agrees)."""
        if slot is None or not self.jitter_seconds:
            return slot
        key = f"{self.id}:{int(slot.timestamp())}"
        return slot + timedelta(seconds=timing.jitter_offset(key, self.jitter_seconds))

    def upcoming(self, count: int = 5, after: datetime | None = None) -> list[datetime]:
        """The next ``count`` fire times (aware UTC datetimes) strictly after ``after``
        (default: now), by the same computation the worker uses. Works unsaved."""
        self._normalize()
        after = timing.require_aware(after, "after") if after else dj_timezone.now()
        return timing.upcoming(self.spec(), after, count)


class RunAttempt(models.Model):
    """One claim of one occurrence by one worker (append-only).

    ``lease_expires_at`` is the lease as first granted; renewals extend the schedule's
    lease, not this row. ``missed_slots`` counts slots passed over before this attempt
    (downtime coalescing or overlap). The schedule foreign key has no database constraint
    on purpose: the audit trail outlives a deleted schedule.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    schedule = models.ForeignKey(
        Schedule, on_delete=models.DO_NOTHING, db_constraint=False, related_name="attempts"
    )
    schedule_name = models.CharField(max_length=128)
    occurrence = models.PositiveIntegerField()
    attempt = models.PositiveIntegerField()
    scheduled_for = models.DateTimeField()
    claimed_at = models.DateTimeField()
    lease_token = models.UUIDField(unique=True)
    lease_expires_at = models.DateTimeField()
    worker = models.CharField(max_length=200)
    idempotency_key = models.CharField(max_length=200)
    missed_slots = models.PositiveBigIntegerField(default=0)

    class Meta:
        ordering = ["-claimed_at"]
        indexes = [models.Index(fields=["claimed_at"], name="dds_attempt_claimed_idx")]
        constraints = [
            models.UniqueConstraint(
                fields=["schedule", "occurrence", "attempt"],
                name="dds_attempt_unique_per_occurrence",
            ),
            models.CheckConstraint(condition=Q(attempt__gte=1), name="dds_attempt_number_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.schedule_name} #{self.occurrence}.{self.attempt}"

    @property
    def lateness(self) -> float:
        """Seconds between the slot and the claim."""
        return (self.claimed_at - self.scheduled_for).total_seconds()


class RunReceipt(models.Model):
    """The one outcome of one attempt (append-only).

    ``succeeded_occurrence`` equals ``occurrence`` for a success (``succeeded``, or
    ``enqueued``: handed to an execution engine) and is NULL otherwise; the
    unique constraint on ``(schedule, succeeded_occurrence)`` makes a second success of the
    same occurrence impossible on every backend.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    attempt = models.OneToOneField(RunAttempt, on_delete=models.DO_NOTHING, related_name="receipt")
    schedule = models.ForeignKey(
        Schedule, on_delete=models.DO_NOTHING, db_constraint=False, related_name="receipts"
    )
    occurrence = models.PositiveIntegerField()
    succeeded_occurrence = models.PositiveIntegerField(null=True, blank=True, editable=False)
    status = models.CharField(max_length=16, choices=ReceiptStatus.choices)
    finished_at = models.DateTimeField()
    result = models.JSONField(null=True, blank=True)
    error_type = models.CharField(max_length=200, blank=True, default="")
    error_message = models.TextField(blank=True, default="")
    failure_count_after = models.PositiveIntegerField(default=0)
    next_run_at = models.DateTimeField(null=True, blank=True)
    slots_skipped = models.PositiveBigIntegerField(
        default=0, help_text="Slots that came due while this attempt ran, skipped (overlap)."
    )

    class Meta:
        ordering = ["-finished_at"]
        indexes = [
            models.Index(fields=["schedule", "finished_at"], name="dds_receipt_sched_idx"),
            models.Index(fields=["finished_at"], name="dds_receipt_finished_idx"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=ReceiptStatus.values), name="dds_receipt_status_valid"
            ),
            models.UniqueConstraint(
                fields=["schedule", "succeeded_occurrence"],
                name="dds_receipt_one_success_per_occurrence",
            ),
            models.CheckConstraint(
                condition=Q(
                    status__in=SUCCESS_STATUSES,
                    succeeded_occurrence__isnull=False,  # NULL = occurrence would pass a CHECK
                    succeeded_occurrence=models.F("occurrence"),
                )
                | (~Q(status__in=SUCCESS_STATUSES) & Q(succeeded_occurrence__isnull=True)),
                name="dds_receipt_success_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.status} #{self.occurrence}"


class WorkerHeartbeat(models.Model):
    """One row per ``run_scheduler`` process, refreshed while it runs (for health)."""

    worker_id = models.CharField(max_length=200, primary_key=True)
    hostname = models.CharField(max_length=200, blank=True, default="")
    pid = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    stopped_at = models.DateTimeField(null=True, blank=True)
    in_flight = models.PositiveIntegerField(default=0)
    runs_finished = models.PositiveBigIntegerField(default=0)
    clock_skew_seconds = models.FloatField(
        default=0.0, help_text="Host clock minus database clock."
    )

    class Meta:
        ordering = ["-last_seen_at"]

    def __str__(self) -> str:
        return self.worker_id


class EventAction(models.TextChoices):
    CREATED = "created", "created"
    EDITED = "edited", "edited"
    ENABLED = "enabled", "enabled"
    DISABLED = "disabled", "disabled"
    CANCELLED = "cancelled", "cancelled"
    TRIGGERED = "triggered", "triggered"
    DELETED = "deleted", "deleted"


class ScheduleEvent(models.Model):
    """One control action on a schedule (append-only, guarded like receipts): who did what,
    when (database clock), from where, and which fields changed (``{field: [old, new]}``).

    Foreign keys carry no database constraint: the trail outlives deleted schedules and
    users (``actor_repr`` keeps who it was).
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    schedule = models.ForeignKey(
        Schedule, on_delete=models.DO_NOTHING, db_constraint=False, related_name="events"
    )
    schedule_name = models.CharField(max_length=128)
    action = models.CharField(max_length=16, choices=EventAction.choices)
    at = models.DateTimeField()
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    actor_repr = models.CharField(max_length=200, blank=True, default="")
    source = models.CharField(max_length=32, help_text="api, admin, command, code or worker.")
    changes = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at"]
        indexes = [models.Index(fields=["schedule", "at"], name="dds_event_sched_idx")]
        constraints = [
            models.CheckConstraint(
                condition=Q(action__in=EventAction.values), name="dds_event_action_valid"
            )
        ]

    def __str__(self) -> str:
        return f"{self.schedule_name} {self.action} by {self.actor_repr or self.source}"
