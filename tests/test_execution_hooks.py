"""The integrations' hooks into a run (``worker.execution.hooks``) are total: whatever a hook
returns or raises, a run goes on and only text headers reach a task."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
from hypothesis import given
from hypothesis import strategies as st

from django_durable_schedules.worker.execution import hooks


def _hashable(value):
    try:
        hash(value)
    except TypeError:
        return False
    return True


junk = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20) | st.binary(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(inner.filter(_hashable), inner),
    max_leaves=12,
)


@pytest.fixture(autouse=True)
def no_hooks_left():
    yield
    hooks.RUN_CONTEXTS.clear()
    hooks.DISPATCH_HEADERS.clear()


@given(junk)
def test_only_text_headers_reach_a_task(returned):
    def hook(claim):
        return returned

    hooks.add(headers=hook)
    try:
        found = hooks.dispatch_headers(object())
    finally:
        hooks.remove(headers=hook)
    assert isinstance(found, dict)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in found.items())


@given(st.sampled_from(["factory", "enter", "exit"]))
def test_a_raising_run_hook_never_stops_the_run(where):
    calls = []

    @contextmanager
    def good(claim):
        calls.append("in")
        yield
        calls.append("out")

    def bad(claim):
        if where == "factory":
            raise RuntimeError("factory")

        @contextmanager
        def manager():
            if where == "enter":
                raise RuntimeError("enter")
            yield
            raise RuntimeError("exit")

        return manager()

    hooks.add(run_context=bad)
    hooks.add(run_context=good)
    try:
        with hooks.around(object()):
            calls.append("body")
    finally:
        hooks.remove(run_context=bad)
        hooks.remove(run_context=good)
    assert calls == ["in", "body", "out"]


def test_the_first_hooks_header_wins_and_no_hook_means_no_header():
    assert hooks.dispatch_headers(object()) == {}
    hooks.add(headers=lambda claim: {"traceparent": "a"})
    hooks.add(headers=lambda claim: {"traceparent": "b", "baggage": "k=v"})
    assert hooks.dispatch_headers(object()) == {"traceparent": "a", "baggage": "k=v"}
