"""Further specs (``Schedule.extra_specs``) through the API, the model and the admin form:
the union planned and listed, a bad item a 400 naming the field, an edit re-planned."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient

from django_durable_schedules import timing
from django_durable_schedules.admin.forms import KIND_HIDES, ScheduleForm
from django_durable_schedules.models import Schedule

pytestmark = pytest.mark.django_db

WORKDAYS = "0 9 * * 1-5"
FIRSTS = "FREQ=MONTHLY;BYMONTHDAY=1;BYHOUR=9;BYMINUTE=0"


def url(name, *args, **query):
    path = reverse(f"durable_schedules_api:{name}", args=args)
    if query:
        path += "?" + "&".join(f"{k}={v}" for k, v in query.items())
    return path


@pytest.fixture
def api(django_user_model):
    client = APIClient()
    client.force_authenticate(django_user_model.objects.create_user("staff", is_staff=True))
    return client


def create(api, **fields):
    body = {
        "name": "job",
        "callback": "tests.noop",
        "kind": "cron",
        "cron": WORKDAYS,
        "timezone": "Europe/Paris",
        "start_at": "2026-01-01T00:00:00Z",
    }
    body.update(fields)
    return api.post(url("schedule-list"), body, format="json")


def test_create_with_extra_specs_lists_the_union(api):
    response = create(api, extra_specs=[FIRSTS])
    assert response.status_code == 201, response.json()
    data = response.json()
    assert data["extra_specs"] == [FIRSTS]
    assert " and rrule 'FREQ=MONTHLY" in data["description"]
    # Hand-checked (tests/test_extra_specs.py): weekdays 09:00 CEST = 07:00 UTC, and the
    # rule's Saturday 08-01.
    upcoming = api.get(
        url("schedule-upcoming", data["id"], count=5, after="2026-07-30T00:00:00Z")
    ).json()
    assert [item["utc"] for item in upcoming["upcoming"]] == [
        "2026-07-30T07:00:00Z",
        "2026-07-31T07:00:00Z",
        "2026-08-01T07:00:00Z",
        "2026-08-03T07:00:00Z",
        "2026-08-04T07:00:00Z",
    ]
    row = Schedule.objects.get(pk=data["id"])
    assert row.extra_specs == [FIRSTS]
    assert row.next_run_at == timing.next_slot_after(row.spec(), row.created_at)
    assert api.get(url("schedule-detail", data["id"])).json()["extra_specs"] == [FIRSTS]


def test_a_bad_item_is_a_400_naming_the_field(api):
    response = create(api, extra_specs=["0 10 * * *", "61 * * * *"])
    assert response.status_code == 400
    errors = response.json()
    assert list(errors) == ["extra_specs"] and errors["extra_specs"][0].startswith("item 2: ")
    for body, words in (
        ({"extra_specs": ["0 10 * * *"] * 2}, "item 2: repeats item 1"),
        ({"extra_specs": [f"0 {h} * * *" for h in range(11)]}, "at most 10"),
        (
            {"kind": "interval", "cron": "", "interval_seconds": 60, "extra_specs": ["0 9 * * *"]},
            "does not take extra_specs",
        ),
    ):
        response = create(api, **body)
        assert response.status_code == 400, body
        assert words in response.json()["extra_specs"][0]
    response = create(api, extra_specs="0 9 * * *")  # not a list
    assert response.status_code == 400 and "extra_specs" in response.json()
    # An item the field itself refuses (a NUL, too long): a flat list of messages naming the
    # item, the shape the schema gives every field's errors (CI's schemathesis run found
    # DRF's {"3": [...]} here).
    response = create(api, extra_specs=["0 9 * * *", "0 1\x00 * * *", "x" * 501])
    assert response.status_code == 400
    assert response.json() == {
        "extra_specs": [
            "item 2: Null characters are not allowed.",
            "item 3: Ensure this field has no more than 500 characters.",
        ]
    }
    assert not Schedule.objects.exists()


def test_patching_extra_specs_is_an_edit(api):
    data = create(api).json()
    row = Schedule.objects.get(pk=data["id"])
    before = row.definition_hash
    response = api.patch(
        url("schedule-detail", data["id"]), {"extra_specs": [FIRSTS]}, format="json"
    )
    assert response.status_code == 200, response.json()
    row.refresh_from_db()
    assert row.definition_hash != before and row.extra_specs == [FIRSTS]
    # Back to none: the fingerprint of a schedule that never had any.
    api.patch(url("schedule-detail", data["id"]), {"extra_specs": []}, format="json")
    row.refresh_from_db()
    assert row.definition_hash == before


def test_an_update_behind_save_is_seen_as_an_edit():
    row = Schedule(
        name="job", callback="tests.noop", kind="cron", cron=WORKDAYS, timezone="Europe/Paris"
    )
    row.full_clean()
    row.save()
    Schedule.objects.filter(pk=row.pk).update(extra_specs=[FIRSTS])
    fresh = Schedule.objects.get(pk=row.pk)
    assert fresh.definition_hash == row.definition_hash  # the trigger leaves the hash
    assert fresh.compute_definition_hash() != fresh.definition_hash  # the claim re-plans
    # The edit trigger saw the column change: due now (the database clock), to be re-planned.
    assert fresh.next_run_at != row.next_run_at
    assert fresh.next_run_at <= datetime.now(UTC) + timedelta(seconds=2)


@pytest.mark.vendor_independent  # validation of an unsaved row
def test_model_clean_names_the_field():
    row = Schedule(
        name="job",
        callback="tests.noop",
        kind="cron",
        cron=WORKDAYS,
        timezone="UTC",
        extra_specs=["0 10 * * *", "FREQ=SOMETIMES"],
    )
    with pytest.raises(ValidationError) as caught:
        row.full_clean()
    assert caught.value.message_dict["extra_specs"][0].startswith("item 2: ")


@pytest.mark.vendor_independent  # the form's parsing, unsaved
def test_the_admin_form_takes_one_spec_a_line():
    form = ScheduleForm(
        data={
            "name": "job",
            "callback": "tests.noop",
            "kind": "cron",
            "cron": WORKDAYS,
            "extra_specs": f"\n  {FIRSTS}  \n\n30 17 * * 5\n",
            "timezone": "Europe/Paris",
            "misfire_policy": "coalesce",
            "overlap_policy": "skip",
            "max_attempts": 1,
            "payload": "{}",
            "metadata": "{}",
        }
    )
    form.is_valid()
    assert form.cleaned_data.get("extra_specs") == [FIRSTS, "30 17 * * 5"]
    assert "extra_specs" not in form.errors, form.errors
    shown = ScheduleForm(instance=Schedule(extra_specs=[FIRSTS, "30 17 * * 5"]))
    assert shown["extra_specs"].value() == f"{FIRSTS}\n30 17 * * 5"
    assert "<textarea" in str(shown["extra_specs"])
    for kind, hides in KIND_HIDES.items():
        assert ("extra_specs" in hides) == (kind not in timing.EXTRA_KINDS)


@pytest.mark.vendor_independent  # validation message
def test_a_bad_item_is_a_form_error():
    form = ScheduleForm(
        data={
            "name": "job",
            "callback": "tests.noop",
            "kind": "cron",
            "cron": WORKDAYS,
            "extra_specs": "0 10 * * *\n99 * * * *",
            "timezone": "UTC",
        }
    )
    assert not form.is_valid()
    assert form.errors["extra_specs"][0].startswith("item 2: ")


@pytest.mark.vendor_independent  # words of an unsaved row
def test_words_name_the_union_for_the_model():
    row = Schedule(
        kind="cron",
        cron=WORKDAYS,
        timezone="UTC",
        extra_specs=[FIRSTS],
        start_at=datetime(2026, 1, 1, tzinfo=UTC),
    )
    assert timing.describe(row.spec(exclusions=False)) == (
        f"cron '{WORKDAYS}' and rrule '{FIRSTS}' (UTC)"
    )


UNION_WORDS = "At 09:00, Monday through Friday; on day 1 of every month at 09:00"


def test_the_words_of_every_surface_name_the_union(api, admin_client):
    """The API's cron_description, the admin's list and the ``schedules show`` command say
    every spec in words, the main one first."""
    data = create(api, extra_specs=[FIRSTS, "30 17 * * 5"]).json()
    union = f"{UNION_WORDS}; At 17:30, only on Friday"
    assert data["cron_description"] == union
    assert data["rrule_description"] is None
    page = admin_client.get(reverse("admin:durable_schedules_schedule_changelist"))
    assert union in page.content.decode()
    out = StringIO()
    call_command("schedules", "upcoming", "job", "--count", "1", stdout=out)
    assert union in out.getvalue()
    rule = create(api, name="rule", kind="rrule", cron="", rrule=FIRSTS, extra_specs=[WORKDAYS])
    assert rule.status_code == 201, rule.json()
    assert rule.json()["rrule_description"] == (
        "on day 1 of every month at 09:00; At 09:00, Monday through Friday"
    )
    assert rule.json()["cron_description"] is None


def test_words_without_the_union_are_the_main_specs_and_a_bad_list_has_none(api):
    data = create(api).json()
    assert data["cron_description"] == "At 09:00, Monday through Friday"
    Schedule.objects.filter(pk=data["id"]).update(extra_specs="not a list")  # behind save()
    again = api.get(url("schedule-detail", data["id"]))
    assert again.status_code == 200 and again.json()["cron_description"] is None


@pytest.fixture
def cleanup_registry():
    from django_durable_schedules.registry import registry

    before = set(registry.names())
    yield
    for name in set(registry.names()) - before:
        registry.remove(name)


def test_register_declares_extra_specs(cleanup_registry):
    from django_durable_schedules import register, state

    register("t.union", lambda ctx: None, cron=WORKDAYS, extra_specs=[FIRSTS], timezone="UTC")
    state.sync_declared()
    row = Schedule.objects.get(name="t.union")
    assert (row.kind, row.extra_specs) == ("cron", [FIRSTS])
    register("t.union", lambda ctx: None, cron=WORKDAYS, timezone="UTC")  # dropped: synced
    state.sync_declared()
    row.refresh_from_db()
    assert row.extra_specs == []


@pytest.mark.vendor_independent  # registry argument checks
def test_register_refuses_extra_specs_it_cannot_use():
    from django_durable_schedules import register

    with pytest.raises(TypeError):
        register("t.bad", lambda ctx: None, cron=WORKDAYS, extra_specs="0 9 * * *")
    with pytest.raises(ValueError, match="needs cron= or rrule="):
        register("t.bad", lambda ctx: None, every=60, extra_specs=["0 9 * * *"])
    # Arguments that cannot go together: ValueError, as every clash of register()'s.
    with pytest.raises(ValueError, match="extra_specs"):
        register("t.bad", lambda ctx: None, manual=True, extra_specs=["0 9 * * *"])
