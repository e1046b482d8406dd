"""The audit trail of concurrency group edits: an edit of a group (its description,
``max_running`` or ``rate``) writes one ``group`` event on each schedule that names it,
with who (``actor``), from where (``source``: admin, api, command, code) and the changed
fields (``{"group": name, field: [before, after]}``), in one insert however many schedules
name it. An edit that changes nothing writes nothing; a created group (named by no
schedule yet) and a deleted one (refused while named) write no event. Every edit path
goes through ``state.save_group`` / ``state.delete_group``: the admin, the API, the
command. On SQLite, PostgreSQL and MariaDB."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib import admin as django_admin
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from django_durable_schedules import signals, state
from django_durable_schedules.models import ConcurrencyGroup, EventAction, Schedule, ScheduleEvent

pytestmark = pytest.mark.django_db


def schedule(name: str, group: ConcurrencyGroup | None = None) -> Schedule:
    return state.create_schedule(
        name=name, callback="tests.noop", kind="interval", interval_seconds=60,
        concurrency_group=group,
    )  # fmt: skip


def group_events(**filters) -> list[ScheduleEvent]:
    return list(
        ScheduleEvent.objects.filter(action=EventAction.GROUP, **filters).order_by("schedule_name")
    )


@pytest.fixture
def reports() -> ConcurrencyGroup:
    """The group ``reports`` (max 2 at once) named by ``a`` and ``b``; ``free`` names none."""
    group = state.save_group("reports", max_running=2, description="nightly reports")
    schedule("a", group)
    schedule("b", group)
    schedule("free")
    return group


# -- state ---------------------------------------------------------------------------------


def test_an_edit_writes_one_event_per_schedule_naming_the_group(reports, admin_user):
    state.save_group(
        "reports", max_running=3, rate="10 / m", description="nightly reports",
        actor=admin_user, source="code",
    )  # fmt: skip
    events = group_events()
    assert [e.schedule_name for e in events] == ["a", "b"]  # not "free"
    for e in events:
        assert e.changes == {"group": "reports", "max_running": [2, 3], "rate": ["", "10/m"]}
        assert (e.actor_id, e.actor_repr, e.source) == (admin_user.pk, str(admin_user), "code")
        assert e.schedule_id == Schedule.objects.get(name=e.schedule_name).pk


def test_an_edit_that_changes_nothing_writes_nothing(reports):
    before = ConcurrencyGroup.objects.get(pk=reports.pk).updated_at
    same = state.save_group("reports", max_running=2, description="nightly reports")
    assert same.pk == reports.pk
    assert group_events() == []
    assert ConcurrencyGroup.objects.get(pk=reports.pk).updated_at == before


def test_a_created_group_writes_no_event_and_a_deleted_one_none_either():
    state.save_group("new", max_running=1, source="api")
    assert group_events() == []
    state.delete_group("new", source="api")  # named by no schedule: no schedule to tell
    assert not ConcurrencyGroup.objects.filter(name="new").exists()
    assert group_events() == []


def test_a_refused_edit_writes_no_event(reports):
    with pytest.raises(ValidationError):
        state.save_group("reports", rate="10/d")
    assert group_events() == []


def test_fifty_schedules_get_their_events_in_one_insert(django_assert_max_num_queries):
    """The same statements for 1 schedule as for 50: one read of the schedules, one insert
    of their events (the rest, about 20 with savepoints, is the group's lock, its
    ``full_clean`` and its update)."""
    group = state.save_group("wide", max_running=5)
    schedule("s00", group)
    with CaptureQueriesContext(connection) as one:
        state.save_group("wide", max_running=6)
    for i in range(1, 50):
        schedule(f"s{i:02d}", group)
    with django_assert_max_num_queries(len(one)) as queries:
        state.save_group("wide", max_running=7, source="code")
    assert len(queries) <= 24
    assert sum(e.changes.get("max_running") == [6, 7] for e in group_events()) == 50
    inserts = [
        q for q in queries.captured_queries if q["sql"].lstrip().upper().startswith("INSERT")
    ]
    assert len(inserts) == 1


@pytest.mark.django_db(transaction=True)
def test_the_events_are_announced_on_commit(reports):
    seen = []

    def receiver(sender, event, **kwargs):
        seen.append((event.action, event.schedule_name))

    signals.schedule_changed.connect(receiver, sender=ScheduleEvent)
    try:
        state.save_group("reports", max_running=4, description="nightly reports")
    finally:
        signals.schedule_changed.disconnect(receiver, sender=ScheduleEvent)
    assert sorted(seen) == [("group", "a"), ("group", "b")]


# -- the admin -----------------------------------------------------------------------------


def test_an_admin_edit_writes_events_with_the_user(reports, admin_client, admin_user):
    url = reverse("admin:durable_schedules_concurrencygroup_change", args=[reports.pk])
    saved = admin_client.post(
        url,
        {"name": "reports", "max_running": "3", "rate": "5/s", "description": "nightly reports"},
    )
    assert saved.status_code == 302
    events = group_events()
    assert [e.schedule_name for e in events] == ["a", "b"]
    for e in events:
        assert (e.actor_id, e.source) == (admin_user.pk, "admin")
        assert e.changes == {"group": "reports", "max_running": [2, 3], "rate": ["", "5/s"]}
    # Saved again unchanged: nothing more.
    again = admin_client.post(
        url,
        {"name": "reports", "max_running": "3", "rate": "5/s", "description": "nightly reports"},
    )
    assert again.status_code == 302
    assert len(group_events()) == 2
    # The schedule's change page lists the event with its label and what changed.
    a = Schedule.objects.get(name="a")
    page = admin_client.get(reverse("admin:durable_schedules_schedule_change", args=[a.pk]))
    html = page.content.decode()
    assert "concurrency group changed" in html
    assert "max_running: 2 → 3" in html and "rate: — → 5/s" in html


def test_the_admin_adds_a_group_through_the_state_package(admin_client):
    url = reverse("admin:durable_schedules_concurrencygroup_add")
    made = admin_client.post(url, {"name": "mailer", "rate": " 10 / m ", "description": ""})
    assert made.status_code == 302
    group = ConcurrencyGroup.objects.get(name="mailer")
    assert group.rate == "10/m"
    assert made.url == reverse("admin:durable_schedules_concurrencygroup_changelist")
    assert group_events() == []


def test_the_admin_change_page_keeps_the_name(reports, admin_client):
    url = reverse("admin:durable_schedules_concurrencygroup_change", args=[reports.pk])
    page = admin_client.get(url)
    assert "name" not in page.context["adminform"].form.fields  # shown, not edited
    saved = admin_client.post(
        url, {"name": "renamed", "max_running": "2", "rate": "", "description": "other"}
    )
    assert saved.status_code == 302
    assert list(ConcurrencyGroup.objects.values_list("name", "description")) == [
        ("reports", "other")
    ]
    assert [e.changes for e in group_events()] == [
        {"group": "reports", "description": ["nightly reports", "other"]}
    ] * 2


def test_the_admin_deletes_through_the_state_package(admin_client, monkeypatch):
    group = state.save_group("unused", max_running=1)
    url = reverse("admin:durable_schedules_concurrencygroup_delete", args=[group.pk])
    calls = []
    real = state.delete_group

    def spy(name, **kwargs):
        calls.append((name, kwargs.get("source")))
        return real(name, **kwargs)

    monkeypatch.setattr(state, "delete_group", spy)
    assert admin_client.post(url, {"post": "yes"}).status_code == 302
    assert calls == [("unused", "admin")]
    assert not ConcurrencyGroup.objects.filter(pk=group.pk).exists()


def test_a_schedule_naming_the_group_after_the_page_was_read_refuses_the_delete(
    admin_client, monkeypatch
):
    group = state.save_group("late", max_running=1)
    schedule("came-since", group)
    model_admin = django_admin.site._registry[ConcurrencyGroup]
    real = type(model_admin).get_deleted_objects

    def not_named_yet(self, objs, request):  # the page's check ran before the schedule
        deleted, counts, perms, _protected = real(self, objs, request)
        return deleted, counts, perms, []

    monkeypatch.setattr(type(model_admin), "get_deleted_objects", not_named_yet)
    url = reverse("admin:durable_schedules_concurrencygroup_delete", args=[group.pk])
    refused = admin_client.post(url, {"post": "yes"}, follow=True)
    assert refused.status_code == 200
    assert "still named by 1 schedule(s): came-since" in refused.content.decode()
    assert ConcurrencyGroup.objects.filter(pk=group.pk).exists()


def test_the_admin_bulk_delete_goes_through_the_state_package(admin_client, monkeypatch):
    for name in ("x", "y"):
        state.save_group(name, max_running=1)
    calls = []
    real = state.delete_group
    monkeypatch.setattr(
        state, "delete_group", lambda name, **kw: calls.append(name) or real(name, **kw)
    )
    url = reverse("admin:durable_schedules_concurrencygroup_changelist")
    pks = [str(pk) for pk in ConcurrencyGroup.objects.values_list("pk", flat=True)]
    done = admin_client.post(
        url, {"action": "delete_selected", "_selected_action": pks, "post": "yes"}
    )
    assert done.status_code == 302
    assert sorted(calls) == ["x", "y"]
    assert not ConcurrencyGroup.objects.exists()


# -- the API -------------------------------------------------------------------------------


@pytest.fixture
def api(admin_user):
    client = APIClient()
    client.force_authenticate(admin_user)
    return client


def test_an_api_patch_writes_events_with_source_api(reports, api, admin_user):
    changed = api.patch("/api/groups/reports/", {"rate": "2/s"}, format="json")
    assert changed.status_code == 200, changed.json()
    events = group_events()
    assert [(e.schedule_name, e.source, e.actor_id) for e in events] == [
        ("a", "api", admin_user.pk),
        ("b", "api", admin_user.pk),
    ]
    assert events[0].changes == {"group": "reports", "rate": ["", "2/s"]}
    a = Schedule.objects.get(name="a")
    listed = api.get(f"/api/schedules/{a.pk}/events/").json()
    assert listed[0]["action"] == "group"
    assert listed[0]["changes"] == {"group": "reports", "rate": ["", "2/s"]}
    assert (listed[0]["source"], listed[0]["actor"]) == ("api", admin_user.pk)
    # The same values again (a PUT of what it holds): nothing more.
    same = api.put(
        "/api/groups/reports/",
        {"name": "reports", "max_running": 2, "rate": "2/s", "description": "nightly reports"},
        format="json",
    )
    assert same.status_code == 200, same.json()
    assert len(group_events()) == 2


# -- the command ---------------------------------------------------------------------------


def test_the_command_writes_events_with_source_command(reports):
    out = StringIO()
    call_command("schedules", "groups", "add", "reports", "--max-running", "4", stdout=out)
    assert out.getvalue() == "reports: changed, max 4 at once, no rate\n"
    events = group_events()
    assert [(e.schedule_name, e.source, e.actor_id) for e in events] == [
        ("a", "command", None),
        ("b", "command", None),
    ]
    # The command gives every field: its description left out is a change to blank.
    assert events[0].changes == {
        "group": "reports",
        "max_running": [2, 4],
        "description": ["nightly reports", ""],
    }


def test_a_bulk_delete_keeps_a_group_named_since_and_says_so(admin_client, monkeypatch):
    state.save_group("free-one", max_running=1)
    state.save_group("named-since", max_running=1)
    schedule("came-since", ConcurrencyGroup.objects.get(name="named-since"))
    model_admin = django_admin.site._registry[ConcurrencyGroup]
    real = type(model_admin).get_deleted_objects

    def not_named_yet(self, objs, request):
        deleted, counts, perms, _protected = real(self, objs, request)
        return deleted, counts, perms, []

    monkeypatch.setattr(type(model_admin), "get_deleted_objects", not_named_yet)
    url = reverse("admin:durable_schedules_concurrencygroup_changelist")
    pks = [str(pk) for pk in ConcurrencyGroup.objects.values_list("pk", flat=True)]
    done = admin_client.post(
        url, {"action": "delete_selected", "_selected_action": pks, "post": "yes"}, follow=True
    )
    assert "Not deleted (schedules name them): named-since." in done.content.decode()
    assert list(ConcurrencyGroup.objects.values_list("name", flat=True)) == ["named-since"]
