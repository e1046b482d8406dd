"""``manage.py schedules``: inspect and control schedules from the shell.

Subcommands: ``list [--pool NAME]``, ``upcoming NAME [--count N]``, ``health``, ``show NAME`` (definition,
state, next fire times, the run in flight, latest receipts), ``receipts NAME [--status S]
[--limit N]`` (newest first, with durations and failed runs' tracebacks), and ``enable`` /
``disable`` / ``cancel`` / ``trigger`` ``NAME`` (the same state transitions as the admin
and the API, recorded with source ``command``); ``disable NAME [NAME ...] [--note TEXT]
[--until WHEN]`` pauses several with a note and an end (WHEN: ISO 8601 or ``2h``); ``enable NAME --run-at ISO`` re-arms a
one-shot at a new instant; ``backfill NAME --from ISO --to ISO [--include-succeeded]
[--dry-run]`` runs (or lists) every slot of a past range, and ``cancel-backfill NAME``
stops it; ``rerun NAME N [--force] [--note TEXT]`` runs occurrence N again under its own
idempotency key. ``calendars list``, ``calendars add-date CALENDAR DATE [--reason TEXT]`` and
``calendars remove-date CALENDAR DATE`` show and edit exclusion calendars (the schedules
that name one are re-planned at once); ``upcoming`` marks the slots they exclude.
``blackouts list|add|delete|link|unlink`` show and edit blackout windows and a schedule's
list of them (:mod:`..blackout_text`).
"""

from __future__ import annotations

import argparse
import json
from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.utils.dateparse import parse_datetime

from ... import health, state, timing
from ...cron_words import cron_in_words
from ...exceptions import StateConflict
from ...models import ExclusionCalendar, ReceiptStatus, Schedule, pool_validator
from .. import blackout_text, pause_text, schedule_text

MAX_COUNT = 1000


