"""A pause with a note and an end (issue #27, item 1): ``state.disable(note=..., until=...)``
keeps the note in ``pause_reason`` and the end in ``paused_until``; at the end a worker
resumes the schedule (``state.resume_paused``: event ``enabled`` by the worker) by
enable's rule: the next run is the first slot after the resume, nothing paused is caught
up. On SQLite, PostgreSQL and MariaDB (``DATABASE_URL``); one real ``run_scheduler``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_durable_schedules import state
from django_durable_schedules.exceptions import StateConflict
from django_durable_schedules.models import RunAttempt, Schedule, ScheduleEvent
from django_durable_schedules.state import control
from django_durable_schedules.state.pause_rules import NOTE_MAX_CHARS

from .conftest import server_examples, wait_until
from .factories import T0

pytestmark = pytest.mark.django_db(transaction=True)

S = timedelta(seconds=1)


def make(name="s", **kw):
    kw.setdefault("callback", "tests.noop")
    kw.setdefault("kind", "interval")
    kw.setdefault("interval_seconds", 60)
    kw.setdefault("created_at", T0)
    s = Schedule(name=name, timezone="UTC", **kw)
    s.full_clean()
    s.save()
    return s


def events(s, action=None):
    found = ScheduleEvent.objects.filter(schedule_id=s.pk).order_by("at", "pk")
    if action:
        found = found.filter(action=action)
    return list(found)


def test_a_pause_keeps_its_note_and_end_and_says_so_in_its_event():
    s = make()
    state.disable(s.pk, note="  db migration, INC-42  ", until=T0 + 3600 * S, now=T0)
    s.refresh_from_db()
    assert (s.status, s.pause_reason, s.paused_until) == (
        "paused",
        "db migration, INC-42",
        T0 + 3600 * S,
    )
    assert s.next_run_at is None
    [event] = events(s, "disabled")
    assert event.changes == {
        "status": ["active", "paused"],
        "pause_reason": ["", "db migration, INC-42"],
        "paused_until": [None, (T0 + 3600 * S).isoformat()],
    }


def test_until_is_rounded_up_to_the_second_and_read_in_utc():
    s = make()
    paris = timezone(timedelta(hours=2))
    state.disable(s.pk, until=datetime(2027, 6, 1, 13, 0, 0, 1, tzinfo=paris), now=T0)
    s.refresh_from_db()
    assert s.paused_until == datetime(2027, 6, 1, 11, 0, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("kwargs", "fields"),
    [
        ({"until": datetime(2027, 6, 1, 12)}, {"until"}),  # naive
        ({"until": T0}, {"until"}),  # not later than now
        ({"until": T0 - 60 * S}, {"until"}),
        ({"until": "2027-06-02T00:00:00Z"}, {"until"}),  # text: the API and CLI parse it
        ({"until": datetime(9999, 1, 1, tzinfo=UTC)}, {"until"}),
        ({"note": "x" * (NOTE_MAX_CHARS + 1)}, {"note"}),
        ({"note": 42}, {"note"}),
        ({"note": "x" * 501, "until": T0}, {"note", "until"}),
    ],
)
def test_a_bad_note_or_end_is_refused_with_a_message_per_field(kwargs, fields):
    s = make()
    with pytest.raises(ValidationError) as raised:
        state.disable(s.pk, now=T0, **kwargs)
    assert set(raised.value.message_dict) == fields
    s.refresh_from_db()
    assert s.status == "active" and s.paused_until is None and not events(s, "disabled")


def test_the_worker_resumes_at_the_end_without_catching_up():
    s = make()  # every minute from T0
    state.disable(s.pk, note="maintenance", until=T0 + 3600 * S, now=T0 + 30 * S)
    assert state.resume_paused(now=T0 + 3599 * S) == []
    s.refresh_from_db()
    assert s.status == "paused"
    [event] = state.resume_paused(now=T0 + 3600 * S + timedelta(milliseconds=400))
    s.refresh_from_db()
    assert (s.status, s.pause_reason, s.paused_until) == ("active", "", None)
    assert s.next_run_at == T0 + 3660 * S  # the first slot after the resume: no burst
    assert (event.action, event.source) == ("enabled", "worker")
    assert event.changes == {
        "status": ["paused", "active"],
        "paused_until": [(T0 + 3600 * S).isoformat(), None],
    }
    assert events(s)[-1].pk == event.pk  # written
    claims = state.claim_due(worker="w", now=T0 + 3600 * S + 1 * S)
    assert claims == []  # the 59 slots passed while paused are not run
    assert state.resume_paused(now=T0 + 7200 * S) == []  # once


def test_an_operator_extends_a_pause_and_the_old_end_resumes_nothing():
    s = make()
    state.disable(s.pk, note="incident", until=T0 + 600 * S, now=T0)
    state.disable(s.pk, until=T0 + 1200 * S, now=T0 + 60 * S)
    s.refresh_from_db()
    assert (s.pause_reason, s.paused_until) == ("incident", T0 + 1200 * S)
    last = events(s, "disabled")[-1]
    assert last.changes == {
        "paused_until": [(T0 + 600 * S).isoformat(), (T0 + 1200 * S).isoformat()]
    }
    state.disable(s.pk, note="incident: still on it", now=T0 + 120 * S)
    s.refresh_from_db()
    assert s.paused_until == T0 + 1200 * S  # a note alone keeps the end
    assert state.resume_paused(now=T0 + 900 * S) == []
    assert len(state.resume_paused(now=T0 + 1200 * S)) == 1
    before = len(events(s))
    state.disable(s.pk)  # a plain disable of an active row: a pause without an end
    state.disable(s.pk)  # again: a no-op, as before
    s.refresh_from_db()
    assert s.paused_until is None and len(events(s)) == before + 1


def test_a_degraded_row_takes_no_note_or_end_and_is_never_resumed():
    s = make()
    state.disable(s.pk, until=T0 + 60 * S, now=T0)
    Schedule.objects.filter(pk=s.pk).update(degraded_reason="callback missing")
    with pytest.raises(StateConflict):
        state.disable(s.pk, note="more", now=T0)
    assert state.resume_paused(now=T0 + 600 * S) == []
    s.refresh_from_db()
    assert s.status == "paused" and s.degraded_reason == "callback missing"
    assert not Schedule.objects.resume_due(T0 + 600 * S).exists()


def test_enable_and_cancel_clear_the_end():
    a, b = make("a"), make("b")
    for s in (a, b):
        state.disable(s.pk, until=T0 + 600 * S, now=T0)
    state.enable(a.pk, now=T0 + 60 * S)
    state.cancel(b.pk)
    a.refresh_from_db()
    b.refresh_from_db()
    assert a.paused_until is None and b.paused_until is None
    assert state.resume_paused(now=T0 + 700 * S) == []
    assert b.status == "cancelled"


def test_a_pending_trigger_survives_the_resume():
    s = make()
    state.disable(s.pk, until=T0 + 600 * S, now=T0)
    state.trigger(s.pk, now=T0 + 10 * S)
    state.resume_paused(now=T0 + 600 * S)
    s.refresh_from_db()
    assert s.status == "active" and s.triggered_at == T0 + 10 * S
    assert s.next_run_at == T0 + 10 * S


def test_an_unevaluable_definition_is_degraded_not_resumed_and_not_retried():
    s = make()
    state.disable(s.pk, until=T0 + 60 * S, now=T0)
    Schedule.objects.filter(pk=s.pk).update(timezone="Mars/Olympus")  # behind save()
    assert state.resume_paused(now=T0 + 61 * S) == []
    s.refresh_from_db()
    assert s.status == "paused" and s.degraded_reason
    assert [e.action for e in events(s)][-1] == "degraded"
    assert state.resume_paused(now=T0 + 120 * S) == []


def test_the_limit_and_the_wakeup():
    rows = [make(f"r{i}") for i in range(3)]
    for i, s in enumerate(rows):
        state.disable(s.pk, until=T0 + (100 + i) * S, now=T0)
    assert state.next_wakeup().resume == T0 + 100 * S
    assert state.next_wakeup(worker_id="nobody").resume == T0 + 100 * S
    assert len(state.resume_paused(now=T0 + 200 * S, limit=2)) == 2
    assert state.next_wakeup().resume == T0 + 102 * S
    assert len(state.resume_paused(now=T0 + 200 * S)) == 1
    assert state.next_wakeup().resume is None


def test_run_scheduler_once_resumes_what_ended():
    s = make(created_at=None)
    Schedule.objects.filter(pk=s.pk).update(
        status="paused", next_run_at=None, paused_until=datetime(2020, 1, 1, tzinfo=UTC)
    )
    call_command("run_scheduler", "--once")
    s.refresh_from_db()
    assert s.status == "active" and s.paused_until is None
    assert events(s, "enabled")[0].source == "worker"


outside = st.one_of(
    st.none(),
    st.text(max_size=600),
    st.integers(),
    st.datetimes(timezones=st.none() | st.timezones()),
    st.datetimes(
        min_value=datetime(2027, 1, 1), max_value=datetime(9999, 12, 31), timezones=st.timezones()
    ),
    st.dates(),
)


@settings(
    # What each database keeps of a note or an end (text, far dates): it runs on every
    # vendor, with fewer examples on the servers (conftest.server_examples).
    max_examples=server_examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(note=outside, until=outside)
def test_any_note_or_end_from_outside_is_taken_or_refused_never_a_crash(note, until):
    Schedule.objects.all().delete()
    s = make()
    try:
        state.disable(s.pk, note=note, until=until, now=T0)
    except ValidationError as exc:
        assert set(exc.message_dict) <= {"note", "until"}
        s.refresh_from_db()
        assert s.status == "active"
        return
    s.refresh_from_db()
    assert s.status == "paused"
    if s.paused_until is not None:
        assert s.paused_until > T0 and s.paused_until.microsecond == 0
        state.resume_paused(now=s.paused_until)
        s.refresh_from_db()
        assert s.status == "active"


@pytest.mark.process
def test_a_worker_runs_nothing_while_paused_and_resumes_within_a_poll(start_worker):
    s = Schedule.objects.create(
        name="paused-1s", callback="tests.noop", kind="interval", interval_seconds=1
    )
    worker = start_worker()  # POLL_MAX_SECONDS 5: it wakes for the end itself
    wait_until(lambda: RunAttempt.objects.filter(schedule_id=s.pk).exists(), 10, message="a run")
    # Not through state.disable, which this module's observer wraps: a receipt the worker
    # writes meanwhile would be read as the pause's own step.
    control.disable(s.pk, note="deploy", until=state.db_now() + 3 * S)
    s.refresh_from_db()
    until = s.paused_until
    runs_before = RunAttempt.objects.filter(schedule_id=s.pk).count()
    wait_until(
        lambda: RunAttempt.objects.filter(schedule_id=s.pk, claimed_at__gte=until).exists(),
        10,
        message="the first run after the pause",
    )
    after = list(
        RunAttempt.objects.filter(schedule_id=s.pk)
        .order_by("claimed_at")
        .values_list("claimed_at", "scheduled_for")
    )
    during = [a for a in after[runs_before:] if a[0] < until]
    assert during == []  # nothing ran while paused (a run claimed just before the pause aside)
    first = [a for a in after if a[0] >= until][0]
    assert first[1] > until  # its slot is after the resume: no slot of the pause is run
    # The worker wakes for the end itself (POLL_MAX_SECONDS is 5): it resumes the schedule
    # within about a second of the end (3 s: a loaded machine), and the first run is the
    # next slot after the resume, one interval (1 s) later (2 s more for the load).
    resumed = ScheduleEvent.objects.get(schedule_id=s.pk, action="enabled")
    assert resumed.source == "worker" and until <= resumed.at < until + 3 * S
    assert first[0] - resumed.at < 3 * S
    assert worker.proc.poll() is None


# -- the API, the command and the admin: the same rule through state.disable ----------------


@pytest.fixture
def api(django_user_model):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(django_user_model.objects.create_user("staff", is_staff=True))
    return client


def test_the_api_pauses_with_a_note_and_an_end_and_shows_them(api):
    s = make(created_at=None)
    until = (state.db_now() + 3600 * S).replace(microsecond=0)
    body = {"note": "INC-42", "until": until.isoformat().replace("+00:00", "Z")}
    response = api.post(f"/api/schedules/{s.pk}/disable/", body, format="json")
    assert response.status_code == 200, response.json()
    data = response.json()
    assert data["status"] == "paused" and data["pause_reason"] == "INC-42"
    assert datetime.fromisoformat(data["paused_until"]) == until
    assert api.post(f"/api/schedules/{s.pk}/disable/").status_code == 200  # no body: as before
    event = events(s, "disabled")[0]
    assert event.source == "api"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"until": "2026-12-03T18:00:00"}, "until"),  # naive
        ({"until": "2001-01-01T00:00:00Z"}, "until"),  # past
        ({"until": "soon"}, "until"),
        ({"note": "x" * 501}, "note"),
        ({"note": ["a"]}, "note"),
    ],
)
def test_the_api_refuses_a_bad_body_with_a_400_naming_the_field(api, body, field):
    s = make(created_at=None)
    response = api.post(f"/api/schedules/{s.pk}/disable/", body, format="json")
    assert response.status_code == 400 and field in response.json(), response.json()
    s.refresh_from_db()
    assert s.status == "active"


def test_the_schema_documents_the_body_and_the_field():
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    operation = schema["paths"]["/api/schedules/{id}/disable/"]["post"]
    ref = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    body = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
    assert set(body["properties"]) == {"note", "until"}
    schedule = schema["components"]["schemas"]["Schedule"]["properties"]
    assert schedule["paused_until"]["readOnly"] is True


def test_the_command_pauses_several_with_a_note_and_a_duration():
    from io import StringIO

    a, b = make("a", created_at=None), make("b", created_at=None)
    out = StringIO()
    before = state.db_now()
    call_command("schedules", "disable", "a", "b", "--note", "deploy", "--until", "2h", stdout=out)
    for s in (a, b):
        s.refresh_from_db()
        assert s.status == "paused" and s.pause_reason == "deploy"
        assert before + 7200 * S <= s.paused_until <= state.db_now() + 7201 * S
    assert "a: paused until" in out.getvalue() and "(deploy)" in out.getvalue()
    shown = StringIO()
    call_command("schedules", "show", "a", stdout=shown)
    assert "paused: deploy" in shown.getvalue() and "paused until:" in shown.getvalue()


@pytest.mark.parametrize(
    "until", ["2026-12-03T18:00:00", "2001-01-01T00:00:00Z", "0m", "5w", "99999999999d", "x"]
)
def test_the_command_refuses_a_bad_end(until):
    from django.core.management.base import CommandError

    make("a", created_at=None)
    with pytest.raises((CommandError, SystemExit)):
        call_command("schedules", "disable", "a", "--until", until)
    assert Schedule.objects.get(name="a").status == "active"


def test_the_command_names_the_refused_and_pauses_the_others():
    from io import StringIO

    from django.core.management.base import CommandError

    make("ok", created_at=None)
    gone = make("gone", created_at=None)
    state.cancel(gone.pk)
    out = StringIO()
    with pytest.raises(CommandError, match="gone: a cancelled schedule cannot be disabled"):
        call_command("schedules", "disable", "ok", "gone", "--note", "x", stdout=out)
    assert Schedule.objects.get(name="ok").status == "paused"
    with pytest.raises(CommandError, match="no schedule named"):
        call_command("schedules", "disable", "nope")


def test_health_lists_the_paused_with_their_note_and_end():
    from django_durable_schedules import health

    s = make(created_at=None)
    until = (state.db_now() + 600 * S).replace(microsecond=0)
    state.disable(s.pk, note="INC-7", until=until)
    [row] = health.snapshot().as_dict()["paused_schedules"]
    assert row["name"] == "s" and row["pause_reason"] == "INC-7"
    assert row["paused_until"] == until.isoformat().replace("+00:00", "Z")


def test_the_admin_action_pauses_the_selected_and_says_which_were_refused(admin_client):
    a, b, c = make("a", created_at=None), make("b", created_at=None), make("c", created_at=None)
    state.cancel(c.pk)
    url = "/admin/durable_schedules/schedule/"
    ids = [str(x.pk) for x in (a, b, c)]
    page = admin_client.post(url, {"action": "pause_selected", "_selected_action": ids})
    assert page.status_code == 200 and b'name="note"' in page.content
    assert b'type="datetime-local"' in page.content
    # A past end: the form again, with the message, nothing paused.
    page = admin_client.post(
        url,
        {
            "action": "pause_selected",
            "_selected_action": ids,
            "post": "yes",
            "note": "INC-9",
            "until": "2001-01-01T10:00",
        },
    )
    assert page.status_code == 200 and b"Must be later than now" in page.content
    assert Schedule.objects.filter(status="paused").count() == 0
    done = admin_client.post(
        url,
        {"action": "pause_selected", "_selected_action": ids, "post": "yes", "note": "INC-9"},
        follow=True,
    )
    text = done.content.decode()
    assert "Paused 2 schedules until enabled: a; b." in text
    assert "Pause refused for 1 schedule: c (a cancelled schedule cannot be disabled)" in text
    assert set(Schedule.objects.filter(pause_reason="INC-9").values_list("name", flat=True)) == {
        "a",
        "b",
    }
    assert "INC-9" in text  # the list shows the note


def test_the_change_page_offers_pause_and_its_form_extends_a_pause(admin_client):
    s = make(created_at=None)
    change = f"/admin/durable_schedules/schedule/{s.pk}/change/"
    assert f"/{s.pk}/pause/" in admin_client.get(change).content.decode()
    state.disable(s.pk, note="first", until=state.db_now() + 600 * S)
    form = admin_client.get(f"/admin/durable_schedules/schedule/{s.pk}/pause/")
    assert b"first" in form.content  # prefilled
    until = dj_local_text(state.db_now() + 7200 * S)
    done = admin_client.post(
        f"/admin/durable_schedules/schedule/{s.pk}/pause/",
        {"note": "second", "until": until},
    )
    assert done.status_code == 302 and done["Location"].endswith(change)
    s.refresh_from_db()
    assert s.pause_reason == "second" and s.paused_until > state.db_now() + 7000 * S
    Schedule.objects.filter(pk=s.pk).update(degraded_reason="broken")
    assert f"/{s.pk}/pause/" not in admin_client.get(change).content.decode()


def dj_local_text(value):
    from django.utils import timezone as dj_timezone

    return dj_timezone.localtime(value).strftime("%Y-%m-%dT%H:%M")


def test_the_admin_health_page_lists_the_paused_with_their_note(admin_client):
    s = make(created_at=None)
    state.disable(s.pk, note="INC-11: vendor maintenance")
    page = admin_client.get("/admin/durable_schedules/schedule/health/").content.decode()
    assert "Paused by an operator (1)" in page and "INC-11: vendor maintenance" in page
