"""The statements one API create or edit of a schedule costs (issue #25, one validation
pass for definitions): ``state.prepare`` builds and validates the candidate once, the write
reads the database clock once, and the constraints the database enforces at the write (the
name's uniqueness, the CHECKs) are not probed in Python: a refusal is explained with the
same field messages. Counted on each database with the request's session and user reads.
"""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from django_durable_schedules import state
from django_durable_schedules.models import Schedule

pytestmark = pytest.mark.django_db

BODY = {"name": "job", "callback": "tests.noop", "kind": "interval", "interval_seconds": 60}
#: Issue #25's goal for one POST (57 statements before: two full_clean passes, 20 CHECK
#: probes in savepoints, 5 uniqueness probes, 2 clock reads).
POST_MAX = 18
PATCH_MAX = 18


@pytest.fixture
def api(django_user_model):
    """A staff user logged in with a session (each request reads its session and user)."""
    django_user_model.objects.create_user("staff", password="pw", is_staff=True)
    client = APIClient()
    assert client.login(username="staff", password="pw")
    return client


def _listed(ctx: CaptureQueriesContext) -> str:
    return "\n".join(f"{i}. {q['sql'][:160]}" for i, q in enumerate(ctx.captured_queries, 1))


def _clock_reads(ctx: CaptureQueriesContext) -> int:
    clock = ("statement_timestamp()", "UTC_TIMESTAMP(6)", "strftime('%Y-%m-%d %H:%M:%f', 'now')")
    return sum(q["sql"].startswith("SELECT ") and q["sql"].endswith(clock) for q in ctx)


def _probes(ctx: CaptureQueriesContext) -> int:
    return sum('"_check"' in q["sql"] or "SELECT 1 AS" in q["sql"] for q in ctx)


def test_post_schedules_costs_at_most_18_statements(api):
    with CaptureQueriesContext(connection) as ctx:
        response = api.post(reverse("durable_schedules_api:schedule-list"), BODY, format="json")
    assert response.status_code == 201, response.content
    print(f"POST schedules/: {len(ctx)} statements on {connection.vendor} (goal <= {POST_MAX})")
    assert len(ctx) <= POST_MAX, _listed(ctx)
    assert _probes(ctx) == 0, _listed(ctx)
    assert _clock_reads(ctx) == 1, _listed(ctx)
    row = Schedule.objects.get()
    event = row.events.get()
    assert event.at == row.created_at  # the one clock read: the row, its plan, its event


def test_patch_schedule_costs_at_most_18_statements(api):
    sid = api.post(reverse("durable_schedules_api:schedule-list"), BODY, format="json").json()["id"]
    path = reverse("durable_schedules_api:schedule-detail", args=[sid])
    with CaptureQueriesContext(connection) as ctx:
        response = api.patch(path, {"interval_seconds": 120}, format="json")
    assert response.status_code == 200, response.content
    print(f"PATCH schedules/{{id}}/: {len(ctx)} statements on {connection.vendor}")
    assert len(ctx) <= PATCH_MAX, _listed(ctx)
    assert _probes(ctx) == 0, _listed(ctx)
    assert _clock_reads(ctx) == 1, _listed(ctx)
    assert Schedule.objects.get().interval_seconds == 120


def test_a_refused_insert_has_the_messages_of_the_probes(api, monkeypatch):
    """A name taken between the validation and the insert: the database refuses it (its
    message differs on each database) and the answer is the name check's own message."""
    real = state.prepare

    def racing(*args, **kwargs):
        prepared = real(*args, **kwargs)
        Schedule.objects.create(name="raced", callback="tests.noop", interval_seconds=60)
        return prepared

    monkeypatch.setattr(state, "prepare", racing)
    response = api.post(
        reverse("durable_schedules_api:schedule-list"), {**BODY, "name": "raced"}, format="json"
    )
    assert response.status_code == 400
    assert response.json() == {"name": ["schedule with this name already exists."]}
    assert Schedule.objects.filter(name="raced").count() == 1


