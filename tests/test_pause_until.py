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
from django_durable_schedules.state.pause_rules import NOTE_MAX_CHARS

from .conftest import wait_until
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
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
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
    state.disable(s.pk, note="deploy", until=state.db_now() + 3 * S)
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
    assert first[0] - until < 2 * S  # within about one poll after the end
    assert first[1] > until  # its slot is after the resume: no slot of the pause is run
    resumed = ScheduleEvent.objects.get(schedule_id=s.pk, action="enabled")
    assert resumed.source == "worker" and until <= resumed.at < until + 2 * S
    assert worker.proc.poll() is None
