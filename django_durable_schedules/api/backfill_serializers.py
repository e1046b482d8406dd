"""Serializers of ``schedules/{id}/backfill/``: the request body, the stored backfill and
the dry run's plan. They only validate and shape; :mod:`..state.backfills` decides."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from ..models import Backfill, BackfillStatus
from ..state import BackfillPlan
from .fields import AwareDateTimeField, BaseModelSerializer
from .strict import StrictSerializer


class BackfillRangeSerializer(StrictSerializer):
    """Body of ``POST schedules/{id}/backfill/``: the past range ``[start, end)``."""

    start = AwareDateTimeField(help_text="First instant of the range, included (aware ISO 8601).")
    end = AwareDateTimeField(
        help_text="End of the range, excluded (aware ISO 8601; not after now)."
    )
    include_succeeded = serializers.BooleanField(
        default=False, help_text="Also run slots that already have a successful receipt."
    )
    cascade = serializers.BooleanField(
        default=False,
        help_text="Run the schedules downstream of it (kind 'after') again for each slot "
        "that succeeds.",
    )
    dry_run = serializers.BooleanField(
        default=False,
        help_text="Answer 200 with the slots it would run; store nothing.",
    )


class BackfillSerializer(BaseModelSerializer):
    """A stored backfill (read-only)."""

    # A plain string in the schema: an enum would collide with the schedule's ``status``.
    status = serializers.CharField(
        read_only=True, help_text="One of: " + ", ".join(BackfillStatus.values) + "."
    )
    slots = serializers.ListField(
        child=AwareDateTimeField(),
        source="slot_instants",
        read_only=True,
        help_text="The slots it runs, in order (UTC).",
    )
    remaining = serializers.IntegerField(read_only=True, help_text="Slots not finished yet.")

    class Meta:
        model = Backfill
        fields = [
            "id",
            "schedule",
            "schedule_name",
            "start",
            "end",
            "include_succeeded",
            "cascade",
            "slots",
            "skipped_succeeded",
            "position",
            "remaining",
            "status",
            "created_at",
            "finished_at",
            "created_by_repr",
            "source",
        ]
        read_only_fields = fields


class BackfillPlanSerializer(serializers.Serializer):
    """Answer of a dry run: what a backfill of ``[start, end)`` would run."""

    start = AwareDateTimeField()
    end = AwareDateTimeField()
    slots = serializers.ListField(child=AwareDateTimeField())
    skipped_succeeded = serializers.IntegerField(
        help_text="Slots of the range left out: they already succeeded."
    )

    @staticmethod
    def shape(plan: BackfillPlan) -> dict[str, Any]:
        """The response body of ``plan``."""
        return BackfillPlanSerializer(plan).data
