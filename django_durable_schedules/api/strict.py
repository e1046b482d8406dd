"""Request bodies name only fields the endpoint knows: any other key is a 400.

DRF ignores a key no field declares, so a typo (``intreval_seconds``) would be dropped
silently and the request answered 201 with something else than was meant. Every
serializer of a request body in this API derives from :class:`RejectUnknownFields`
(through :class:`StrictSerializer` or :class:`.fields.BaseModelSerializer`): a key that
is none of its fields is ``{"key": ["Unknown field. Did you mean interval_seconds?"]}``,
reported with the body's other field errors.

Read-only fields (``id``, ``status``, ``next_run_at``...) are fields: sent in a body they
are ignored, as DRF does, so what a ``GET`` answered can be sent back to ``PUT``/``PATCH``
(docs/api.md, "Unknown fields").
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from rest_framework import serializers

#: The message of a key no field of the body declares.
UNKNOWN_MESSAGE = "Unknown field."


def unknown_field_errors(keys: Any, known: Any, writable: Any) -> dict[str, list[str]]:
    """``{key: [message]}`` for every key of ``keys`` (strings, a body's keys) that is not
    in ``known`` (every field name, read-only ones too); the message suggests the nearest
    name of ``writable`` (difflib, ratio >= 0.6) when there is one. Empty: none unknown."""
    choices = sorted(str(name) for name in writable)
    errors: dict[str, list[str]] = {}
    for key in keys:
        if key in known:
            continue
        near = difflib.get_close_matches(str(key), choices, n=1)
        message = f"{UNKNOWN_MESSAGE} Did you mean {near[0]}?" if near else UNKNOWN_MESSAGE
        errors[str(key)] = [message]
    return errors


class RejectUnknownFields(serializers.Serializer):
    """A serializer whose input may hold only its fields' names: any other key is a 400
    naming it (:func:`unknown_field_errors`), beside the other fields' errors."""

    def to_internal_value(self, data: Any) -> Any:
        """As DRF's; a mapping with keys no field declares is a ``ValidationError`` with
        those keys' messages (and the known fields' errors, if any)."""
        unknown: dict[str, list[str]] = {}
        if isinstance(data, Mapping):
            fields = self.fields
            writable = [name for name, field in fields.items() if not field.read_only]
            unknown = unknown_field_errors(data.keys(), fields, writable)
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if unknown and isinstance(exc.detail, dict):
                raise serializers.ValidationError({**exc.detail, **unknown}) from None
            raise
        if unknown:
            raise serializers.ValidationError(unknown)
        return value


class StrictSerializer(RejectUnknownFields, serializers.Serializer):
    """A plain serializer of a request body (an action's) that refuses unknown keys."""


__all__ = ["UNKNOWN_MESSAGE", "RejectUnknownFields", "StrictSerializer", "unknown_field_errors"]
