"""The JSON a schedule stores (``payload``, ``metadata``): what every supported backend can
store and a worker can hand to a callback, one rule for the model, the admin and the API.

A value is refused when it nests deeper than :data:`JSON_MAX_DEPTH`, holds a NUL character
or an unpaired surrogate in a string (PostgreSQL's ``jsonb`` and UTF-8 refuse them), a
non-finite number (JSON has none: ``NaN``, ``Infinity``), or something that is not JSON;
a payload also when it is over :data:`PAYLOAD_MAX_BYTES` as compact UTF-8 JSON. Pure.
"""

from __future__ import annotations

import json
import math
from typing import Any

from .limits import METADATA_MAX_KEYS, METADATA_MAX_VALUE_CHARS

#: Largest ``payload``, as compact UTF-8 JSON (bytes).
PAYLOAD_MAX_BYTES = 64 * 1024
#: Deepest nesting accepted in ``payload`` and ``metadata``.
JSON_MAX_DEPTH = 32


def json_problem(value: Any, max_depth: int = JSON_MAX_DEPTH) -> str | None:
    """What makes ``value`` unfit to store as JSON on every backend (``"contains a NUL
    character"``), or None. Iterative: any depth is examined without recursion."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > max_depth:
            return f"nested deeper than {max_depth} levels"
        if isinstance(item, dict):
            stack.extend((k, depth) for k in item)
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list | tuple):
            stack.extend((v, depth + 1) for v in item)
        elif isinstance(item, str):
            if "\x00" in item:
                return "contains a NUL character"
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return "contains an unpaired surrogate"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return "contains a non-finite number"
        elif item is not None and not isinstance(item, bool | int):
            return f"contains a {type(item).__name__}, which is not JSON"
    return None


def json_size(value: Any) -> int:
    """Bytes of ``value`` as compact UTF-8 JSON (``value`` must be JSON: see
    :func:`json_problem`)."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def payload_errors(payload: Any, metadata: Any) -> dict[str, list[str]]:
    """Field messages for a payload and metadata that break the rules of this module
    (``{"payload": ["The payload contains a non-finite number."]}``), else ``{}``."""
    errors: dict[str, list[str]] = {}
    problem = json_problem(payload)
    if problem:
        errors["payload"] = [f"The payload {problem}."]
    else:
        size = json_size(payload)
        if size > PAYLOAD_MAX_BYTES:
            errors["payload"] = [
                f"The payload is {size} bytes as JSON; at most {PAYLOAD_MAX_BYTES} are accepted."
            ]
    problem = json_problem(metadata)
    if problem:
        errors["metadata"] = [f"The metadata {problem}."]
    return errors


def metadata_errors(metadata: Any) -> dict[str, list[str]]:
    """``metadata`` must be a flat JSON object: at most 50 string keys of at most 100
    characters, scalar values, strings at most 500 characters."""
    if metadata in (None, {}):
        return {}
    problems = []
    if not isinstance(metadata, dict):
        problems.append("Must be a JSON object.")
    else:
        if len(metadata) > METADATA_MAX_KEYS:
            problems.append(f"At most {METADATA_MAX_KEYS} keys.")
        for key, value in list(metadata.items())[: METADATA_MAX_KEYS + 1]:
            if not isinstance(key, str) or len(key) > 100:
                problems.append("Keys must be strings of at most 100 characters.")
            if not (value is None or isinstance(value, (bool, int, float, str))):
                problems.append(f"{key!r}: values must be scalars (flat metadata).")
            elif isinstance(value, str) and len(value) > METADATA_MAX_VALUE_CHARS:
                problems.append(f"{key!r}: at most {METADATA_MAX_VALUE_CHARS} characters.")
    return {"metadata": problems} if problems else {}
