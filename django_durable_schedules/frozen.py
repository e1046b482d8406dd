"""A quicker ``__init__`` for the frozen dataclasses made on every run.

A run makes half a dozen frozen dataclass instances (the slot chosen, the claim, the
callback's context, the outcome, the receipt, the previous run): about 75 fields. The
``__init__`` that ``dataclasses`` writes for a frozen class sets each field through
``object.__setattr__`` (its own ``__setattr__`` refuses), a call per field; writing the
instance's ``__dict__`` does the same in a store per field, about three times as fast
(issue #32, goal 4: the worker's CPU per run).

:func:`quick_init` replaces the ``__init__`` of a frozen dataclass by one that takes the
same parameters, in the same order, with the same defaults (``default_factory`` called
for each instance that does not pass the field), and leaves the instance's ``__dict__``
as the generated one does. A class it cannot mirror exactly is returned unchanged: one
with ``__slots__``, ``__post_init__``, keyword-only fields, ``InitVar`` or ``ClassVar``
pseudo-fields, or not a frozen dataclass. Everything else the dataclass generated
(``__eq__``, ``__hash__``, ``__repr__``, the refusing ``__setattr__``,
``dataclasses.replace``) is untouched.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

_T = TypeVar("_T")
#: Stands for "not passed" of a field with a ``default_factory``.
_FACTORY = object()


def quick_init(cls: type[_T]) -> type[_T]:
    """``cls`` (a frozen dataclass) with the quicker ``__init__`` (module docstring), or
    unchanged when it cannot be mirrored exactly. Use below ``@dataclass(frozen=True)``."""
    params = getattr(cls, "__dataclass_params__", None)
    every = getattr(cls, "__dataclass_fields__", {})
    fields = dataclasses.fields(cls) if params is not None else ()  # type: ignore[arg-type]
    if (
        params is None
        or not params.frozen
        or "__slots__" in cls.__dict__
        or hasattr(cls, "__post_init__")
        or len(fields) != len(every)  # an InitVar or a ClassVar
        or any(f.kw_only is True for f in fields)
        or any(f.name.startswith("_dds_") for f in fields)  # the names it writes with
    ):
        return cls
    names: dict[str, Any] = {"_dds_factory": _FACTORY}
    args, body = [], []
    for n, f in enumerate(fields):
        if f.default is not dataclasses.MISSING:
            names[f"_dds_d{n}"] = f.default
        if f.default_factory is not dataclasses.MISSING:
            names[f"_dds_f{n}"] = f.default_factory
        if not f.init:  # a plain default stays the class attribute, as dataclasses leaves it
            if f.default_factory is not dataclasses.MISSING:
                body.append(f"_dds_dict[{f.name!r}] = _dds_f{n}()")
            continue
        if f.default is not dataclasses.MISSING:
            args.append(f"{f.name}=_dds_d{n}")
            body.append(f"_dds_dict[{f.name!r}] = {f.name}")
        elif f.default_factory is not dataclasses.MISSING:
            args.append(f"{f.name}=_dds_factory")
            body.append(
                f"_dds_dict[{f.name!r}] = _dds_f{n}() if {f.name} is _dds_factory else {f.name}"
            )
        else:
            args.append(f.name)
            body.append(f"_dds_dict[{f.name!r}] = {f.name}")
    source = "def __init__(_dds_self, {}):\n    _dds_dict = _dds_self.__dict__\n    {}\n".format(
        ", ".join(args), "\n    ".join(body) or "pass"
    )
    exec(source, names)
    init = names["__init__"]
    original = cls.__init__
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = original.__doc__
    init.__annotations__ = dict(getattr(original, "__annotations__", {}))
    cls.__init__ = init  # type: ignore[method-assign]
    return cls


__all__ = ["quick_init"]
