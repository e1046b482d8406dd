"""``manage.py schedules show NAME`` and ``schedules receipts NAME [--status S] [--limit N]``
(issue 26, item 6): a schedule and its receipts from the shell, failed runs with their
tracebacks; a wrong name, status or limit is a ``CommandError`` that says what is wrong."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from django_durable_schedules.models import RunAttempt, RunReceipt, Schedule

pytestmark = pytest.mark.django_db

START = datetime(2027, 6, 1, 10, 0, tzinfo=UTC)
FRAMES = [
    {"file": "/srv/app/jobs.py", "line": 12, "function": "nightly"},
    {"file": "/srv/app/billing.py", "line": 40, "function": "Invoice.charge"},
]


def cli(*args: str) -> str:
    out = StringIO()
    call_command("schedules", *args, stdout=out)
    return out.getvalue()


def make(name: str = "nightly", **fields) -> Schedule:
    return Schedule.objects.create(
        name=name,
        callback="tests.noop",
        kind="cron",
        cron="0 3 * * *",
        timezone="Europe/Paris",
        **fields,
    )


def history(schedule: Schedule, statuses: str) -> None:
    """Receipts, oldest first: ``s`` succeeded in 2.5 s, ``f`` failed after 0.25 s with
    :data:`FRAMES`, ``m`` missed (never ran)."""
    for i, letter in enumerate(statuses, 1):
        at = START + timedelta(minutes=i)
        attempt = RunAttempt.objects.create(
            schedule=schedule,
            schedule_name=schedule.name,
            occurrence=i,
            attempt=1,
            scheduled_for=at,
            claimed_at=at,
            lease_token=uuid.uuid4(),
            lease_expires_at=at + timedelta(seconds=30),
            worker="host-1:4242",
            idempotency_key=f"{schedule.pk}:{i}",
        )
        status = {"s": "succeeded", "f": "failed", "m": "missed"}[letter]
        took = {"s": 2.5, "f": 0.25, "m": None}[letter]
        RunReceipt.objects.create(
            attempt=attempt,
            schedule=schedule,
            occurrence=i,
            succeeded_occurrence=i if status == "succeeded" else None,
            status=status,
            started_at=None if took is None else at,
            finished_at=at + timedelta(seconds=took or 0),
            error_type="KeyError" if letter == "f" else "",
            error_message="amount" if letter == "f" else "",
            traceback=FRAMES if letter == "f" else None,
        )


def test_show_prints_definition_state_fire_times_and_latest_receipts():
    schedule = make()
    history(schedule, "sfsmsfs")  # 7 receipts: the last 5 shown
    out = cli("show", "nightly")
    lines = out.splitlines()
    assert lines[0] == "nightly: cron '0 3 * * *' (Europe/Paris)"
    assert "  callback: tests.noop" in lines
    assert "  status: active" in lines
    assert "running: no" in lines
    fire = lines[lines.index("next 5 fire times:") + 1 : lines.index("next 5 fire times:") + 6]
    assert all(" 03:00:00 CE" in line for line in fire)  # CET or CEST, and UTC beside it
    first = lines.index("last 5 receipts (newest first):") + 1
    receipts = lines[first : first + 5]
    assert [line.split()[0] for line in receipts] == ["#7.1", "#6.1", "#5.1", "#4.1", "#3.1"]
    assert lines[first + 5].startswith("statistics (")  # then the statistics (test_stats.py)
    assert "took 2.500 s" in receipts[0]
    assert "failed" in receipts[1] and "took 0.250 s" in receipts[1]
    assert "KeyError: amount" in receipts[1]
    assert "missed" in receipts[3] and "took -" in receipts[3]


def test_receipts_newest_first_with_tracebacks_of_failed_ones():
    schedule = make()
    history(schedule, "sfsf")
    out = cli("receipts", "nightly")
    assert [line.split()[0] for line in out.splitlines() if line.startswith("#")] == [
        "#4.1",
        "#3.1",
        "#2.1",
        "#1.1",
    ]
    assert out.count("Traceback (most recent call last):") == 2
    assert '    File "/srv/app/jobs.py", line 12, in nightly\n' in out
    assert '    File "/srv/app/billing.py", line 40, in Invoice.charge\n  KeyError: amount' in out
    assert "started 2027-06-01T10:04:00Z, worker host-1:4242" in out


def test_receipts_by_status_and_limit():
    schedule = make()
    history(schedule, "f" * 25 + "s")
    failed = cli("receipts", "nightly", "--status", "failed")
    assert sum(line.startswith("#") for line in failed.splitlines()) == 20  # the default
    assert failed.splitlines()[0].startswith("#25.1 ")  # newest failed first
    assert "succeeded" not in failed
    two = cli("receipts", "nightly", "--limit", "2")
    assert [line.split()[0] for line in two.splitlines() if line.startswith("#")] == [
        "#26.1",
        "#25.1",
    ]
    assert (
        cli("receipts", "nightly", "--status", "skipped")
        == "nightly: no receipts with status skipped\n"
    )


def test_a_schedule_without_receipts_and_with_an_invalid_definition_still_shows():
    schedule = make()
    Schedule.objects.filter(pk=schedule.pk).update(cron="not a cron")  # behind save()
    out = cli("show", "nightly")
    assert "no receipts yet" in out
    assert "the stored definition is invalid" in out


@pytest.mark.parametrize(
    "args, message",
    [
        (("show", "nope"), "no schedule named 'nope'"),
        (("receipts", "nope"), "no schedule named 'nope'"),
        (("receipts", "nightly", "--status", "bogus"), "unknown receipt status 'bogus': use one"),
        (("receipts", "nightly", "--limit", "0"), "--limit must be between 1 and 1000"),
        (("receipts", "nightly", "--limit", "x"), "'x' is not an integer"),
    ],
)
def test_wrong_arguments_are_command_errors(args, message):
    make()
    with pytest.raises(CommandError, match=message.replace("(", r"\(")):
        cli(*args)
