"""Chains declared in code (issue #30 item 1): ``register(..., after=[...], wait_seconds=)``
declares a schedule of kind ``after``; the sync creates it after the schedules it names,
links it through the chaining checks, replaces its links when ``after=`` changes, and logs
and skips a declaration it cannot link. Then the declared chain runs through ``claim_due``
and ``complete``."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from django_durable_schedules import register, register_command, state
from django_durable_schedules.models import EventAction, RunReceipt, Schedule, ScheduleEvent
from django_durable_schedules.registry import registry
from django_durable_schedules.state import Outcome

from .factories import T0

S = timedelta(seconds=1)


def import_rows(ctx):
    return {"rows": 1}


def aggregate(ctx):
    return None


#: The declared pair: the downstream first, so the sync has to order them.
DOWNSTREAM = ("t.dc.aggregate", aggregate, {"after": ["t.dc.import"], "wait_seconds": 600})
UPSTREAM = ("t.dc.import", import_rows, {"every": 3600, "start_at": T0, "timezone": "UTC"})


@pytest.fixture
def cleanup_registry():
    before = set(registry.names())
    yield
    for name in set(registry.names()) - before:
        registry.remove(name)


@pytest.fixture
def declared_pair(cleanup_registry):
    for name, func, kwargs in (DOWNSTREAM, UPSTREAM):
        register(name, func, **kwargs)


def links(name: str) -> list[str]:
    return sorted(Schedule.objects.get(name=name).upstream.values_list("name", flat=True))


@pytest.mark.django_db(transaction=True)
def test_the_sync_creates_the_after_schedule_linked_to_its_upstream(declared_pair):
    state.sync_declared()
    row = Schedule.objects.get(name="t.dc.aggregate")
    assert (row.kind, row.wait_seconds, row.next_run_at) == ("after", 600, None)
    assert links("t.dc.aggregate") == ["t.dc.import"]
    created = ScheduleEvent.objects.get(schedule=row, action=EventAction.CREATED)
    assert created.changes["upstream"] == [None, ["t.dc.import"]]
    assert state.sync_declared() == []  # unchanged: nothing written


@pytest.mark.django_db(transaction=True)
def test_a_changed_after_replaces_the_links_with_an_edited_event(declared_pair):
    state.sync_declared()
    register("t.dc.other", import_rows, every=3600, start_at=T0, timezone="UTC")
    register("t.dc.aggregate", aggregate, after=["t.dc.other"])  # wait_seconds left out
    state.sync_declared()
    row = Schedule.objects.get(name="t.dc.aggregate")
    assert links("t.dc.aggregate") == ["t.dc.other"]
    assert row.wait_seconds == 600  # kept
    edited = ScheduleEvent.objects.filter(schedule=row, action=EventAction.EDITED).get()
    assert edited.changes == {"upstream": [["t.dc.import"], ["t.dc.other"]]}
    register("t.dc.aggregate", aggregate, every=60)  # no longer after: its links go
    state.sync_declared()
    assert Schedule.objects.get(name="t.dc.aggregate").kind == "interval"
    assert links("t.dc.aggregate") == []


@pytest.mark.django_db(transaction=True)
def test_a_missing_upstream_is_logged_and_that_declaration_skipped(cleanup_registry, caplog):
    register("t.dc.orphan", aggregate, after=["t.dc.nowhere"])
    register("t.dc.fine", import_rows, every=3600)
    with caplog.at_level(logging.ERROR):
        state.sync_declared()
    assert not Schedule.objects.filter(name="t.dc.orphan").exists()
    assert Schedule.objects.filter(name="t.dc.fine").exists()
    assert "the schedule declared in code for 't.dc.orphan' was not synced" in caplog.text
    assert "t.dc.nowhere" in caplog.text


@pytest.mark.django_db(transaction=True)
def test_links_the_checks_refuse_are_logged_and_skipped(cleanup_registry, caplog):
    register("t.dc.m", aggregate, manual=True)
    register("t.dc.on_manual", aggregate, after=["t.dc.m"])
    register("t.dc.cycle_a", aggregate, after=["t.dc.cycle_b"])
    register("t.dc.cycle_b", aggregate, after=["t.dc.cycle_a"])
    with caplog.at_level(logging.ERROR):
        state.sync_declared()
    assert set(Schedule.objects.values_list("name", flat=True)) == {"t.dc.m"}
    for name in ("t.dc.on_manual", "t.dc.cycle_a", "t.dc.cycle_b"):
        assert f"the schedule declared in code for {name!r} was not synced" in caplog.text


@pytest.mark.django_db(transaction=True)
def test_register_command_declares_an_after_schedule_too(cleanup_registry):
    register("t.dc.up", import_rows, every=3600)
    register_command("t.dc.cmd", "check", after=("t.dc.up",), wait_seconds=60)
    state.sync_declared()
    row = Schedule.objects.get(name="t.dc.cmd")
    assert (row.kind, row.wait_seconds) == ("after", 60)
    assert links("t.dc.cmd") == ["t.dc.up"]


@pytest.mark.parametrize(
    "clash",
    [
        {"every": 60},
        {"cron": "0 * * * *"},
        {"rrule": "FREQ=DAILY"},
        {"at": T0},
        {"start_at": T0},
        {"end_at": T0},
        {"max_runs": 3},
        {"manual": True},
        {"extra_specs": ["0 1 * * *"]},
    ],
)
def test_after_with_a_timing_argument_is_refused_naming_it(cleanup_registry, clash):
    (arg,) = clash
    with pytest.raises(ValueError, match=f"takes no {arg}="):
        register("t.dc.bad", aggregate, after=["x"], **clash)
    if arg != "manual":  # register_command has no manual=
        with pytest.raises(ValueError, match=f"takes no {arg}="):
            register_command("t.dc.bad", "check", after=["x"], **clash)
    assert "t.dc.bad" not in registry


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"after": "t.dc.import"}, TypeError),  # a text alone
        ({"after": ["a", 3]}, TypeError),
        ({"after": []}, ValueError),
        ({"after": ["a"], "wait_seconds": "600"}, TypeError),
        ({"after": ["a"], "wait_seconds": True}, TypeError),
        ({"after": ["a"], "wait_seconds": 0}, ValueError),
        ({"after": ["a"], "wait_seconds": 31 * 86400 + 1}, ValueError),
        ({"every": 60, "wait_seconds": 600}, ValueError),  # needs after=
    ],
)
def test_bad_after_arguments_are_refused(cleanup_registry, kwargs, error):
    with pytest.raises(error):
        register("t.dc.bad", aggregate, **kwargs)
    with pytest.raises(error):
        register_command("t.dc.bad", "check", **kwargs)


@pytest.mark.django_db(transaction=True)
def test_the_declared_chain_runs_through_claim_and_complete(declared_pair):
    state.sync_declared()
    up = Schedule.objects.get(name="t.dc.import")
    assert up.next_run_at == T0

    def run(now):
        claims = state.claim_due(worker="w", now=now)
        state.complete([Outcome(c, "succeeded") for c in claims], now=now + S)
        return [(c.schedule_name, c.scheduled_for) for c in claims]

    assert run(T0) == [("t.dc.import", T0)]
    assert run(T0 + 2 * S) == [("t.dc.aggregate", T0)]  # after its upstream's success
    assert run(T0 + 4 * S) == []
    receipts = RunReceipt.objects.filter(schedule__name="t.dc.aggregate")
    assert list(receipts.values_list("status", "attempt__scheduled_for")) == [("succeeded", T0)]
