"""Notifications with real ``run_scheduler`` processes (issue #26 item 2): a worker
killed with SIGKILL in the middle of a delivery loses no notification (another worker sends
it once the lease has expired), and a notifier that hangs delays neither another notifier
nor the worker's runs. The webhook receivers are REAL local HTTP servers."""

from __future__ import annotations

import json
import time

import pytest
from django.db import transaction

from django_durable_schedules import state
from django_durable_schedules.models import NotificationDelivery, RunReceipt, Schedule

from .conftest import wait_until
from .notify_server import Hook

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True)]

WEBHOOK = "django_durable_schedules.notify.WebhookNotifier"


@pytest.fixture
def hooks():
    made: list[Hook] = []

    def make() -> Hook:
        made.append(Hook().up())
        return made[-1]

    yield make
    for hook in made:
        hook.release()
        hook.down()


def worker_env(notifiers: dict, **extra) -> dict[str, str]:
    settings = {"NOTIFIERS": notifiers, "NOTIFY_POLL_SECONDS": 0.2, **extra}
    return {"DDS_TEST_DURABLE_SCHEDULES": json.dumps(settings)}


def alert(name: str, action: str = "failing", occurrence: int = 1):
    row = Schedule.objects.create(
        name=name, callback="tests.noop", kind="interval", interval_seconds=3600, status="paused"
    )
    with transaction.atomic():
        return state.record_event(row, action, source="worker", occurrence=occurrence)


def test_sigkill_mid_delivery_loses_no_notification(hooks, start_worker, settings):
    hook = hooks()
    hook.hang = 1  # the first request hangs: the worker is mid-delivery when killed
    notifiers = {"ops": {"BACKEND": WEBHOOK, "OPTIONS": {"url": hook.url, "timeout": 3}}}
    settings.DURABLE_SCHEDULES = {"NOTIFIERS": notifiers}
    env = worker_env(notifiers)
    victim = start_worker("--worker-id", "notify-a", "--max-idle", "0.5", env=env)
    event = alert("ledger", "deadline_missed", occurrence=7)
    wait_until(lambda: len(hook.requests) == 1, 30, message="the first (hanging) request")
    victim.kill()  # SIGKILL: no release, no record of the send
    row = NotificationDelivery.objects.get(event=event)
    assert row.status == "pending" and row.tries == 0 and row.leased_by.startswith("notify-a:")

    start_worker("--worker-id", "notify-b", "--max-idle", "0.5", env=env)
    done = wait_until(
        lambda: NotificationDelivery.objects.filter(event=event, status="delivered").first(),
        40,
        message="the delivery by the other worker after the lease expired",
    )
    assert done.leased_by.startswith("notify-b:") and done.tries == 1
    assert done.delivered_at >= row.lease_until  # never taken over before the lease ended
    bodies = hook.bodies()
    assert len(bodies) == 2  # at-least-once: the killed send and the one that succeeded
    assert bodies[0] == bodies[1]
    assert bodies[1]["event"] == "deadline_missed" and bodies[1]["occurrence"] == 7
    ids = {r["headers"]["X-Durable-Schedules-Delivery"] for r in hook.requests}
    assert ids == {str(done.pk)}  # the receiver can de-duplicate


def test_a_hung_notifier_delays_neither_another_notifier_nor_the_runs(
    hooks, start_worker, settings
):
    stuck, ops = hooks(), hooks()
    stuck.hang = 100
    notifiers = {
        "stuck": {"BACKEND": WEBHOOK, "OPTIONS": {"url": stuck.url, "timeout": 60}},
        "ops": {"BACKEND": WEBHOOK, "OPTIONS": {"url": ops.url}},
    }
    settings.DURABLE_SCHEDULES = {"NOTIFIERS": notifiers}
    worker = start_worker("--worker-id", "notify-c", "--max-idle", "0.5", env=worker_env(notifiers))
    alert("first")
    wait_until(lambda: len(stuck.requests) == 1, 30, message="the stuck notifier's send")
    started = time.monotonic()
    alert("second")
    wait_until(lambda: len(ops.requests) == 2, 10, message="the other notifier's sends")
    assert time.monotonic() - started < 5
    s = Schedule.objects.create(
        name="ticks", callback="tests.record", kind="interval", interval_seconds=1
    )
    wait_until(
        lambda: RunReceipt.objects.filter(schedule=s, status="succeeded").count() >= 3,
        15,
        message="three runs while a notifier hangs",
    )
    assert len(stuck.requests) == 1
    assert [b["schedule"] for b in ops.bodies()] == ["first", "second"]
    worker.stop()
    assert worker.proc.returncode == 0, worker.output()[-2000:]


def test_two_workers_deliver_each_alert_once_after_the_server_comes_back(
    hooks, start_worker, settings
):
    hook = hooks()
    hook.down()  # down before the alerts: every first send fails
    notifiers = {"ops": {"BACKEND": WEBHOOK, "OPTIONS": {"url": hook.url, "timeout": 2}}}
    settings.DURABLE_SCHEDULES = {"NOTIFIERS": notifiers}
    env = worker_env(notifiers, NOTIFY_BACKOFF_BASE_SECONDS=0.5, NOTIFY_BACKOFF_CAP_SECONDS=2)
    for wid in ("notify-d", "notify-e"):
        start_worker("--worker-id", wid, "--max-idle", "0.5", env=env)
    events = [alert(f"batch-{i}", action) for i, action in enumerate(["failing", "recovered"] * 3)]
    wait_until(
        lambda: NotificationDelivery.objects.filter(tries__gte=2).count() == len(events),
        40,
        message="two failed sends of each while the server is down",
    )
    assert hook.requests == []
    hook.up()
    wait_until(
        lambda: NotificationDelivery.objects.filter(status="delivered").count() == len(events),
        30,
        message="every alert delivered after the server came back",
    )
    time.sleep(1.0)
    bodies = hook.bodies()
    assert sorted(b["schedule"] for b in bodies) == sorted(e.schedule_name for e in events)
    delivered_by = {r.leased_by.split(":")[0] for r in NotificationDelivery.objects.all()}
    assert delivered_by <= {"notify-d", "notify-e"}
