"""Tracebacks and durations (issue 26, item 3): a failed run's receipt keeps a bounded
traceback (file, line, function; never a variable's value) and every receipt of a run that
started keeps ``started_at``; admin, API and the ``schedules`` command show both.

Real worker passes (``Worker(once=True)``): the thread path, an async callback, and a
hard-timeout child process (its callback raising, and it killed at its timeout).
"""

from __future__ import annotations

import json
import logging
import uuid
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.forms.models import model_to_dict
from django.urls import reverse
from rest_framework.test import APIClient

from django_durable_schedules.models import RunReceipt, Schedule
from django_durable_schedules.state import Claim, Outcome, bound_outcome
from django_durable_schedules.state.records import build_receipt
from django_durable_schedules.state.values import Failure
from django_durable_schedules.worker import Worker, WorkerOptions
from django_durable_schedules.worker.execution import runner
from tests.testapp.schedules import LEAKY_SECRET

pytestmark = pytest.mark.django_db(transaction=True)

#: Each failing callback and the innermost functions its traceback must end with.
FAILING = {
    "thread": ("tests.leaky_fail", {}, ["leaky_fail", "charge_card"]),
    "async": ("tests.async_leaky_fail", {}, ["async_leaky_fail", "async_charge_card"]),
    # timeout_seconds: the run goes to a hard-timeout child process.
    "child": ("tests.leaky_fail", {"timeout_seconds": 30}, ["leaky_fail", "charge_card"]),
}


def make(name: str, callback: str, **fields) -> Schedule:
    return Schedule.objects.create(
        name=name,
        callback=callback,
        kind="interval",
        interval_seconds=3600,
        timezone="UTC",
        max_attempts=1,
        **fields,
    )


def run_once() -> None:
    assert Worker(WorkerOptions(worker_id="w-tb", once=True, concurrency=2)).run() == 0


def cli(*args: str) -> str:
    out = StringIO()
    call_command("schedules", *args, stdout=out)
    return out.getvalue()


def assert_no_secret(text: str, where: str) -> None:
    assert LEAKY_SECRET not in text, f"the secret leaked into {where}"
    assert "hunter2" not in text, f"part of the secret leaked into {where}"


@pytest.mark.parametrize("path", sorted(FAILING))
def test_a_failed_runs_traceback_is_kept_and_its_secret_shown_nowhere(
    path, admin_client, django_user_model, monkeypatch
):
    callback, fields, innermost = FAILING[path]
    schedule = make(f"charge-{path}", callback, **fields)
    in_worker = []  # the claims run in the worker process (a child's are not)
    execute = runner.execute
    monkeypatch.setattr(
        runner,
        "execute",
        lambda claim, *a: in_worker.append(claim.schedule_name) or execute(claim, *a),
    )
    run_once()
    assert in_worker == ([] if path == "child" else [schedule.name])
    receipt = RunReceipt.objects.select_related("attempt").get(schedule=schedule)

    assert receipt.status == "failed"
    assert (receipt.error_type, receipt.error_message) == ("KeyError", "amount")
    functions = [frame["function"] for frame in receipt.traceback]
    assert functions[-2:] == innermost  # innermost frame last
    assert "execute" not in functions  # the runner's own frame is left out
    for frame in receipt.traceback:
        assert set(frame) == {"file", "line", "function"}
        assert type(frame["line"]) is int and frame["line"] > 0
    assert receipt.traceback[-1]["file"].endswith("tests/testapp/schedules.py")
    # Started by the worker's database clock, before it finished.
    assert receipt.started_at is not None
    assert receipt.started_at <= receipt.finished_at + timedelta(seconds=0.5)
    assert 0 <= receipt.duration_seconds < 10

    # The row: every field, as stored.
    assert_no_secret(json.dumps(model_to_dict(receipt), default=str), "the receipt row")
    # The API: the receipt, in the list and alone.
    api = APIClient()
    api.force_authenticate(django_user_model.objects.create_user("ops", is_staff=True))
    body = api.get(
        reverse("durable_schedules_api:receipt-detail", args=[receipt.pk]), format="json"
    ).json()
    assert [f["function"] for f in body["traceback"]][-2:] == innermost
    assert body["started_at"].endswith("Z") and body["duration_seconds"] >= 0
    listed = api.get(
        reverse("durable_schedules_api:receipt-list"), {"schedule": str(schedule.pk)}
    ).content.decode()
    assert_no_secret(body.__repr__() + listed, "the API")
    # The admin's receipt page: the traceback as Python prints it, and the duration.
    page = admin_client.get(
        reverse("admin:durable_schedules_runreceipt_change", args=[receipt.pk])
    ).content.decode()
    assert f"line {receipt.traceback[-1]['line']}, in {innermost[-1]}" in page
    assert "Traceback (most recent call last):" in page and "KeyError: amount" in page
    assert_no_secret(page, "the admin's receipt page")
    schedule_page = admin_client.get(
        reverse("admin:durable_schedules_schedule_change", args=[schedule.pk])
    ).content.decode()
    assert_no_secret(schedule_page, "the admin's schedule page")
    # The shell.
    out = cli("receipts", schedule.name, "--status", "failed")
    assert f", in {innermost[-1]}" in out and "KeyError: amount" in out
    assert_no_secret(out + cli("show", schedule.name), "the schedules command")


