"""``frozen.quick_init`` (the quicker ``__init__`` of the frozen dataclasses made on every
run) makes what the ``__init__`` that ``dataclasses`` writes makes: the same parameters,
defaults and factories, the same instance, still frozen; a class it cannot mirror is left
as it is."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import FrozenInstanceError, InitVar, dataclass, field
from typing import ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from django_durable_schedules.frozen import quick_init
from django_durable_schedules.state import records, values
from django_durable_schedules.state.overlap_rules import Overlap
from django_durable_schedules.worker.execution.runner import RunContext


def _pair():
    """The same frozen dataclass twice: as ``dataclasses`` writes it, and quick."""

    def make():
        @dataclass(frozen=True)
        class Sample:
            a: int
            b: str
            c: list[int] | None = None
            d: list[int] = field(default_factory=list)
            e: int = field(default=7, init=False)
            f: dict[str, int] = field(default_factory=dict, init=False)
            g: int = field(default=3, repr=False, compare=False)

        return Sample

    return make(), quick_init(make())


PLAIN, QUICK = _pair()


@given(
    st.integers(),
    st.text(),
    st.none() | st.lists(st.integers(), max_size=3),
    st.none() | st.lists(st.integers(), max_size=3),
    st.none() | st.integers(),
)
def test_a_quick_instance_is_the_dataclasss_own(a, b, c, d, g):
    kwargs = {"c": c}
    if d is not None:
        kwargs["d"] = d
    if g is not None:
        kwargs["g"] = g
    plain, quick = PLAIN(a, b, **kwargs), QUICK(a, b, **kwargs)
    assert quick.__dict__ == plain.__dict__ and list(quick.__dict__) == list(plain.__dict__)
    assert repr(quick).replace("QUICK", "") == repr(plain).replace("PLAIN", "")
    assert dataclasses.astuple(quick) == dataclasses.astuple(plain)
    assert dataclasses.replace(quick, a=a + 1).a == a + 1
    with pytest.raises(FrozenInstanceError):
        quick.a = 0  # type: ignore[misc]


def test_factories_make_a_new_value_for_each_instance():
    one, two = QUICK(1, "x"), QUICK(2, "y")
    assert one.d == [] and one.d is not two.d and one.f is not two.f
    given_list = [1]
    assert QUICK(1, "x", d=given_list).d is given_list


def test_the_parameters_are_the_dataclasss_own():
    plain = inspect.signature(PLAIN).parameters
    quick = inspect.signature(QUICK).parameters
    assert list(quick) == list(plain) == ["a", "b", "c", "d", "g"]
    for name in ("a", "b", "c", "g"):
        assert quick[name].default == plain[name].default, name
    with pytest.raises(TypeError):
        QUICK(1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        QUICK(1, "x", e=2)  # type: ignore[call-arg]


def test_a_class_it_cannot_mirror_is_left_as_it_is():
    @dataclass(frozen=True)
    class Posted:
        a: int

        def __post_init__(self) -> None:
            pass

    @dataclass(frozen=True)
    class WithInitVar:
        a: int
        b: InitVar[int] = 0

    @dataclass(frozen=True)
    class WithClassVar:
        a: int
        limit: ClassVar[int] = 3

    @dataclass(frozen=True, kw_only=True)
    class KeywordOnly:
        a: int

    @dataclass(frozen=True, slots=True)
    class Slotted:
        a: int

    @dataclass
    class Mutable:
        a: int

    for cls in (Posted, WithInitVar, WithClassVar, KeywordOnly, Slotted, Mutable, int):
        before = cls.__init__
        assert quick_init(cls) is cls and cls.__init__ is before, cls


@pytest.mark.parametrize(
    "cls",
    [
        values.Claim,
        values.Outcome,
        values.Failure,
        values.Previous,
        records.Receipt,
        RunContext,
        Overlap,
    ],
)
def test_the_run_values_have_the_quick_init_and_their_fields_as_parameters(cls):
    assert cls.__init__.__qualname__ == f"{cls.__qualname__}.__init__"
    code = cls.__init__.__code__  # writes __dict__, not through object.__setattr__
    assert "__dict__" in code.co_names and "__setattr__" not in code.co_names
    params = inspect.signature(cls).parameters
    assert list(params) == [f.name for f in dataclasses.fields(cls) if f.init]
    for f in dataclasses.fields(cls):
        if f.init and f.default is not dataclasses.MISSING:
            assert params[f.name].default is f.default, f.name
