"""The migrations match the models."""

from io import StringIO

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_no_missing_migrations():
    out = StringIO()
    call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=StringIO())
    assert "No changes detected" in out.getvalue()


@pytest.mark.django_db
def test_claim_index_exists():
    """0004's claim index is not in the model state (see the migration's docstring), so a
    table rebuild could drop it silently: it must exist after migrating, partial where the
    database has partial indexes."""
    from django.db import connection

    from django_durable_schedules.models import Schedule

    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, Schedule._meta.db_table)
    assert "dds_sched_claim_idx" in constraints
    assert constraints["dds_sched_claim_idx"]["columns"] == ["next_run_at"]
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT indexdef FROM pg_indexes WHERE indexname = 'dds_sched_claim_idx'"
            )
            (definition,) = cursor.fetchone()
        assert "WHERE" in definition and "lease_token IS NULL" in definition


@pytest.mark.django_db
def test_claim_uses_the_claim_index_when_everything_is_due():
    """With many rows due at once the claim must read the claim index in order and stop at
    the batch, not sort every due row (bench/claim_plan.py measures it at 1M rows)."""
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("plan shape checked on PostgreSQL")
    from django.db.models.expressions import RawSQL
    from django.utils import timezone

    from django_durable_schedules.models import Schedule

    from .factories import ScheduleFactory

    ScheduleFactory.create_batch(50)
    Schedule.objects.update(next_run_at=timezone.now().replace(microsecond=0))
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE durable_schedules_schedule")
        cursor.execute("SET LOCAL enable_seqscan = off")  # a 50-row table is scanned otherwise
    qs = (
        Schedule.objects.filter(
            status__in=("active", "paused"),
            lease_token__isnull=True,
            next_run_at__lte=RawSQL("now()", []),
        )
        .order_by("next_run_at")
        .select_for_update(skip_locked=True)[:10]
    )
    plan = qs.explain()
    assert "dds_sched_claim_idx" in plan
    assert "Sort" not in plan
