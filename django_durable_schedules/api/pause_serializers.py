"""The body of ``schedules/{id}/disable/`` (:class:`DisableSerializer`): a pause's note and
end (issue #27). Checked here for shape; that ``until`` lies ahead is checked by
:func:`..state.disable` against the database clock (a 400 with the same field)."""

from __future__ import annotations

from rest_framework import serializers

from ..state import NOTE_MAX_CHARS
from .fields import AwareDateTimeField
from .strict import StrictSerializer


class DisableSerializer(StrictSerializer):
    """Body of ``disable/`` (optional): ``note`` (why, kept in ``pause_reason``) and
    ``until`` (when a worker resumes it by itself, as ``enable`` does: no catch-up). On a
    schedule already paused by an operator, either updates the pause (extends it)."""

    note = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=NOTE_MAX_CHARS,
        help_text="Why it is paused (kept in pause_reason).",
    )
    until = AwareDateTimeField(
        required=False,
        help_text="When the pause ends (aware ISO 8601, later than now): a worker resumes "
        "the schedule then, with no catch-up.",
    )


__all__ = ["DisableSerializer"]
