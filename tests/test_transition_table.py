"""The transition table in code (``state/transition_table.py``) is the one docs/concepts.md
shows, the one the operator actions are driven by (``state.control.ALLOWED``), and the one
the rules implement: every row has a rule that declares it (``@implements``), every rule
names a row, and every function of the state package that writes a schedule's status,
next run or lease declares its rows.

``scripts/transition-table`` (or ``DDS_WRITE_DOCS=1`` with this file) rewrites the docs'
table from the code.
"""

from __future__ import annotations

import ast
import importlib
import os
from datetime import timedelta
from pathlib import Path

import pytest

from django_durable_schedules import state
from django_durable_schedules.models import Schedule, Status
from django_durable_schedules.registry import register, registry
from django_durable_schedules.state import control, transition_docs, transitions
from django_durable_schedules.state.transition_terms import SAME

from .factories import T0
from .transition_steps import Observer, Snapshot, observe

STATE = Path(transitions.__file__).resolve().parent
S = timedelta(seconds=1)


def test_the_docs_show_the_codes_table():
    if os.environ.get("DDS_WRITE_DOCS"):
        transition_docs.write_docs()
    shown = transition_docs.shown_in(transition_docs.DOC.read_text())
    assert shown == transitions.render_markdown(), (
        f"docs/concepts.md shows another transition table than the code: run "
        f"{transition_docs.REGENERATE}"
    )


def test_every_row_has_a_rule_and_every_rule_a_row():
    assert transitions.problems() == []


def test_a_rule_naming_no_row_is_reported():
    rules = {k: list(v) for k, v in transitions.RULES.items()}
    unknown = list(transitions._UNKNOWN)
    try:

        @transitions.implements("claim.no_such_row")
        def rule() -> None: ...

        assert rule.__name__ == "rule"  # returned unchanged
        assert any("'claim.no_such_row', which is no row" in p for p in transitions.problems())
    finally:
        transitions.RULES.clear()
        transitions.RULES.update(rules)
        transitions._UNKNOWN[:] = unknown


@pytest.mark.parametrize("id_", sorted(transitions.ELSEWHERE))
def test_the_rules_outside_the_state_package_exist(id_):
    transitions.row(id_)
    for path in transitions.ELSEWHERE[id_]:
        module, _, name = path.rpartition(".")
        owner: object
        try:
            owner = importlib.import_module(module)
        except ImportError:  # a method: module.Class.method
            module, _, cls = module.rpartition(".")
            owner = getattr(importlib.import_module(module), cls)
        assert callable(getattr(owner, name)), path


#: What a rule writes: these schedule columns, by attribute (``row.status = ...``) or in an
#: ``update(...)`` call.
WRITTEN = frozenset({"status", "next_run_at", "lease_token", "lease_expires_at"})


def _writes(fn: ast.FunctionDef) -> bool:
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for e in ast.walk(target):
                    if (
                        isinstance(e, ast.Attribute)
                        and e.attr in WRITTEN
                        and isinstance(e.value, ast.Name)
                        and e.value.id == "row"
                    ):
                        return True
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "update"
            and any(k.arg in WRITTEN for k in node.keywords)
            and not any(word in ast.unparse(node.func.value) for word in OTHER_RECORDS)
        ):
            return True
    return False


#: Receivers of ``update(status=...)`` that are another record's, not a schedule's (a
#: notification's delivery has a status of its own).
OTHER_RECORDS = ("deliver",)


def _declares(fn: ast.FunctionDef) -> bool:
    return any(
        isinstance(d, ast.Call)
        and getattr(d.func, "id", getattr(d.func, "attr", "")) == "implements"
        for d in fn.decorator_list
    )


