"""The lists that must stay fast on big tables (bench/big_tables.py times them on 1M
schedules and 10M receipts): a bounded number of queries per page whatever the filter, no
count of a whole table, the outcome strip's receipts bounded per schedule, and the counts
that become estimates past a limit."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from django_durable_schedules.admin import changelist, columns, pagination
from django_durable_schedules.db.counts import bounded_count, planner_estimate
from django_durable_schedules.models import (
    RunAttempt,
    RunReceipt,
    Schedule,
    Status,
    WorkerHeartbeat,
)

pytestmark = pytest.mark.django_db

ADMIN = "admin:durable_schedules_"
T0 = datetime(2027, 6, 1, 10, 0, tzinfo=UTC)
STATUSES = ["succeeded", "failed", "skipped", "lease_expired", "missed"]


def history(schedule: Schedule, n: int, *, worker: str = "w1") -> None:
    """``n`` finished attempt/receipt pairs, one a minute from T0, statuses in turn."""
    attempts, receipts = [], []
    for i in range(1, n + 1):
        at = T0 + timedelta(minutes=i)
        attempt = RunAttempt(
            id=uuid.uuid4(),
            schedule=schedule,
            schedule_name=schedule.name,
            occurrence=i,
            attempt=1,
            scheduled_for=at,
            claimed_at=at,
            lease_token=uuid.uuid4(),
            lease_expires_at=at + timedelta(seconds=30),
            worker=worker,
            idempotency_key=f"{schedule.pk}:{i}",
        )
        status = STATUSES[i % len(STATUSES)]
        attempts.append(attempt)
        receipts.append(
            RunReceipt(
                attempt=attempt,
                schedule=schedule,
                occurrence=i,
                succeeded_occurrence=i if status == "succeeded" else None,
                status=status,
                finished_at=at + timedelta(seconds=1),
                error_type="RuntimeError" if status == "failed" else "",
            )
        )
    RunAttempt.objects.bulk_create(attempts)
    RunReceipt.objects.bulk_create(receipts)


@pytest.fixture
def schedules() -> list[Schedule]:
    """30 schedules of every kind of row the filters pick, the first 10 with 25 runs each."""
    rows = []
    for i in range(30):
        fields: dict = {"callback": "tests.noop", "kind": "interval", "interval_seconds": 60}
        if i % 5 == 1:
            fields.update(kind="cron", cron="*/5 * * * *", timezone="Europe/Paris")
            del fields["interval_seconds"]
        rows.append(Schedule.objects.create(name=f"big-{i:03}", **fields))
    Schedule.objects.filter(name__in=["big-003", "big-004"]).update(status=Status.PAUSED)
    Schedule.objects.filter(name="big-004").update(degraded_reason="callback not registered")
    Schedule.objects.filter(name="big-005").update(failure_count=2)
    for schedule in rows[:10]:
        history(schedule, 25)
    WorkerHeartbeat.objects.create(
        worker_id="w1", hostname="h", pid=1, started_at=T0, last_seen_at=T0
    )
    return rows


def queries_of(client, path: str) -> list[str]:
    client.get(path)  # warm: sessions, content types
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(path)
    assert response.status_code == 200, (path, response.status_code)
    return [q["sql"] for q in ctx.captured_queries]


def no_full_count(sql: list[str]) -> None:
    """Every COUNT of the page reads a bounded subquery (``LIMIT``), never a whole table
    but the health banner's probe (``health.probe``, the statements ``health/probe/`` runs:
    the live workers' heartbeats, and the due schedules through the claim index; its cost
    at 10 M schedules is issue #32's)."""
    counts = [
        q for q in sql if "COUNT(" in q.upper() and "workerheartbeat" not in q and "oldest" not in q
    ]
    assert all("LIMIT" in q.upper() for q in counts), counts


@pytest.mark.parametrize(
    "query",
    [
        "",
        "?status__exact=paused",
        "?kind__exact=cron",
        "?failing=yes",
        "?degraded=yes",
        "?running=yes",
        "?q=big-00",
        "?o=2",  # ordered by next run
    ],
)
def test_schedule_list_pages_in_bounded_queries(admin_client, schedules, query):
    sql = queries_of(admin_client, reverse(f"{ADMIN}schedule_changelist") + query)
    # session, user, one bounded count, the page, its strips' receipts (+ savepoints), and
    # the health banner's probe (indexed, bounded: health.probe).
    assert len(sql) <= 9, sql
    no_full_count(sql)


@pytest.mark.parametrize(
    "name, query",
    [
        ("runreceipt", ""),
        ("runreceipt", "?status__exact=failed"),
        ("runreceipt", "?schedule__id__exact={id}"),
        ("runreceipt", "?finished_at__gte=2027-06-01+00:00:00%2B00:00"),
        ("runattempt", ""),
        ("runattempt", "?worker=w1"),
        ("runattempt", "?claimed_at__gte=2027-06-01+00:00:00%2B00:00"),
        ("scheduleevent", ""),
    ],
)
def test_history_lists_page_in_bounded_queries(admin_client, schedules, name, query):
    path = reverse(f"{ADMIN}{name}_changelist") + query.format(id=schedules[0].pk)
    sql = queries_of(admin_client, path)
    assert len(sql) <= 7, sql
    no_full_count(sql)


