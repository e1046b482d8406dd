"""Notifications as facts, then delivery (issue #26 item 2): the outbox rows written with
their event, a worker's delivery threads sending them to a REAL local HTTP server, retries
with backoff, a notifier that raises or hangs delaying only itself, mail through Django's
locmem backend, HMAC signatures, and the system checks of ``NOTIFIERS``."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from datetime import timedelta

import django
import pytest
from django.core import checks, mail
from django.db import transaction
from django.test.utils import override_settings

from django_durable_schedules import state
from django_durable_schedules.models import NotificationDelivery, Schedule
from django_durable_schedules.notify import Notifier
from django_durable_schedules.worker.deliveries import Deliveries

from .conftest import wait_until
from .notify_server import Hook

pytestmark = pytest.mark.django_db(transaction=True)

WEBHOOK = "django_durable_schedules.notify.WebhookNotifier"
FAST = {"NOTIFY_POLL_SECONDS": 0.1, "NOTIFY_BACKOFF_BASE_SECONDS": 0.5}
CALLS: dict[str, list[str]] = {"raises": [], "hangs": []}
HANG = threading.Event()


class Raises(Notifier):
    def send(self, notification):
        CALLS["raises"].append(notification.schedule)
        raise RuntimeError("the chat service is down")


class RaisesOdd(Notifier):
    def send(self, notification):
        raise ValueError("nul \x00 and a lone \ud800 surrogate " + "x" * 5000)


class Hangs(Notifier):
    def send(self, notification):
        CALLS["hangs"].append(notification.schedule)
        HANG.wait(30)


@pytest.fixture
def hook():
    server = Hook().up()
    yield server
    server.release()
    server.down()


@pytest.fixture
def deliveries():
    started: list[Deliveries] = []

    def start(worker_id: str = "w-test") -> Deliveries:
        d = Deliveries(worker_id)
        d.start()
        started.append(d)
        return d

    yield start
    HANG.set()
    for d in started:
        d.stop()
    HANG.clear()


def settings_with(notifiers, **extra):
    return override_settings(DURABLE_SCHEDULES={**FAST, "NOTIFIERS": notifiers, **extra})


def alert(name: str, action: str = "failing", occurrence: int | None = 3):
    row = Schedule.objects.filter(name=name).first() or Schedule.objects.create(
        name=name, callback="tests.noop", kind="interval", interval_seconds=3600
    )
    with transaction.atomic():
        return state.record_event(
            row, action, source="worker", occurrence=occurrence, changes={"streak": [2, 3]}
        )


def test_an_alert_queues_one_delivery_per_notifier_that_wants_it_in_its_transaction():
    notifiers = {
        "ops": {"BACKEND": WEBHOOK, "OPTIONS": {"url": "http://127.0.0.1:9/x"}},
        "late-only": {
            "BACKEND": WEBHOOK,
            "OPTIONS": {"url": "http://127.0.0.1:9/y"},
            "EVENTS": ["deadline_missed"],
        },
    }
    with settings_with(notifiers):
        event = alert("nightly", "failing")
        rows = list(NotificationDelivery.objects.filter(event=event))
        assert [(r.notifier, r.status, r.tries, r.action, r.occurrence) for r in rows] == [
            ("ops", "pending", 0, "failing", 3)
        ]
        # A control action is not an alert by default: nothing queued.
        with transaction.atomic():
            state.record_event(Schedule.objects.get(name="nightly"), "edited")
        assert NotificationDelivery.objects.count() == 1
        # Rolled back with its event: the outbox never holds a delivery of no fact.
        with pytest.raises(RuntimeError), transaction.atomic():
            alert("nightly", "deadline_missed")
            raise RuntimeError
        assert NotificationDelivery.objects.count() == 1
        # The de-duplication safety: queuing one event again adds nothing.
        assert state.enqueue_deliveries(event) == 1
        assert NotificationDelivery.objects.filter(event=event).count() == 1


def test_a_webhook_receives_each_alert_exactly_once_signed(hook, deliveries):
    secret = "s3cret"
    notifiers = {"ops": {"BACKEND": WEBHOOK, "OPTIONS": {"url": hook.url, "secret": secret}}}
    with settings_with(notifiers):
        deliveries("w1")
        deliveries("w2")  # two workers: still once
        events = [alert(f"job-{i}", action) for i, action in enumerate(["failing", "recovered"])]
        wait_until(lambda: len(hook.requests) >= 2, 15, message="two deliveries")
        wait_until(lambda: NotificationDelivery.objects.filter(status="delivered").count() == 2, 10)
        time.sleep(0.5)
    assert len(hook.requests) == 2
    got = sorted(hook.bodies(), key=lambda b: b["schedule"])
    assert [(b["event"], b["schedule"], b["occurrence"]) for b in got] == [
        ("failing", "job-0", 3),
        ("recovered", "job-1", 3),
    ]
    assert set(got[0]) == {"event", "schedule", "occurrence", "at", "detail"}
    assert got[0]["detail"] == {"streak": [2, 3]}
    for request in hook.requests:
        expected = (
            "sha256=" + hmac.new(secret.encode(), request["body"], hashlib.sha256).hexdigest()
        )
        assert request["headers"]["X-Durable-Schedules-Signature"] == expected
        assert request["headers"]["Content-Type"] == "application/json"
    assert {r["headers"]["X-Durable-Schedules-Event"] for r in hook.requests} == {
        str(e.pk) for e in events
    }
    row = NotificationDelivery.objects.get(event=events[0])
    assert row.tries == 1 and row.delivered_at is not None and row.lease_until is None


def test_a_server_down_for_a_while_gets_the_alert_after_it_returns(hook, deliveries):
    hook.down()
    notifiers = {"ops": {"BACKEND": WEBHOOK, "OPTIONS": {"url": hook.url, "timeout": 2}}}
    with settings_with(notifiers):
        deliveries()
        event = alert("payroll", "deadline_missed")
        row = wait_until(
            lambda: NotificationDelivery.objects.filter(event=event, tries__gte=2).first(),
            15,
            message="two failed tries",
        )
        assert row.status == "pending" and "cannot POST" in row.last_error
        # Backoff honoured: the second retry waits twice the first (0.5 s, then 1 s).
        assert row.next_try_at - row.created_at >= timedelta(seconds=1)
        assert hook.requests == []
        hook.up()
        done = wait_until(
            lambda: NotificationDelivery.objects.filter(event=event, status="delivered").first(),
            15,
            message="the delivery after the server returned",
        )
    assert len(hook.requests) == 1 and hook.bodies()[0]["event"] == "deadline_missed"
    assert done.tries >= 3 and done.last_error == ""


def test_a_non_2xx_answer_is_a_failure_and_gives_up_after_max_tries(hook, deliveries):
    hook.status = 500
    notifiers = {"ops": {"BACKEND": WEBHOOK, "OPTIONS": {"url": hook.url}}}
    with settings_with(notifiers, NOTIFY_MAX_TRIES=2, NOTIFY_BACKOFF_BASE_SECONDS=0.05):
        deliveries()
        event = alert("reports")
        row = wait_until(
            lambda: NotificationDelivery.objects.filter(event=event, status="abandoned").first(),
            15,
            message="abandoned",
        )
        time.sleep(0.5)
    assert row.tries == 2 and "HTTP 500" in row.last_error
    assert len(hook.requests) == 2  # never a third send


def test_a_notifier_that_raises_or_hangs_delays_only_its_own_deliveries(hook, deliveries):
    CALLS["raises"].clear()
    CALLS["hangs"].clear()
    notifiers = {
        "hangs": {"BACKEND": f"{__name__}.Hangs", "OPTIONS": {"timeout": 30}},
        "raises": {"BACKEND": f"{__name__}.Raises"},
        "ops": {"BACKEND": WEBHOOK, "OPTIONS": {"url": hook.url}},
    }
    with settings_with(notifiers):
        deliveries()
        alert("first")
        wait_until(lambda: CALLS["hangs"] == ["first"], 10, message="the hung send")
        started = time.monotonic()
        alert("second")  # while "hangs" is stuck in its first send
        wait_until(lambda: len(hook.requests) == 2, 10, message="the webhook's deliveries")
        assert time.monotonic() - started < 5
        wait_until(lambda: len(CALLS["raises"]) >= 2, 10, message="the raising sends")
        assert CALLS["hangs"] == ["first"]  # no second call while the first hangs
    by = {(r.notifier, r.schedule_name): r for r in NotificationDelivery.objects.all()}
    assert by[("ops", "first")].status == by[("ops", "second")].status == "delivered"
    assert "RuntimeError: the chat service is down" in by[("raises", "first")].last_error
    assert by[("hangs", "first")].status == "pending"


def test_a_hung_send_times_out_and_is_retried(deliveries):
    CALLS["hangs"].clear()
    notifiers = {"hangs": {"BACKEND": f"{__name__}.Hangs", "OPTIONS": {"timeout": 0.5}}}
    with settings_with(notifiers):
        event = alert("slow")
        waiting = alert("queued-behind")  # claimed in the same batch
        deliveries()
        row = wait_until(
            lambda: NotificationDelivery.objects.filter(event=event, tries=1).first(), 10
        )
        time.sleep(0.5)
        behind = NotificationDelivery.objects.get(event=waiting)
    assert row.status == "pending" and row.last_error == "timed out after 0.5s"
    # The notifier's call is still hung: the rest of its batch was handed back unsent.
    assert CALLS["hangs"] == ["slow"]
    assert behind.tries == 0 and behind.lease_until is None and behind.leased_by == ""


def test_mail_goes_through_djangos_mail_backend(deliveries):
    notifiers = {
        "mail": {
            "BACKEND": "django_durable_schedules.notify.MailNotifier",
            "OPTIONS": {"to": ["ops@example.com"], "from_email": "dds@example.com"},
        }
    }
    with settings_with(notifiers):  # the test runner's mail backend: locmem
        mail.outbox = []
        deliveries()
        alert("invoices", "deadline_missed", occurrence=12)
        wait_until(lambda: NotificationDelivery.objects.filter(status="delivered").exists(), 10)
    [message] = mail.outbox
    assert message.to == ["ops@example.com"] and message.from_email == "dds@example.com"
    assert message.subject.startswith("[durable schedules] ")
    assert 'schedule "invoices" missed its deadline (occurrence 12)' in message.subject
    assert "occurrence: 12" in message.body


@pytest.mark.skipif(django.VERSION < (6, 1), reason="MAILERS came with Django 6.1")
def test_mail_goes_through_the_named_mailer(deliveries):
    """Option ``mailer``: the alias of the project's ``MAILERS`` entry to send with."""
    notifiers = {
        "mail": {
            "BACKEND": "django_durable_schedules.notify.MailNotifier",
            "OPTIONS": {"to": ["ops@example.com"], "mailer": "alerts"},
        }
    }
    mailers = {
        "default": {"BACKEND": "django.core.mail.backends.dummy.EmailBackend"},
        "alerts": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"},
    }
    with settings_with(notifiers), override_settings(MAILERS=mailers):
        mail.outbox = []
        deliveries()
        alert("invoices", "failing", occurrence=3)
        wait_until(lambda: NotificationDelivery.objects.filter(status="delivered").exists(), 10)
    [message] = mail.outbox
    assert message.to == ["ops@example.com"] and "invoices" in message.subject


