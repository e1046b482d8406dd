"""Calendar-rule schedules (kind ``rrule``) through the database: planning on save, the
claim/complete loop across DST days (instants derived by hand from RFC 5545 §3.3.5), a real
worker run, catch-up and jitter like cron, edits behind ``save()`` (the rule is part of the
definition), a rule that cannot be evaluated written behind ``save()``, the model's field
messages, the API (400 field messages, OpenAPI schema), the admin and the CLI."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from io import StringIO
from unittest import mock
from zoneinfo import ZoneInfo

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient

from django_durable_schedules import state, timing
from django_durable_schedules.health import snapshot
from django_durable_schedules.models import RunReceipt, Schedule
from django_durable_schedules.worker import Worker, WorkerOptions
from django_durable_schedules.worker.execution.runner import execute

pytestmark = pytest.mark.django_db(transaction=True)

S = timedelta(seconds=1)
LAST_BUSINESS_DAY = "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1"
SECOND_TUESDAY = "FREQ=WEEKLY;INTERVAL=2;BYDAY=TU;BYHOUR=9;BYMINUTE=0"


def z(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def make(name: str, rule: str, zone: str = "UTC", **kw) -> Schedule:
    kw.setdefault("callback", "tests.noop")
    row = Schedule(name=name, kind="rrule", rrule=rule, timezone=zone, **kw)
    row.full_clean()
    row.save()
    return row


def at(instant: datetime):
    """Stand the database clock still at ``instant`` (as the tests of save() do)."""
    return mock.patch("django_durable_schedules.db.clock.db_now", return_value=instant)


def run_all(now: datetime) -> list[datetime]:
    """One claim and completion pass at ``now``: the slots it ran."""
    claims = state.claim_due(worker="w", now=now, lease_seconds=120)
    state.complete([execute(c) for c in claims], now=now + S)
    return [c.scheduled_for for c in claims]


def test_save_plans_the_first_slot_and_upcoming_follows_the_rule():
    with at(z(2027, 3, 13, 12)):
        row = make("nightly", "FREQ=DAILY;BYHOUR=2;BYMINUTE=30", "America/New_York")
    assert row.created_at == z(2027, 3, 13, 12)
    assert row.next_run_at == z(2027, 3, 14, 7, 30)  # 02:30 in the gap: 03:30 EDT
    assert row.upcoming(2, after=z(2027, 3, 14, 7, 30)) == [
        z(2027, 3, 15, 6, 30),
        z(2027, 3, 16, 6, 30),
    ]


def test_the_claim_loop_runs_every_slot_across_both_dst_changes_in_new_york():
    with at(z(2027, 3, 12, 12)):
        make("spring", "FREQ=DAILY;BYHOUR=2;BYMINUTE=30", "America/New_York")
    with at(z(2027, 11, 5, 12)):
        make("fall", "FREQ=DAILY;BYHOUR=1;BYMINUTE=30", "America/New_York")
    ran: dict[str, list[datetime]] = {"spring": [], "fall": []}
    for name, start, days in (("spring", z(2027, 3, 12, 12), 4), ("fall", z(2027, 11, 5, 12), 4)):
        now = start
        for _ in range(days):
            now = Schedule.objects.get(name=name).next_run_at
            claims = state.claim_due(worker="w", now=now, lease_seconds=120)
            state.complete([execute(c) for c in claims], now=now + S)
            ran[name] += [c.scheduled_for for c in claims if c.schedule_name == name]
    assert ran["spring"] == [
        z(2027, 3, 13, 7, 30),  # 02:30 EST
        z(2027, 3, 14, 7, 30),  # 02:30 does not exist: read with -05, 03:30 EDT
        z(2027, 3, 15, 6, 30),  # 02:30 EDT
        z(2027, 3, 16, 6, 30),
    ]
    assert ran["fall"] == [
        z(2027, 11, 6, 5, 30),  # 01:30 EDT
        z(2027, 11, 7, 5, 30),  # 01:30 twice: the first occurrence only
        z(2027, 11, 8, 6, 30),  # 01:30 EST
        z(2027, 11, 9, 6, 30),
    ]


def test_a_real_worker_runs_an_rrule_schedule_and_moves_it_to_the_next_slot():
    row = make("minutely", "FREQ=MINUTELY;INTERVAL=5", "Europe/Paris")
    due = timing.truncate_to_second(state.db_now())
    Schedule.objects.filter(pk=row.pk).update(next_run_at=due - 10 * S)
    assert Worker(WorkerOptions(worker_id="w-rrule", once=True)).run() == 0
    [receipt] = RunReceipt.objects.filter(schedule=row)
    assert receipt.status == "succeeded" and receipt.attempt.worker == "w-rrule"
    row.refresh_from_db()
    assert row.occurrence == 1 and row.next_run_at > due
    assert row.next_run_at == timing.next_slot_after(row.spec(), due)
    local = row.next_run_at.astimezone(ZoneInfo("Europe/Paris"))
    assert local.minute % 5 == 0 and local.second == 0  # on the grid from local midnight


def test_after_downtime_missed_slots_are_coalesced_into_one_late_run():
    with at(z(2027, 6, 1, 0, 0, 30)):
        row = make("hourly", "FREQ=HOURLY;BYMINUTE=0")
    assert row.next_run_at == z(2027, 6, 1, 1)
    assert run_all(z(2027, 6, 1, 4, 10)) == [z(2027, 6, 1, 4)]  # 01:00, 02:00, 03:00 missed
    row.refresh_from_db()
    assert row.missed_count == 3 and row.next_run_at == z(2027, 6, 1, 5)


def test_jitter_delays_each_slot_by_a_stable_offset_bounded_by_half_the_gap():
    with at(z(2027, 6, 1)):
        row = make("jittered", "FREQ=HOURLY;BYMINUTE=0", jitter_seconds=600)
    slot = z(2027, 6, 1)  # created at a slot: that slot is the first
    assert slot <= row.next_run_at <= slot + 600 * S
    assert row.next_run_at == row.due_at(slot)
    with pytest.raises(ValidationError) as exc:
        Schedule(
            name="x", callback="tests.noop", kind="rrule", rrule="FREQ=HOURLY", jitter_seconds=2000
        ).full_clean()
    assert "jitter_seconds" in exc.value.message_dict


@pytest.mark.vendor_independent  # validation of unsaved rows
def test_the_model_refuses_bad_rules_with_field_messages():
    cases = {
        "FREQ=DAILY;BYFOO=1": "unknown rule part 'BYFOO'",
        "FREQ=MONTHLY;BYMONTHDAY=31;BYMONTH=2": "can never fire",
        "FREQ=DAILY;COUNT=5": "COUNT is not accepted",
        "DTSTART:20270101T000000Z\nRRULE:FREQ=DAILY": "DTSTART and TZID are not accepted",
    }
    for rule, message in cases.items():
        row = Schedule(name="x", callback="tests.noop", kind="rrule", rrule=rule)
        with pytest.raises(ValidationError) as exc:
            row.full_clean()
        assert message in " ".join(exc.value.message_dict["rrule"]), rule
    row = Schedule(name="x", callback="tests.noop", kind="rrule", rrule="")
    with pytest.raises(ValidationError) as exc:
        row.full_clean()
    assert "rrule" in exc.value.message_dict
    row = Schedule(
        name="x",
        callback="tests.noop",
        kind="rrule",
        rrule="FREQ=DAILY;UNTIL=20300101T000000Z",
        end_at=z(2030, 1, 1),
    )
    with pytest.raises(ValidationError, match="not both"):
        row.full_clean()


@pytest.mark.vendor_independent  # a hash of unsaved rows
def test_a_blank_rule_leaves_the_definition_hash_of_existing_rows_unchanged():
    row = Schedule(name="c", callback="tests.noop", kind="cron", cron="0 3 * * *", timezone="UTC")
    old = "|".join(
        f"{f}={getattr(row, f)!s}"
        for f in ("kind", "interval_seconds", "cron", "timezone", "run_at", "start_at", "end_at")
    )
    assert row.compute_definition_hash() == hashlib.sha1(old.encode()).hexdigest()
    ruled = Schedule(name="r", callback="tests.noop", kind="rrule", rrule="FREQ=DAILY")
    other = Schedule(name="r", callback="tests.noop", kind="rrule", rrule="FREQ=WEEKLY")
    assert ruled.compute_definition_hash() != other.compute_definition_hash()


def test_an_edit_of_the_rule_behind_save_replans_without_firing():
    with at(z(2027, 6, 1)):
        row = make("edited", "FREQ=DAILY;BYHOUR=9")
    assert row.next_run_at == z(2027, 6, 1, 9)
    Schedule.objects.filter(pk=row.pk).update(rrule="FREQ=DAILY;BYHOUR=18")
    row.refresh_from_db()
    assert row.definition_hash != row.compute_definition_hash()
    assert row.next_run_at is not None and row.next_run_at <= timing.truncate_to_second(
        state.db_now()
    )
    now = row.next_run_at + S  # the trigger made it due at the database's now: re-planned, no run
    assert state.claim_due(worker="w", now=now) == []
    row.refresh_from_db()
    assert row.next_run_at == timing.next_slot_after(row.spec(), now)
    assert row.next_run_at.hour == 18 and not RunReceipt.objects.exists()


def test_a_rule_broken_behind_save_degrades_that_schedule_only():
    with at(z(2027, 6, 1)):
        make("good", "FREQ=HOURLY;BYMINUTE=0")
        bad = make("bad", "FREQ=HOURLY;BYMINUTE=0")
    Schedule.objects.filter(pk=bad.pk).update(rrule="FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30")
    bad.refresh_from_db()
    Schedule.objects.filter(pk=bad.pk).update(
        definition_hash=bad.compute_definition_hash(), next_run_at=z(2027, 6, 1, 1)
    )
    claims = state.claim_due(worker="w", now=z(2027, 6, 1, 1, 0, 5))
    assert [c.schedule_name for c in claims] == ["good"]
    bad.refresh_from_db()
    assert bad.status == "paused" and "rrule: can never fire" in bad.degraded_reason
    [receipt] = RunReceipt.objects.filter(schedule=bad)
    assert receipt.status == "degraded" and "rrule" in receipt.error_message
    assert snapshot().degraded == 1


def test_the_api_creates_describes_and_refuses_rules():
    from django.contrib.auth import get_user_model

    client = APIClient()
    client.force_authenticate(get_user_model().objects.create_user("staff", is_staff=True))
    listing = reverse("durable_schedules_api:schedule-list")
    body = {
        "name": "month-end",
        "callback": "tests.noop",
        "kind": "rrule",
        "rrule": LAST_BUSINESS_DAY + ";BYHOUR=18;BYMINUTE=0",
        "timezone": "Europe/Paris",
    }
    answer = client.post(listing, body, format="json")
    assert answer.status_code == 201, answer.json()
    data = answer.json()
    assert data["rrule"] == body["rrule"] and data["cron_description"] is None
    assert data["rrule_description"] == (
        "on the last weekday (Monday to Friday) of every month at 18:00"
    )
    upcoming = client.get(
        reverse("durable_schedules_api:schedule-upcoming", args=[data["id"]]),
        {"count": 3, "after": "2027-01-02T00:00:00Z"},
    )
    assert [t["utc"] for t in upcoming.json()["upcoming"]] == [
        "2027-01-29T17:00:00Z",
        "2027-02-26T17:00:00Z",
        "2027-03-31T16:00:00Z",
    ]
    bad = client.post(
        listing, {**body, "name": "bad", "rrule": "FREQ=DAILY;BYHOUR=24"}, format="json"
    )
    assert bad.status_code == 400
    assert bad.json()["rrule"] == ["BYHOUR: '24' is out of range 0 to 23"]
    never = client.post(
        listing,
        {**body, "name": "never", "rrule": "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=31"},
        format="json",
    )
    assert never.status_code == 400 and "can never fire" in never.json()["rrule"][0]
    edge = client.post(
        listing,
        {**body, "name": "edge", "rrule": "FREQ=DAILY;UNTIL=99991231T235959Z"},
        format="json",
    )  # was a 500: the UNTIL read in Paris overflowed the calendar
    assert edge.status_code == 400 and "outside the years 1000 to 9000" in edge.json()["rrule"][0]


@pytest.mark.vendor_independent  # the OpenAPI document
def test_the_openapi_schema_documents_the_rule_field():
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator(patterns=None).get_schema(request=None, public=True)
    props = schema["components"]["schemas"]["Schedule"]["properties"]
    assert "RFC 5545" in props["rrule"]["description"]
    assert props["rrule_description"]["readOnly"] is True
    assert "rrule" in schema["components"]["schemas"]["KindEnum"]["enum"]


def test_the_admin_form_words_and_field_errors(admin_client):
    with at(z(2027, 6, 1)):
        row = make("fortnight", SECOND_TUESDAY, "Europe/Paris")
    page = admin_client.get(reverse("admin:durable_schedules_schedule_change", args=[row.pk]))
    html = page.content.decode()
    assert 'id="id_rrule_words" aria-live="polite">every 2 weeks on Tuesday at 09:00</p>' in html
    describe = reverse("admin:durable_schedules_schedule_describe_rrule")
    assert f'data-words-url="{describe}"' in html
    answer = admin_client.get(describe, {"rrule": "FREQ=DAILY;BYHOUR=7;BYMINUTE=0"}).json()
    assert answer == {"words": "every day at 07:00", "error": ""}
    answer = admin_client.get(describe, {"rrule": "FREQ=DAILY;BYFOO=1"}).json()
    assert answer["words"] == "" and "BYFOO" in answer["error"]
    add = admin_client.post(
        reverse("admin:durable_schedules_schedule_add"),
        {
            "name": "bad",
            "callback": "tests.noop",
            "kind": "rrule",
            "timezone": "UTC",
            "rrule": "FREQ=MONTHLY;BYMONTHDAY=30;BYMONTH=2",
            "payload": "{}",
            "metadata": "{}",
            "misfire_policy": "coalesce",
        },
    )
    assert add.status_code == 200
    assert "can never fire" in str(add.context["adminform"].form.errors["rrule"])
    listing = admin_client.get(reverse("admin:durable_schedules_schedule_changelist"))
    assert "every 2 weeks on Tuesday at 09:00" in listing.content.decode()


def test_the_cli_lists_and_shows_upcoming_in_words():
    with at(z(2027, 6, 1)):
        make("fortnight", SECOND_TUESDAY, "Europe/Paris", start_at=z(2027, 6, 1))
    out = StringIO()
    call_command("schedules", "upcoming", "fortnight", "--count", "2", stdout=out)
    text = out.getvalue()
    assert f"rrule '{SECOND_TUESDAY}' (Europe/Paris): every 2 weeks on Tuesday at 09:00" in text
    out = StringIO()
    call_command("schedules", "list", stdout=out)
    assert "rrule 'FREQ=WEEKLY" in out.getvalue()


def test_a_rule_declared_in_code_is_created_and_switching_kind_clears_it():
    from django_durable_schedules import register
    from django_durable_schedules.registry import registry

    try:
        register("t.rule", lambda ctx: None, rrule=SECOND_TUESDAY, timezone="Europe/Paris")
        state.sync_declared()
        row = Schedule.objects.get(name="t.rule")
        assert (row.kind, row.rrule, row.timezone) == ("rrule", SECOND_TUESDAY, "Europe/Paris")
        register("t.rule", lambda ctx: None, cron="0 9 * * 2", timezone="Europe/Paris")
        state.sync_declared()
        row.refresh_from_db()
        assert (row.kind, row.cron, row.rrule) == ("cron", "0 9 * * 2", "")
        with pytest.raises(ValueError, match="at most one of"):
            register("t.two", lambda ctx: None, every=60, rrule="FREQ=DAILY")
    finally:
        registry.remove("t.rule")
