"""``manage.py import_schedules --from celery-beat|django-q2``: copy another scheduler's
schedule rows into ours (docs/migrating.md)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from ... import importers
from ...registry import registry

_APPS = {importers.CELERY_BEAT: "django_celery_beat", importers.DJANGO_Q: "django_q"}


class Command(BaseCommand):
    help = (
        "Import schedules from django-celery-beat or django-q2. Only tasks that map to a "
        "registered callback are imported; existing names are left alone (safe to re-run)."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--from", dest="source", required=True, choices=importers.SOURCES, help="Source app."
        )
        parser.add_argument(
            "--callback-map",
            action="append",
            default=[],
            metavar="SOURCE=REGISTERED",
            help="Map a Celery task / django-q func name to a registered callback (repeatable). "
            "Unmapped names are used as they are if registered.",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="Show what would be imported; write nothing."
        )
        parser.add_argument(
            "--disable-source",
            action="store_true",
            help="Stop the source scheduler from running what was imported (celery-beat: "
            "enabled=False; django-q2: repeats=0).",
        )
        parser.add_argument("--database", default="default", help="Database alias to write to.")

    def handle(self, *args: Any, **options: Any) -> None:
        source = options["source"]
        if not apps.is_installed(_APPS[source]):
            raise CommandError(f"{_APPS[source]} is not in INSTALLED_APPS: nothing to import.")
        try:
            callback_map = importers.parse_callback_map(options["callback_map"])
        except ValueError as exc:
            raise CommandError(f"--callback-map {exc}") from exc
        registered = set(registry.names())
        disable: Callable[[Any], None]
        if source == importers.CELERY_BEAT:
            rows = list(importers.load_celery_beat())
            plans = [importers.plan_celery_beat(r, callback_map, registered) for r in rows]
            disable = importers.disable_celery_beat
        else:
            rows = list(importers.load_django_q())
            plans = [
                importers.plan_django_q(r, callback_map, registered, settings.TIME_ZONE)
                for r in rows
            ]
            disable = importers.disable_django_q
        results = importers.apply(plans, dry_run=options["dry_run"], using=options["database"])
        for row, result in zip(rows, results, strict=True):
            plan = result.plan
            line = f"{result.action:>12}  {plan.name}  <- {source} #{plan.source_id}"
            if result.detail:
                line += f"  ({result.detail})"
            self.stdout.write(line)
            for note in plan.notes:
                self.stdout.write(f"{'':>14}note: {note}")
            ours = result.action == "created" or result.detail == "already imported"
            if options["disable_source"] and ours and not options["dry_run"]:
                disable(row)
        summary = importers.Summary.of(results)
        prefix = "dry run: " if options["dry_run"] else ""
        self.stdout.write(f"{prefix}{summary}")