@pytest.mark.vendor_independent  # an options check: no query
def test_a_bad_mailer_option_is_a_problem_not_a_crash():
    from django_durable_schedules.notify import MailNotifier

    problems = MailNotifier.check_options({"to": ["ops@example.com"], "mailer": 7})
    assert problems == ["'mailer' must be the alias of a MAILERS entry"]


def test_the_chat_webhook_posts_text(hook, deliveries):
    notifiers = {
        "chat": {
            "BACKEND": "django_durable_schedules.notify.ChatWebhookNotifier",
            "OPTIONS": {"url": hook.url, "headers": {"X-Team": "ops"}},
        }
    }
    with settings_with(notifiers):
        deliveries()
        alert("backup", "recovered", occurrence=None)
        wait_until(lambda: hook.requests, 10)
    [body] = hook.bodies()
    assert body == {"text": body["text"]} and body["text"].startswith('schedule "backup" recovered')
    assert hook.requests[0]["headers"]["X-Team"] == "ops"


def test_a_lost_lease_cannot_record_and_the_next_claim_takes_over():
    notifiers = {"ops": {"BACKEND": WEBHOOK, "OPTIONS": {"url": "http://127.0.0.1:9/"}}}
    with settings_with(notifiers):
        alert("fenced")
        [first] = state.claim_deliveries("ops", "w1", limit=5, lease_seconds=-10)
        # Its lease (1 * -10 + 5 s) is already over: another worker takes it over.
        [second] = state.claim_deliveries("ops", "w2", limit=5, lease_seconds=10)
        assert first.id == second.id and first.token != second.token
        assert state.claim_deliveries("ops", "w3", limit=5, lease_seconds=10) == []
        assert state.finish_delivery(first, None) is None  # fenced out
        assert state.finish_delivery(second, None) == "delivered"
    assert NotificationDelivery.objects.get().tries == 1


