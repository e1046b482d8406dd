"""The admin's delivery log of notifications: read-only, filterable by notifier, status and
event, searchable by schedule name, in a bounded number of queries; an event's page shows
its notifications."""

from __future__ import annotations

import pytest
from django.db import transaction
from django.test.utils import override_settings
from django.urls import reverse

from django_durable_schedules import state
from django_durable_schedules.models import NotificationDelivery, Schedule

pytestmark = pytest.mark.django_db

LOG = "admin:durable_schedules_notificationdelivery_changelist"
NOTIFIERS = {
    "ops": {
        "BACKEND": "django_durable_schedules.notify.WebhookNotifier",
        "OPTIONS": {"url": "http://127.0.0.1:9/x"},
    },
    "mail": {
        "BACKEND": "django_durable_schedules.notify.MailNotifier",
        "OPTIONS": {"to": ["ops@example.com"]},
        "EVENTS": ["deadline_missed"],
    },
}


@pytest.fixture
def log():
    with override_settings(DURABLE_SCHEDULES={"NOTIFIERS": NOTIFIERS}):
        events = []
        for i, action in enumerate(["failing", "deadline_missed", "recovered"] * 4):
            row = Schedule.objects.create(
                name=f"job-{i}", callback="tests.noop", kind="interval", interval_seconds=60
            )
            with transaction.atomic():
                events.append(state.record_event(row, action, source="worker", occurrence=i))
        [claim] = state.claim_deliveries("mail", "w", limit=1, lease_seconds=5)
        state.finish_delivery(claim, None)
        yield events


def rows(response) -> int:
    return response.content.decode().count('class="field-notifier"')


def test_the_delivery_log_lists_filters_and_searches(
    admin_client, log, django_assert_max_num_queries
):
    with django_assert_max_num_queries(8):
        response = admin_client.get(reverse(LOG))
    assert response.status_code == 200 and rows(response) == 16
    html = response.content.decode()
    assert "?notifier=ops" in html and "?status__exact=abandoned" in html
    assert rows(admin_client.get(reverse(LOG), {"notifier": "mail"})) == 4
    assert rows(admin_client.get(reverse(LOG), {"status__exact": "delivered"})) == 1
    assert rows(admin_client.get(reverse(LOG), {"action": "recovered"})) == 4
    # job-1 and job-10 (deadline_missed: ops and mail), job-11 (recovered: ops)
    assert rows(admin_client.get(reverse(LOG), {"q": "job-1"})) == 5
    one = NotificationDelivery.objects.filter(status="delivered").get()
    page = admin_client.get(
        reverse("admin:durable_schedules_notificationdelivery_change", args=[one.pk])
    ).content.decode()
    assert "gives up after (tries)" in page.lower() and "delivered" in page


def test_the_delivery_log_is_read_only(admin_client, log):
    one = NotificationDelivery.objects.first()
    add = reverse("admin:durable_schedules_notificationdelivery_add")
    assert admin_client.get(add).status_code == 403
    change = reverse("admin:durable_schedules_notificationdelivery_change", args=[one.pk])
    assert admin_client.post(change, {"status": "delivered"}).status_code == 403
    delete = reverse("admin:durable_schedules_notificationdelivery_delete", args=[one.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 403
    assert NotificationDelivery.objects.filter(pk=one.pk, status=one.status).exists()


def test_an_events_page_shows_its_notifications(admin_client, log):
    missed = log[1]
    page = admin_client.get(
        reverse("admin:durable_schedules_scheduleevent_change", args=[missed.pk])
    ).content.decode()
    assert "mail: delivered (1 tries)" in page and "ops: pending (0 tries)" in page
