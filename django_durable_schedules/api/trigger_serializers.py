"""The body of ``schedules/{id}/trigger/`` (issue #27): an optional payload override, a
note and ``ignore_blackout``. The rules of the override (bounds, the callback's JSON
Schema, the keys an owner-scoped user may override) are the state package's
(:func:`..state.overrides.check_override`); here only the shapes."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from ..state.overrides import NOTE_MAX_CHARS
from .strict import StrictSerializer


class TriggerSerializer(StrictSerializer):
    """Body of ``trigger/`` (optional): ``{"payload": {...}, "note": "...",
    "ignore_blackout": false}``."""

    payload = serializers.JSONField(
        required=False,
        allow_null=True,
        help_text="A JSON object merged over the schedule's payload (top level) for this run "
        "only; the callback's payload schema, if it declares one, must accept the result.",
    )
    note = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=NOTE_MAX_CHARS,
        trim_whitespace=True,
        help_text="Why it is run by hand; kept in the `triggered` event.",
    )
    ignore_blackout = serializers.BooleanField(
        required=False,
        default=False,
        help_text="The run may start inside a blackout window.",
    )

    def validate_payload(self, value: Any) -> Any:
        if value is not None and not isinstance(value, dict):
            raise serializers.ValidationError(
                "Must be a JSON object (its keys replace the payload's)."
            )
        return value