def test_notifications_need_no_notifier_configured():
    with settings_with({}):
        alert("quiet")
    assert not NotificationDelivery.objects.exists()


# -- system checks ---------------------------------------------------------------------


def check_ids(value, **extra):
    with override_settings(DURABLE_SCHEDULES={"NOTIFIERS": value, **extra}):
        return [
            (m.id, m.msg) for m in checks.run_checks() if m.id.startswith("durable_schedules.E02")
        ]


@pytest.mark.vendor_independent  # the NOTIFIERS setting's checks; the outbox: other tests
@pytest.mark.parametrize(
    ("value", "words"),
    [
        (
            {"ops": {"BACKEND": "no.such.Backend", "OPTIONS": {"url": "http://x"}}},
            "cannot be imported",
        ),
        ({"ops": {"BACKEND": "json.dumps"}}, "not a subclass"),
        ({"ops": {"BACKEND": WEBHOOK}}, "'url' is required"),
        ({"ops": {"BACKEND": WEBHOOK, "OPTIONS": {"url": "ftp://x/y"}}}, "http:// or https://"),
        (
            {"ops": {"BACKEND": WEBHOOK, "OPTIONS": {"url": "http://x", "timeout": "10"}}},
            "'timeout'",
        ),
        (
            {"ops": {"BACKEND": WEBHOOK, "OPTIONS": {"url": "http://x", "headers": [1]}}},
            "'headers'",
        ),
        (
            {"ops": {"BACKEND": WEBHOOK, "OPTIONS": {"url": "http://x", "sekret": "a"}}},
            "unknown option",
        ),
        (
            {"ops": {"BACKEND": WEBHOOK, "OPTIONS": {"url": "http://x"}, "EVENTS": ["nope"]}},
            "unknown actions",
        ),
        ({"ops": {"BACKEND": "django_durable_schedules.notify.MailNotifier"}}, "'to' is required"),
        ({"ops": "django_durable_schedules.notify.MailNotifier"}, "must be a dict"),
        ({"bad name!": {"BACKEND": WEBHOOK}}, "name"),
        (["ops"], "NOTIFIERS must be a dict"),
    ],
)
def test_bad_notifiers_are_check_errors_not_crashes(value, words):
    found = check_ids(value)
    assert found and all(i == "durable_schedules.E020" for i, _ in found)
    assert any(words in msg for _, msg in found), found
    # ...and where they enter: the bad entry is left out, an alert is still written.
    with settings_with(value):
        alert("still-written")
    assert not NotificationDelivery.objects.exists()


