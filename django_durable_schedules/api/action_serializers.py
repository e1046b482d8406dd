"""The bodies of ``schedules/{id}/enable/`` and ``schedules/{id}/duplicate/``. The other
actions' bodies have their own modules: :mod:`.pause_serializers` (``disable/``),
:mod:`.trigger_serializers` (``trigger/``), :mod:`.rerun_serializers` (``rerun/``)."""

from __future__ import annotations

from rest_framework import serializers

from .fields import AwareDateTimeField
from .strict import StrictSerializer


class EnableSerializer(StrictSerializer):
    """Body of ``enable/`` (optional): ``run_at`` moves a ``once`` schedule to a new
    instant as it is re-armed (without it, a past one-shot is due at once)."""

    run_at = AwareDateTimeField(
        required=False,
        help_text="Once schedules only: the new instant to run at (aware ISO 8601).",
    )


class DuplicateSerializer(StrictSerializer):
    """Body of ``duplicate/``: the new schedule's ``name`` (the rules of
    ``Schedule.name``; a name taken is a 400 on ``name``)."""

    name = serializers.CharField(
        max_length=128, help_text="The new schedule's name (unique, as Schedule.name)."
    )


__all__ = ["DuplicateSerializer", "EnableSerializer"]
