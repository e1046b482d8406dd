"""``manage.py prune_runs``: it shows what it would delete, asks before deleting (Django's
``--no-input`` convention), and refuses a window shorter than the longest lease. Each test
checks what is left in the tables, not only what the command printed."""

from __future__ import annotations

import uuid
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from django_durable_schedules.models import RunAttempt, RunReceipt, Schedule

from .factories import ReceiptFactory, ScheduleFactory

pytestmark = pytest.mark.django_db(transaction=True)

DAY = timedelta(days=1)


@pytest.fixture
def history():
    """Two old receipts (succeeded, failed) and one recent one."""
    now = timezone.now()
    old = [
        ReceiptFactory(status="succeeded", finished_at=now - 400 * DAY),
        ReceiptFactory(status="failed", finished_at=now - 100 * DAY),
    ]
    recent = ReceiptFactory(status="succeeded", finished_at=now - DAY)
    return old, recent


def prune(*args: str) -> str:
    out = StringIO()
    call_command("prune_runs", *args, stdout=out)
    return out.getvalue()


def counts() -> tuple[int, int]:
    return RunReceipt.objects.count(), RunAttempt.objects.count()


def test_a_dry_run_shows_counts_per_status_and_age_and_deletes_nothing(history):
    out = prune("--older-than", "30", "--dry-run")
    assert "Would delete 2 receipts" in out
    assert any(line.split()[:2] == ["succeeded", "1"] for line in out.splitlines())
    assert any(line.split()[:2] == ["failed", "1"] for line in out.splitlines())
    assert "oldest" in out and "newest" in out
    assert counts() == (3, 3)


def test_without_a_terminal_it_refuses_and_says_how_to_run_unattended(history, monkeypatch):
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    with pytest.raises(CommandError, match="--no-input"):
        prune("--older-than", "30")
    assert counts() == (3, 3)


@pytest.mark.parametrize(("answer", "left"), [("no", (3, 3)), ("", (3, 3)), ("yes", (1, 1))])
def test_at_a_terminal_it_deletes_only_after_yes(history, monkeypatch, answer, left):
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    asked = []
    monkeypatch.setattr("builtins.input", lambda prompt: asked.append(prompt) or answer)
    out = prune("--older-than", "30")
    assert "This deletes 2 receipts" in out and len(asked) == 1
    assert counts() == left
    assert ("Cancelled: nothing was deleted." in out) == (left == (3, 3))


@pytest.mark.parametrize("flag", ["--no-input", "--noinput", "--yes"])
def test_no_input_deletes_without_asking(history, monkeypatch, flag):
    monkeypatch.setattr("builtins.input", lambda prompt: pytest.fail("asked"))
    out = prune("--older-than", "30", flag)
    assert "Pruned 2 receipts and 2 attempts" in out
    _, recent = history
    assert list(RunReceipt.objects.all()) == [recent]


@pytest.mark.parametrize("days", ["0", "0.0001"])  # 0 s, 8.64 s: both under the 30 s lease
def test_a_window_shorter_than_the_lease_is_refused(history, days):
    with pytest.raises(CommandError, match="shorter than the longest lease"):
        prune("--older-than", days, "--no-input")
    assert counts() == (3, 3)


def test_a_live_lease_longer_than_the_setting_sets_the_shortest_window(history):
    """A worker started with ``--lease-seconds 7200`` holds a lease 2 h long: a 1 h window
    is refused, a 3 h one is not."""
    s = ScheduleFactory(name="long-lease")
    Schedule.objects.filter(pk=s.pk).update(
        lease_token=uuid.uuid4(), lease_expires_at=timezone.now() + timedelta(hours=2)
    )
    with pytest.raises(CommandError, match="shorter than the longest lease"):
        prune("--older-than", str(1 / 24), "--no-input")
    assert "Pruned 3 receipts" in prune("--older-than", str(3 / 24), "--no-input")


def test_nothing_to_prune_says_so(history):
    assert "Nothing to prune" in prune("--older-than", "1000", "--no-input")
    assert counts() == (3, 3)