def test_a_child_killed_at_its_timeout_has_a_start_and_no_traceback():
    schedule = make("hangs", "tests.sleep", timeout_seconds=1, payload={"seconds": 30})
    run_once()
    receipt = RunReceipt.objects.get(schedule=schedule)
    assert (receipt.status, receipt.error_type) == ("failed", "Timeout")
    assert receipt.traceback is None  # killed: nothing raised, nothing to show
    assert receipt.started_at is not None
    assert 0.9 <= receipt.duration_seconds < 10  # it ran until it was killed


def test_receipts_of_runs_that_started_carry_it_and_the_rest_do_not():
    ok = make("ok", "tests.echo")
    skipped = make("skips", "tests.skip")
    run_once()
    for schedule in (ok, skipped):
        receipt = RunReceipt.objects.get(schedule=schedule)
        assert receipt.started_at is not None and receipt.traceback is None
        assert receipt.duration_seconds is not None


NOW = datetime(2027, 6, 1, 10, 0, tzinfo=UTC)


def claim() -> Claim:
    return Claim(
        attempt_id=uuid.uuid4(),
        schedule_id=uuid.uuid4(),
        schedule_name="s",
        callback="tests.noop",
        occurrence=1,
        attempt=1,
        scheduled_for=NOW,
        claimed_at=NOW,
        lease_token=uuid.uuid4(),
        lease_expires_at=NOW + timedelta(seconds=30),
        idempotency_key="s:1",
        payload=None,
    )


def test_receipts_that_never_ran_a_callback_have_no_start():
    c = claim()
    frames = [{"file": "f.py", "line": 1, "function": "f"}]
    released = Outcome(c, "released", started_at=NOW, traceback=frames)
    receipt = build_receipt(c, "released", NOW, schedule_id=c.schedule_id, ran=released)
    assert receipt.started_at is None and receipt.traceback is None
    recovered = Failure.of(c, "lease_expired", error_type="LeaseExpired")  # recovery
    receipt = build_receipt(
        recovered, "lease_expired", NOW, schedule_id=c.schedule_id, ran=recovered
    )
    assert receipt.started_at is None and receipt.traceback is None
    missed = build_receipt(c, "missed", NOW, schedule_id=c.schedule_id)
    assert missed.started_at is None and missed.model().started_at is None


def test_an_outcome_is_bounded_before_its_receipt():
    c = claim()
    naive = Outcome(c, "failed", started_at=datetime(2027, 1, 1), traceback="not a list")
    bounded = bound_outcome(naive)
    assert bounded.started_at is None and bounded.traceback is None
    long = [{"file": "x" * 900, "line": "7", "function": None}] * 80
    bounded = bound_outcome(Outcome(c, "failed", started_at=NOW, traceback=long))
    assert len(bounded.traceback) == 50 and bounded.started_at == NOW
    assert bounded.traceback[0]["function"] == "<31 outer frames left out>"
    assert bounded.traceback[1] == {"file": "x" * 299 + "…", "line": 0, "function": ""}


def test_a_run_start_is_logged_once_at_info(caplog):
    make("logged", "tests.echo")
    with caplog.at_level(logging.INFO, logger=runner.logger.name):
        run_once()
    started = [r.getMessage() for r in caplog.records if "started (late" in r.getMessage()]
    assert len(started) == 1
    assert started[0].startswith("run logged #1.1 started (late ")


def test_the_start_line_costs_one_level_check_when_info_is_off(monkeypatch):
    calls = []
    monkeypatch.setattr(runner.logger, "info", lambda *a, **k: calls.append(a))
    monkeypatch.setattr(runner.logger, "isEnabledFor", lambda level: level > logging.INFO)
    runner.log_start(claim())
    assert calls == []


def test_a_start_and_a_traceback_cost_no_query():
    """The two fields ride on the receipts' one INSERT: completing failed outcomes that
    carry them costs the statements of completing those that do not."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from django_durable_schedules import state

    frames = [{"file": "f.py", "line": 3, "function": "f"}] * 40
    counts = []
    for carry in (False, True):
        for i in range(3):
            make(f"q-{carry}-{i}", "tests.noop")
        claims = state.claim_due(worker="w")
        assert len(claims) == 3
        extra = {"started_at": NOW, "traceback": frames} if carry else {}
        outcomes = [state.Outcome(c, "failed", error_type="E", **extra) for c in claims]
        with CaptureQueriesContext(connection) as ctx:
            report = state.complete(outcomes)
        counts.append(len(ctx.captured_queries))
        assert len(report.receipts) == 3
    assert counts[0] == counts[1], counts
    stored = RunReceipt.objects.filter(schedule__name__startswith="q-True")
    assert all(r.traceback == frames and r.started_at == NOW for r in stored)


@pytest.mark.parametrize("callback", ["tests.task_immediate", "tests.task_db"])
def test_an_enqueued_run_started_with_its_dispatch(callback):
    """A task handed to django.tasks (outside the completion transaction, or inside it for
    django-tasks-db): ``started_at`` is the start of the dispatch."""
    from django_durable_schedules.registry import registry

    if callback not in registry:
        pytest.skip(f"{callback} is not registered here (django-tasks-db missing)")
    schedule = make(f"enqueue-{callback}", callback, payload={"tag": "x"})
    before = datetime.now(UTC)
    run_once()
    receipt = RunReceipt.objects.get(schedule=schedule)
    assert receipt.status == "enqueued" and receipt.traceback is None
    assert receipt.started_at is not None
    assert (
        before - timedelta(seconds=5)
        <= receipt.started_at
        <= receipt.finished_at + timedelta(seconds=0.5)
    )
