"""Runs handed to execution engines: django.tasks (django-tasks-db's DatabaseBackend and the
immediate backend), Celery (Redis broker, a real ``celery worker``), management commands.

The end-to-end tests run real processes: ``run_scheduler``, django-tasks-db's ``db_worker``
and ``celery worker``; they skip, saying why, when an engine is not installed or Redis does
not answer on ``DDS_REDIS_URL`` (default ``redis://127.0.0.1:6379/15``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import IntegrityError, transaction
from django.test import override_settings
from django.utils import timezone as dj_timezone

from django_durable_schedules import register, register_command, state
from django_durable_schedules.models import RunAttempt, RunReceipt, Schedule
from django_durable_schedules.registry import (
    KIND_CELERY_TASK,
    KIND_COMMAND,
    KIND_DJANGO_TASK,
    registry,
)
from django_durable_schedules.worker.execution import runner
from tests.testapp import engines
from tests.testapp.models import SideEffect

from .conftest import REPO, database_url, wait_until
from .factories import T0, ReceiptFactory, ScheduleFactory

HAS_TASKS_DB = "django_tasks_db" in settings.INSTALLED_APPS
needs_tasks = pytest.mark.skipif(
    engines.task is None, reason="django.tasks needs Django 6+ (this is Django 5.2)"
)
needs_tasks_db = pytest.mark.skipif(
    not HAS_TASKS_DB, reason="django-tasks-db is not installed (pip install django-tasks-db)"
)
needs_celery = pytest.mark.skipif(
    engines.celery_record is None, reason="Celery is not installed (pip install 'celery[redis]')"
)
S = timedelta(seconds=1)


def _run(name: str, *, payload=None, failure_count: int = 0, now=T0):
    """Create a schedule of callback ``name``, claim it at ``now`` and run it in-process."""
    ScheduleFactory(
        name=f"s-{uuid.uuid4().hex[:8]}",
        callback=name,
        payload=payload if payload is not None else {"tag": "unit"},
        failure_count=failure_count,
    )
    [claim] = state.claim_due(worker="w", now=now)
    return claim, runner.execute(claim)


def _receipt(claim: state.Claim) -> RunReceipt:
    return RunReceipt.objects.get(attempt_id=claim.attempt_id)


def _db_tasks():
    from django_tasks_db.models import DBTaskResult

    return DBTaskResult.objects.filter(task_path=engines.db_record.module_path)


# ---------------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------------


@pytest.fixture
def cleanup_registry():
    before = set(registry.names())
    yield
    for name in set(registry.names()) - before:
        registry.remove(name)


@needs_tasks
def test_a_django_task_registers_as_a_task_and_stays_usable(cleanup_registry):
    returned = register("t.task", engines.immediate_record, task_options={"priority": 5})
    assert returned is engines.immediate_record
    reg = registry.get("t.task")
    assert (reg.kind, dict(reg.options), reg.is_async) == (KIND_DJANGO_TASK, {"priority": 5}, False)
    with pytest.raises(ValueError, match="routing_key"):
        register("t.task2", engines.immediate_record, task_options={"routing_key": "x"})
    with pytest.raises(Exception, match="priority"):  # the backend validates the options
        register("t.task3", engines.immediate_record, task_options={"priority": 10_000})


@needs_celery
def test_a_celery_task_and_a_shared_task_proxy_register_as_celery(cleanup_registry):
    from celery import shared_task

    @shared_task(name="tests.never_evaluated")
    def proxied(**kwargs):
        return None

    register("t.celery", engines.celery_record, task_options={"queue": "q"})
    register("t.proxy", proxied)
    assert registry.get("t.celery").kind == KIND_CELERY_TASK
    assert registry.get("t.proxy").kind == KIND_CELERY_TASK
    with pytest.raises(ValueError, match="task_id"):
        register("t.bad", engines.celery_record, task_options={"task_id": "x"})


def test_task_options_are_refused_for_a_plain_function(cleanup_registry):
    with pytest.raises(ValueError, match="only apply to a task"):
        register("t.fn", lambda ctx: None, task_options={"queue": "q"})


def test_register_command_is_the_allow_list(cleanup_registry):
    register_command("t.cmd", "clearsessions", every=3600)
    reg = registry.get("t.cmd")
    assert reg.kind == KIND_COMMAND and reg.declaration.every == 3600
    assert dict(reg.options) == {"command": "clearsessions", "args": (), "options": {}}
    with pytest.raises(TypeError):
        register_command("t.cmd2", "check", args="--deploy")
    with pytest.raises(ValueError):
        register_command("t.cmd3", " check")
    with pytest.raises(ValueError):
        register_command("bad name", "check")


# ---------------------------------------------------------------------------------------
# django.tasks on django-tasks-db: enqueued inside the completion transaction
# ---------------------------------------------------------------------------------------


@needs_tasks_db
@pytest.mark.django_db(transaction=True)
def test_db_task_is_enqueued_by_the_completion_and_counts_as_success():
    claim, outcome = _run("tests.task_db", failure_count=2)
    assert outcome.status == "enqueued" and outcome.enqueue is not None
    assert not _db_tasks().exists()  # running the claim enqueued nothing yet

    state.complete([outcome], now=T0 + S)

    [task] = _db_tasks()
    receipt = _receipt(claim)
    assert receipt.status == "enqueued"
    assert receipt.succeeded_occurrence == claim.occurrence
    assert receipt.result == {"task_id": str(task.id), "backend": "db", "queue": "default"}
    assert task.args_kwargs == {"args": [], "kwargs": {"tag": "unit"}}
    row = Schedule.objects.get(pk=claim.schedule_id)
    assert row.failure_count == 0 and row.next_run_at > T0  # a success: moved on, reset


@needs_tasks_db
@pytest.mark.django_db(transaction=True)
def test_an_in_transaction_enqueue_is_logged_after_it_commits_and_timed(caplog):
    """The runner says nothing of "enqueued" (the enqueue has not happened, and could still
    roll back); the completion says it once the receipt and the task committed, with the
    enqueue's own time, which the run's duration (the metric) then includes."""
    with caplog.at_level("DEBUG", logger="django_durable_schedules"):
        claim, outcome = _run("tests.task_db")
        ran = [r.getMessage() for r in caplog.records if "enqueued in" in r.getMessage()]
        assert ran == []
        report = state.complete([outcome], now=T0 + S)
    said = [r for r in caplog.records if "committed with its receipt" in r.getMessage()]
    assert len(said) == 1 and said[0].levelname == "INFO"
    assert said[0].getMessage().startswith(f"run {claim.schedule_name} #1.1 enqueued in ")
    assert report.enqueue_seconds[claim.attempt_id] > 0


@needs_tasks_db
@pytest.mark.django_db(transaction=True)
def test_a_fenced_outcome_never_enqueues_and_the_retry_enqueues_once():
    claim, outcome = _run("tests.task_db")
    late = claim.lease_expires_at + S
    report = state.complete([outcome], now=late)  # the lease ran out before the completion
    assert report.fenced == [outcome]
    assert _receipt(claim).status == "lease_expired"
    assert not _db_tasks().exists()

    [retry] = state.claim_due(worker="w2", now=late + S)
    assert (retry.occurrence, retry.attempt) == (claim.occurrence, 2)
    state.complete([runner.execute(retry)], now=late + 2 * S)
    assert _db_tasks().count() == 1
    assert _receipt(retry).status == "enqueued"


@needs_tasks_db
@pytest.mark.django_db(transaction=True)
def test_an_enqueue_that_fails_is_rolled_back_and_receipted_failed():
    claim, outcome = _run("tests.task_db")

    def enqueue_then_fail():
        engines.db_record.enqueue(tag="half")  # written, then rolled back with the savepoint
        raise RuntimeError("broker on fire")

    state.complete([state.Outcome(claim, "enqueued", enqueue=enqueue_then_fail)], now=T0 + S)
    receipt = _receipt(claim)
    assert (receipt.status, receipt.error_type, receipt.error_message) == (
        "failed",
        "RuntimeError",
        "broker on fire",
    )
    assert receipt.succeeded_occurrence is None
    assert not _db_tasks().exists()
    assert Schedule.objects.get(pk=claim.schedule_id).failure_count == 1  # retried


@pytest.mark.django_db(transaction=True)
def test_an_enqueued_receipt_is_a_success_for_the_constraints():
    with pytest.raises(IntegrityError), transaction.atomic():
        ReceiptFactory(status="enqueued", succeeded_occurrence=None)  # must be the occurrence
    ok = ReceiptFactory(status="enqueued", attempt__occurrence=7)
    with pytest.raises(IntegrityError), transaction.atomic():  # one success per occurrence
        ReceiptFactory(
            status="succeeded",
            attempt__occurrence=7,
            attempt__schedule=ok.attempt.schedule,
            attempt__attempt=2,
        )


# ---------------------------------------------------------------------------------------
# Backends that cannot join the transaction; payloads; Celery arguments
# ---------------------------------------------------------------------------------------


@needs_tasks
@pytest.mark.django_db(transaction=True)
def test_immediate_backend_enqueues_while_running_with_its_options():
    claim, outcome = _run("tests.task_immediate", payload={"tag": "now"})
    assert outcome.enqueue is None  # not a database queue: enqueued at once
    [effect] = SideEffect.objects.filter(schedule_name="task:now")  # the backend ran it
    assert outcome.result == {
        "task_id": effect.idempotency_key,
        "backend": "default",
        "queue": "fast",
    }
    state.complete([outcome], now=T0 + S)
    assert _receipt(claim).status == "enqueued"


@needs_tasks
@pytest.mark.django_db(transaction=True)
def test_a_payload_that_is_not_an_object_fails_the_schedule():
    claim, outcome = _run("tests.task_immediate", payload=[1, 2])
    assert (outcome.status, outcome.error_type, outcome.terminal) == ("failed", "FailRun", True)
    state.complete([outcome], now=T0 + S)
    assert Schedule.objects.get(pk=claim.schedule_id).status == "failed"


@needs_celery
@pytest.mark.django_db(transaction=True)
def test_celery_task_gets_the_idempotency_key_as_task_id(monkeypatch):
    sent = {}

    class Sent:
        def __init__(self, task_id):
            self.id = task_id

    def apply_async(**kwargs):
        sent.update(kwargs)
        return Sent(kwargs["task_id"])

    monkeypatch.setattr(engines.celery_record, "apply_async", apply_async)
    claim, outcome = _run("tests.celery", payload={"tag": "c"})
    assert sent == {"kwargs": {"tag": "c"}, "task_id": claim.idempotency_key, "priority": 3}
    assert outcome.status == "enqueued" and outcome.enqueue is None
    assert outcome.result == {
        "task_id": claim.idempotency_key,
        "backend": "celery",
        "queue": os.environ["DDS_CELERY_QUEUE"],
    }


# ---------------------------------------------------------------------------------------
# Management commands
# ---------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_command_output_is_captured_into_the_receipt():
    claim, outcome = _run("tests.cmd_check")
    assert outcome.status == "succeeded"
    assert outcome.result["command"] == "check"
    output = outcome.result["stdout"] + outcome.result["stderr"]  # warnings go to stderr
    assert "System check identified" in output
    state.complete([outcome], now=T0 + S)
    assert _receipt(claim).result == outcome.result


@pytest.mark.django_db(transaction=True)
def test_command_error_is_a_failed_receipt_with_the_output():
    claim, outcome = _run("tests.cmd_bad_tag")
    assert outcome.status == "failed" and not outcome.terminal
    assert outcome.error_type == "django.core.management.base.CommandError"
    assert "no_such_tag" in outcome.error_message
    assert outcome.result["command"] == "check"


@pytest.mark.django_db(transaction=True)
@override_settings(DURABLE_SCHEDULES={"RESULT_MAX_BYTES": 120})
def test_command_output_is_bounded():
    ScheduleFactory.create_batch(30, status="paused")  # `schedules list`: 30 more lines
    _, outcome = _run("tests.cmd_dds")
    assert outcome.status == "succeeded"
    assert len(json.dumps(outcome.result, ensure_ascii=False).encode()) <= 120


# ---------------------------------------------------------------------------------------
# End to end: real schedulers, real task workers
# ---------------------------------------------------------------------------------------


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="tests.settings",
        DATABASE_URL=database_url(),
        PYTHONPATH=str(REPO),
        PYTHONUNBUFFERED="1",
        **extra,
    )
    return env


def _manage(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "django", *args],
        cwd=REPO,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def _due_cron_schedule(callback: str, tag: str) -> Schedule:
    """A ``* * * * *`` schedule whose slot (the current minute) is due now."""
    row = Schedule.objects.create(
        name=f"e2e-{tag}", callback=callback, kind="cron", cron="* * * * *", payload={"tag": tag}
    )
    slot = dj_timezone.now().replace(second=0, microsecond=0)
    Schedule.objects.filter(pk=row.pk).update(next_run_at=slot)
    return row


def _drain_db_tasks() -> None:
    _manage("db_worker", "--batch", "--no-startup-delay", "--backend", "db", "--queue-name", "*")


@pytest.fixture
def redis_url():
    from tests.testapp.celery_app import QUEUE, REDIS_URL

    try:
        import redis

        client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1)
        client.ping()
    except Exception as exc:
        pytest.skip(f"no Redis broker at {REDIS_URL}: {exc}")
    yield REDIS_URL
    client.delete(QUEUE)  # anything left in this run's queue
    client.close()


@needs_tasks_db
@pytest.mark.process
@pytest.mark.django_db(transaction=True)
def test_cron_schedule_enqueues_a_db_task_that_db_worker_runs(start_worker):
    row = _due_cron_schedule("tests.task_db", "e2e")
    assert start_worker("--once").wait(60) == 0
    [receipt] = RunReceipt.objects.filter(schedule=row)
    assert receipt.status == "enqueued"

    _drain_db_tasks()

    [task] = _db_tasks()
    assert task.status == "SUCCESSFUL", task.traceback
    assert receipt.result == {"task_id": str(task.id), "backend": "db", "queue": "default"}
    [effect] = SideEffect.objects.filter(schedule_name="task:e2e")
    assert effect.idempotency_key == str(task.id)


@needs_tasks_db
@pytest.mark.process
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("stage", ["before", "after"])
def test_scheduler_killed_around_the_enqueue_produces_one_task(start_worker, tmp_path, stage):
    """SIGKILL inside the completion transaction, just before or just after the task row
    is written: nothing is committed; the restarted scheduler recovers the lease and
    enqueues the occurrence's one task."""
    row = Schedule.objects.create(
        name=f"kill-{stage}", callback="tests.task_db", interval_seconds=3600
    )
    blocked = tmp_path / "blocked"
    first = start_worker(
        "--lease-seconds",
        "2",
        env={"DDS_TEST_BLOCK_ENQUEUE": stage, "DDS_TEST_BLOCK_FILE": str(blocked)},
    )
    wait_until(blocked.exists, timeout=60, message=f"the scheduler to stop {stage} the enqueue")
    first.kill()
    assert first.proc.returncode == -signal.SIGKILL
    assert not _db_tasks().exists()
    assert not RunReceipt.objects.filter(schedule=row).exists()

    second = start_worker("--lease-seconds", "5")
    receipt = wait_until(
        lambda: RunReceipt.objects.filter(schedule=row, status="enqueued").first(),
        timeout=60,
        message="the restarted scheduler to enqueue",
    )
    second.stop()
    statuses = sorted(
        RunReceipt.objects.filter(schedule=row).values_list("attempt__attempt", "status")
    )
    assert statuses == [(1, "lease_expired"), (2, "enqueued")]

    _drain_db_tasks()

    [task] = _db_tasks()  # one task, not two
    assert task.status == "SUCCESSFUL"
    assert receipt.result["task_id"] == str(task.id)
    assert SideEffect.objects.filter(idempotency_key=str(task.id)).count() == 1