def test_every_function_that_moves_a_schedule_declares_its_rows():
    """A function of the state package that writes a schedule's status, next run or lease
    (``row.status = ...``, ``.update(status=...)``) is a rule: it says which rows."""
    undeclared = [
        f"state/{path.name}: {fn.name}"
        for path in sorted(STATE.glob("*.py"))
        for fn in ast.parse(path.read_text()).body
        if isinstance(fn, ast.FunctionDef) and _writes(fn) and not _declares(fn)
    ]
    assert undeclared == [], "decorate them with @implements(<row id>, ...)"


def test_the_control_rows_are_the_allowed_source_statuses():
    rows = {t.action: t.sources for t in transitions.TABLE if t.action}
    assert rows == control.ALLOWED
    assert set(control.ALREADY) <= set(control.ALLOWED)


def test_every_row_is_well_formed():
    families = {"claim", "outcome", "recovery", "control", "alert"}
    ids = [t.id for t in transitions.TABLE]
    assert len(ids) == len(set(ids))
    seen = set()
    for t in transitions.TABLE:
        assert t.family in families and t.sources <= set(Status.values), t.id
        assert t.id.split(".", 1)[1].isidentifier(), t.id
        # Only the creation row starts from no status (the row does not exist yet).
        assert t.sources or t.id == "control.create"
        assert (t.family, t.event) not in seen, t.event
        seen.add((t.family, t.event))
        assert "|" not in t.event + t.target + t.next_run_at + t.receipt
        assert t.moves_to <= set(Status.values) | {SAME}, t.id
        for event in t.seen_as:
            step, _, what = event.partition(":")
            assert step in transitions.STEPS and what, (t.id, event)
    assert {t.family for t in transitions.TABLE} == families


def test_degraded_recovery_has_its_row():
    row = transitions.row("recovery.degraded")
    assert row.sources == {Status.PAUSED} and row.moves_to == {Status.ACTIVE}
    assert "runs once" in row.next_run_at and "grid goes on" in row.next_run_at
    assert any(
        rule.endswith(".recover_degraded") for rule in transitions.RULES["recovery.degraded"]
    )


def test_allows_reads_the_rows():
    allows = transitions.allows
    assert allows("active", "claim:leased", "active")
    assert allows("paused", "claim:leased", "paused")  # triggered
    assert not allows("cancelled", "claim:leased", "cancelled")
    assert allows("active", "claim:degraded", "paused")
    assert allows("active", "claim:degraded", "active")  # a backfill slot's attempt
    assert not allows("active", "claim:missed", "paused")
    assert allows("active", "complete:succeeded", "completed")
    assert allows("paused", "complete:succeeded", "paused")
    assert not allows("paused", "complete:succeeded", "active")
    assert allows("cancelled", "complete:failed", "failed")  # FailRun
    assert allows("active", "expire:lease_expired", "active")
    assert allows("paused", "recover:none", "active")
    assert not allows("failed", "recover:none", "active")
    assert allows("failed", "enable:none", "active")
    assert not allows("completed", "enable:none", "active")
    assert transitions.rows_allowing("active", "claim:missed", "completed") == [
        transitions.row("claim.missed")
    ]


def test_allowed_actions_reads_the_table():
    for status in Status.values:
        for lease in (None, "held"):
            row = Schedule(status=status)
            row.lease_token = lease  # an unsaved row: only status and lease are read
            expected = {
                action
                for action, sources in control.ALLOWED.items()
                if status in sources and not (lease and action in control.NOT_WHILE_RUNNING)
            }
            assert control.allowed_actions(row) == expected
    assert control.allowed_actions(Schedule(status=Status.ACTIVE)) == {
        "disable",
        "trigger",
        "cancel",
        "delete",
    }


# ---------------------------------------------------------------------------------------
# Steps observed against the table (tests/transition_steps.py), by example
# ---------------------------------------------------------------------------------------


