"""Definition history and restore (issue #29, item 3) in the CLI (``schedules versions`` and
``schedules restore``) and the admin (the change page's "History of the definition", the
compare page, the confirmation page and its POST)."""

from __future__ import annotations

import re
import uuid
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from django_durable_schedules import state
from django_durable_schedules.models import RunAttempt, Schedule, ScheduleEvent

pytestmark = pytest.mark.django_db


def run(*args):
    out = StringIO()
    call_command("schedules", *args, stdout=out)
    return out.getvalue()


def edited(name="nightly"):
    row = state.create_schedule(
        name=name, callback="tests.noop", kind="cron", cron="0 3 * * *", timezone="UTC"
    )
    state.update_schedule(row.pk, cron="0 5 * * *", payload={"v": 2}, source="api")
    return Schedule.objects.get(pk=row.pk)


def created_event(row):
    return str(ScheduleEvent.objects.get(schedule_id=row.pk, action="created").pk)


# -- CLI --------------------------------------------------------------------------------------


def test_versions_lists_each_with_what_differs_from_the_current():
    row = edited()
    text = run("versions", "nightly")
    newest, older = text.split("\n", 1)[0], text.split("\n", 1)[1]
    assert "edited by api  (current)" in newest
    assert created_event(row) in older
    assert 'cron: "0 5 * * *" -> "0 3 * * *"' in older
    assert 'payload: {"v": 2} -> {}' in older


def test_restore_makes_the_version_current_as_an_edit_by_the_command():
    row = edited()
    text = run("restore", "nightly", "--event", created_event(row))
    assert "restored" in text and "no run was fired" in text
    row.refresh_from_db()
    assert (row.cron, row.payload) == ("0 3 * * *", {})
    last = ScheduleEvent.objects.filter(schedule_id=row.pk).order_by("-at").first()
    assert (last.action, last.source) == ("edited", "command")
    assert last.changes["restored_from"][1]["event"] == created_event(row)
    assert not RunAttempt.objects.filter(schedule_id=row.pk).exists()
    assert "nothing changed" in run("restore", "nightly", "--event", str(last.pk))


@pytest.mark.parametrize("event", ["bogus", str(uuid.uuid4())])
def test_restore_refuses_a_bad_event_with_a_command_error(event):
    edited()
    with pytest.raises(CommandError, match="not restored: event:"):
        run("restore", "nightly", "--event", event)
    with pytest.raises(CommandError, match="no schedule named"):
        run("restore", "nope", "--event", event)
    with pytest.raises(CommandError):
        run("restore", "nightly")  # --event is required


# -- admin ------------------------------------------------------------------------------------


def change_url(row):
    return reverse("admin:durable_schedules_schedule_change", args=[row.pk])


def compare_url(row, event):
    return reverse("admin:durable_schedules_schedule_version", args=[row.pk, event])


def restore_url(row, event):
    return reverse("admin:durable_schedules_schedule_restore", args=[row.pk, event])


def test_the_change_page_lists_the_versions_with_compare_links(admin_client):
    row = edited()
    page = admin_client.get(change_url(row)).content.decode()
    assert "History of the definition" in page
    assert compare_url(row, created_event(row)) in page
    assert re.search(r"cron, payload", page)


def test_compare_shows_the_differences_and_a_restore_button(admin_client):
    row = edited()
    page = admin_client.get(compare_url(row, created_event(row))).content.decode()
    assert "0 5 * * *" in page and "0 3 * * *" in page
    assert restore_url(row, created_event(row)) in page
    newest = str(ScheduleEvent.objects.get(schedule_id=row.pk, action="edited").pk)
    same = admin_client.get(compare_url(row, newest)).content.decode()
    assert "the current definition" in same and restore_url(row, newest) not in same
    assert admin_client.get(compare_url(row, uuid.uuid4())).status_code == 404


def test_the_confirmation_page_asks_and_its_post_restores(admin_client):
    row = edited()
    event = created_event(row)
    ask = admin_client.get(restore_url(row, event))
    assert ask.status_code == 200 and b"csrfmiddlewaretoken" in ask.content
    assert Schedule.objects.get(pk=row.pk).cron == "0 5 * * *"  # a GET changes nothing
    done = admin_client.post(restore_url(row, event), {"post": "yes"}, follow=True)
    assert done.redirect_chain[-1][0] == change_url(row)
    assert "was restored" in done.content.decode()
    assert Schedule.objects.get(pk=row.pk).cron == "0 3 * * *"
    last = ScheduleEvent.objects.filter(schedule_id=row.pk).order_by("-at").first()
    assert (last.action, last.source, last.actor_repr) == ("edited", "admin", "admin")
    assert not RunAttempt.objects.filter(schedule_id=row.pk).exists()


def test_a_refused_restore_shows_the_reason_and_changes_nothing(admin_client):
    from django_durable_schedules.registry import registry

    row = state.create_schedule(
        name="e", callback="tests.echo", kind="interval", interval_seconds=60
    )
    state.update_schedule(row.pk, callback="tests.noop")
    registration = registry.get("tests.echo")
    registry.remove("tests.echo")
    try:
        done = admin_client.post(restore_url(row, created_event(row)), {"post": "yes"}, follow=True)
    finally:
        registry.add(registration)
    assert "not restored" in done.content.decode() and "callback" in done.content.decode()
    assert Schedule.objects.get(pk=row.pk).callback == "tests.noop"


def test_restoring_needs_change_permission(client, django_user_model):
    from django.contrib.auth.models import Permission

    row = edited()
    viewer = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_schedule"))
    client.force_login(viewer)
    assert client.get(compare_url(row, created_event(row))).status_code == 200
    assert client.post(restore_url(row, created_event(row)), {"post": "yes"}).status_code == 403
    assert Schedule.objects.get(pk=row.pk).cron == "0 5 * * *"
