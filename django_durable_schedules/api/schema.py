"""OpenAPI (drf-spectacular) details of the API: the error answers of every operation.

The views set ``schema = APIAutoSchema()`` themselves, so the API documents itself with
drf-spectacular whatever the project's ``DEFAULT_SCHEMA_CLASS`` is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse
from drf_spectacular.utils import extend_schema as spectacular_extend_schema

from .examples import create_examples

#: ``{"field": ["message", ...], ...}`` (field errors) or ``{"detail": "..."}``.
VALIDATION_ERROR = {
    "type": "object",
    "description": "Field errors (name -> messages; non_field_errors for the whole) "
    "or a detail message.",
    "additionalProperties": {
        "oneOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}]
    },
}
DETAIL = {
    "type": "object",
    "properties": {"detail": {"type": "string"}},
    "required": ["detail"],
}


class APIAutoSchema(AutoSchema):
    """drf-spectacular's ``AutoSchema`` that also documents the errors an operation can
    answer: 400 (invalid body or query), 401/403 (authentication, permission), 404 (unknown
    or not-yours id; an invalid page cursor), beside what ``extend_schema`` declares (409);
    and the request examples of the create operations (:mod:`.examples`)."""

    def get_examples(self) -> list[Any]:
        """What ``extend_schema(examples=)`` declares; for a ``POST`` without any, the real
        bodies of :func:`.examples.create_examples` (none for most actions)."""
        declared = list(super().get_examples())
        if declared or self.method != "POST":
            return declared
        serializer = self.get_request_serializer()
        return create_examples(serializer) if serializer is not None else []

    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        responses = super()._get_response_bodies(direction)
        if direction != "response":
            return responses
        errors: dict[str, tuple[dict[str, Any], str]] = {
            "401": (DETAIL, "Not authenticated (with an authentication scheme that asks)."),
            "403": (DETAIL, "Not authenticated, not permitted, or a missing CSRF token."),
        }
        if "{" in self.path or self._is_list_view():
            errors["404"] = (DETAIL, "Not found (or not yours), or an invalid page cursor.")
        if (
            self.method in ("PUT", "PATCH")
            or self._is_create_operation()
            or self._is_list_view()
            or self.get_override_parameters()
            or (self.method == "POST" and self.get_request_serializer() is not None)  # a body
        ):
            errors["400"] = (VALIDATION_ERROR, "Invalid input: field errors.")
        for code, (schema, description) in errors.items():
            if code not in responses:
                responses[code] = self._get_response_for_code(
                    OpenApiResponse(schema, description=description), code, direction=direction
                )
        return responses


def extend_schema(**kwargs: Any) -> Callable[[Any], Any]:
    """drf-spectacular's ``extend_schema`` for a view method, built on
    :class:`APIAutoSchema` instead of the project's ``DEFAULT_SCHEMA_CLASS`` (which
    spectacular would otherwise use, and which may not be spectacular's at all)."""

    def decorator(func: Any) -> Any:
        func.schema = APIAutoSchema  # what extend_schema takes as its base class
        try:
            return spectacular_extend_schema(**kwargs)(func)
        finally:
            del func.schema

    return decorator
