"""Definition history and restore (issue #29, item 3), in the state package: the versions
reconstructed from the audit trail (:mod:`django_durable_schedules.state.version_rules`)
and ``state.restore_definition``: an edit like any other (validated, re-planned from now,
one ``edited`` event naming the version restored), never a run."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from django.core.exceptions import ValidationError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_durable_schedules import state
from django_durable_schedules.models import (
    ConcurrencyGroup,
    ExclusionCalendar,
    RunAttempt,
    Schedule,
    ScheduleEvent,
)
from django_durable_schedules.state import version_rules as rules

T = datetime(2027, 1, 1, tzinfo=UTC)


def event(action, at, changes, **kw):
    return SimpleNamespace(
        id=kw.get("id", uuid.uuid4()),
        action=action,
        at=T + timedelta(seconds=at),
        actor_repr=kw.get("actor", ""),
        source=kw.get("source", "api"),
        changes=changes,
    )


def current(**values):
    base = {"kind": "interval", "interval_seconds": 60, "callback": "tests.noop"}
    return rules.definition_of({**base, **values})


# -- the pure reconstruction ---------------------------------------------------------------


def test_each_version_is_the_newer_one_with_its_changes_undone():
    created = event(
        "created", 0, {"callback": [None, "tests.noop"], "interval_seconds": [None, 30]}
    )
    first = event("edited", 10, {"interval_seconds": [30, 45]})
    second = event("edited", 20, {"interval_seconds": [45, 60], "payload": [{}, {"a": 1}]})
    found = rules.versions(current(payload={"a": 1}), [second, first, created])
    assert [v.event_id for v in found] == [str(second.id), str(first.id), str(created.id)]
    assert [v.definition["interval_seconds"] for v in found] == [60, 45, 30]
    assert [v.definition["payload"] for v in found] == [{"a": 1}, {}, {}]
    assert found[0].current and not found[1].current
    assert found[0].changed == ("interval_seconds", "payload")


def test_run_state_and_unversioned_keys_are_never_part_of_a_version():
    edit = event(
        "edited", 5, {"name": ["a", "b"], "status": ["active", "paused"], "cron": ["", ""]}
    )
    [version] = rules.versions(current(), [edit])
    assert set(version.definition) == set(rules.VERSIONED_FIELDS)
    assert "name" not in version.definition and "status" not in version.definition


def test_instants_compare_in_utc_whole_seconds():
    assert (
        rules.normalized("run_at", "2027-01-01T02:00:00.400+02:00") == "2027-01-01T00:00:00+00:00"
    )
    assert rules.normalized("run_at", T) == "2027-01-01T00:00:00+00:00"
    assert rules.normalized("exclusion_calendars", ["b", "a"]) == ["a", "b"]


def test_a_deleted_window_is_back_in_the_versions_before_its_deletion():
    edit = event("edited", 1, {"blackout_windows": [[], ["nightly"]]})
    deleted = event("blackouts", 2, {"window": "nightly", "deleted": True})
    found = rules.versions(current(), [deleted, edit])
    assert len(found) == 1  # the deletion is no version of its own
    assert found[0].definition["blackout_windows"] == ["nightly"]  # as the edit left it
    assert not found[0].current  # the window's deletion changed the definition since


def test_events_of_the_same_instant_are_ordered_by_their_values():
    a = event("edited", 3, {"cron": ["x", "y"]})
    b = event("edited", 3, {"cron": ["y", "z"]})
    found = rules.versions(current(cron="z"), [a, b])  # a given first, but b is newer
    assert [v.event_id for v in found] == [str(b.id), str(a.id)]
    assert [v.definition["cron"] for v in found] == ["z", "y"]


def test_the_list_is_bounded_and_stops_at_the_creation():
    edits = [event("edited", i, {"interval_seconds": [i, i + 1]}) for i in range(80, 0, -1)]
    assert len(rules.versions(current(interval_seconds=81), edits)) == rules.VERSIONS_LIMIT
    created = event("created", 0, {})
    older = event("edited", -5, {"interval_seconds": [1, 2]})
    assert len(rules.versions(current(), [created, older])) == 1


def test_differences_name_the_field_the_current_and_the_version_value():
    diff = rules.differences(current(cron="y", kind="cron"), current())
    assert [(d.field, d.current, d.version) for d in diff] == [
        ("kind", "interval", "cron"),
        ("cron", None, "y"),
    ]


# -- restore_definition ----------------------------------------------------------------------


def schedule(**kw) -> Schedule:
    fields = {"callback": "tests.noop", "kind": "cron", "cron": "0 3 * * *", "timezone": "UTC"}
    return state.create_schedule(name=kw.pop("name", "nightly.report"), **{**fields, **kw})


def edited_events(row):
    return list(ScheduleEvent.objects.filter(schedule_id=row.pk, action="edited").order_by("at"))


@pytest.mark.django_db(transaction=True)
def test_a_restore_is_one_edited_event_naming_the_version_and_fires_no_run():
    row = schedule()
    state.update_schedule(row.pk, cron="0 5 * * *", payload={"v": 2}, source="api")
    old = state.definition_versions(Schedule.objects.get(pk=row.pk))[1]  # the created one
    twin = schedule(name="twin", cron="0 5 * * *", payload={"v": 2})
    before = ScheduleEvent.objects.filter(schedule_id=row.pk).count()

    restored = state.restore_definition(row.pk, old.event_id, source="command")
    state.update_schedule(twin.pk, cron="0 3 * * *", payload={})  # the same change, an edit

    restored.refresh_from_db()
    assert (restored.cron, restored.payload) == ("0 3 * * *", {})
    assert ScheduleEvent.objects.filter(schedule_id=row.pk).count() == before + 1
    last = edited_events(row)[-1]
    assert last.source == "command"
    assert last.changes["cron"] == ["0 5 * * *", "0 3 * * *"]
    assert last.changes["restored_from"] == [
        None,
        {"event": old.event_id, "at": old.at.isoformat()},
    ]
    # Takes effect at the next pass as an edit does; no run fired.
    assert restored.next_run_at == Schedule.objects.get(pk=twin.pk).next_run_at
    assert restored.triggered_at is None
    assert not RunAttempt.objects.filter(schedule_id=row.pk).exists()
    assert not ScheduleEvent.objects.filter(schedule_id=row.pk, action="triggered").exists()
    newest = state.definition_versions(restored)[0]
    assert newest.restored_from == old.event_id and newest.current


@pytest.mark.django_db(transaction=True)
def test_a_version_whose_callback_is_no_longer_registered_is_refused_and_nothing_written():
    from django_durable_schedules.registry import registry

    row = schedule(callback="tests.echo")
    state.update_schedule(row.pk, callback="tests.noop")
    created = state.definition_versions(Schedule.objects.get(pk=row.pk))[1]
    registration = registry.get("tests.echo")
    registry.remove("tests.echo")
    try:
        with pytest.raises(ValidationError) as err:
            state.restore_definition(row.pk, created.event_id)
    finally:
        registry.add(registration)
    assert "callback" in err.value.message_dict
    assert Schedule.objects.get(pk=row.pk).callback == "tests.noop"
    assert len(edited_events(row)) == 1


@pytest.mark.django_db(transaction=True)
def test_a_removed_time_zone_and_a_deleted_calendar_are_refused_by_name(monkeypatch):
    cal = ExclusionCalendar.objects.create(name="holidays")
    row = schedule(timezone="Europe/Paris", exclusion_calendars=[cal])
    state.update_schedule(row.pk, timezone="UTC", exclusion_calendars=[])
    created = state.definition_versions(Schedule.objects.get(pk=row.pk))[1]
    assert created.definition["exclusion_calendars"] == ["holidays"]
    assert created.definition["timezone"] == "Europe/Paris"
    state.delete_calendar("holidays")
    with pytest.raises(ValidationError) as err:
        state.restore_definition(row.pk, created.event_id)
    assert "exclusion_calendars" in err.value.message_dict
    # The version's zone gone from tzdata (as after an upgrade that removed it): refused.
    cal = ExclusionCalendar.objects.create(name="holidays")
    from django_durable_schedules.timing import spec, zones

    known = zones.known_zones()
    monkeypatch.setattr(zones, "known_zones", lambda: known - {"Europe/Paris"})
    monkeypatch.setattr(spec, "_VALID_SPECS", {})  # specs found valid before: forgotten
    with pytest.raises(ValidationError) as err:
        state.restore_definition(row.pk, created.event_id)
    assert "timezone" in err.value.message_dict
    assert Schedule.objects.get(pk=row.pk).timezone == "UTC"


@pytest.mark.django_db(transaction=True)
def test_bad_unknown_and_foreign_event_ids_are_refused_on_the_event_field():
    row = schedule()
    other = schedule(name="other")
    foreign = ScheduleEvent.objects.get(schedule_id=other.pk, action="created")
    for bad in ("nope", uuid.uuid4(), foreign.pk, None):
        with pytest.raises(ValidationError) as err:
            state.restore_definition(row.pk, bad)
        assert list(err.value.message_dict) == ["event"]
    with pytest.raises(Schedule.DoesNotExist):
        state.restore_definition(uuid.uuid4(), foreign.pk)


@pytest.mark.django_db(transaction=True)
def test_restoring_the_current_version_changes_nothing():
    row = schedule()
    newest = state.definition_versions(row)[0]
    state.restore_definition(row, newest.event_id)
    assert edited_events(row) == []


@pytest.mark.django_db(transaction=True)
def test_a_group_is_restored_by_its_key_and_a_deleted_one_refused():
    group = ConcurrencyGroup.objects.create(name="reports", max_running=1)
    row = schedule(concurrency_group=group)
    state.update_schedule(row.pk, concurrency_group=None)
    created = state.definition_versions(Schedule.objects.get(pk=row.pk))[1]
    state.restore_definition(row.pk, created.event_id)
    assert Schedule.objects.get(pk=row.pk).concurrency_group_id == group.pk


# -- the property: restoring version k makes version k's definition current ----------------

EDITS = st.lists(
    st.one_of(
        st.builds(
            lambda c: {"kind": "cron", "cron": c, "interval_seconds": None},
            st.sampled_from(["0 3 * * *", "*/5 * * * *", "30 6 * * 1-5"]),
        ),
        st.builds(
            lambda s: {"kind": "interval", "interval_seconds": s, "cron": ""},
            st.integers(min_value=1, max_value=10_000),
        ),
        st.builds(
            lambda z: {"timezone": z}, st.sampled_from(["UTC", "Europe/Paris", "Asia/Tokyo"])
        ),
        st.builds(
            lambda p: {"payload": p},
            st.dictionaries(st.sampled_from("abc"), st.integers(), max_size=2),
        ),
        st.builds(lambda j: {"jitter_seconds": j}, st.integers(min_value=0, max_value=600)),
        st.builds(lambda m: {"max_attempts": m}, st.integers(min_value=1, max_value=9)),
    ),
    min_size=1,
    max_size=6,
)


@pytest.mark.django_db
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(edits=EDITS, pick=st.integers(min_value=0))
def test_restoring_version_k_makes_its_definition_current(edits, pick):
    row = schedule(name=f"p-{uuid.uuid4().hex[:12]}")
    for change in edits:
        try:
            state.update_schedule(row.pk, **change)
        except ValidationError:  # an edit refused (jitter over half the gap...): none made
            continue
    found = state.definition_versions(Schedule.objects.get(pk=row.pk))
    version = found[pick % len(found)]
    restored = state.restore_definition(row.pk, version.event_id)
    assert state.current_definition(Schedule.objects.get(pk=restored.pk)) == version.definition
    after = state.definition_versions(Schedule.objects.get(pk=row.pk))
    if after[0].event_id != found[0].event_id:  # something changed: one event, naming it
        assert after[0].restored_from == version.event_id
        assert len(after) == min(len(found) + 1, rules.VERSIONS_LIMIT)


@pytest.mark.django_db(transaction=True)
def test_a_window_deleted_since_is_in_the_older_versions_and_refused_by_name():
    from django_durable_schedules.models import BlackoutWindow

    window = BlackoutWindow.objects.create(
        name="nightly", rrule="FREQ=DAILY;BYHOUR=2;BYMINUTE=0", duration_seconds=600
    )
    row = schedule(blackout_windows=[window])
    state.update_schedule(row.pk, cron="0 5 * * *")
    window.duration_seconds = 900
    state.save_window(window)  # a blackouts event of the window's own: no version
    state.delete_window(window)  # drops it from the schedule's list
    found = state.definition_versions(Schedule.objects.get(pk=row.pk))
    assert [v.action for v in found] == ["edited", "created"]
    assert [v.definition["blackout_windows"] for v in found] == [["nightly"], ["nightly"]]
    assert not found[0].current  # the deletion changed the list since
    with pytest.raises(ValidationError) as err:
        state.restore_definition(row.pk, found[1].event_id)
    assert "blackout_windows" in err.value.message_dict


@pytest.mark.django_db
def test_listing_the_versions_is_three_queries_whatever_their_number():
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    row = schedule()
    for minute in range(1, 30):
        state.update_schedule(row.pk, cron=f"{minute} 3 * * *")
    row = Schedule.objects.get(pk=row.pk)
    with CaptureQueriesContext(connection) as queries:
        found = state.definition_versions(row)
    assert len(found) == 30 and len(queries) == 3