def test_the_attempt_list_offers_the_workers_that_registered(admin_client, schedules):
    response = admin_client.get(reverse(f"{ADMIN}runattempt_changelist"))
    assert "?worker=w1" in response.content.decode()


def test_a_busy_schedules_change_page_costs_what_a_quiet_ones_does(admin_client, schedules):
    change = f"{ADMIN}schedule_change"
    busy = queries_of(admin_client, reverse(change, args=[schedules[0].pk]))
    quiet = queries_of(admin_client, reverse(change, args=[schedules[20].pk]))
    # 14, and 2 for blackout windows (issue #27): the form's window choices and the windows
    # the upcoming slots are checked against; constant, like the calendars' pair; and 1
    # for the concurrency group's choices (issue #28); and 3 for the statistics (issue #29:
    # the database clock, one aggregate over both windows, one bounded sample).
    # And 3 for the history of the definition (issue #29 item 3: the newest events, and the
    # calendars and windows their versions name), constant too. And 1 for the chain
    # (issue #30: the links of a schedule with none, both ways in one statement).
    assert len(busy) == len(quiet) and len(busy) <= 24, busy
    no_full_count(busy)


@pytest.mark.parametrize(
    "path",
    [
        "/api/schedules/",
        "/api/schedules/?status=paused",
        "/api/schedules/?callback=tests.noop&failing=true",
        "/api/schedules/?degraded=true",
        "/api/receipts/",
        "/api/receipts/?schedule={id}",
        "/api/receipts/?status=failed",
        "/api/receipts/?schedule={id}&status=missed",
        "/api/attempts/?schedule={id}&worker=w1",
        "/api/attempts/?status=succeeded&origin=scheduled",
    ],
)
def test_api_lists_are_one_query(django_user_model, schedules, path):
    client = APIClient()
    client.force_authenticate(django_user_model.objects.create_user("staff", is_staff=True))
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(path.format(id=schedules[0].pk))
    assert response.status_code == 200
    assert len(ctx.captured_queries) == 1, [q["sql"] for q in ctx.captured_queries]
    # No COUNT of the list (the paginator's): the only one is a schedule row's running
    # occurrences, correlated on the occurrence leases' schedule_id index (at most
    # max_parallel rows, 100, each: ScheduleQuerySet.with_running).
    sql = ctx.captured_queries[0]["sql"].upper()
    running = re.findall(
        r"COUNT\(\*\) AS .N. FROM .DURABLE_SCHEDULES_OCCURRENCELEASE. .?U0.? WHERE", sql
    )
    assert sql.count("COUNT(") == len(running), sql
    # No DISTINCT: it sorts every matching row before the page's LIMIT (0.4 s for 61,000
    # paused schedules of a million, bench/big_tables.py).
    assert "DISTINCT" not in ctx.captured_queries[0]["sql"].upper()


def test_strip_receipts_are_each_schedules_newest(schedules):
    busy, quiet = schedules[0], schedules[20]
    history(quiet, 3)
    found = changelist.attach_recent_receipts([busy, quiet], length=20)
    for schedule in found:
        expected = list(
            RunReceipt.objects.filter(schedule=schedule).order_by("-finished_at", "-occurrence")[
                :20
            ]
        )
        assert [r.pk for r in schedule.dds_recent_receipts] == [r.pk for r in expected]
    assert [len(s.dds_recent_receipts) for s in found] == [20, 3]
    assert changelist.attach_recent_receipts([]) == []


def test_counts_past_the_limit_are_bounded_then_estimated(admin_client, schedules, monkeypatch):
    monkeypatch.setattr(pagination, "EXACT_COUNT_LIMIT", 20)
    monkeypatch.setattr(columns, "EXACT_COUNT_LIMIT", 20)
    receipts = RunReceipt.objects.all()
    assert bounded_count(receipts, 20) == 21 and bounded_count(receipts, 1000) == 250
    response = admin_client.get(reverse(f"{ADMIN}runreceipt_changelist"))
    paginator = response.context["cl"].paginator
    html = response.content.decode()
    if connection.vendor == "postgresql":  # the planner's figure, "about"
        assert paginator.estimated and planner_estimate(receipts) is not None
        assert response.context["cl"].result_count >= 21 and ">about</span>" in html
    else:  # counted exactly
        assert not paginator.estimated and planner_estimate(receipts) is None
        assert response.context["cl"].result_count == 250 and ">about</span>" not in html
    # Under the limit: exact everywhere.
    response = admin_client.get(reverse(f"{ADMIN}schedule_changelist") + "?status__exact=paused")
    assert response.context["cl"].result_count == 2
    assert not response.context["cl"].paginator.estimated
    # A schedule's history past the limit: "20+ receipts".
    page = admin_client.get(reverse(f"{ADMIN}schedule_change", args=[schedules[0].pk]))
    assert "20+ receipts</a>" in page.content.decode()
