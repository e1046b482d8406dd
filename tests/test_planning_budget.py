"""The planning budget of calendar rules (issue 24, item 5): a valid-looking rule whose
expansion by python-dateutil would take minutes (``FREQ=SECONDLY`` stepping through every
second of 28 years of days) is a field error on ``rrule`` at save and a ``degraded``
schedule at the claim, never a stalled request or worker. The budget is counted
(``limits.RRULE_PLAN_MAX_STEPS``), not timed: these tests assert what is refused, never how
fast."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from unittest import mock

import pytest
from django.core.exceptions import ValidationError
from django.test import override_settings
from hypothesis import given, note
from hypothesis import strategies as st
from rest_framework.test import APIClient

from django_durable_schedules import state, timing
from django_durable_schedules.health import snapshot
from django_durable_schedules.limits import RRULE_PLAN_MAX_STEPS
from django_durable_schedules.models import RunReceipt, Schedule
from django_durable_schedules.timing.rrule import cached_rule_plan

from .test_rrule_totality import rules
from .test_totality_properties import PROFILE, write_behind_save

#: The tester's rule (issue 24): a Monday 29 February at 23:59:59, stepped second by second.
TESTERS_RULE = "FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO;BYHOUR=23;BYMINUTE=59;BYSECOND=59"
#: The same kind of rule a minute at a time (1,440 steps a day for 28 years).
MINUTELY_RULE = "FREQ=MINUTELY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO;BYHOUR=23;BYMINUTE=59"
OVER = "planning the rule took more than"


def z(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


def at(instant: datetime):
    return mock.patch("django_durable_schedules.db.clock.db_now", return_value=instant)


# ---------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("rule", [TESTERS_RULE, MINUTELY_RULE, "RRULE:" + TESTERS_RULE.lower()])
@pytest.mark.parametrize(
    "dtstart",
    [
        datetime(2025, 1, 1),  # 19 years to the first Monday 29 February
        datetime(2044, 2, 20),  # the first one is near: the next is 28 years later
        datetime(2044, 2, 29, 23, 59, 59),  # DTSTART is an occurrence
        datetime(2072, 3, 1),  # inside the longest run without one (2072 to 2112)
    ],
)
def test_a_rule_over_the_planning_budget_is_refused_with_a_field_error(rule, dtstart):
    cached_rule_plan.cache_clear()
    with pytest.raises(timing.PlanningBudgetExceeded) as raised:
        timing.validate_rrule(rule, "UTC", dtstart)
    assert raised.value.field == "rrule"
    assert OVER in raised.value.message and f"{RRULE_PLAN_MAX_STEPS:,}" in raised.value.message
    assert isinstance(raised.value, timing.InvalidSchedule)


@pytest.mark.parametrize(
    "rule",
    [
        "FREQ=DAILY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO;BYHOUR=23;BYMINUTE=59;BYSECOND=59",
        "FREQ=HOURLY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO;BYHOUR=23",  # 24 steps a day
        "FREQ=SECONDLY;BYMONTH=2;BYMONTHDAY=29",  # every second of a day every 4 years
        "FREQ=SECONDLY;BYHOUR=23;BYMINUTE=59;BYSECOND=59",  # every day
        "FREQ=MINUTELY;BYDAY=MO;BYHOUR=9;BYMINUTE=0",
        "FREQ=SECONDLY;INTERVAL=7;BYHOUR=23;BYMINUTE=59;BYSECOND=59",
        "FREQ=SECONDLY;INTERVAL=86401;BYHOUR=23;BYMINUTE=59;BYSECOND=59",
    ],
)
def test_the_same_times_written_coarser_or_denser_stay_within_the_budget(rule):
    assert timing.validate_rrule(rule, "UTC", datetime(2025, 1, 1))
    spec = timing.Spec(kind="rrule", rrule=rule, start_at=z(2025, 1, 1))
    assert timing.upcoming(spec, z(2025, 1, 1), 3)


@pytest.mark.django_db
def test_the_model_refuses_the_rule_with_a_message_on_rrule():
    row = Schedule(
        name="leap-monday", callback="tests.noop", kind="rrule", rrule=TESTERS_RULE, timezone="UTC"
    )
    with pytest.raises(ValidationError) as raised:
        row.full_clean()
    [message] = raised.value.message_dict["rrule"]
    assert OVER in message


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("staff", [True, False])
def test_the_api_refuses_the_rule_with_a_400_on_rrule(django_user_model, staff):
    from django_durable_schedules.registry import register, registry

    register("tests.scoped_any", lambda ctx: None, owner_scoped=True, owner_min_interval=1)
    try:
        with override_settings(DURABLE_SCHEDULES={"API_OWNER_SCOPED": True}):
            client = APIClient()
            user = django_user_model.objects.create_user("someone", is_staff=staff)
            client.force_authenticate(user)
            answer = client.post(
                _list_url(),
                {
                    "name": "leap-monday",
                    "callback": "tests.scoped_any",
                    "kind": "rrule",
                    "rrule": TESTERS_RULE,
                    "timezone": "UTC",
                },
                format="json",
            )
    finally:
        registry.remove("tests.scoped_any")
    assert answer.status_code == 400, answer.content
    assert OVER in answer.json()["rrule"][0]
    assert not Schedule.objects.exists()


def _list_url() -> str:
    from django.urls import reverse

    return reverse("durable_schedules_api:schedule-list")


# ---------------------------------------------------------------------------------------
# The claim
# ---------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("via", ["update", "sql"])
@pytest.mark.parametrize("rehash", [True, False])
def test_a_rule_written_behind_save_is_degraded_at_the_claim_with_the_reason(via, rehash):
    now = z(2027, 6, 1, 1, 0, 5)
    with at(z(2027, 6, 1)):
        good = Schedule(name="good", callback="tests.noop", kind="rrule", rrule="FREQ=HOURLY")
        good.full_clean()
        good.save()
        bad = Schedule(name="bad", callback="tests.noop", kind="rrule", rrule="FREQ=HOURLY")
        bad.full_clean()
        bad.save()
    assert write_behind_save(bad, "rrule", TESTERS_RULE, via=via, rehash=rehash)
    cached_rule_plan.cache_clear()
    claims = state.claim_due(worker="w", now=now)
    assert [c.schedule_name for c in claims] == ["good"]
    bad.refresh_from_db()
    assert bad.status == "paused" and bad.next_run_at is None
    assert "rrule: " + OVER in bad.degraded_reason
    [receipt] = RunReceipt.objects.filter(schedule=bad)
    assert receipt.status == "degraded" and OVER in receipt.error_message
    assert receipt.error_type == "InvalidSchedule"
    assert snapshot().degraded == 1


# ---------------------------------------------------------------------------------------
# Every search of a rule, and the property
# ---------------------------------------------------------------------------------------


def test_every_search_of_an_over_budget_rule_raises_the_documented_error():
    spec = timing.Spec(kind="rrule", rrule=TESTERS_RULE, start_at=z(2044, 2, 29, 23, 59, 59))
    searches = [
        lambda: timing.next_slot_after(spec, z(2044, 3, 1)),
        lambda: timing.upcoming(spec, z(2044, 3, 1), 3),
        lambda: timing.latest_slot_at_or_before(spec, z(2100, 1, 1), not_before=z(2044, 3, 1)),
        lambda: timing.count_slots(spec, z(2044, 3, 1), z(2100, 1, 1)),
        lambda: timing.upcoming_slots(spec, z(2044, 3, 1), 3),
    ]
    for search in searches:
        with pytest.raises(timing.PlanningBudgetExceeded):
            search()


@PROFILE
@given(
    rule=rules(), start=st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2100, 1, 1))
)
def test_a_rule_that_passes_validation_plans_within_the_budget(rule, start):
    """Whatever the rule: validation either refuses it (a field error on ``rrule`` or
    ``timezone``) or every search of it returns, or raises only
    :class:`.timing.PlanningBudgetExceeded` (a rule over budget later than validation
    looked). Nothing else escapes, and no search runs on past the budget."""
    start_at = start.replace(microsecond=0, tzinfo=UTC)
    spec = timing.Spec(kind="rrule", rrule=rule, start_at=start_at)
    try:
        spec.validate()
    except timing.InvalidSchedule as exc:
        assert exc.field in ("rrule", "timezone"), exc.field
        return
    note(f"valid: {rule!r} from {start_at}")
    after = start_at + timedelta(days=3)
    try:
        timing.upcoming(spec, start_at - timedelta(seconds=1), 3)
        timing.next_slot_after(spec, after)
        timing.latest_slot_at_or_before(spec, after, not_before=start_at)
        timing.count_slots(spec, start_at, after, cap=1000)
    except timing.PlanningBudgetExceeded:
        pass
