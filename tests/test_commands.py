"""``manage.py schedules`` and friends, through call_command."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from django_durable_schedules.models import Schedule

pytestmark = pytest.mark.django_db(transaction=True)


def run(*args):
    out = StringIO()
    call_command("schedules", *args, stdout=out)
    return out.getvalue()


def test_upcoming_prints_local_and_utc():
    Schedule.objects.create(
        name="paris", callback="tests.noop", kind="cron", cron="0 3 * * *", timezone="Europe/Paris"
    )
    out = run("upcoming", "paris", "--count", "3")
    lines = [line for line in out.splitlines() if line.startswith("  ")]
    assert len(lines) == 3
    assert " 03:00:00 CE" in lines[0] and "(Europe/Paris)" in lines[0]  # CET or CEST
    assert lines[0].rstrip().endswith(("T01:00:00Z", "T02:00:00Z"))
    assert out.splitlines()[0] == "paris: cron '0 3 * * *' (Europe/Paris): At 03:00"


def test_list_health_and_transitions():
    Schedule.objects.create(
        name="tick", callback="tests.noop", kind="interval", interval_seconds=300
    )
    assert "every 5 minutes" in run("list")
    assert "paused" in run("disable", "tick")
    assert "active" in run("enable", "tick")
    assert "tick: triggered; it runs at the next worker pass" in run("trigger", "tick")
    run("cancel", "tick", "--no-input")
    with pytest.raises(CommandError, match="cannot be enabled"):
        run("enable", "tick")
    with pytest.raises(CommandError, match="no schedule named"):
        run("upcoming", "nope")
    assert '"healthy": true' in run("health")


def test_bad_count_is_a_usage_error():
    with pytest.raises(CommandError):
        run("upcoming", "x", "--count", "0")


def test_list_says_why_a_schedule_is_paused():
    Schedule.objects.create(
        name="lost", callback="tests.noop", kind="interval", interval_seconds=300
    )
    Schedule.objects.filter(name="lost").update(
        status="paused", degraded_reason="callback 'old.job' is not registered"
    )
    [line] = [line for line in run("list").splitlines() if line.startswith("lost")]
    assert "paused" in line and line.endswith("(callback 'old.job' is not registered)")


def test_list_has_a_header_and_shows_the_next_run_in_the_zone_and_in_utc():
    s = Schedule.objects.create(
        name="tokyo", callback="tests.noop", kind="cron", cron="0 9 * * *", timezone="Asia/Tokyo"
    )
    header, line = run("list").splitlines()
    assert header.split()[:3] == ["NAME", "STATUS", "CADENCE"] and "UTC" in header
    local = s.next_run_at.astimezone(__import__("zoneinfo").ZoneInfo("Asia/Tokyo"))
    assert f"{local:%Y-%m-%d} 09:00:00 JST · {s.next_run_at:%Y-%m-%dT%H:%M:%SZ}" in line


def test_subcommands_have_help_for_their_arguments():
    from django_durable_schedules.management.commands.schedules import Command

    parser = Command().create_parser("manage.py", "schedules")
    sub = next(a for a in parser._actions if a.dest == "action")
    helps = sub.choices["upcoming"].format_help()
    assert "The schedule's name." in helps and "How many fire times" in helps
    assert "not undoable" in sub.choices["cancel"].format_help()


def test_a_second_trigger_says_one_run_happens():
    Schedule.objects.create(name="t2", callback="tests.noop", kind="interval", interval_seconds=300)
    assert "t2: triggered;" in run("trigger", "t2")
    assert "t2: already triggered at " in run("trigger", "t2")


@pytest.mark.parametrize(
    "values",
    [
        {"kind": "rrule", "interval_seconds": None, "rrule": "FREQ=DAILY;UNTIL=99991231T235959Z"},
        {"kind": "rrule", "interval_seconds": None, "rrule": "FREQ=DAILY;BYSECOND=99"},
        {"timezone": "Mars/Olympus"},
    ],
    ids=["until-9999", "bysecond-99", "unknown-zone"],
)
def test_upcoming_of_a_definition_broken_behind_save_is_a_command_error(values):
    s = Schedule.objects.create(
        name="broken", callback="tests.noop", kind="interval", interval_seconds=60, timezone="UTC"
    )
    Schedule.objects.filter(pk=s.pk).update(**values)
    with pytest.raises(CommandError, match="broken: the stored definition is invalid"):
        run("upcoming", "broken")
