"""JSON Schemas a callback declares for its payload (``register(..., payload_schema=...)``):
checked once at registration, then used to validate a trigger's effective payload and to
render the admin's "Run now…" form. Uses the ``jsonschema`` library (the schema's own
``$schema`` dialect, else Draft 2020-12), imported on first use: a project that declares
no schema never loads it. No database access.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ImproperlyConfigured

#: Schema-validation problems reported per validation (the rest are left out).
MAX_SCHEMA_PROBLEMS = 10


def check_schema(name: str, schema: Any) -> dict[str, Any] | None:
    """``schema`` (a JSON Schema given to ``register`` for callback ``name``) as a plain
    dict, or None for none. Raises ``TypeError`` for a value that is not a mapping and
    ``ImproperlyConfigured`` for a mapping that is no valid schema of its dialect (the
    message names the callback, the place in the schema and the problem)."""
    if schema is None:
        return None
    if not isinstance(schema, Mapping):
        raise TypeError(
            f"payload_schema of callback {name!r} must be a JSON Schema (a dict), "
            f"not {type(schema).__name__}"
        )
    checked: dict[str, Any] = dict(schema)
    from jsonschema.exceptions import SchemaError

    try:
        _validator(checked).check_schema(checked)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "(root)"
        raise ImproperlyConfigured(
            f"payload_schema of callback {name!r} is not a valid JSON Schema: "
            f"at {where}: {exc.message}"
        ) from None
    return checked


def schema_problems(schema: Mapping[str, Any], value: Any) -> list[str]:
    """What makes ``value`` break ``schema`` (checked by :func:`check_schema`), one message
    each naming the path (``"$.retries: 'x' is not of type 'integer'"``), at most
    :data:`MAX_SCHEMA_PROBLEMS`, in path order; ``[]`` when it is valid. A schema that
    cannot be applied (a ``$ref`` nothing resolves) is one problem, never raised."""
    try:
        errors = sorted(
            _validator(schema)(schema).iter_errors(value), key=lambda e: [str(p) for p in e.path]
        )
    except Exception as exc:  # noqa: BLE001 - the library's own failures, e.g. Unresolvable
        return [f"$: the callback's payload schema cannot be applied ({type(exc).__name__})"]
    return [
        f"{_path(error.absolute_path)}: {error.message}" for error in errors[:MAX_SCHEMA_PROBLEMS]
    ]


def declared_keys(schema: Mapping[str, Any] | None) -> set[str]:
    """The top-level keys ``schema`` declares in ``properties`` (none without a schema)."""
    properties = (schema or {}).get("properties")
    return set(properties) if isinstance(properties, Mapping) else set()


def _validator(schema: Mapping[str, Any]) -> Any:
    """The validator class of ``schema``'s dialect (``$schema``), else Draft 2020-12's."""
    from jsonschema import Draft202012Validator
    from jsonschema.validators import validator_for

    return validator_for(schema, default=Draft202012Validator)


def _path(path: Any) -> str:
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out
