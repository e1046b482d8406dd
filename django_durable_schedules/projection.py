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
import re
from collections import deque
from typing import Any

_SCALARS = (bool, int, float, type(None))
_MAX_DEPTH = 32
_MAX_SAFE_INT = 2**53
_LONG_DIGITS = re.compile(r"\d{16}")
#: What stands in for a character that a receipt cannot store (U+FFFD REPLACEMENT CHARACTER).
REPLACEMENT = "\ufffd"
#: Appended to a receipt's error message whose text was repaired by :func:`safe_text`.
REPAIRED_NOTE = " [invalid characters replaced with U+FFFD]"


def safe_text(value: str) -> tuple[str, bool]:
    """``(text, repaired)``: ``value`` as text every supported database stores unchanged.

    Lone surrogates (``"\\ud800"``: not encodable as UTF-8, so a driver raises
    ``UnicodeEncodeError``) and NUL (``"\\x00"``: refused by PostgreSQL in ``text`` and
    ``jsonb``) become U+FFFD; a surrogate pair is joined into its character. ``repaired``
    says whether anything was replaced. Never raises for a ``str``.
    """
    if value.isascii():
        if "\x00" not in value:
            return value, False
        return value.replace("\x00", REPLACEMENT), True
    try:
        value.encode("utf-8")
        clean = value
    except UnicodeEncodeError:
        # UTF-16 with surrogatepass pairs what can be paired; the rest decodes as U+FFFD.
        clean = value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if "\x00" in clean:
        clean = clean.replace("\x00", REPLACEMENT)
    return clean, clean != value


