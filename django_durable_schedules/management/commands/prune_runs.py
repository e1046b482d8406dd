"""``manage.py prune_runs --older-than DAYS``: the retention path for the run tables."""

from __future__ import annotations

import argparse
from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from ...db.retention import prune_finished


def non_negative_days(value: str) -> float:
    try:
        days = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of days") from None
    if not (0 <= days <= 365 * 1000):
        raise argparse.ArgumentTypeError("--older-than must be between 0 and 365000 days")
    return days


class Command(BaseCommand):
    help = (
        "Delete finished run attempts and their receipts whose receipt is older than DAYS. "
        "Attempts still open (no receipt) are never removed. This is the only path the "
        "append-only guards let through."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--older-than", type=non_negative_days, required=True, metavar="DAYS")
        parser.add_argument("--batch-size", type=int, default=5000)
        parser.add_argument("--database", default="default")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1")
        result = prune_finished(
            timedelta(days=options["older_than"]),
            batch_size=options["batch_size"],
            using=options["database"],
        )
        self.stdout.write(
            f"Pruned {result.receipts} receipts and {result.attempts} attempts finished before "
            f"{result.cutoff.isoformat()}."
        )
