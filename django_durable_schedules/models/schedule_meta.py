"""``Schedule``'s ``Meta``: its indexes (the due query, lease recovery, the owner and the
filtered lists) and its database constraints (the invariants of a row: unique name, valid
choices, paired lease columns, kind-specific required fields, ordered window, positive
durations). Each builder returns new objects, for ``Schedule.Meta``; the migrations
created them, so a change here is a change of the schema and needs a migration.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from ..limits import CHAIN_WAIT_MAX_SECONDS, MAX_PARALLEL_MAX
from .choices import BlackoutPolicy, Kind, Status


def schedule_indexes() -> list[models.Index]:
    """The indexes of ``Schedule.Meta.indexes``, each named ``dds_sched_*``."""
    return [
        # The due query: status = active AND next_run_at <= now ORDER BY next_run_at LIMIT n.
        models.Index(fields=["status", "next_run_at"], name="dds_sched_due_idx"),
        # Lease recovery: lease_expires_at <= now; the "running" filter (IS NOT NULL).
        # Partial, like the owner's: a completion (lease cleared) and a claim of a row
        # without an owner write no entry in them (migration 0012). MariaDB/MySQL ignore
        # the condition and build plain indexes (the foreign key needs one there).
        models.Index(
            fields=["lease_expires_at"],
            condition=Q(lease_expires_at__isnull=False),
            name="dds_sched_lease_idx",
        ),
        models.Index(
            fields=["owner"], condition=Q(owner__isnull=False), name="dds_sched_owner_idx"
        ),
        # The "degraded" and "failing" lists of the admin and the API, by name (a few
        # rows of many: without these a filtered list reads the whole table). Partial,
        # so a claim or a completion of a healthy row writes no entry in them
        # (docs/scale.md); MariaDB/MySQL have no partial indexes (check models.W037).
        models.Index(
            fields=["name"], condition=~Q(degraded_reason=""), name="dds_sched_degraded_idx"
        ),
        models.Index(
            fields=["name"], condition=Q(failure_count__gt=0), name="dds_sched_failing_idx"
        ),
        # The claim's reads (state/claim_reads.py): one pool, one priority level, the due
        # rows of no concurrency group, or of one group, in next_run_at order: each a
        # bounded range scan at any size whatever the other pools, levels and groups hold
        # (a full group's backlog is never read: migration 0036). Partial like migration
        # 0004's claim index (the claimable rows only); MariaDB/MySQL build it plain
        # (check models.W037).
        models.Index(
            fields=["pool", "priority", "concurrency_group", "next_run_at"],
            condition=Q(lease_token__isnull=True, status__in=["active", "paused"]),
            name="dds_sched_pool_claim_idx",
        ),
        # A concurrency group's live leases, counted by each claim that grants one in
        # the group (state/groups.py): the leased rows of grouped schedules only.
        models.Index(
            fields=["concurrency_group"],
            condition=Q(concurrency_group__isnull=False, lease_token__isnull=False),
            name="dds_sched_group_lease_idx",
        ),
        # The schedules with a deadline (deadline_queries.py: the late count of health and
        # the deadline sweep read only those): without it, each read the whole table
        # (427 ms at 1 M rows, none with a deadline: bench/big_tables.py, 2026-12-06).
        # Partial: a row without a deadline writes no entry in it; MariaDB/MySQL have no
        # partial indexes (check models.W037).
        models.Index(
            fields=["status"],
            condition=Q(deadline_seconds__isnull=False),
            name="dds_sched_deadline_idx",
        ),
        # The list's kind filter by name (a rare kind among many; one more entry per
        # claim and completion, as every index: docs/scale.md).
        models.Index(fields=["kind", "name"], name="dds_sched_kind_idx"),
        # Health at 10 M (issue #32, migration 0032; health_counts.py): the total of
        # missed slots summed from the rows that have one, without the table; the paused
        # (not degraded) schedules in the order health lists them (soonest end first, then
        # by name) and a worker resumes them. Partial: a row that never missed a slot, is
        # not paused or does not fail writes no entry; MariaDB/MySQL build them plain.
        models.Index(
            fields=["missed_count"], condition=Q(missed_count__gt=0), name="dds_sched_missed_idx"
        ),
        models.Index(
            fields=["paused_until", "name"],
            condition=Q(status=Status.PAUSED, degraded_reason=""),
            name="dds_sched_paused_idx",
        ),
        # The failing schedules, most consecutive failures first, with their status:
        # health counts them from this index alone (the status filter read in it, no table
        # page) and the admin's health page lists the first 50 in its order.
        models.Index(
            fields=["-failure_count", "name", "status"],
            condition=Q(failure_count__gt=0),
            name="dds_sched_failing_rank_idx",
        ),
    ]


def schedule_constraints() -> list[models.BaseConstraint]:
    """The constraints of ``Schedule.Meta.constraints``, each named ``dds_sched_*``."""
    return [
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
            condition=~Q(kind=Kind.RRULE) | ~Q(rrule=""), name="dds_sched_rrule_needs_rule"
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
        models.CheckConstraint(
            condition=Q(deadline_seconds__isnull=True) | Q(deadline_seconds__gte=1),
            name="dds_sched_deadline_positive",
        ),
        models.CheckConstraint(
            condition=Q(wait_seconds__gte=1, wait_seconds__lte=CHAIN_WAIT_MAX_SECONDS),
            name="dds_sched_wait_in_range",
        ),
        models.CheckConstraint(
            condition=Q(blackout_policy__in=BlackoutPolicy.values),
            name="dds_sched_blackout_policy_valid",
        ),
        models.CheckConstraint(
            condition=Q(rerun_occurrence__isnull=True, rerun_attempt__isnull=True)
            | Q(rerun_occurrence__gte=1, rerun_attempt__gte=1, triggered_at__isnull=False),
            name="dds_sched_rerun_paired",
        ),
        models.CheckConstraint(condition=~Q(pool=""), name="dds_sched_pool_named"),
        models.CheckConstraint(
            condition=Q(max_parallel__gte=1, max_parallel__lte=MAX_PARALLEL_MAX),
            name="dds_sched_max_parallel_range",
        ),
    ]
