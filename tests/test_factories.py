"""The factory of due schedules the claim's tests share (``factories.due_schedules``)."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_durable_schedules.models import ConcurrencyGroup, Schedule

from .factories import T0, due_schedules

pytestmark = pytest.mark.django_db

S = timedelta(seconds=1)


def test_due_schedules_by_count_names_and_row_fields():
    group = ConcurrencyGroup.objects.create(name="reports", max_running=2)
    with CaptureQueriesContext(connection) as seen:
        due_schedules(3, prefix="g", offset=10, spacing=1, concurrency_group=group)
    inserts = [q["sql"].split()[2].strip('"`') for q in seen if q["sql"].startswith("INSERT")]
    # One INSERT of the rows; their ``created`` events (source code) and the audit mute.
    assert inserts.count("durable_schedules_schedule") == 1
    rows = list(Schedule.objects.order_by("name"))
    assert [r.name for r in rows] == ["g-0000", "g-0001", "g-0002"]
    assert [r.next_run_at for r in rows] == [T0 + 10 * S, T0 + 11 * S, T0 + 12 * S]
    assert {(r.concurrency_group_id, r.status, r.interval_seconds) for r in rows} == {
        (group.pk, "active", 3600)
    }
    assert {r.created_at for r in rows} == {T0 - timedelta(days=1)}
    due_schedules(["a", {"name": "b", "offset": 600, "priority": 5, "pool": "reports"}])
    a, b = Schedule.objects.filter(name__in=["a", "b"]).order_by("name")
    assert (a.next_run_at, a.priority, a.pool) == (T0, 0, "default")
    assert (b.next_run_at, b.priority, b.pool) == (T0 + 600 * S, 5, "reports")