def test_the_observer_fails_a_step_no_row_allows():
    def snapshot(status, attempts=None):
        return Snapshot({1: status}, {1: "s"}, attempts or {}, {})

    observer = Observer()
    observer.step("claim", snapshot("active"), snapshot("active", {"a": 1}))
    assert observer.seen == [("s", "active", "claim:leased", "active")]
    with pytest.raises(AssertionError, match=r"s: \('completed', 'claim:leased', 'active'\)"):
        observer.step("claim", snapshot("completed"), snapshot("active", {"a": 1}))
    with pytest.raises(AssertionError, match="'cancel:none'"):
        observer.step("cancel", snapshot("completed"), snapshot("cancelled"))


@pytest.fixture
def steps(monkeypatch):
    return observe(monkeypatch)


@pytest.fixture
def late_callback():
    """A callback name registered only when the test calls the returned function."""
    name = "tests.transition-late"
    yield name, lambda: register(name, lambda ctx: "back")
    if name in registry:
        registry.remove(name)


def make(name, **fields):
    fields.setdefault("callback", "tests.noop")
    if fields.setdefault("kind", "interval") == "interval":
        fields.setdefault("interval_seconds", 60)
    row = Schedule(name=name, timezone="UTC", created_at=T0, **fields)
    row.save()
    return row


def run(now, status="succeeded", **kw):
    claims = state.claim_due(worker="w", now=now, lease_seconds=3600)
    state.complete([state.Outcome(c, status, **kw) for c in claims], now=now + S)
    return claims


def rows_of(steps, name):
    """The ids of the rows that allow each step seen on ``name``."""
    return [
        [t.id for t in transitions.rows_allowing(before, event, after)]
        for who, before, event, after in steps.seen
        if who == name
    ]


@pytest.mark.django_db(transaction=True)
def test_degraded_recovery_steps_are_rows(steps, late_callback):
    """The missing callback: degraded and paused; registered again: recovered, the kept
    occurrence runs once (its next attempt), then the grid goes on."""
    name, register_it = late_callback
    make("late", callback=name)
    run(T0)
    register_it()
    state.recover_degraded(now=T0 + 305 * S)
    [claim] = run(T0 + 305 * S)
    assert (claim.occurrence, claim.attempt, claim.scheduled_for) == (1, 2, T0)
    assert steps.events("late") == [
        "claim:degraded",
        "recover:none",
        "claim:leased",
        "complete:succeeded",
    ]
    allowed = rows_of(steps, "late")
    assert "claim.unregistered" in allowed[0] and "recovery.degraded" in allowed[1]
    assert "claim.retry" in allowed[2]


@pytest.mark.django_db(transaction=True)
def test_worker_and_operator_steps_are_rows(steps):
    """A walk through retries, a lease expiry, the operator actions and a terminal failure:
    each step is one the table declares (the observer fails the step otherwise)."""
    s = make("walk")
    run(T0, "failed", error_type="RuntimeError")  # retried
    [claim] = state.claim_due(worker="w", now=T0 + 60 * S, lease_seconds=1)
    state.expire_leases(now=T0 + 120 * S)  # the worker died: retried at once
    run(T0 + 121 * S)
    state.disable(s.pk)
    state.trigger(s.pk, now=T0 + 200 * S)
    run(T0 + 200 * S)  # a paused schedule runs when triggered
    state.enable(s.pk, now=T0 + 300 * S)
    run(T0 + 360 * S, "failed", terminal=True)
    state.enable(s.pk, now=T0 + 400 * S)
    state.cancel(s.pk)
    assert steps.events("walk") == [
        "claim:leased",
        "complete:failed",
        "claim:leased",
        "expire:lease_expired",
        "claim:leased",
        "complete:succeeded",
        "disable:none",
        "claim:leased",
        "complete:succeeded",
        "enable:none",
        "claim:leased",
        "complete:failed",
        "enable:none",
        "cancel:none",
    ]
    assert [before for who, before, _, _ in steps.seen if who == "walk"][-3:] == [
        "active",
        "failed",
        "active",
    ]
