"""The concurrency group admin (issue #28, item 1): a group's limits, how many of its runs
hold a live lease now, how many schedules name it, and whether it is at its limit (the
whole page one query: each row's counts are scalar subqueries, with the database clock).

The form checks the rate (:func:`..models.parse_rate`) and asks for ``max_running``, a
rate, or both. Saves and deletes go through :mod:`..state` (:func:`~..state.save_group`,
:func:`~..state.delete_group`: under the group's row lock, with a ``group`` event, by the
user, on each schedule that names an edited group). The name is fixed once created (as
in the API): the change page shows it read-only. The run state (``full_until``,
``rate_until``, ``starts``) is shown, never written: a save writes only the fields the
form edits, so a claim's concurrent write of the run state is never undone. Deleting a
group that schedules name is refused by the database's ``PROTECT``: Django's "cannot
delete" page lists those schedules; a schedule that names it after that page was read
makes the delete an error message on the same page.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db import router
from django.db.models import BooleanField, Case, F, Q, QuerySet, Value, When
from django.db.models.functions import Now
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect

from .. import state
from ..group_health import live_leases, schedules_of
from ..models import ConcurrencyGroup, Schedule, parse_rate
from .write_lock import WriteLockedForm

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
class ConcurrencyGroupAdmin(WriteLockedForm):
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

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        """The run state; on an existing group its name too (fixed once created)."""
        fields = tuple(super().get_readonly_fields(request, obj))
        return ("name", *fields) if obj is not None else fields

    def save_model(
        self, request: HttpRequest, obj: ConcurrencyGroup, form: Any, change: bool
    ) -> None:
        """:func:`..state.save_group` of the form's values by this user (an edit ends the
        group's hold, so the next claim reads the new limits at once; the claim's run
        state is never written back)."""
        group = state.save_group(
            obj.name,
            max_running=obj.max_running,
            rate=obj.rate,
            description=obj.description,
            actor=request.user,
            source="admin",
            using=router.db_for_write(ConcurrencyGroup),
        )
        for field in ConcurrencyGroup._meta.concrete_fields:  # the admin's log and redirect
            setattr(obj, field.attname, getattr(group, field.attname))

    def delete_model(self, request: HttpRequest, obj: ConcurrencyGroup) -> None:
        """:func:`..state.delete_group` (refused while schedules name it)."""
        state.delete_group(
            obj.name, actor=request.user, source="admin", using=router.db_for_write(type(obj))
        )

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet) -> None:
        """Each group through :func:`..state.delete_group`; one that a schedule named since
        the confirmation page was read is kept, and named in an error message."""
        refused = []
        for obj in list(queryset):
            try:
                self.delete_model(request, obj)
            except ValidationError:
                refused.append(obj.name)
        if refused:
            self.message_user(
                request, f"Not deleted (schedules name them): {', '.join(refused)}.", messages.ERROR
            )

    def delete_view(
        self, request: HttpRequest, object_id: str, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """Django's (a POST under the write lock, as :class:`.write_lock.WriteLockedForm` takes it); a delete
        refused by :func:`..state.delete_group` (a schedule named the group after the page
        was read) rolls back and is an error message on the page again."""
        try:
            if request.method != "POST":
                return super().delete_view(request, object_id, extra_context)
            with state.write_transaction(using=router.db_for_write(self.model)):
                return super().delete_view(request, object_id, extra_context)
        except ValidationError as exc:
            self.message_user(request, " ".join(exc.messages), messages.ERROR)
            return HttpResponseRedirect(request.get_full_path())
