"""Worker pools (issue #28 item 3): ``run_scheduler --pool NAME`` (repeatable) claims only
those pools (none: the pool ``default``), its heartbeat says which, and health lists a
pool that has due schedules and no live worker claiming it (``pools_without_workers``).
Real ``run_scheduler`` processes on SQLite, PostgreSQL and MariaDB (``DATABASE_URL``)."""

from __future__ import annotations

import logging
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_durable_schedules import health, pool_health, state
from django_durable_schedules.models import RunAttempt, Schedule, WorkerHeartbeat

from .conftest import wait_until
from .factories import T0

pytestmark = pytest.mark.django_db(transaction=True)

S = timedelta(seconds=1)
#: Every schedule below is due by then (interval 60 s from T0).
LATER = T0 + 3600 * S


def mk(name, pool="default", **kw):
    kw.setdefault("interval_seconds", 60)
    kw.setdefault("created_at", T0)
    s = Schedule(name=name, callback="tests.noop", kind="interval", pool=pool, **kw)
    s.full_clean()
    s.save()
    return s


def beat(worker_id, pools="default", at=LATER, **kw):
    return WorkerHeartbeat.objects.create(
        worker_id=worker_id, started_at=at, last_seen_at=at, pools=pools, **kw
    )


# -- run_scheduler --pool ---------------------------------------------------------------


@pytest.mark.parametrize("bad", ["bad name", "-lead", "", "x" * 65, "a,b"])
def test_a_bad_pool_name_is_a_command_error_naming_it(bad):
    with pytest.raises(CommandError) as caught:
        call_command("run_scheduler", "--once", f"--pool={bad}")
    assert "--pool" in str(caught.value) and repr(bad) in str(caught.value)
    assert not WorkerHeartbeat.objects.exists()  # refused before it started


def test_too_many_pools_for_the_heartbeat_are_refused():
    names = [f"pool-{n:03d}-{'x' * 50}" for n in range(20)]
    args = [arg for name in names for arg in ("--pool", name)]
    with pytest.raises(CommandError, match="1000 characters"):
        call_command("run_scheduler", "--once", *args)


def test_once_with_pools_runs_only_those_pools_and_its_heartbeat_names_them(caplog):
    plain = mk("plain", created_at=None)
    report = mk("report", pool="reports", created_at=None)
    bill = mk("bill", pool="billing", created_at=None)
    Schedule.objects.update(next_run_at=state.db_now() - S)
    caplog.set_level(logging.INFO, logger="django_durable_schedules.worker")
    call_command(
        "run_scheduler",
        "--once",
        "--worker-id",
        "w-rb",
        "--pool",
        "reports",
        "--pool",
        "billing",
        "--pool",
        "reports",
        verbosity=0,
    )
    ran = set(RunAttempt.objects.values_list("schedule_id", flat=True))
    assert ran == {report.pk, bill.pk} and plain.pk not in ran
    assert WorkerHeartbeat.objects.get(worker_id="w-rb").pools == "reports,billing"
    assert "pools=reports,billing" in caplog.text  # the start line


def test_without_pool_a_worker_claims_the_default_pool_and_says_so():
    plain = mk("plain", created_at=None)
    mk("report", pool="reports", created_at=None)
    Schedule.objects.update(next_run_at=state.db_now() - S)
    call_command("run_scheduler", "--once", "--worker-id", "w-d", verbosity=0, stderr=StringIO())
    assert set(RunAttempt.objects.values_list("schedule_id", flat=True)) == {plain.pk}
    assert WorkerHeartbeat.objects.get(worker_id="w-d").pools == "default"


# -- health -----------------------------------------------------------------------------


def test_health_lists_a_pool_with_due_work_and_no_live_worker():
    mk("plain")
    mk("report", pool="reports")
    beat("w1")
    h = health.snapshot(now=LATER)
    assert h.pools_without_workers == ["reports"] and not h.healthy
    assert "no live worker claims pool reports, which has due schedules" in h.problems
    assert h.workers[0]["pools"] == "default"
    assert h.as_dict()["pools_without_workers"] == ["reports"]


def test_a_live_worker_of_the_pool_covers_it_and_a_stopped_or_stale_one_does_not():
    mk("report", pool="reports")
    beat("w1", pools="default,reports")
    assert health.snapshot(now=LATER).pools_without_workers == []
    WorkerHeartbeat.objects.all().delete()
    beat("stopped", pools="reports", stopped_at=LATER)
    beat("stale", pools="reports", at=LATER - 3600 * S)
    beat("live", pools="default")
    h = health.snapshot(now=LATER)
    assert h.pools_without_workers == ["reports"] and not h.healthy