@pytest.mark.vendor_independent  # settings checks
def test_good_notifiers_pass_the_checks():
    good = {
        "ops": {
            "BACKEND": WEBHOOK,
            "OPTIONS": {"url": "https://h.example/x", "secret": "k", "timeout": 3},
        },
        "mail": {
            "BACKEND": "django_durable_schedules.notify.MailNotifier",
            "OPTIONS": {"to": ["a@b.c"]},
        },
    }
    assert check_ids(good, NOTIFY_MAX_TRIES=5) == []


@pytest.mark.parametrize(
    "bad", [{"NOTIFY_MAX_TRIES": 0}, {"NOTIFY_MAX_TRIES": 2.5}, {"NOTIFY_POLL_SECONDS": "1"}]
)
@pytest.mark.vendor_independent  # settings checks
def test_bad_notify_numbers_are_e021(bad):
    assert [i for i, _ in check_ids({}, **bad)] == ["durable_schedules.E021"]


@pytest.mark.vendor_independent  # the webhook body's JSON
def test_webhook_body_is_the_documented_json():
    from django_durable_schedules.notify.base import Notification, webhook_body

    n = Notification("failing", "s", 1, "2027-01-01T00:00:00Z", {"a": 1})
    assert json.loads(webhook_body(n)) == {
        "event": "failing",
        "schedule": "s",
        "occurrence": 1,
        "at": "2027-01-01T00:00:00Z",
        "detail": {"a": 1},
    }


def test_an_error_no_database_can_store_is_still_recorded(deliveries):
    notifiers = {"odd": {"BACKEND": f"{__name__}.RaisesOdd"}}
    with settings_with(notifiers):
        deliveries()
        event = alert("odd")
        row = wait_until(
            lambda: NotificationDelivery.objects.filter(event=event, tries__gte=1).first(), 10
        )
    assert row.last_error.startswith("ValueError: nul  and a lone ? surrogate xxx")
    assert len(row.last_error) == 1000
