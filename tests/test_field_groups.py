"""The editable fields of a schedule are declared once, in groups, in ``models.choices``; the
admin's form and fieldsets, the API's writable fields and ``state.EDITABLE_FIELDS`` agree
with them, so a field added in one place and not the others fails here."""

from __future__ import annotations

from django.contrib import admin
from django.test import RequestFactory

from django_durable_schedules import state
from django_durable_schedules.admin.forms import (
    DEFINITION_LAYOUT,
    FORM_ONLY,
    LINKS_LAYOUT,
    ScheduleForm,
)
from django_durable_schedules.api.serializers import WRITABLE_ORDER, ScheduleSerializer
from django_durable_schedules.models import Schedule, choices

GROUPS = (
    choices.IDENTITY_FIELDS,
    choices.TIMING_FIELDS,
    choices.INPUT_FIELDS,
    choices.POLICY_FIELDS,
)
#: Fields only the API takes (write-only, not stored as themselves).
API_ONLY = {"run_in_seconds", "run_now"}


def _flat(layout):
    for item in layout:
        if isinstance(item, (tuple, list)):
            yield from item
        else:
            yield item


def test_the_groups_are_disjoint_and_their_union_is_the_editable_fields():
    names = [f for group in GROUPS for f in group]
    assert len(names) == len(set(names))
    assert choices.EDITABLE_ORDER == tuple(names)
    assert choices.EDITABLE_FIELDS == frozenset(names)


def test_every_editable_field_is_a_field_of_the_schedule_and_the_definition_is_editable():
    model_fields = {f.name for f in Schedule._meta.get_fields()}
    assert choices.EDITABLE_FIELDS <= model_fields
    assert set(choices.DEFINITION_FIELDS) <= set(choices.TIMING_FIELDS)


def test_the_definition_fields_keep_the_fingerprints_order():
    # Schedule.definition_hash hashes them in this order, and every row stores its hash.
    assert choices.DEFINITION_FIELDS == (
        "kind",
        "interval_seconds",
        "cron",
        "timezone",
        "run_at",
        "start_at",
        "end_at",
        "rrule",
        "extra_specs",  # left out of the hash when empty (older rows keep theirs)
        # Added last; left out of the hash at their defaults (skip, False): older rows keep
        # theirs.
        "exclusion_policy",
        "rrule_business_days",
    )


def test_the_state_packages_editable_fields_are_the_groups():
    assert state.EDITABLE_FIELDS == choices.EDITABLE_FIELDS
    assert state.candidates.EDITABLE_FIELDS is choices.EDITABLE_FIELDS


def test_the_admin_form_edits_exactly_the_editable_fields_in_group_order():
    # ... then the form's own fields, which are no column (run_now).
    assert tuple(ScheduleForm.base_fields) == (*choices.EDITABLE_ORDER, *FORM_ONLY)


def test_the_admin_fieldsets_show_each_group_and_nothing_editable_read_only():
    model_admin = admin.site._registry[Schedule]
    request = RequestFactory().get("/")
    add = model_admin.get_fieldsets(request, None)
    names = [name for name, _ in add]
    assert names == ["Definition", "Calendars and windows", "Input and owner", "Policies"]
    definition, links, inputs, policies = (tuple(_flat(opts["fields"])) for _, opts in add)
    assert len(definition + links) == len(set(definition + links))
    timing = {*choices.IDENTITY_FIELDS, *choices.TIMING_FIELDS, *FORM_ONLY}
    assert set(definition + links) == timing
    assert tuple(_flat(DEFINITION_LAYOUT)) == definition and links == LINKS_LAYOUT
    assert inputs == choices.INPUT_FIELDS
    assert policies == choices.POLICY_FIELDS
    read_only = set(model_admin.get_readonly_fields(request, None))
    assert not read_only & choices.EDITABLE_FIELDS


def test_the_api_writes_exactly_the_editable_fields():
    assert len(WRITABLE_ORDER) == len(set(WRITABLE_ORDER))
    assert set(WRITABLE_ORDER) - API_ONLY == choices.EDITABLE_FIELDS
    fields = ScheduleSerializer().fields
    writable = {name for name, field in fields.items() if not field.read_only}
    assert writable - API_ONLY == choices.EDITABLE_FIELDS
    # Its order: id, the writable fields, then the run state (read-only).
    assert list(ScheduleSerializer.Meta.fields[: len(WRITABLE_ORDER) + 1]) == [
        "id",
        *WRITABLE_ORDER,
    ]
    assert not set(ScheduleSerializer.Meta.read_only_fields) & choices.EDITABLE_FIELDS


def test_the_edit_triggers_watch_the_definition_fields():
    """``db.edits`` keeps its own copy of the definition's columns (the migrations import
    it, and a migration must not change with the models); the copy is the model's list, so
    a definition field added to the model and not to the edit triggers fails here."""
    from django_durable_schedules.db.edits import DEFINITION_COLUMNS

    assert DEFINITION_COLUMNS == choices.DEFINITION_FIELDS
