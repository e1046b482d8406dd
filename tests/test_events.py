"""The audit trail of control actions: append-only, recorded with the action."""

import pytest
from django.contrib.auth import get_user_model
from django.db import DatabaseError, transaction

from django_durable_schedules import state
from django_durable_schedules.models import Schedule, ScheduleEvent
from django_durable_schedules.registry import register, registry

pytestmark = pytest.mark.django_db(transaction=True)


def test_control_actions_are_recorded_with_actor_and_source():
    user = get_user_model().objects.create_user("ops", password="x")
    s = Schedule.objects.create(
        name="e", callback="tests.noop", kind="interval", interval_seconds=60
    )
    state.disable(s.pk, actor=user, source="admin")
    state.trigger(s.pk, actor=user, source="api")
    state.enable(s.pk, source="command")
    state.cancel(s.pk)
    state.delete_schedule(s.pk, actor=user, source="api")
    events = list(
        ScheduleEvent.objects.order_by("at", "action").values_list("action", "source", "actor_repr")
    )
    assert [
        e[0]
        for e in sorted(
            events,
            key=lambda e: [
                "created",
                "disabled",
                "triggered",
                "enabled",
                "cancelled",
                "deleted",
            ].index(e[0]),
        )
    ] == ["created", "disabled", "triggered", "enabled", "cancelled", "deleted"]
    assert ("disabled", "admin", "ops") in events and ("cancelled", "code", "") in events
    disabled = ScheduleEvent.objects.get(action="disabled")
    assert disabled.changes == {"status": ["active", "paused"]} and disabled.actor_id == user.pk
    # Outlives the schedule; the create by Schedule.objects.create() is one too (from code).
    assert ScheduleEvent.objects.filter(schedule_name="e").count() == 6
    assert ("created", "code", "") in events


def test_a_refused_action_records_nothing():
    s = Schedule.objects.create(
        name="r", callback="tests.noop", kind="interval", interval_seconds=60
    )
    state.cancel(s.pk)
    with pytest.raises(state.StateConflict):
        state.enable(s.pk)
    actions = ScheduleEvent.objects.values_list("action", flat=True)
    assert sorted(actions) == ["cancelled", "created"]  # the create, from code


def test_declared_schedules_record_created_and_edited():
    try:
        register("t.audited", lambda ctx: None, every=60)
        state.sync_declared()
        register("t.audited", lambda ctx: None, every=120)
        state.sync_declared()
        events = dict(ScheduleEvent.objects.values_list("action", "changes"))
        assert events["edited"] == {"interval_seconds": [60, 120]}
        assert "created" in events
    finally:
        registry.remove("t.audited")


def test_events_are_append_only():
    s = Schedule.objects.create(
        name="g", callback="tests.noop", kind="interval", interval_seconds=60
    )
    state.disable(s.pk)
    with pytest.raises(DatabaseError), transaction.atomic():
        ScheduleEvent.objects.update(source="forged")
    with pytest.raises(DatabaseError), transaction.atomic():
        ScheduleEvent.objects.all()._raw_delete(ScheduleEvent.objects.db)
