"""Bounded, hook-free projection of results and errors."""

import json

from django_durable_schedules.projection import project_error, project_result

from .testapp.schedules import Hostile, HostileError


def size(value) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode())


def test_plain_values_are_kept():
    value = {"a": [1, 2.5, True, None, "x"], "b": {"c": "d"}}
    assert project_result(value, 8192) == value
    assert project_result((1, 2), 8192) == [1, 2]


def test_cycles_are_cut():
    a = {"name": "a"}
    a["self"] = a
    out = project_result(a, 8192)
    assert out == {"name": "a", "self": "<cycle>"}


def test_huge_string_is_truncated_within_the_bound():
    out = project_result("é" * (10 * 1024 * 1024), 8192)
    assert out["truncated"] is True and size(out) <= 8192


def test_wide_and_deep_structures_stay_bounded():
    wide = {str(i): "v" * 100 for i in range(10_000)}
    assert size(project_result(wide, 8192)) <= 8192
    deep: list = []
    cur = deep
    for _ in range(1000):
        nxt: list = []
        cur.append(nxt)
        cur = nxt
    assert size(project_result(deep, 8192)) <= 8192


def test_hostile_objects_are_described_by_type_only():
    out = project_result({"obj": Hostile(), "list": [Hostile()], 3: "int key"}, 8192)
    assert out["obj"] == {"type": "tests.testapp.schedules.Hostile"}
    assert out["list"] == [{"type": "tests.testapp.schedules.Hostile"}]
    assert "<int key>" in out


def test_non_finite_floats_and_big_ints_are_json_safe():
    out = project_result([float("nan"), float("inf"), 2**80], 8192)
    assert out == ["nan", "inf", str(2**80)]
    json.dumps(out, allow_nan=False)


def test_error_projection_never_calls_str():
    assert project_error(RuntimeError("boom"), 1000) == ("RuntimeError", "boom")
    error_type, message = project_error(HostileError(Hostile()), 1000)
    assert error_type == "tests.testapp.schedules.HostileError"
    assert "Hostile" in message
    _, long = project_error(ValueError("x" * 5000), 1000)
    assert len(long) == 1000
