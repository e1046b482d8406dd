"""``manage.py prune_runs --older-than DAYS``: the retention path for the run tables.

Deleting history is final, so the command behaves like Django's own destructive commands
(``flush``): it shows what it would delete and asks for ``yes`` first, unless given
``--no-input`` (alias ``--noinput``, ``--yes``) for unattended runs (cron, a systemd timer);
``--dry-run`` only shows. A window shorter than the longest lease is refused: it could
delete the attempt of a run whose worker stalled past its lease and reports later.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from ...db.clock import db_now
from ...db.retention import prunable, prune_finished, shortest_window

MAX_DAYS = 365 * 1000


def non_negative_days(value: str) -> float:
    """``--older-than``: a number of days in ``[0, 365000]`` (fractions allowed)."""
    try:
        days = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of days") from None
    if not (0 <= days <= MAX_DAYS):
        raise argparse.ArgumentTypeError(f"--older-than must be between 0 and {MAX_DAYS} days")
    return days


def _instant(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _seconds(window: timedelta) -> str:
    seconds = window.total_seconds()
    return f"{seconds:g} s ({seconds / 86400:.6g} days)"


class Command(BaseCommand):
    help = (
        "Delete finished run attempts and their receipts whose receipt is older than DAYS. "
        "Attempts still open (no receipt) are never removed. This is the only path the "
        "append-only guards let through. Shows what it would delete and asks first "
        "(--no-input to run unattended, --dry-run to only show)."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--older-than",
            type=non_negative_days,
            required=True,
            metavar="DAYS",
            help="Delete pairs whose receipt finished more than DAYS days ago (fractions "
            "allowed; at least the longest lease).",
        )
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="Only show what would be deleted, per receipt status, oldest and newest.",
        )
        parser.add_argument(
            "--no-input",
            "--noinput",
            "--yes",
            action="store_false",
            dest="interactive",
            help="Do not ask for confirmation (for cron jobs and timers).",
        )
        parser.add_argument(
            "--batch-size",
            type=int,
            default=5000,
            help="Pairs deleted per transaction (default 5000).",
        )
        parser.add_argument("--database", default="default", help="Database alias.")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1")
        using = options["database"]
        window = timedelta(days=options["older_than"])
        now = db_now(using)
        shortest = shortest_window(now=now, using=using)
        if window < shortest:
            raise CommandError(
                f"--older-than {options['older_than']:g} days is a window of "
                f"{_seconds(window)}, shorter than the longest lease, {_seconds(shortest)}: "
                "it could delete the attempt of a run that is still to report. Use a longer "
                "window."
            )
        cutoff = now - window
        groups = prunable(cutoff, using=using)
        total = sum(g.count for g in groups)
        if total == 0:
            self.stdout.write(f"Nothing to prune: no receipt finished before {_instant(cutoff)}.")
            return
        verb = "Would delete" if options["dry_run"] else "This deletes"
        self.stdout.write(
            f"{verb} {total} receipts finished before {_instant(cutoff)}, and their attempts:"
        )
        for g in groups:
            self.stdout.write(
                f"  {g.status:<14} {g.count:>10}   oldest {_instant(g.oldest)}, "
                f"newest {_instant(g.newest)}"
            )
        if options["dry_run"]:
            return
        if options["interactive"]:
            if not sys.stdin.isatty():
                raise CommandError(
                    "prune_runs deletes history for good and asks first, but there is no "
                    "terminal to ask on: pass --no-input to run it unattended, or --dry-run "
                    "to only show."
                )
            answer = input("The deletion is final. Type 'yes' to continue, or 'no' to cancel: ")
            if answer.strip().lower() != "yes":
                self.stdout.write("Cancelled: nothing was deleted.")
                return
        result = prune_finished(window, now=now, batch_size=options["batch_size"], using=using)
        chains = f" and {result.chain_slots} decided chain slots" if result.chain_slots else ""
        self.stdout.write(
            f"Pruned {result.receipts} receipts and {result.attempts} attempts{chains} finished "
            f"before {_instant(result.cutoff)}."
        )
