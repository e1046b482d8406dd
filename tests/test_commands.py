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
    assert "T03:00:00+0" in lines[0] and "(Europe/Paris)" in lines[0]
    assert lines[0].rstrip().endswith(("T01:00:00Z", "T02:00:00Z"))


def test_list_health_and_transitions():
    Schedule.objects.create(
        name="tick", callback="tests.noop", kind="interval", interval_seconds=300
    )
    assert "every 5 minutes" in run("list")
    assert "paused" in run("disable", "tick")
    assert "active" in run("enable", "tick")
    run("trigger", "tick")
    run("cancel", "tick")
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
