"""``manage.py schedules``: inspect and control schedules from the shell.

Subcommands: ``list [--pool NAME] [--label KEY[:VALUE] ...]``, ``upcoming NAME [--count N]``,
``health``, ``show NAME`` (definition, state, next fire times, the run in flight, latest
receipts, statistics over 24 h and 7 d), ``receipts NAME [--status S]
[--limit N]`` (newest first, with durations and failed runs' tracebacks), and ``enable`` /
``disable`` / ``cancel`` / ``trigger`` ``NAME`` (the same state transitions as the admin
and the API, recorded with source ``command``); ``disable NAME [NAME ...] [--note TEXT]
[--until WHEN]`` pauses several with a note and an end (WHEN: ISO 8601 or ``2h``); ``enable NAME --run-at ISO`` re-arms a
one-shot at a new instant; ``backfill NAME --from ISO --to ISO [--include-succeeded] [--cascade]
[--dry-run]`` runs (or lists) every slot of a past range, and ``cancel-backfill NAME``
stops it; ``rerun NAME N [--force] [--note TEXT]`` runs occurrence N again under its own
idempotency key. ``versions NAME`` lists the versions of a definition and ``restore NAME
--event ID`` makes one current again, as an edit (:mod:`..version_text`). ``calendars
list``, ``calendars add-date CALENDAR DATE [--reason TEXT]`` and
``calendars remove-date CALENDAR DATE`` show and edit exclusion calendars (the schedules
that name one are re-planned at once); ``upcoming`` marks the slots they exclude.
``blackouts list|add|delete|link|unlink`` show and edit blackout windows and a schedule's
list of them (:mod:`..blackout_text`). ``groups list|add|delete`` show and edit
concurrency groups (:mod:`..group_text`).

This module owns the parser and the dispatch, and the subcommands ``list``, ``upcoming``,
``health`` and the transitions; the others are in :mod:`..schedule_text` (``show``,
``receipts``), :mod:`..pause_text` (``disable``), :mod:`..backfill_text` (``backfill``,
``cancel-backfill``, ``rerun``), :mod:`..calendar_text`, :mod:`..blackout_text`, :mod:`..group_text` and
:mod:`..version_text` (``versions``, ``restore``), and
the argparse types in :mod:`..arguments`.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any
from zoneinfo import ZoneInfo

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from ... import health, state, timing
from ...cron_words import schedule_description, schedule_in_words
from ...db.names import with_calendar_names
from ...exceptions import StateConflict
from ...models import ReceiptStatus, Schedule
from ...models.running_queries import live_occurrences
from ...state.overlap_rules import queued_behind
from .. import (
    backfill_text,
    blackout_text,
    calendar_text,
    group_text,
    pause_text,
    schedule_text,
    version_text,
)
from ..arguments import (
    MAX_COUNT,
    aware_datetime,
    count_type,
    label_type,
    limit_type,
    pool_type,
)
from ..schedule_text import in_zone, utc


class Command(BaseCommand):
    help = "Inspect and control durable schedules."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        lister = sub.add_parser("list", help="One line per schedule.")
        lister.add_argument("--pool", type=pool_type, help="Only the schedules of this pool.")
        lister.add_argument(
            "--label",
            type=label_type,
            action="append",
            default=[],
            metavar="KEY[:VALUE]",
            help="Only the schedules whose metadata holds this label (repeatable: all).",
        )
        upcoming = sub.add_parser(
            "upcoming", help="Next fire times, in the schedule's zone and UTC."
        )
        upcoming.add_argument("name", help="The schedule's name.")
        upcoming.add_argument(
            "--count",
            type=count_type,
            default=5,
            help=f"How many fire times (1 to {MAX_COUNT}, default 5).",
        )
        health_parser = sub.add_parser(
            "health", help="The health snapshot as JSON; exit 1 when unhealthy."
        )
        health_parser.add_argument(
            "--exact",
            action="store_true",
            help="Look for attempts without a receipt or a lease over the whole attempts "
            "table (an anti-join with the receipts: seconds at ten million attempts), not "
            "only among the newest claims.",
        )
        show = sub.add_parser(
            "show",
            help="One schedule: definition, state, next fire times, the run in flight, "
            "its latest receipts, its statistics over 24 h and 7 d.",
        )
        show.add_argument("name", help="The schedule's name.")
        receipts = sub.add_parser(
            "receipts", help="A schedule's receipts, newest first, with failed runs' tracebacks."
        )
        receipts.add_argument("name", help="The schedule's name.")
        receipts.add_argument(
            "--status", help=f"Only receipts of this status ({', '.join(ReceiptStatus.values)})."
        )
        receipts.add_argument(
            "--limit",
            type=limit_type,
            default=schedule_text.RECEIPTS_LIMIT,
            help=f"How many (1 to {schedule_text.RECEIPTS_MAX}, default {schedule_text.RECEIPTS_LIMIT}).",
        )
        for action in ("enable", "disable", "cancel", "trigger"):
            command = sub.add_parser(
                action, help=_ACTION_HELP[action], description=_ACTION_HELP[action]
            )
            if action == "disable":
                command.add_argument("names", nargs="+", metavar="NAME", help="Schedules.")
                command.add_argument("--note", help="Why (shown with the pause).")
                command.add_argument(
                    "--until",
                    type=pause_text.pause_end,
                    help="When a worker resumes it: ISO 8601 with offset, or 30m, 2h, 1d.",
                )
                continue
            command.add_argument("name", help="The schedule's name.")
            if action == "enable":
                command.add_argument(
                    "--run-at",
                    type=aware_datetime,
                    help="Once schedules: the new instant to run at (ISO 8601 with offset).",
                )
            if action == "cancel":  # not undoable: it asks, as Django's flush does
                command.add_argument(
                    "--noinput",
                    "--no-input",
                    action="store_false",
                    dest="interactive",
                    help="Do not ask to confirm (scripts); without a terminal it is refused.",
                )
            if action == "trigger":
                command.add_argument(
                    "--payload",
                    help="A JSON object merged over the payload for this run, e.g. '{\"dry\": true}'.",
                )
                command.add_argument("--note", default="", help="Why (kept in the event).")
                command.add_argument(
                    "--ignore-blackout",
                    action="store_true",
                    help="The run may start inside a blackout window.",
                )

        backfill_text.add_parsers(sub)
        calendar_text.add_parser(sub)
        blackout_text.add_parser(sub)
        group_text.add_parser(sub)
        version_text.add_parsers(sub)

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        if action in ("backfill", "cancel-backfill"):
            self._write(backfill_text.backfill(self._get(options["name"]), options))
        elif action == "versions":
            self._write(version_text.versions_lines(self._get(options["name"])))
        elif action == "restore":
            self._write(version_text.restore(self._get(options["name"]), options))
        elif action == "rerun":
            self._write(backfill_text.rerun(self._get(options["name"]), options))
        elif action == "list":
            self._list(options["pool"], options["label"])
        elif action == "calendars":
            self._write(calendar_text.run(options))
        elif action == "blackouts":
            self._write(blackout_text.run(options))
        elif action == "groups":
            self._write(group_text.run(options))
        elif action == "health":
            snap = health.snapshot(exact=options["exact"])
            self.stdout.write(json.dumps(snap.as_dict(), indent=2))
            for warning in snap.warnings:  # never unhealthy: the exit status stays 0
                self.stderr.write(f"warning: {warning}")
            for late in snap.late_schedules:  # past their deadline: a warning too
                at = late["deadline_at"].isoformat() if late["deadline_at"] else "?"
                self.stderr.write(
                    f"late: {late['name']} occurrence {late['occurrence']} (deadline {at})"
                )
            if not snap.healthy:
                raise CommandError("unhealthy: " + "; ".join(snap.problems), returncode=1)
        elif action == "show":
            self._write(schedule_text.show_lines(self._get(options["name"])))
        elif action == "receipts":
            status = schedule_text.check_status(options["status"])
            schedule = self._get(options["name"])
            self._write(schedule_text.receipts_lines(schedule, status, options["limit"]))
        elif action == "upcoming":
            self._upcoming(self._get(options["name"]), options["count"])
        elif action == "disable":
            self._write(
                pause_text.disable_each(options["names"], options["note"], options["until"])
            )
        else:
            schedule = self._get(options["name"])
            if action == "cancel":
                self._confirm_cancel(schedule, options)
            extra = {"run_at": options["run_at"]} if options.get("run_at") else {}
            if action == "trigger":
                extra = _trigger_options(options)
            try:
                row = getattr(state, action)(schedule.pk, source="command", **extra)
            except StateConflict as exc:
                raise CommandError(f"{schedule.name}: {exc.reason}") from None
            except ValidationError as exc:
                raise CommandError(f"{schedule.name}: {' '.join(exc.messages)}") from None
            if action == "trigger" and schedule.triggered_at is not None:
                self.stdout.write(
                    f"{row.name}: already triggered at {utc(schedule.triggered_at)} and not "
                    "run yet; one run happens at the next worker pass."
                )
            elif action == "trigger":
                self.stdout.write(
                    f"{row.name}: triggered; it runs at the next worker pass as its own "
                    "occurrence, and its grid is unchanged."
                )
            else:
                self.stdout.write(
                    f"{row.name}: {row.status}, next run {in_zone(row.next_run_at, row.timezone)}"
                )

    def _confirm_cancel(self, schedule: Schedule, options: dict[str, Any]) -> None:
        """Ask before a cancel (it cannot be undone) unless ``--no-input``; refuse without
        a terminal to ask on. Raises ``CommandError`` when not confirmed."""
        if not options.get("interactive", True):
            return
        if not sys.stdin.isatty():
            raise CommandError(
                f"{schedule.name}: cancelling cannot be undone; no terminal to confirm on: "
                "pass --no-input to cancel without asking"
            )
        answer = input(
            f"Cancel {schedule.name} for good? It never runs again and this cannot be undone.\n"
            "Type 'yes' to continue, or 'no' to keep it: "
        )
        if answer.strip().lower() != "yes":
            raise CommandError(f"{schedule.name}: not cancelled")

    def _write(self, lines: Any) -> None:
        for line in lines:
            self.stdout.write(line)

    def _get(self, name: str) -> Schedule:
        try:
            # With its calendar names (the words name them) and its runs in flight
            # (running: the oldest, how many) in the same query.
            row: Schedule = with_calendar_names(Schedule.objects.with_running()).get(name=name)
            return row
        except Schedule.DoesNotExist:
            raise CommandError(f"no schedule named {name!r}") from None

    def _list(self, pool: str | None, labels: list[tuple[str, str | None]]) -> None:
        self.stdout.write(f"{'NAME':32} {'STATUS':9} {'CADENCE':44} NEXT RUN (ITS ZONE · UTC)")
        now = state.db_now()
        rows = with_calendar_names(Schedule.objects.with_labels(labels)).order_by("name")
        # The live occurrence leases of each row, in the same statement (overlap "allow").
        rows = rows.annotate(live_occurrences=live_occurrences(now))
        for s in rows if pool is None else rows.filter(pool=pool):
            line = (
                f"{s.name:32} {s.status:9} {_describe(s):44} {in_zone(s.next_run_at, s.timezone)}"
            )
            why = s.degraded_reason or s.pause_reason  # why a paused schedule does not run
            why = "; ".join(w for w in (_running_words(s, now), why) if w)
            self.stdout.write(f"{line}  ({why})" if why else line)

    def _upcoming(self, schedule: Schedule, count: int) -> None:
        try:
            words = schedule_in_words(schedule)
            self.stdout.write(
                f"{schedule.name}: {_describe(schedule)}" + (f": {words}" if words else "")
            )
            views = schedule.upcoming_slots(count)
        except timing.InvalidSchedule as exc:  # a definition made invalid behind save()
            raise CommandError(
                f"{schedule.name}: the stored definition is invalid: {exc}"
            ) from None
        zone = ZoneInfo(schedule.timezone or "UTC")  # valid: upcoming() checked it
        if schedule.overlap_policy == "allow":
            running = schedule.occurrence_leases.count()
            self.stdout.write(
                f"  overlap policy: allow (at most {schedule.max_parallel} at once, "
                f"{running} running)"
            )
        elif schedule.overlap_policy != "skip":
            self.stdout.write(f"  overlap policy: {schedule.overlap_policy}")
        if schedule.buffered_for is not None:
            last = queued_behind(schedule)
            queue = f", then the queue through {in_zone(last, zone.key)}" if last else ""
            self.stdout.write(
                f"  buffered: the slot {in_zone(schedule.buffered_for, zone.key)} runs next" + queue
            )
        calendars = schedule.exclusions().calendars
        if calendars:
            self.stdout.write(
                f"  exclusion calendars: {', '.join(calendars)}; "
                f"{schedule.excluded_count} slots excluded so far"
            )
        windows = schedule.blackouts().names
        if windows:
            self.stdout.write(
                f"  blackout windows: {', '.join(windows)} ({schedule.blackout_policy}); "
                f"{schedule.blackout_count} slots blacked out so far"
            )
        if not any(v.fires for v in views):
            self.stdout.write("  no further fire times")
        for v in views:
            mark = "  " if v.fires else "x "  # struck out: not run
            line = f"{mark}{v.at.astimezone(zone):%Y-%m-%d %H:%M:%S %Z} ({zone.key})   {utc(v.at)}"
            if v.excluded_by is not None:
                line += f"   EXCLUDED, not run: {v.excluded_by}"
            elif v.blacked_out_by is not None:
                line += f"   BLACKED OUT, not run: window {v.blacked_out_by}"
            elif v.moved_by is not None:
                line += f"   MOVED: {v.why_moved}"
            self.stdout.write(line)


def _describe(schedule: Schedule) -> str:
    """The schedule in words, or why it cannot be described (a definition written behind
    ``save()`` that the engine cannot evaluate)."""
    try:
        return schedule_description(schedule)
    except (timing.InvalidSchedule, ValueError, OverflowError):
        return "(invalid definition)"


_ACTION_HELP = {
    "enable": "Make a paused or failed schedule active again (a failed one-shot is re-armed).",
    "disable": "Pause active schedules (a run in progress finishes), with an optional note "
    "and end (--until: a worker resumes them then, with no catch-up).",
    "cancel": "Cancel a schedule for good: it never runs again (not undoable).",
    "trigger": "Run a schedule at the next worker pass, as its own occurrence.",
}


def _trigger_options(options: dict[str, Any]) -> dict[str, Any]:
    """``state.trigger``'s keywords from ``trigger``'s options; ``--payload`` that is not
    JSON is a :class:`CommandError` (the rules of the override are the state package's)."""
    payload = None
    if options.get("payload") is not None:
        try:
            payload = json.loads(options["payload"])
        except ValueError as exc:
            raise CommandError(f"--payload is not JSON: {exc}") from None
    return {
        "payload": payload,
        "note": options.get("note") or "",
        "ignore_blackout": bool(options.get("ignore_blackout")),
    }


def _running_words(row: Any, now: Any) -> str:
    """``"running"`` (a live lease on the row), ``"running: 2 of 3 occurrences"`` (live
    occurrence leases, ``overlap_policy="allow"``; "+ 1" when the row's own lease runs
    too: a backfill slot or a re-run), or ``""``. ``row`` carries ``live_occurrences``."""
    own = row.lease_expires_at is not None and row.lease_expires_at > now
    count = int(row.live_occurrences or 0)
    if not count:
        return "running" if own else ""
    limit = row.max_parallel or count
    return f"running: {count} of {limit} occurrences" + (" + 1" if own else "")