def count_type(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not an integer") from None
    if not 1 <= number <= MAX_COUNT:
        raise argparse.ArgumentTypeError(f"--count must be between 1 and {MAX_COUNT}")
    return number


def pool_type(value: str) -> str:
    """``--pool`` of ``list``: a pool's name (``Schedule.pool``'s rule; argparse type)."""
    try:
        pool_validator(value)
    except ValidationError:
        raise argparse.ArgumentTypeError(
            f"invalid pool {value!r}: {pool_validator.message}"
        ) from None
    return value


def limit_type(value: str) -> int:
    """``--limit`` of ``receipts``: an integer in [1, RECEIPTS_MAX] (argparse type)."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not an integer") from None
    if not 1 <= number <= schedule_text.RECEIPTS_MAX:
        raise argparse.ArgumentTypeError(
            f"--limit must be between 1 and {schedule_text.RECEIPTS_MAX}"
        )
    return number


class Command(BaseCommand):
    help = "Inspect and control durable schedules."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        lister = sub.add_parser("list", help="One line per schedule.")
        lister.add_argument("--pool", type=pool_type, help="Only the schedules of this pool.")
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
        sub.add_parser("health", help="The health snapshot as JSON; exit 1 when unhealthy.")
        show = sub.add_parser(
            "show",
            help="One schedule: definition, state, next fire times, the run in flight, "
            "its latest receipts.",
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

        backfill = sub.add_parser("backfill", help=_BACKFILL_HELP, description=_BACKFILL_HELP)
        backfill.add_argument("name", help="The schedule's name.")
        backfill.add_argument(
            "--from",
            dest="start",
            type=aware_datetime,
            required=True,
            help="First instant of the range, included (ISO 8601 with offset).",
        )
        backfill.add_argument(
            "--to",
            dest="end",
            type=aware_datetime,
            required=True,
            help="End of the range, excluded (ISO 8601 with offset; not after now).",
        )
        backfill.add_argument(
            "--include-succeeded",
            action="store_true",
            help="Also run slots that already have a successful receipt.",
        )
        backfill.add_argument(
            "--dry-run", action="store_true", help="List the slots it would run; change nothing."
        )
        rerun = sub.add_parser("rerun", help=_RERUN_HELP, description=_RERUN_HELP)
        rerun.add_argument("name", help="The schedule's name.")
        rerun.add_argument("occurrence", type=int, help="The occurrence to run again (1 or more).")
        rerun.add_argument(
            "--force", action="store_true", help="Run it again even though it succeeded."
        )
        rerun.add_argument("--note", default="", help="Why (kept in the rerun event).")
        stop = sub.add_parser("cancel-backfill", help="Cancel a schedule's open backfill.")
        stop.add_argument("name", help="The schedule's name.")
        calendars = sub.add_parser(
            "calendars", help="Exclusion calendars: list, add or remove dates."
        )
        cal = calendars.add_subparsers(dest="calendar_action", required=True)
        cal.add_parser("list", help="One line per calendar: holidays, dates, schedules.")
        for verb in ("add-date", "remove-date"):
            edit = cal.add_parser(verb, help=f"{verb.split('-')[0].title()} a local date.")
            edit.add_argument("calendar", help="The calendar's name.")
            edit.add_argument("date", type=date.fromisoformat, help="A local date, YYYY-MM-DD.")
            if verb == "add-date":
                edit.add_argument("--reason", default="", help="Why (shown with the date).")
        blackout_text.add_parser(sub)

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        if action in ("backfill", "cancel-backfill"):
            self._backfill(self._get(options["name"]), options)
        elif action == "rerun":
            self._rerun(self._get(options["name"]), options)
        elif action == "list":
            self._list(options["pool"])
        elif action == "calendars":
            self._calendars(options)
        elif action == "blackouts":
            self._write(blackout_text.run(options))
        elif action == "health":
            snap = health.snapshot()
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
                    f"{row.name}: already triggered at {_fmt(schedule.triggered_at)} and not "
                    "run yet; one run happens at the next worker pass."
                )
            elif action == "trigger":
                self.stdout.write(
                    f"{row.name}: triggered; it runs at the next worker pass as its own "
                    "occurrence, and its grid is unchanged."
                )
            else:
                self.stdout.write(
                    f"{row.name}: {row.status}, next run {_when(row.next_run_at, row.timezone)}"
                )

    def _backfill(self, schedule: Schedule, options: dict[str, Any]) -> None:
        try:
            if options["action"] == "cancel-backfill":
                done = state.cancel_backfill(schedule.pk, source="command")
                self.stdout.write(
                    f"{schedule.name}: backfill cancelled after {done.position} of "
                    f"{_slots(len(done.slots))} (a slot running now finishes)."
                )
                return
            kw = {"include_succeeded": options["include_succeeded"]}
            if options["dry_run"]:
                plan = state.plan_backfill(schedule, options["start"], options["end"], **kw)
                slots, skipped = plan.slots, plan.skipped_succeeded
            else:
                made = state.request_backfill(
                    schedule.pk, options["start"], options["end"], source="command", **kw
                )
                slots, skipped = made.slot_instants, made.skipped_succeeded
        except StateConflict as exc:
            raise CommandError(f"{schedule.name}: {exc.reason}") from None
        except ValidationError as exc:
            raise CommandError(f"{schedule.name}: {_messages(exc)}") from None
        verb = "would run (dry run, nothing changed)" if options["dry_run"] else "will run"
        note = f"; {skipped} already succeeded, left out" if skipped else ""
        self.stdout.write(f"{schedule.name}: backfill {verb} {_slots(len(slots))}, in order{note}:")
        for slot in slots:
            self.stdout.write(f"  {_when(slot, schedule.timezone)}")

    def _rerun(self, schedule: Schedule, options: dict[str, Any]) -> None:
        occurrence = options["occurrence"]
        try:
            state.rerun(
                schedule.pk,
                occurrence,
                force=options["force"],
                note=options["note"],
                source="command",
            )
        except StateConflict as exc:
            raise CommandError(f"{schedule.name}: {exc.reason}") from None
        except ValidationError as exc:
            raise CommandError(f"{schedule.name}: {_messages(exc)}") from None
        self.stdout.write(
            f"{schedule.name}: occurrence {occurrence} re-run requested; it runs at the next "
            f"worker pass under its key {state.idempotency_key(schedule.pk, occurrence)}, "
            "and its grid is unchanged."
        )

    def _calendars(self, options: dict[str, Any]) -> None:
        verb = options["calendar_action"]
        if verb == "list":
            self.stdout.write(f"{'NAME':24} {'HOLIDAYS':10} {'DATES':>5}  SCHEDULES")
            for cal in ExclusionCalendar.objects.prefetch_related("dates", "schedules"):
                where = "-".join(p for p in (cal.holidays_country, cal.holidays_subdivision) if p)
                names = ", ".join(s.name for s in cal.schedules.all()) or "-"
                self.stdout.write(
                    f"{cal.name:24} {where or '-':10} {len(cal.dates.all()):>5}  {names}"
                )
            return
        try:
            if verb == "add-date":
                state.add_dates(options["calendar"], [(options["date"], options["reason"])])
            else:
                if not state.remove_dates(options["calendar"], [options["date"]]):
                    raise CommandError(f"{options['calendar']}: has no date {options['date']}")
        except ValidationError as exc:
            raise CommandError(_messages(exc)) from None
        done = "added to" if verb == "add-date" else "removed from"
        self.stdout.write(
            f"{options['date']}: {done} {options['calendar']}; its schedules are re-planned."
        )

    def _write(self, lines: Any) -> None:
        for line in lines:
            self.stdout.write(line)

    def _get(self, name: str) -> Schedule:
        try:
            return Schedule.objects.get(name=name)
        except Schedule.DoesNotExist:
            raise CommandError(f"no schedule named {name!r}") from None

    def _list(self, pool: str | None) -> None:
        self.stdout.write(f"{'NAME':32} {'STATUS':9} {'CADENCE':44} NEXT RUN (ITS ZONE · UTC)")
        rows = Schedule.objects.order_by("name")
        for s in rows if pool is None else rows.filter(pool=pool):
            line = f"{s.name:32} {s.status:9} {_describe(s):44} {_when(s.next_run_at, s.timezone)}"
            why = s.degraded_reason or s.pause_reason  # why a paused schedule does not run
            self.stdout.write(f"{line}  ({why})" if why else line)

    def _upcoming(self, schedule: Schedule, count: int) -> None:
        try:
            words = cron_in_words(schedule.cron) if schedule.kind == "cron" else ""
            if schedule.kind == "rrule":
                words = timing.rrule_description(schedule.spec(exclusions=False))
            self.stdout.write(
                f"{schedule.name}: {_describe(schedule)}" + (f": {words}" if words else "")
            )
            views = schedule.upcoming_slots(count)
        except timing.InvalidSchedule as exc:  # a definition made invalid behind save()
            raise CommandError(
                f"{schedule.name}: the stored definition is invalid: {exc}"
            ) from None
        zone = ZoneInfo(schedule.timezone or "UTC")  # valid: upcoming() checked it
        if schedule.overlap_policy != "skip":
            self.stdout.write(f"  overlap policy: {schedule.overlap_policy}")
        if schedule.buffered_for is not None:
            self.stdout.write(
                f"  buffered: the slot {_when(schedule.buffered_for, zone.key)} runs next"
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
            line = f"{mark}{v.at.astimezone(zone):%Y-%m-%d %H:%M:%S %Z} ({zone.key})   {_fmt(v.at)}"
            if v.excluded_by is not None:
                line += f"   EXCLUDED, not run: {v.excluded_by}"
            elif v.blacked_out_by is not None:
                line += f"   BLACKED OUT, not run: window {v.blacked_out_by}"
            self.stdout.write(line)


def _describe(schedule: Schedule) -> str:
    """The schedule in words, or why it cannot be described (a definition written behind
    ``save()`` that the engine cannot evaluate)."""
    try:
        return timing.describe(schedule.spec(exclusions=False))
    except (timing.InvalidSchedule, ValueError, OverflowError):
        return "(invalid definition)"


def aware_datetime(value: str) -> datetime:
    """An ISO 8601 instant with a UTC offset (argparse type)."""
    parsed = parse_datetime(value)
    if parsed is None or parsed.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{value!r} is not an ISO 8601 datetime with an offset")
    return parsed


def _messages(exc: ValidationError) -> str:
    """``field: message`` pairs of a ``ValidationError`` (bare messages when it has none)."""
    if not hasattr(exc, "error_dict"):
        return " ".join(exc.messages)
    return "; ".join(
        " ".join(messages) if field == "__all__" else f"{field}: {' '.join(messages)}"
        for field, messages in exc.message_dict.items()
    )


def _fmt(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ") if value else "-"


def _when(value: datetime | None, zone_name: str) -> str:
    """An instant in the schedule's zone with its abbreviation, and in UTC beside it:
    ``2027-06-01 09:00:00 JST · 2027-06-01T00:00:00Z`` (UTC once for a UTC schedule)."""
    if value is None:
        return "-"
    try:
        zone = ZoneInfo(timing.validate_timezone(zone_name or "UTC"))
    except timing.InvalidSchedule:
        return _fmt(value)
    if zone.key == "UTC":
        return _fmt(value)
    return f"{value.astimezone(zone):%Y-%m-%d %H:%M:%S %Z} · {_fmt(value)}"


_BACKFILL_HELP = (
    "Run every slot of a past range [--from, --to) of a schedule, in order, one at a time, "
    "each as its own occurrence (slots that already succeeded are left out)."
)

_RERUN_HELP = (
    "Run occurrence N of a schedule again, as a new attempt under its own idempotency key "
    "(one attempt, the grid unchanged); --force for one that succeeded."
)

_ACTION_HELP = {
    "enable": "Make a paused or failed schedule active again (a failed one-shot is re-armed).",
    "disable": "Pause active schedules (a run in progress finishes), with an optional note "
    "and end (--until: a worker resumes them then, with no catch-up).",
    "cancel": "Cancel a schedule for good: it never runs again (not undoable).",
    "trigger": "Run a schedule at the next worker pass, as its own occurrence.",
}


def _slots(count: int) -> str:
    """``1 slot``, ``3 slots``."""
    return f"{count} slot" if count == 1 else f"{count} slots"


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
