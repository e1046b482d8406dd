"""Bounded, hook-free projection of callback results and errors into receipts.

A callback may return anything, including hostile objects (cyclic structures, a 10 MB
string, an object whose ``__repr__``/``__eq__``/``__str__`` raise). The projection never
calls a method of the value: it only looks at exact built-in types (``type(x) is dict``),
walks containers with a cycle guard and a byte budget, and describes anything else by its
type name. It never raises.
"""

from __future__ import annotations

import json
import math
from typing import Any

_SCALARS = (bool, int, float, type(None))
_MAX_DEPTH = 32
_MAX_SAFE_INT = 2**53


class _Budget:
    def __init__(self, limit: int):
        self.left = limit
        self.truncated = False

    def take(self, n: int) -> bool:
        self.left -= n
        if self.left < 0:
            self.truncated = True
            return False
        return True


def _type_name(value: Any) -> str:
    cls = type(value)
    module = getattr(cls, "__module__", "?")
    qualname = getattr(cls, "__qualname__", "?")
    if type(module) is not str or type(qualname) is not str:
        return "?"
    return qualname if module == "builtins" else f"{module}.{qualname}"


def _walk(value: Any, budget: _Budget, stack: set[int], depth: int) -> Any:
    t = type(value)
    if t is str:
        room = max(0, budget.left // 4)  # worst case 4 bytes per character in UTF-8
        if len(value) > room:
            budget.truncated = True
            value = value[:room]
        budget.take(len(value.encode("utf-8", "replace")) + 2)
        return value
    if t in _SCALARS:
        budget.take(8)
        if t is float and not math.isfinite(value):
            return str(float(value))
        if t is int and abs(value) >= _MAX_SAFE_INT:
            return str(int(value)) if value.bit_length() < 4000 else "<int too large>"
        return value
    if t in (dict, list, tuple):
        if id(value) in stack:
            budget.take(10)
            return "<cycle>"
        if depth >= _MAX_DEPTH:
            budget.truncated = True
            return "<too deep>"
        stack.add(id(value))
        try:
            if t is dict:
                out: dict[str, Any] = {}
                for k, v in dict.items(value):
                    if budget.left <= 0:
                        budget.truncated = True
                        break
                    key = k if type(k) is str else f"<{_type_name(k)} key>"
                    key = _walk(key, budget, stack, depth + 1)
                    out[key] = _walk(v, budget, stack, depth + 1)
                return out
            items = []
            for item in list.__iter__(value) if t is list else tuple.__iter__(value):
                if budget.left <= 0:
                    budget.truncated = True
                    break
                items.append(_walk(item, budget, stack, depth + 1))
            return items
        finally:
            stack.discard(id(value))
    budget.take(40)
    return {"type": _type_name(value)}


def project_result(value: Any, max_bytes: int) -> Any:
    """JSON-safe copy of ``value`` whose JSON encoding is at most ``max_bytes`` (UTF-8).

    Exact dicts/lists/tuples/str/int/float/bool/None are kept (truncated to the budget;
    cycles become ``"<cycle>"``); other objects become ``{"type": "module.Class"}``. When
    anything was cut, the result is ``{"truncated": true, "value": <partial>}``.
    """
    try:
        budget = _Budget(max(0, max_bytes - 64))
        projected = _walk(value, budget, set(), 0)
        if budget.truncated:
            projected = {"truncated": True, "value": projected}
        encoded = json.dumps(projected, ensure_ascii=False)
        if len(encoded.encode("utf-8")) > max_bytes:
            return {"truncated": True, "type": _type_name(value)}
        return projected
    except Exception:  # noqa: BLE001 - a projection must never fail a run
        return {"truncated": True, "type": "?"}


def project_error(exc: BaseException, max_chars: int) -> tuple[str, str]:
    """``(error_type, message)`` of an exception without calling its ``__str__``/``__repr__``:
    the type's qualified name and the first argument if it is an exact ``str``, cut to
    ``max_chars`` characters."""
    try:
        error_type = _type_name(exc)[:200]
        message = ""
        args = BaseException.__dict__["args"].__get__(exc)  # the C slot, not a Python override
        if type(args) is tuple and args:
            if type(args[0]) is str:
                message = args[0]
            else:
                message = json.dumps(project_result(list(args), max_chars), ensure_ascii=False)
        if len(message) > max_chars:
            message = message[: max(0, max_chars - 1)] + "…"
        return error_type, message
    except Exception:  # noqa: BLE001
        return "?", ""
