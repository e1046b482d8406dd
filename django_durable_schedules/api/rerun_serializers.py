"""Body of ``schedules/{id}/rerun/`` (issue #27): which occurrence to run again."""

from __future__ import annotations

from rest_framework import serializers

from ..state.bounds import COUNT_MAX
from ..state.reruns import NOTE_MAX_CHARS
from .strict import StrictSerializer


class RerunSerializer(StrictSerializer):
    """``{"occurrence": N, "force": false, "note": ""}``: a new attempt of occurrence
    ``N`` under its own idempotency key (``state.rerun``)."""

    occurrence = serializers.IntegerField(
        min_value=1,
        max_value=COUNT_MAX,
        help_text="The occurrence to run again (its number, 1 or more).",
    )
    force = serializers.BooleanField(
        default=False,
        help_text="Run it again even though it succeeded (its receipt is then `forced`).",
    )
    note = serializers.CharField(
        default="",
        allow_blank=True,
        max_length=NOTE_MAX_CHARS,
        help_text="Why, kept in the `rerun` event.",
    )
