"""Rows loaded without ``Model.__init__`` (django_durable_schedules/db/fast_orm.py) are
the instances Django's own ``from_db`` and ``__init__`` would make."""

from __future__ import annotations

import uuid

import pytest
from django.db.models import Model
from django.db.models.signals import post_init

from django_durable_schedules.db.fast_orm import FastLoading
from django_durable_schedules.models import RunAttempt, RunReceipt, Schedule, ScheduleEvent
from django_durable_schedules.state.rules import new_attempt
from django_durable_schedules.timing import truncate_to_second

pytestmark = pytest.mark.django_db


def fields(obj: Model) -> dict:
    return {f.attname: getattr(obj, f.attname) for f in obj._meta.concrete_fields}


def django_from_db(model, db, names, values):
    return super(FastLoading, model).from_db.__func__(model, db, names, values)


@pytest.mark.vendor_independent  # a class check: no query
@pytest.mark.parametrize("model", [Schedule, RunAttempt, RunReceipt, ScheduleEvent])
def test_every_model_of_the_app_loads_fast(model):
    assert issubclass(model, FastLoading)


def test_a_loaded_schedule_equals_djangos_own_instance():
    s = Schedule.objects.create(
        name="fast", callback="tests.noop", kind="cron", cron="*/5 * * * *", payload={"a": [1]}
    )
    fast = Schedule.objects.get(pk=s.pk)
    names = [f.attname for f in Schedule._meta.concrete_fields]
    values = [getattr(fast, n) for n in names]
    slow = django_from_db(Schedule, "default", names, values)
    assert type(fast) is Schedule and fast.__dict__.keys() >= slow.__dict__.keys()
    assert fields(fast) == fields(slow)
    assert fast._state.adding is False and fast._state.db == "default"
    fast.name = "renamed"  # and it saves like any instance
    fast.save()
    assert Schedule.objects.get(pk=s.pk).name == "renamed"


def test_a_row_with_deferred_fields_equals_djangos_own_instance():
    s = Schedule.objects.create(
        name="d", callback="tests.noop", kind="interval", interval_seconds=60, payload=[1]
    )
    partial = Schedule.objects.defer("payload", "metadata", "owner").get(pk=s.pk)
    names = [n for n in partial.__dict__ if n != "_state"]
    slow = django_from_db(Schedule, "default", names, [partial.__dict__[n] for n in names])
    assert {k: v for k, v in partial.__dict__.items() if k != "_state"} == {
        k: v for k, v in slow.__dict__.items() if k != "_state"
    }
    assert (
        partial.get_deferred_fields()
        == slow.get_deferred_fields()
        == {
            "payload",
            "metadata",
            "owner_id",
        }
    )
    assert partial.payload == [1]  # loaded on use, as Django's own instance does


def test_post_init_listeners_take_djangos_path():
    s = Schedule.objects.create(
        name="d", callback="tests.noop", kind="interval", interval_seconds=60
    )
    partial = Schedule.objects.only("name").get(pk=s.pk)
    assert partial.get_deferred_fields() and partial.callback == "tests.noop"  # loaded on use
    seen = []

    def listener(sender, instance, **kwargs):
        seen.append(instance.pk)

    post_init.connect(listener, sender=Schedule)
    try:
        Schedule.objects.get(pk=s.pk)
        RunReceipt.build(attempt_id=uuid.uuid4(), schedule_id=s.pk, occurrence=1)
    finally:
        post_init.disconnect(listener, sender=Schedule)
    assert seen == [s.pk]


def test_build_equals_the_model_constructor_with_its_defaults():
    s = Schedule.objects.create(
        name="b", callback="tests.noop", kind="interval", interval_seconds=60
    )
    now = truncate_to_second(s.created_at)
    built = new_attempt(s, 1, 1, now, now, now, "w")
    assert type(built) is RunAttempt and built._state.adding
    made = RunAttempt(**{k: v for k, v in fields(built).items()})
    assert fields(built) == fields(made)
    receipt = RunReceipt.build(attempt_id=built.id, schedule_id=s.pk, occurrence=1, status="ok")
    default = RunReceipt(attempt_id=built.id, schedule_id=s.pk, occurrence=1, status="ok")
    assert {k: v for k, v in fields(receipt).items() if k != "id"} == {
        k: v for k, v in fields(default).items() if k != "id"
    }
    assert isinstance(receipt.id, uuid.UUID) and receipt.id != default.id  # callable default
    with pytest.raises(TypeError):  # not a field: Django's own error
        RunReceipt.build(schedule=s, nonsense=1)
