"""A jitter written behind ``save()`` (issue 24, item 6): the engine uses
``jitter_seconds`` clamped to ``limits.JITTER_MAX_SECONDS`` (one day), so a value that
would delay a schedule by decades delays it by at most a day; ``Schedule.clean()`` and
``save()`` refuse a larger one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from unittest import mock

import pytest
from django.core.exceptions import ValidationError

from django_durable_schedules import state
from django_durable_schedules.limits import JITTER_MAX_SECONDS
from django_durable_schedules.models import Schedule
from django_durable_schedules.worker.execution.runner import execute

from .test_totality_properties import write_behind_save

DECADES = 2_000_000_000  # about 63 years; a PositiveIntegerField holds it on every database


def z(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def at(instant: datetime):
    return mock.patch("django_durable_schedules.db.clock.db_now", return_value=instant)


@pytest.mark.parametrize("value", [DECADES, 2**63, -5, 1.5e12, "3600", None, True])
def test_the_jitter_used_is_within_a_day_whatever_the_field_holds(value):
    row = Schedule(name="j", callback="tests.noop", kind="interval", interval_seconds=60)
    row.jitter_seconds = value
    assert 0 <= row.jitter_bound() <= JITTER_MAX_SECONDS
    slot = z(2027, 6, 1)
    assert slot <= row.due_at(slot) <= slot + timedelta(seconds=JITTER_MAX_SECONDS)


def test_save_refuses_a_jitter_over_a_day_with_a_field_message():
    row = Schedule(
        name="j",
        callback="tests.noop",
        kind="interval",
        interval_seconds=10 * 86400,
        jitter_seconds=JITTER_MAX_SECONDS + 1,
    )
    with pytest.raises(ValidationError) as raised:
        row.save()
    assert "jitter_seconds" in raised.value.message_dict


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("via", ["update", "sql"])
@pytest.mark.parametrize("rehash", [True, False])
def test_a_jitter_of_decades_written_behind_save_delays_a_slot_by_at_most_a_day(via, rehash):
    with at(z(2027, 6, 1)):
        row = Schedule(name="hourly", callback="tests.noop", kind="interval", interval_seconds=3600)
        row.full_clean()
        row.save()
    assert write_behind_save(row, "jitter_seconds", DECADES, via=via, rehash=rehash)
    now = z(2027, 6, 1, 0, 0, 5)
    claims = state.claim_due(worker="w", now=now)
    row.refresh_from_db()
    assert row.next_run_at is not None
    assert row.next_run_at <= now + timedelta(hours=1, seconds=JITTER_MAX_SECONDS)
    if claims:  # the claim ran it: the next slot is jittered by at most a day
        [claim] = claims
        assert claim.schedule_name == "hourly"
        # Its completion plans the next slot with the same bound.
        state.complete([execute(claim)], now=now + timedelta(seconds=1))
        row.refresh_from_db()
        assert row.next_run_at <= now + timedelta(hours=1, seconds=JITTER_MAX_SECONDS)
    # And a later claim finds its slot: the look-back for a jittered slot is bounded too.
    later = row.next_run_at + timedelta(seconds=1)
    [claim] = state.claim_due(worker="w", now=later)
    assert claim.scheduled_for <= later