@needs_celery
@pytest.mark.process
@pytest.mark.django_db(transaction=True)
def test_cron_schedule_enqueues_a_celery_task_that_a_celery_worker_runs(start_worker, redis_url):
    from tests.testapp.celery_app import QUEUE

    row = _due_cron_schedule("tests.celery", "celery-e2e")
    assert start_worker("--once").wait(60) == 0
    [receipt] = RunReceipt.objects.filter(schedule=row).select_related("attempt")
    assert receipt.status == "enqueued"
    assert receipt.result == {
        "task_id": receipt.attempt.idempotency_key,
        "backend": "celery",
        "queue": QUEUE,
    }

    effect = _celery_worker_until(
        lambda: SideEffect.objects.filter(schedule_name="celery:celery-e2e").first()
    )
    assert effect.idempotency_key == receipt.result["task_id"]


def _celery_worker_until(predicate):
    """Run a real ``celery worker`` on the test queue until ``predicate()`` is truthy (at
    most 90 s); return that value."""
    from tests.testapp.celery_app import QUEUE

    celery = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "tests.testapp.celery_app",
            "worker",
            "--pool=solo",
            "--queues",
            QUEUE,
            "--without-heartbeat",
            "--without-mingle",
            "--without-gossip",
            "--loglevel=INFO",
        ],
        cwd=REPO,
        env=_env(DDS_CELERY_QUEUE=QUEUE),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        return wait_until(predicate, timeout=90, message="the Celery worker to run the task")
    except AssertionError:
        celery.kill()
        raise AssertionError(celery.communicate(timeout=10)[0]) from None
    finally:
        if celery.poll() is None:
            celery.send_signal(signal.SIGTERM)
            try:
                celery.wait(30)
            except subprocess.TimeoutExpired:
                celery.kill()
                celery.wait(10)


