"""The concurrency group admin (issue #28, item 1): a group's limits, how many of its runs
hold a live lease now, how many schedules name it, and whether it is at its limit (the
whole page one query: each row's counts are scalar subqueries, with the database clock).

The form checks the rate (:func:`..models.parse_rate`) and asks for ``max_running``, a
rate, or both. The run state (``full_until``, ``rate_until``, ``starts``) is shown, never
written: a save writes only the fields the form edits, so a claim's concurrent write of
the run state is never undone. Deleting a group that schedules name is refused by the
database's ``PROTECT``: Django's "cannot delete" page lists those schedules.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db.models import BooleanField, Case, F, Q, QuerySet, Value, When
from django.db.models.functions import Now
from django.http import HttpRequest

from ..group_health import live_leases, schedules_of
from ..models import ConcurrencyGroup, Schedule, parse_rate

#: The fields the form edits (the only ones a save writes on an existing group).
EDITED_FIELDS = ("name", "description", "max_running", "rate")
#: The run state, shown read-only (written by the claim: :mod:`..state.groups`).
RUN_STATE_FIELDS = ("full_until", "rate_until", "starts", "created_at", "updated_at")


class ConcurrencyGroupForm(forms.ModelForm):
    """A group's name, description and limits: a rate :func:`..models.parse_rate` reads
    (stored without spaces), and ``max_running``, a rate, or both."""

    class Meta:
        model = ConcurrencyGroup
        fields = EDITED_FIELDS

    def clean_rate(self) -> str:
        """The rate as stored ("10/m"), or a ``rate`` field error."""
        rate = self.cleaned_data.get("rate") or ""
        try:
            parse_rate(rate)
        except ValidationError as exc:
            raise ValidationError(exc.message_dict["rate"]) from exc
        return rate.replace(" ", "")

    def clean(self) -> dict[str, Any]:
        """At least one limit."""
        data = super().clean() or {}
        if not self.errors and data.get("max_running") is None and not data.get("rate"):
            raise ValidationError("Give max_running, a rate, or both.")
        return data


@admin.register(ConcurrencyGroup)
class ConcurrencyGroupAdmin(admin.ModelAdmin):
    """Concurrency groups: their limits and how full they are now."""

    form = ConcurrencyGroupForm
    list_display = ("name", "max_running", "rate", "running_now", "used_by", "at_limit")
    search_fields = ("name", "description")
    readonly_fields = RUN_STATE_FIELDS
    fieldsets = (
        (None, {"fields": EDITED_FIELDS}),
        ("Run state (written by the claim)", {"fields": RUN_STATE_FIELDS}),
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[ConcurrencyGroup]:
        full = Q(max_running__isnull=False, _running__gte=F("max_running"))
        queryset: QuerySet[ConcurrencyGroup] = (
            super()
            .get_queryset(request)
            .annotate(
                _running=live_leases(Now()),
                _schedules=schedules_of(Schedule.objects.all()),
            )
            .annotate(
                _at_limit=Case(
                    When(full | ConcurrencyGroup.rate_holding_q(Now()), then=Value(True)),
                    default=Value(False),
                    output_field=BooleanField(),
                )
            )
        )
        return queryset

    @admin.display(description="running now", ordering="_running")
    def running_now(self, obj: Any) -> int:
        return int(obj._running)

    @admin.display(description="schedules", ordering="_schedules")
    def used_by(self, obj: Any) -> int:
        return int(obj._schedules)

    @admin.display(description="at its limit", boolean=True, ordering="_at_limit")
    def at_limit(self, obj: Any) -> bool:
        return bool(obj._at_limit)

    def save_model(
        self, request: HttpRequest, obj: ConcurrencyGroup, form: Any, change: bool
    ) -> None:
        if change:  # the run state is the claim's: never written back from the page, but
            # a hold ends with the edit, so the next claim reads the new limits at once
            # (as state.save_group does).
            obj.full_until = obj.rate_until = None
            obj.save(update_fields=[*EDITED_FIELDS, "full_until", "rate_until", "updated_at"])
        else:
            obj.save()
