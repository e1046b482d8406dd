"""Issue #31 item 7, smaller edges a new user met: a generator callback counted as
``succeeded`` (none of its body ran); ``schedules list`` did not mark running schedules;
``schedules cancel`` did not confirm; a rule's error echoed ``INTERVAL=abc`` upper-cased."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from django_durable_schedules import register, state
from django_durable_schedules.registry import registry
from django_durable_schedules.worker.execution import runner


def _claim(callback: str) -> state.Claim:
    now = timezone.now()
    return state.Claim(
        attempt_id=uuid.uuid4(),
        schedule_id=uuid.uuid4(),
        schedule_name="gen",
        callback=callback,
        occurrence=1,
        attempt=1,
        scheduled_for=now.replace(microsecond=0),
        claimed_at=now,
        lease_token=uuid.uuid4(),
        lease_expires_at=now + timedelta(seconds=30),
        idempotency_key="gen:1",
        payload={},
    )


def test_register_refuses_a_generator_function_sync_or_async():
    def rows(ctx):
        yield 1

    async def pages(ctx):
        yield 1

    for func in (rows, pages):
        with pytest.raises(TypeError, match="generator function: calling it runs none"):
            register("tests.generator")(func)
        assert "tests.generator" not in registry


@pytest.mark.django_db(transaction=True)
def test_a_callable_that_returns_a_generator_is_a_failed_run_not_a_success():
    ran = []

    def body():
        ran.append(1)
        yield 1

    register("tests.returns-generator")(lambda ctx: body())  # a wrapper hides the generator
    try:
        outcome = runner.execute(_claim("tests.returns-generator"))
    finally:
        registry.remove("tests.returns-generator")
    assert outcome.status == "failed" and outcome.error_type.endswith(".GeneratorReturned")
    assert "none of its body ran" in outcome.error_message
    assert ran == []


def _command(*args):
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("schedules", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_cancel_asks_first_and_without_a_terminal_wants_no_input(monkeypatch):
    from django.core.management import CommandError

    from django_durable_schedules.models import Schedule

    from .factories import due_schedules

    due_schedules(["tick"])

    class NotATerminal:
        def isatty(self):
            return False

    monkeypatch.setattr("sys.stdin", NotATerminal())
    with pytest.raises(CommandError, match="pass --no-input"):
        _command("cancel", "tick")
    assert Schedule.objects.get().status == "active"

    class Terminal:
        def isatty(self):
            return True

    monkeypatch.setattr("sys.stdin", Terminal())
    monkeypatch.setattr("builtins.input", lambda prompt="": "no")
    with pytest.raises(CommandError, match="not cancelled"):
        _command("cancel", "tick")
    assert Schedule.objects.get().status == "active"
    monkeypatch.setattr("builtins.input", lambda prompt="": "yes")
    assert "tick: cancelled" in _command("cancel", "tick")
    assert Schedule.objects.get().status == "cancelled"


@pytest.mark.django_db
def test_list_marks_a_running_schedule():
    from django_durable_schedules.models import Schedule

    from .factories import due_schedules

    due_schedules(["busy", "idle"], due=state.db_now() - timedelta(minutes=1))
    (claim,) = state.claim_due(worker="w", limit=1, now=state.db_now())
    out = _command("list")
    lines = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert lines[claim.schedule_name].rstrip().endswith("(running)")
    other = "idle" if claim.schedule_name == "busy" else "busy"
    assert "running" not in lines[other]
    assert Schedule.objects.filter(lease_token__isnull=False).count() == 1


@pytest.mark.parametrize(
    ("rule", "quoted"),
    [
        ("FREQ=DAILY;INTERVAL=abc", "'abc'"),
        ("FREQ=DAILY;interval=x2", "'x2'"),
        ("FREQ=MONTHLY;BYMONTHDAY=1st", "'1st'"),
    ],
)
def test_a_rules_message_quotes_the_value_as_typed(rule, quoted):
    from django_durable_schedules import timing

    with pytest.raises(timing.InvalidSchedule) as info:
        timing.parse_rrule(rule)
    assert quoted in info.value.message, info.value.message
    assert quoted.upper() not in info.value.message or quoted == quoted.upper()


@pytest.mark.django_db
def test_a_rules_words_take_the_start_typed_on_the_same_form(admin_client):
    """A rule takes its times of day from its start: the live words used "now" whatever
    ``start_at`` the form held; they now ask with it (wall time in the form's zone)."""
    from django.urls import reverse

    describe = reverse("admin:durable_schedules_schedule_describe_rrule")
    weekly = {"rrule": "FREQ=WEEKLY;BYDAY=TU", "timezone": "Europe/Paris"}
    answer = admin_client.get(describe, {**weekly, "start_at": "2027-06-01T09:30"}).json()
    assert answer == {"words": "every week on Tuesday at 09:30", "error": ""}
    later = admin_client.get(describe, {**weekly, "start_at": "2027-06-01T18:05:00"}).json()
    assert later["words"] == "every week on Tuesday at 18:05"
    for unreadable in ("", "tomorrow", "2027-13-45T99:00"):  # now, never an error
        answer = admin_client.get(describe, {**weekly, "start_at": unreadable}).json()
        assert answer["error"] == "" and answer["words"].startswith("every week on Tuesday at ")


@pytest.mark.django_db
def test_an_instant_typed_on_the_form_is_said_in_utc_before_a_save(admin_client):
    """Issue #31 item 7: the zone help under run_at updated only after a save; the form
    now asks describe-instant as it is typed (the help keeps what is stored)."""
    from django.urls import reverse

    describe = reverse("admin:durable_schedules_schedule_describe_instant")
    tokyo = admin_client.get(describe, {"at": "2027-06-01T09:00", "timezone": "Asia/Tokyo"})
    assert tokyo.json() == {
        "text": "As typed: 2027-06-01 09:00:00 JST = 2027-06-01 00:00:00 UTC",
        "error": "",
    }
    paris = admin_client.get(describe, {"at": "2027-06-01T09:00:00", "timezone": "europe/paris"})
    assert paris.json()["text"] == "As typed: 2027-06-01 09:00:00 CEST = 2027-06-01 07:00:00 UTC"
    gap = admin_client.get(describe, {"at": "2027-03-28T02:30", "timezone": "Europe/Paris"})
    assert "does not exist in Europe/Paris" in gap.json()["error"]
    assert admin_client.get(describe, {"at": "2027-06"}).json() == {"text": "", "error": ""}
    bad = admin_client.get(describe, {"at": "2027-06-01T09:00", "timezone": "Mars/Base"})
    assert "unknown time zone" in bad.json()["error"]
