"""The schedule's add and change form: :class:`ScheduleForm` (the callback is chosen among
registered names) and the fields of its fieldsets: the editable ones are the groups of
:mod:`..models.choices` (the fields :mod:`..state` lets a caller write), the others shown
read-only.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable
from typing import Any

from django import forms
from django.contrib.admin.widgets import AutocompleteSelectMultiple
from django.core.exceptions import ValidationError
from django.forms.models import construct_instance

from .. import state, timing
from ..db.clock import db_now
from ..models import EDITABLE_ORDER, MANUAL_REFUSES, Kind, Schedule
from ..models.validation import past_run_at_errors
from ..registry import registry
from .columns import (
    deadline_detail,
    last_run_detail,
    lease_detail,
    next_run_detail,
    previous_detail,
    status_badge,
    upcoming_table,
)
from .form_fields import (
    BoundedJSONField,
    CronInput,
    RruleInput,
    SpecLinesField,
    ZoneInput,
)
from .zoned import INSTANT_INPUTS, WallTimeInput, ZonedDateTimeField, ZonedInstantsMixin

# The editable fields come from models.choices, in groups, one fieldset each: "Definition"
# (IDENTITY_FIELDS + TIMING_FIELDS, laid out by DEFINITION_LAYOUT), "Input and owner"
# (INPUT_FIELDS), "Policies" (POLICY_FIELDS); the form edits all of them (EDITABLE_ORDER).

#: The "Definition" fieldset's fields (:data:`IDENTITY_FIELDS` and :data:`TIMING_FIELDS`,
#: and the form's own ``run_now``, :data:`FORM_ONLY`) as laid out on the form (tuples share
#: a line).
DEFINITION_LAYOUT = (
    "name",
    "callback",
    ("kind", "timezone"),
    "upstream",
    ("interval_seconds", "cron"),
    "rrule",
    "rrule_business_days",
    "extra_specs",
    "run_at",
    "run_now",
    ("start_at", "end_at"),
    "max_runs",
)
#: The "Calendars and windows" fieldset: the definition's relations (two tall selectors,
#: folded on the add form, where a new schedule links none yet).
LINKS_LAYOUT = ("exclusion_calendars", "exclusion_policy", "blackout_windows")
#: The form's fields that are no column: ``run_now`` (a hidden input until a one-shot's
#: ``run_at`` is refused for being in the past, then the checkbox that accepts it).
FORM_ONLY = ("run_now",)
#: The editable relations the model does not let a model form build (``Schedule.upstream``
#: is ``editable=False``: its links are checked as a graph by :mod:`..state`): declared on
#: the form, left out of its ``Meta.fields`` (and of the admin's ``get_form(fields=)``).
DECLARED_RELATIONS = ("upstream",)
#: The fields only a kind ``after`` schedule takes (the others hide them).
AFTER_ONLY = ("upstream", "wait_seconds")

#: The form fields each kind hides (``kind_fields.js`` reads them from the kind select's
#: ``data-kind-hides``): the timing fields the kind refuses (:data:`.timing.KIND_FORBIDS`,
#: and ``extra_specs`` but for :data:`.timing.EXTRA_KINDS`),
#: so the form shows only the chosen kind's; a one-shot also takes no exclusion calendar,
#: and a manual schedule no timing field but its kind. (Only what the kind refuses: the
#: script empties a hidden field when the form is saved.)
KIND_HIDES = {
    **{
        Kind(kind): (
            *forbids,
            *(() if kind in timing.EXTRA_KINDS else ("extra_specs",)),
            *AFTER_ONLY,
        )
        for kind, forbids in timing.KIND_FORBIDS.items()
    },
    Kind.ONCE: (*timing.KIND_FORBIDS["once"], "extra_specs", "exclusion_calendars", *AFTER_ONLY),
    Kind.MANUAL: (*MANUAL_REFUSES, "extra_specs", "timezone", "exclusion_calendars", *AFTER_ONLY),
    Kind.AFTER: (*MANUAL_REFUSES, "extra_specs", "timezone", "exclusion_calendars"),
}

UPSTREAM_HELP = (
    "Kind 'after': the schedules it runs after (type to search by name). It runs each "
    "nominal instant of theirs once every one of them succeeded for it (they share one "
    "grid; no manual schedule, no cycle)."
)


def upstream_field(admin_site: Any) -> forms.ModelMultipleChoiceField:
    """The form's ``upstream`` on the admin site ``admin_site``: a search of the schedules
    by name (the admin's autocomplete, through the schedule admin's own search), which
    renders only the schedules chosen, never a list of every schedule."""
    field = forms.ModelMultipleChoiceField(
        queryset=Schedule.objects.order_by("name").only("id", "name"),
        required=False,
        label="Runs after",
        widget=AutocompleteSelectMultiple(Schedule._meta.get_field("upstream"), admin_site),
        help_text=UPSTREAM_HELP,
    )
    return field


#: The read-only fields computed from the schedule: functions of :mod:`.columns`, and the names
#: of :class:`.schedules.ScheduleAdmin`'s methods (those that link into its site).
SUMMARY_FIELDS: tuple[str | Callable[[Schedule], Any], ...] = (
    status_badge,
    next_run_detail,
    deadline_detail,
    previous_detail,
    upcoming_table,
    "chain_links",
    "recent_outcomes",
    "history_links",
)
STATE_FIELDS: tuple[str | Callable[[Schedule], Any], ...] = (
    "degraded_reason",
    "pause_reason",
    last_run_detail,
    "occurrence",
    "attempt",
    "failure_count",
    "failed_occurrences",
    "missed_count",
    "excluded_count",
    "buffered_for",
    lease_detail,
    "created_at",
    "updated_at",
)


#: Optional in a post: left out (or blank), the schedule keeps its value (a new one gets
#: the field's default), so a form or a script that predates the field still saves.
KEPT_WHEN_LEFT_OUT = (
    "blackout_policy",
    "exclusion_policy",
    "priority",
    "pool",
    "wait_seconds",
    "max_parallel",
)


class ScheduleForm(ZonedInstantsMixin, forms.ModelForm):
    """``callback`` is a choice among registered names, never a free import path;
    ``run_at``, ``start_at`` and ``end_at`` are wall times in the schedule's own zone
    (:class:`.zoned.ZonedInstantsMixin`)."""

    callback = forms.ChoiceField(choices=())
    run_now = forms.BooleanField(
        required=False,
        label="Run at once (run_at is in the past)",
        help_text="Tick to accept a run_at more than a minute in the past: the one-shot is "
        "due at once, its run reported late by the gap.",
        widget=forms.HiddenInput,
    )
    upstream = forms.ModelMultipleChoiceField(
        queryset=Schedule.objects.order_by("name").only("id", "name"),
        required=False,
        label="Runs after",
        widget=forms.SelectMultiple,  # the admin's: a search (upstream_field)
        help_text=UPSTREAM_HELP,
    )
    #: The admin's describe-cron and describe-rrule URLs (set by
    #: :meth:`.schedules.ScheduleAdmin.get_form`).
    cron_words_url: str | None = None
    rrule_words_url: str | None = None
    #: The admin's describe-instant URL: the instant fields say what they will store as
    #: they are typed (``instant_words.js``).
    instant_words_url: str | None = None

    class Meta:
        model = Schedule
        fields = tuple(f for f in EDITABLE_ORDER if f not in DECLARED_RELATIONS)
        widgets = {
            "timezone": ZoneInput,
            "cron": CronInput,
            "rrule": RruleInput,
            # Not the admin's split date/time widget, whose shortcuts use the site's zone.
            **dict.fromkeys(INSTANT_INPUTS, WallTimeInput),
        }
        field_classes = {
            "payload": BoundedJSONField,
            "metadata": BoundedJSONField,
            "extra_specs": SpecLinesField,
            **dict.fromkeys(INSTANT_INPUTS, ZonedDateTimeField),
        }

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        # The row as read, before the form writes into it: an edit is prepared from it.
        self._original = copy.copy(self.instance) if not self.instance._state.adding else None
        self.zone_instant_fields()
        links = self.fields.get("upstream")
        if isinstance(links, forms.ModelMultipleChoiceField) and self._original is not None:
            links.queryset = (
                Schedule.objects.order_by("name")
                .only("id", "name")
                .exclude(
                    pk=self.instance.pk  # never itself
                )
            )
            if "upstream" not in self.initial:  # a model form reads no non-editable field
                # Only a kind after schedule has upstreams (state.chain_links): no query
                # for the others.
                self.initial["upstream"] = (
                    list(self.instance.upstream.order_by("name").values_list("pk", flat=True))
                    if self.instance.kind == Kind.AFTER
                    else []
                )
        kind = self.fields.get("kind")
        if kind is not None:
            hides = {str(k): list(names) for k, names in KIND_HIDES.items()}
            kind.widget.attrs["data-kind-hides"] = json.dumps(hides)
        for name in KEPT_WHEN_LEFT_OUT:  # left out of a post: the schedule's (new: default)
            if name in self.fields:
                self.fields[name].required = False
        cron = self.fields.get("cron")
        if cron is not None and self.cron_words_url:
            cron.widget.attrs["data-words-url"] = self.cron_words_url
        for name in INSTANT_INPUTS:
            instant_field = self.fields.get(name)
            if instant_field is not None and self.instant_words_url:
                instant_field.widget.attrs["data-instant-url"] = self.instant_words_url
        rule = self.fields.get("rrule")
        if rule is not None and isinstance(rule.widget, RruleInput):
            rule.widget.instance = self.instance
            if self.rrule_words_url:
                rule.widget.attrs["data-words-url"] = self.rrule_words_url
        field = self.fields.get("callback")
        if not isinstance(field, forms.ChoiceField):  # absent from a read-only form
            return
        names = registry.names()
        current = self.instance.callback if self.instance and self.instance.callback else None
        choices = [(n, n) for n in names]
        if current and current not in names:
            # Shown so the page still renders; saving it again is refused by validation.
            choices.append((current, f"{current} (not registered)"))
        field.choices = [("", "---------"), *choices]
        field.help_text = "One of the callbacks registered in code."

    def _posted(self, name: str) -> bool:
        """Whether ``name`` was in the post (an optional field left out is unchanged)."""
        return name not in KEPT_WHEN_LEFT_OUT or self.add_prefix(name) in self.data

    def _kept(self, name: str) -> Any:
        """The value of ``name`` chosen, else the schedule's (a new one's default)."""
        chosen = self.cleaned_data.get(name)
        if chosen is None or chosen == "":
            return getattr(self.instance, name)
        return chosen

    def clean_blackout_policy(self) -> str:
        """The policy chosen, else the schedule's (a new one's default, ``skip``)."""
        return self._kept("blackout_policy") or "skip"

    def clean_exclusion_policy(self) -> str:
        """The policy chosen, else the schedule's (a new one's default, ``skip``)."""
        return self._kept("exclusion_policy") or "skip"

    def clean_priority(self) -> int:
        """The priority given, else the schedule's (a new one's default, 0)."""
        return int(self._kept("priority"))

    def clean_pool(self) -> str:
        """The pool given, else the schedule's (a new one's, ``default``)."""
        return str(self._kept("pool"))

    #: The definition :meth:`_post_clean` prepared (``state.prepare``), which the admin's
    #: ``save_model`` applies; None until the form is validated.
    prepared: state.Prepared | None = None

    def _post_clean(self) -> None:
        """Django's model step (the instance built from the form, validated, its uniqueness
        probed), with the definition validated once by ``state.prepare`` (the model's field
        checks and ``clean()``, the messages as ``full_clean()`` gives them), whose result
        ``save_model`` applies without validating again. The ``CHECK`` constraints the
        database enforces at the write are not probed; the name's uniqueness is (the form
        reports a taken name; a refusal at the save could not be shown on it)."""
        opts = self._meta
        try:
            self.instance = construct_instance(self, self.instance, opts.fields, opts.exclude)
        except ValidationError as exc:
            self._update_errors(exc)
        # Django's own exclusions (fields not on the form, or refused by it), as its
        # _post_clean uses them.
        exclude = self._get_validation_exclusions()  # type: ignore[attr-defined]
        self.prepared = None
        try:
            self.prepared = state.prepare(self.definition(exclude), self._original, exclude=exclude)
        except ValidationError as exc:
            self._update_errors(exc)
        self._past_run_at()
        exclude = self._get_validation_exclusions()  # type: ignore[attr-defined]  # and more
        try:
            state.candidates.probe_unique(self.instance, exclude)
        except ValidationError as exc:
            self.prepared = None
            self._update_errors(exc)

    def _past_run_at(self) -> None:
        """A one-shot's ``run_at`` in the past is a field error unless ``run_now`` is ticked
        (:func:`..models.validation.past_run_at_errors`, by the database clock, read only
        when the form writes a one-shot's ``run_at``); the checkbox is shown with it."""
        row, original = self.instance, self._original
        if row.kind != Kind.ONCE or row.run_at is None or self.has_error("run_at"):
            return
        before = (original.kind, original.run_at) if original is not None else None
        if before == (Kind.ONCE, row.run_at):
            return
        errors = past_run_at_errors(
            row.run_at,
            db_now(),
            kind=row.kind,
            run_now=bool(self.cleaned_data.get("run_now")),
            before=before,
            remedy='tick "Run at once" below',
        )
        if errors:
            self.prepared = None
            self.fields["run_now"].widget = forms.CheckboxInput()
            self.add_error("run_at", errors["run_at"])
        elif self.cleaned_data.get("run_now"):
            self.fields["run_now"].widget = forms.CheckboxInput()

    def definition(self, exclude: Iterable[str] = ()) -> dict[str, Any]:
        """The editable fields the form sets (for an edit, those it changed), as
        ``state.create_schedule``/``update_schedule`` take them."""
        editable = [
            f
            for f in self.fields
            if f in state.EDITABLE_FIELDS and f not in exclude and not self.has_error(f)
        ]
        if self._original is not None:
            editable = [f for f in self.changed_data if f in editable and self._posted(f)]

        def value(f: str) -> Any:  # a many-to-many field is the form's, not the row's
            if f in ("exclusion_calendars", "blackout_windows", *DECLARED_RELATIONS):
                return list(self.cleaned_data[f])
            return getattr(self.instance, f)

        return {f: value(f) for f in editable}

    def clean(self) -> dict[str, Any]:
        """The model's checks (run after this) see the calendars chosen on the form."""
        data = super().clean()
        calendars = data.get("exclusion_calendars")
        if calendars is not None and "exclusion_calendars" in self.fields:
            if self.cleaned_data.get("kind"):
                self.instance.kind = self.cleaned_data["kind"]
            try:
                state.calendars.attach_calendars(self.instance, list(calendars))
            except ValidationError as exc:
                self.add_error("exclusion_calendars", exc.message_dict["exclusion_calendars"])
        return data


# The declared relations in their group's place (a model form puts its declared fields
# last): the form's fields are the editable ones in group order, then its own.
ScheduleForm.base_fields = {
    name: ScheduleForm.base_fields[name] for name in (*EDITABLE_ORDER, *FORM_ONLY)
}
