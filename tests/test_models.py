"""Model validation, normalisation and database constraints."""

from datetime import UTC, datetime, timedelta

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from django_durable_schedules.models import RunReceipt, Schedule

from .factories import T0, AttemptFactory, ScheduleFactory

pytestmark = pytest.mark.django_db


def test_create_directly_is_due_at_once_and_whole_seconds():
    s = Schedule.objects.create(
        name="direct", callback="tests.noop", kind="interval", interval_seconds=60
    )
    assert s.next_run_at is not None and s.next_run_at.microsecond == 0
    assert s.next_run_at <= datetime.now(UTC)
    assert s.definition_hash == s.compute_definition_hash()


@pytest.mark.vendor_independent  # validation of an unsaved row
def test_naive_run_at_is_rejected_b10c():
    s = Schedule(
        name="naive", callback="tests.noop", kind="once", run_at=datetime(2027, 6, 1, 9, 0)
    )
    with pytest.raises(ValidationError) as exc:
        s.full_clean()
    assert "aware datetime" in str(exc.value.message_dict["run_at"])


@pytest.mark.vendor_independent  # validation of an unsaved row
def test_unknown_callback_and_bad_name_are_field_errors():
    s = Schedule(name="-bad name", callback="not.registered", kind="interval", interval_seconds=60)
    with pytest.raises(ValidationError) as exc:
        s.full_clean()
    assert set(exc.value.message_dict) >= {"name", "callback"}


@pytest.mark.vendor_independent  # validation of an unsaved row
@pytest.mark.parametrize("seconds", [0, -5, 10**10 * 86400])
def test_interval_out_of_range_is_rejected_b30(seconds):
    s = Schedule(name="x", callback="tests.noop", kind="interval", interval_seconds=seconds)
    with pytest.raises(ValidationError):
        s.full_clean()


@pytest.mark.vendor_independent  # validation of an unsaved row
def test_timezone_defaults_to_settings_and_unknown_zone_is_rejected(settings):
    settings.TIME_ZONE = "Asia/Jakarta"
    s = Schedule(name="tz", callback="tests.noop", kind="cron", cron="25 8-16 * * *")
    s.full_clean()
    assert s.timezone == "Asia/Jakarta"
    bad = Schedule(
        name="tz2",
        callback="tests.noop",
        kind="cron",
        cron="0 * * * *",
        timezone="America/New_Yrok",
    )
    with pytest.raises(ValidationError) as exc:
        bad.full_clean()
    assert "timezone" in exc.value.message_dict


@pytest.mark.vendor_independent  # slot arithmetic of an unsaved row
def test_upcoming_works_on_an_unsaved_instance():
    s = Schedule(
        name="u", callback="tests.noop", kind="cron", cron="0 3 * * *", timezone="Europe/Paris"
    )
    assert s.upcoming(2, after=T0) == [
        datetime(2027, 6, 2, 1, 0, tzinfo=UTC),
        datetime(2027, 6, 3, 1, 0, tzinfo=UTC),
    ]


def test_lease_fields_are_paired_by_a_constraint():
    s = ScheduleFactory()
    with pytest.raises(IntegrityError), transaction.atomic():
        Schedule.objects.filter(pk=s.pk).update(lease_expires_at=T0)


def test_one_success_per_occurrence_and_one_receipt_per_attempt():
    a1 = AttemptFactory(occurrence=1, attempt=1)
    a2 = AttemptFactory(schedule=a1.schedule, occurrence=1, attempt=2)
    common = {"schedule": a1.schedule, "occurrence": 1, "status": "succeeded", "finished_at": T0}
    RunReceipt.objects.create(attempt=a1, succeeded_occurrence=1, **common)
    with pytest.raises(IntegrityError), transaction.atomic():
        RunReceipt.objects.create(attempt=a2, succeeded_occurrence=1, **common)
    with pytest.raises(IntegrityError), transaction.atomic():
        RunReceipt.objects.create(attempt=a1, **{**common, "status": "failed"})
    with pytest.raises(IntegrityError), transaction.atomic():
        AttemptFactory(schedule=a1.schedule, occurrence=1, attempt=2)


@pytest.mark.vendor_independent  # validation of an unsaved row
def test_end_before_start_is_rejected():
    s = Schedule(
        name="w",
        callback="tests.noop",
        kind="interval",
        interval_seconds=60,
        start_at=T0,
        end_at=T0 - timedelta(hours=1),
    )
    with pytest.raises(ValidationError):
        s.full_clean()


def test_interval_built_before_a_slow_save_is_still_due_at_once_r4():
    # created_at is set when the instance is built; a save seconds later (a slow form, a
    # busy host) must not push the first run one interval late.
    built = datetime.now(UTC) - timedelta(seconds=3, microseconds=250000)
    s = Schedule(
        name="slow-save",
        callback="tests.noop",
        kind="interval",
        interval_seconds=3600,
        created_at=built,
    )
    s.save()
    assert s.next_run_at == built.replace(microsecond=0)
    assert s.upcoming(1, after=built) == [built.replace(microsecond=0) + timedelta(hours=1)]


@pytest.mark.parametrize(
    "kw",
    [
        {"kind": "rrule", "rrule": "FREQ=DAILY"},
        {"kind": "cron", "cron": "0 * * * *"},
        {"kind": "interval", "interval_seconds": 60},
    ],
    ids=["rrule", "cron", "interval"],
)
def test_an_active_schedule_whose_end_at_is_past_is_saved_completed_not_active_forever(kw):
    past = datetime(2026, 1, 1, tzinfo=UTC)
    s = Schedule(name="ended", callback="tests.noop", timezone="UTC", end_at=past, **kw)
    s.full_clean()
    s.save()
    s.refresh_from_db()
    assert (s.status, s.next_run_at) == ("completed", None)
    later = Schedule(name="later", callback="tests.noop", timezone="UTC", **kw)
    later.save()
    later.end_at = past  # an edit that leaves no slot
    later.save(update_fields=["end_at"])
    later.refresh_from_db()
    assert (later.status, later.next_run_at) == ("completed", None)