@needs_celery
@pytest.mark.process
@pytest.mark.django_db(transaction=True)
def test_a_fenced_celery_attempt_still_names_the_task_it_published(redis_url):
    """The scheduler published the task, then died before its receipt (as after a kill -9):
    the lease expires and the attempt is receipted lease_expired with no result. The task id
    is the idempotency key, which the attempt row holds from the claim, committed before the
    publish: the published task is traceable from the attempt alone."""
    claim, outcome = _run("tests.celery", payload={"tag": "fenced"}, now=T0)
    assert outcome.status == "enqueued"  # published; the receipt is never written
    assert state.expire_leases(now=T0 + timedelta(hours=1)) == 1
    receipt = _receipt(claim)
    assert receipt.status == "lease_expired" and receipt.result is None
    attempt = RunAttempt.objects.get(pk=claim.attempt_id)
    effect = _celery_worker_until(
        lambda: SideEffect.objects.filter(schedule_name="celery:fenced").first()
    )
    assert effect.idempotency_key == attempt.idempotency_key


@needs_tasks_db
@pytest.mark.django_db(transaction=True)
def test_the_duration_of_a_run_handed_to_a_database_queue_is_its_enqueue(monkeypatch):
    import time as _time

    from django_durable_schedules import signals
    from django_durable_schedules.state import enqueues
    from django_durable_schedules.worker import Worker, WorkerOptions

    Schedule.objects.create(  # due at once
        name="slow-enqueue",
        callback="tests.task_db",
        kind="interval",
        interval_seconds=3600,
        payload={"tag": "d"},
    )
    monkeypatch.setattr(
        enqueues,
        "enqueue_hook",
        lambda stage, outcome: _time.sleep(0.3) if stage == "before" else None,
    )
    durations = []

    def on_finished(sender, duration, **kw):
        durations.append(duration)

    signals.run_finished.connect(on_finished, weak=False)
    try:
        Worker(WorkerOptions(once=True, worker_id="w-enq")).run()
    finally:
        signals.run_finished.disconnect(on_finished)
    assert len(durations) == 1 and durations[0] >= 0.3  # not the ~0 of handing it over