class _Budget:
    def __init__(self, limit: int):
        self.left = limit
        self.truncated = False
        self.repaired = False

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
        value, repaired = safe_text(value)
        budget.repaired = budget.repaired or repaired
        budget.take(len(value.encode("utf-8", "replace")) + 2)
        return value
    if t in _SCALARS:
        budget.take(8)
        if t is float and (not math.isfinite(value) or abs(value) >= _MAX_SAFE_INT):
            # NaN/inf are not JSON; a float this large comes back from PostgreSQL's jsonb
            # as an integer no JSON reader keeps exactly: kept as its text instead.
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
    anything was cut, the result is ``{"truncated": true, "value": <partial>}``; when a
    string held characters no database stores (lone surrogates, NUL; see
    :func:`safe_text`), they are replaced and the result is marked ``"repaired": true``
    the same way. Non-finite floats become strings (``"nan"``, ``"inf"``), and so do ints
    and floats of magnitude 2**53 or more (JSON readers do not keep them exactly).
    """
    if value is None and max_bytes >= 72:  # most callbacks return nothing: the walk keeps
        return None  # None once its budget (max_bytes - 64) holds a scalar's 8 bytes
    return _project(value, max_bytes)


def _project(value: Any, max_bytes: int) -> Any:
    """:func:`project_result` without its shortcut for ``None``."""
    try:
        budget = _Budget(max(0, max_bytes - 64))
        projected = _walk(value, budget, set(), 0)
        if budget.truncated or budget.repaired:
            marks: dict[str, Any] = {}
            if budget.truncated:
                marks["truncated"] = True
            if budget.repaired:
                marks["repaired"] = True
            projected = {**marks, "value": projected}
        encoded = json.dumps(projected, ensure_ascii=False, allow_nan=False)
        if len(encoded.encode("utf-8")) > max_bytes:
            return {"truncated": True, "type": _type_name(value)}
        return projected
    except Exception:  # noqa: BLE001 - a projection must never fail a run
        return {"truncated": True, "type": "?"}


def is_storable(value: Any, max_bytes: int) -> bool:
    """True when ``value`` is plain JSON (``json.dumps`` with ``allow_nan=False`` accepts it)
    that every supported database stores unchanged (no NUL, no lone surrogate) in at most
    ``max_bytes`` UTF-8 bytes. A fast check before :func:`project_result`; never raises."""
    if value is None or type(value) in (bool, int):
        return type(value) is not int or abs(value) < _MAX_SAFE_INT
    try:
        encoded = json.dumps(value, ensure_ascii=False, allow_nan=False)
        return (
            "\\u0000" not in encoded
            and len(encoded.encode("utf-8")) <= max_bytes
            # 16+ digits in a row may be an int beyond 2**53, and "e+" a float that large;
            # JSON readers do not keep them exactly: let project_result make them strings.
            and _LONG_DIGITS.search(encoded) is None
            and "e+" not in encoded
        )
    except Exception:  # noqa: BLE001 - anything json cannot encode is not storable
        return False


def bound_text(value: Any, max_chars: int) -> str:
    """``value`` as storable text of at most ``max_chars`` characters: a non-``str`` becomes
    ``""`` (never ``str()`` of a foreign object), invalid characters are replaced and the
    text marked as repaired (:data:`REPAIRED_NOTE`), a long text is cut with ``"…"``."""
    if type(value) is not str:
        return ""
    text: str = value
    max_chars = max(1, max_chars)
    if len(text) > max_chars:
        text = text[: max_chars - 1] + "…"
    text, repaired = safe_text(text)
    if repaired:
        text = text[: max(0, max_chars - len(REPAIRED_NOTE))] + REPAIRED_NOTE
    return text


def result_preview(value: Any, max_chars: int) -> tuple[str, bool]:
    """A stored JSON result as one line of text for an operator (the admin, ``schedules
    show``): compact JSON, keys sorted, cut to ``max_chars`` characters with ``"…"``
    (:func:`bound_text`); and whether it was cut. ``("null", False)`` for None. Never
    raises (a value no JSON holds is shown by its ``repr``)."""
    try:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return bound_text(text, max_chars), len(text) > max(1, max_chars)


def project_error(exc: BaseException, max_chars: int) -> tuple[str, str]:
    """``(error_type, message)`` of an exception without calling its ``__str__``/``__repr__``:
    the type's qualified name and the first argument if it is an exact ``str``, cut to
    ``max_chars`` characters; characters no database stores are replaced and the message
    marked (:func:`bound_text`)."""
    try:
        error_type = _type_name(exc)[:200]
        message = ""
        args = BaseException.__dict__["args"].__get__(exc)  # the C slot, not a Python override
        if type(args) is tuple and args:
            if type(args[0]) is str:
                message = args[0]
            else:
                message = json.dumps(project_result(list(args), max_chars), ensure_ascii=False)
        return bound_text(error_type, 200), bound_text(message, max_chars)
    except Exception:  # noqa: BLE001
        return "?", ""


#: The most frames a receipt's traceback keeps (the innermost ones).
TRACEBACK_MAX_FRAMES = 50
#: The longest file or function name a traceback frame keeps (characters).
TRACEBACK_MAX_CHARS = 300


def _frame(file: Any, line: Any, function: Any, max_chars: int) -> dict[str, Any]:
    """One bounded frame: text cut to ``max_chars`` (invalid characters replaced), the
    line an ``int`` in ``[0, 2**31)`` (anything else: 0)."""
    number = line if type(line) is int and 0 <= line < 2**31 else 0
    return {
        "file": bound_text(file, max_chars),
        "line": number,
        "function": bound_text(function, max_chars),
    }


def _left_out(count: int) -> dict[str, Any]:
    """The frame that stands first in a cut traceback and says how many were left out."""
    return {"file": "", "line": 0, "function": f"<{count} outer frames left out>"}


def project_traceback(
    exc: BaseException,
    max_frames: int = TRACEBACK_MAX_FRAMES,
    max_chars: int = TRACEBACK_MAX_CHARS,
    skip: int = 0,
) -> list[dict[str, Any]] | None:
    """The stack of ``exc`` (its own ``__traceback__``, not its cause's) as a receipt keeps
    it: a list of ``{"file": str, "line": int, "function": str}``, outermost first,
    innermost (where it was raised) last; ``None`` when it has no traceback.

    Only the code's file name, line number and (qualified) function name are read: never
    a frame's local variables, arguments or source text (which may hold secrets). Bounded:
    at most ``max_frames`` entries - when there were more, the innermost
    ``max_frames - 1`` are kept and a first entry ``{"file": "", "line": 0, "function":
    "<N outer frames left out>"}`` says how many were not -, each text cut to
    ``max_chars`` characters (:func:`bound_text`: storable, JSON-serialisable). ``skip``:
    outermost frames to drop first (the runner's own). Never raises (a traceback that
    cannot be read gives ``None``)."""
    try:
        tb = BaseException.__dict__["__traceback__"].__get__(exc)
        for _ in range(skip):
            if tb is None or tb.tb_next is None:
                break
            tb = tb.tb_next
        max_frames = max(2, max_frames)
        kept: deque[Any] = deque(maxlen=max_frames)
        total = 0
        while tb is not None:
            kept.append(tb)
            total += 1
            tb = tb.tb_next
        if not total:
            return None
        if total > max_frames:
            kept.popleft()
        frames = []
        for entry in kept:
            code = entry.tb_frame.f_code
            name = getattr(code, "co_qualname", None) or code.co_name
            frames.append(_frame(code.co_filename, entry.tb_lineno, name, max_chars))
        if total > max_frames:
            frames.insert(0, _left_out(total - len(frames)))
        return frames
    except Exception:  # noqa: BLE001 - a projection must never fail a run
        return None


def bound_traceback(
    value: Any, max_frames: int = TRACEBACK_MAX_FRAMES, max_chars: int = TRACEBACK_MAX_CHARS
) -> list[dict[str, Any]] | None:
    """``value`` (a traceback as :func:`project_traceback` makes it, or anything: a value
    sent back by a child process, a row written behind ``save()``) as a bounded
    traceback: ``None`` unless it is a list; each entry that is not a ``dict`` with the
    three keys is kept as an empty frame; texts cut to ``max_chars``, lines made ints; at
    most ``max_frames`` entries (the innermost kept, the first saying how many were left
    out, as :func:`project_traceback`). Never raises, never calls a method of a foreign
    object."""
    if type(value) is not list:
        return None
    max_frames = max(2, max_frames)
    items = list.__iter__(value)
    total = len(value)
    if total > max_frames:
        items = list.__iter__(value[total - (max_frames - 1) :])
    frames = []
    for item in items:
        if type(item) is dict:
            get = dict.get
            frames.append(
                _frame(get(item, "file"), get(item, "line"), get(item, "function"), max_chars)
            )
        else:
            frames.append(_frame("", 0, "", max_chars))
    if total > max_frames:
        frames.insert(0, _left_out(total - len(frames)))
    return frames


def format_traceback(value: Any) -> list[str]:
    """The lines of a stored traceback as Python prints them (``File "x", line N, in f``),
    outermost first; a "left out" entry as its own line. ``value`` is bounded first
    (:func:`bound_traceback`): any stored value gives lines, never an error."""
    lines = []
    for frame in bound_traceback(value) or []:
        if not frame["file"] and not frame["line"] and frame["function"].startswith("<"):
            lines.append(f"... {frame['function'][1:-1]}")
        else:
            lines.append(f'File "{frame["file"]}", line {frame["line"]}, in {frame["function"]}')
    return lines