def test_a_pool_whose_schedules_are_not_due_or_not_runnable_is_not_listed():
    mk("report", pool="reports", created_at=LATER + 60 * S)  # not due by LATER
    mk("paused", pool="paused-pool", status="paused")
    mk("leased", pool="leased-pool")
    state.claim_due(worker="w0", now=LATER, lease_seconds=30, pools=["leased-pool"])
    beat("w1")
    assert health.snapshot(now=LATER).pools_without_workers == []
    assert health.snapshot(now=LATER + 3600 * S).pools_without_workers == ["reports"]


def test_a_due_row_below_a_level_that_is_not_due_is_found():
    mk("urgent-later", pool="reports", priority=10, created_at=LATER + 60 * S)
    mk("low-due", pool="reports", priority=-5)
    beat("w1")
    assert health.snapshot(now=LATER).pools_without_workers == ["reports"]
    Schedule.objects.filter(name="low-due").delete()
    assert health.snapshot(now=LATER).pools_without_workers == []


def test_with_no_live_worker_the_pools_are_listed_and_no_live_worker_is_the_problem():
    mk("plain")
    mk("report", pool="reports")
    h = health.snapshot(now=LATER)
    assert h.pools_without_workers == ["default", "reports"]
    assert [p for p in h.problems if "pool" in p] == []
    assert "no live worker: 2 schedules due" in h.problems


def test_the_pool_reads_are_bounded_by_pools_not_rows(monkeypatch):
    for n in range(30):
        mk(f"plain-{n}")
    for n in range(3):
        mk(f"report-{n}", pool="reports", priority=n)
    mk("ops", pool="ops")
    beat("w1", pools="default,ops")
    with CaptureQueriesContext(connection) as queries:
        found = pool_health.pools_without_workers(LATER, {"default", "ops"})
    assert found == ["reports"]
    # Three pools found, one probe each plus the one that ends the scan; then one level
    # probe and one exists() for the pool no worker covers (its top level is due).
    assert len(queries) == 3 + 1 + 2
    monkeypatch.setattr(pool_health, "POOLS_SCANNED", 2)
    assert pool_health.indexed_pools(limit=2) == ["default", "ops"]


def test_the_admin_health_page_shows_the_pools(admin_client):
    mk("report", pool="reports", created_at=None)
    Schedule.objects.update(next_run_at=state.db_now() - 60 * S)
    state.heartbeat("w-admin")
    page = admin_client.get("/admin/durable_schedules/schedule/health/").content.decode()
    assert "Pools without a worker (1)" in page and "run_scheduler --pool reports" in page
    assert "<td>default</td>" in page  # the live worker's pools


# -- real processes ---------------------------------------------------------------------


@pytest.mark.process
def test_a_reports_schedule_runs_only_on_a_worker_with_pool_reports(start_worker):
    now = state.db_now()
    plain = mk("plain-1s", interval_seconds=1, created_at=None)
    report = mk("report-1s", pool="reports", interval_seconds=1, created_at=None)
    Schedule.objects.update(next_run_at=now)
    plain_worker = start_worker("--worker-id", "plain", "--max-idle", "1")

    def ran(schedule, worker):
        return RunAttempt.objects.filter(schedule_id=schedule.pk, worker=worker).count()

    wait_until(lambda: ran(plain, "plain") >= 2, 15, message="two runs of the default pool")
    assert not RunAttempt.objects.filter(schedule_id=report.pk).exists()
    h = health.snapshot()
    assert h.pools_without_workers == ["reports"] and not h.healthy

    reporter = start_worker("--worker-id", "reporter", "--pool", "reports", "--max-idle", "1")
    wait_until(lambda: ran(report, "reporter") >= 1, 15, message="a run of the reports pool")
    wait_until(lambda: health.snapshot().pools_without_workers == [], 5, message="the pool covered")
    assert WorkerHeartbeat.objects.get(worker_id="reporter").pools == "reports"
    workers_of = {
        schedule: set(
            RunAttempt.objects.filter(schedule_id=schedule.pk).values_list("worker", flat=True)
        )
        for schedule in (plain, report)
    }
    assert workers_of == {plain: {"plain"}, report: {"reporter"}}
    assert plain_worker.proc.poll() is None and reporter.proc.poll() is None
