"""The bounding of a receipt's traceback (:func:`projection.project_traceback`,
:func:`projection.bound_traceback`): whatever the depth of the stack and the names of its
functions and files, at most 50 frames of file, line and function, each text at most 300
characters, JSON that every database stores. No database."""

from __future__ import annotations

import builtins
import json
import sys
import types

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_durable_schedules.projection import (
    TRACEBACK_MAX_CHARS,
    TRACEBACK_MAX_FRAMES,
    bound_text,
    bound_traceback,
    format_traceback,
    project_traceback,
)


def _recurse(n):
    if n <= 0:
        secret = "hunter2-XYZ"  # noqa: F841 - a local the traceback must never show
        raise ValueError("deep")
    return _recurse(n - 1)


def raising_function(name: str, filename: str):
    """``_recurse`` under another function name and file name (any text, surrogates
    included), calling itself by that function object."""
    code = _recurse.__code__.replace(co_name=name, co_qualname=name, co_filename=filename)
    namespace: dict = {"__builtins__": builtins}
    func = types.FunctionType(code, namespace)
    namespace["_recurse"] = func
    return func


def caught(func, depth: int) -> BaseException:
    try:
        func(depth)
    except BaseException as exc:
        return exc
    raise AssertionError("did not raise")


def assert_bounded(frames) -> None:
    assert isinstance(frames, list)
    assert 1 <= len(frames) <= TRACEBACK_MAX_FRAMES
    for frame in frames:
        assert set(frame) == {"file", "line", "function"}
        assert type(frame["file"]) is str and len(frame["file"]) <= TRACEBACK_MAX_CHARS
        assert type(frame["function"]) is str and len(frame["function"]) <= TRACEBACK_MAX_CHARS
        assert type(frame["line"]) is int and 0 <= frame["line"] < 2**31
        assert "\x00" not in frame["file"] + frame["function"]
    text = json.dumps(frames, ensure_ascii=False, allow_nan=False)
    text.encode("utf-8")  # no lone surrogate: every database stores it
    assert "hunter2" not in text


names = st.text(min_size=0, max_size=1200)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(depth=st.integers(0, 300), name=names, filename=names)
def test_any_stack_is_bounded_and_json(depth, name, filename):
    exc = caught(raising_function(name, filename), depth)
    frames = project_traceback(exc)
    assert_bounded(frames)
    total = depth + 2  # caught(), then depth + 1 frames of the function
    if total <= TRACEBACK_MAX_FRAMES:
        assert len(frames) == total
    else:  # the innermost kept, the first says how many were left out
        assert frames[0]["function"] == f"<{total - 49} outer frames left out>"
        assert len(frames) == TRACEBACK_MAX_FRAMES
    assert frames[-1]["function"] == bound_text(name, TRACEBACK_MAX_CHARS)
    assert len(format_traceback(frames)) == len(frames)


def test_a_recursion_error_keeps_the_innermost_frames():
    exc = caught(raising_function("again", "loop.py"), sys.getrecursionlimit() * 2)
    assert isinstance(exc, RecursionError)
    frames = project_traceback(exc)
    assert_bounded(frames)
    assert frames[0]["function"].endswith(" outer frames left out>")
    assert all(f["function"] == "again" for f in frames[1:])
    assert format_traceback(frames)[0].startswith("... ") and "left out" in frames[0]["function"]


def test_skip_leaves_out_the_outermost_frames():
    exc = caught(raising_function("f", "f.py"), 3)
    assert [f["function"] for f in project_traceback(exc, skip=1)] == ["f"] * 4
    assert project_traceback(ValueError("never raised")) is None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=400),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=30,
)
frames_like = st.lists(
    st.fixed_dictionaries(
        {"file": json_values, "line": json_values, "function": json_values},
    )
    | json_values,
    max_size=120,
)


@settings(max_examples=100, deadline=None)
@given(value=frames_like | json_values)
def test_any_stored_value_reads_as_a_bounded_traceback(value):
    """A row written behind ``save()`` (or a child's message) may hold anything."""
    frames = bound_traceback(value)
    if not isinstance(value, list):
        assert frames is None
        assert format_traceback(value) == []
        return
    if value:
        assert_bounded(frames)
    assert bound_traceback(frames) == frames  # bounding is idempotent
    assert len(format_traceback(value)) == len(frames)