def test_state_create_schedule_refused_insert_gives_field_messages():
    """``create_schedule`` of a prepared create whose name was taken since: the model's
    message (as ``full_clean()`` gives it), on every database."""
    prepared = state.prepare({"name": "dup", "callback": "tests.noop", "interval_seconds": 60})
    Schedule.objects.create(name="dup", callback="tests.noop", interval_seconds=60)
    with pytest.raises(ValidationError) as info:
        state.create_schedule(prepared)
    assert info.value.message_dict == {"name": ["Schedule with this Name already exists."]}


def test_patch_to_a_taken_name_has_the_name_check_message(api):
    path = reverse("durable_schedules_api:schedule-list")
    api.post(path, {**BODY, "name": "first"}, format="json")
    sid = api.post(path, {**BODY, "name": "second"}, format="json").json()["id"]
    detail = reverse("durable_schedules_api:schedule-detail", args=[sid])
    response = api.patch(detail, {"name": "first"}, format="json")
    assert response.status_code == 400
    assert response.json() == {"name": ["schedule with this name already exists."]}
    # With another field refused by its own check, both are said, as before.
    response = api.patch(detail, {"name": "first", "interval_seconds": 0}, format="json")
    assert response.json() == {
        "name": ["schedule with this name already exists."],
        "interval_seconds": ["At least 1 second."],
    }
    # Renaming to its own name is no conflict.
    assert api.patch(detail, {"name": "second"}, format="json").status_code == 200


def test_prepare_applies_the_owner_policy(django_user_model):
    alice = django_user_model.objects.create_user("alice")
    prepared = state.prepare(
        {"name": "mine", "callback": "tests.noop", "interval_seconds": 60}, owner=alice
    )
    assert prepared.row.owner_id == alice.pk and prepared.fields["owner"] == alice
    row = state.create_schedule(prepared)
    assert row.owner_id == alice.pk
    with pytest.raises(ValidationError) as info:
        state.prepare(
            {"name": "closed", "callback": "tests.echo", "interval_seconds": 60}, owner=alice
        )
    assert info.value.message_dict == {"callback": ["'tests.echo' is not open to you."]}
    with pytest.raises(ValidationError) as info:  # an edit too: tests.noop at most every 60 s
        state.prepare({"interval_seconds": 1}, row, owner=alice)
    assert list(info.value.message_dict) == ["interval_seconds"]
    # Full access (no owner): no policy.
    state.update_schedule(state.prepare({"interval_seconds": 1}, row))
    row.refresh_from_db()
    assert row.interval_seconds == 1 and row.owner_id == alice.pk


def test_a_prepared_edit_is_validated_again_when_the_row_changed_meanwhile():
    row = state.create_schedule(name="edited", callback="tests.noop", interval_seconds=60)
    prepared = state.prepare({"jitter_seconds": 20}, row)  # fits a 60 s interval
    state.update_schedule(row.pk, interval_seconds=30)  # committed in between
    with pytest.raises(ValidationError) as info:  # 20 s is more than half of 30 s
        state.update_schedule(prepared)
    assert list(info.value.message_dict) == ["jitter_seconds"]
    row.refresh_from_db()
    assert row.interval_seconds == 30 and row.jitter_seconds is None


def test_a_prepared_edit_writes_only_its_changes_on_the_current_row():
    row = state.create_schedule(name="kept", callback="tests.noop", interval_seconds=60)
    prepared = state.prepare({"payload": {"a": 1}}, row)
    state.trigger(row.pk)  # run state changes in between; the editable columns do not
    state.update_schedule(prepared)
    row.refresh_from_db()
    assert row.payload == {"a": 1} and row.triggered_at is not None
    assert row.events.get(action="edited").changes == {"payload": [{}, {"a": 1}]}


def test_admin_add_validates_once_and_reports_a_taken_name(admin_client):
    from .test_admin import _form_data

    add = reverse("admin:durable_schedules_schedule_add")
    with CaptureQueriesContext(connection) as ctx:
        response = admin_client.post(add, _form_data())
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert sum('"_check"' in q["sql"] for q in ctx) == 0, _listed(ctx)
    assert _clock_reads(ctx) == 1, _listed(ctx)
    response = admin_client.post(add, _form_data())
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert errors == {"name": ["Schedule with this Name already exists."]}
