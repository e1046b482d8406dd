"""``manage.py schedules blackouts list|add|delete|link|unlink`` (issue #27): blackout windows
from the shell, as the admin and the API edit them. ``add`` and ``delete`` go through
:func:`..state.save_window` and :func:`..state.delete_window` (a ``blackouts`` event on each
schedule that names the window); ``link`` and ``unlink`` through
:func:`..state.change_windows`, the schedule edit of the admin and the API (an ``edited``
event with ``blackout_windows: [before, after]``). Every write is recorded with source
``command``. :func:`add_parser` declares the arguments; :func:`run` does the work and
returns the lines to print; a bad input is a ``CommandError`` and writes nothing.
"""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError
from django.db.models import Prefetch
from django.utils.dateparse import parse_datetime

from .. import state, timing
from ..exceptions import validation_text
from ..models import BlackoutWindow, Schedule
from .schedule_text import utc

#: The ``source`` of the events these commands record.
SOURCE = "command"

_ADD_HELP = (
    "Add a blackout window: one range (--start and --end) or recurring (--rrule and "
    "--duration, optionally anchored at --start, none starting after --end). A time "
    "without an offset is read in --timezone (default UTC)."
)
_LINK_HELP = {
    "link": "Add blackout windows to a schedule's (no run of it starts inside one).",
    "unlink": "Remove blackout windows from a schedule's.",
}


def iso_datetime(value: str) -> datetime:
    """argparse type of ``--start`` and ``--end``: an ISO 8601 datetime, with an offset
    (``2027-12-20T00:00:00Z``) or without (read in ``--timezone`` by :func:`add`).
    Raises ``ArgumentTypeError``."""
    try:
        parsed = parse_datetime(value.strip())
    except ValueError:
        parsed = None
    if parsed is None:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not an ISO 8601 datetime (2027-12-20T00:00:00Z, or "
            "2027-12-20T00:00:00 read in --timezone)"
        )
    return parsed


def add_parser(sub: Any) -> None:
    """Declare ``blackouts`` and its subcommands on ``sub`` (the ``schedules`` command's
    subparsers); the chosen one is in the option ``blackout_action``."""
    blackouts = sub.add_parser(
        "blackouts", help="Blackout windows: list, add, delete, link to or unlink from schedules."
    )
    verbs = blackouts.add_subparsers(dest="blackout_action", required=True)
    verbs.add_parser(
        "list", help="One line per window: name, when, zone, the schedules that name it."
    )
    add_cmd = verbs.add_parser("add", help=_ADD_HELP, description=_ADD_HELP)
    add_cmd.add_argument(
        "name", metavar="NAME", help="The window's name, a short slug: 'db-maintenance'."
    )
    add_cmd.add_argument(
        "--start",
        metavar="ISO",
        type=iso_datetime,
        help="A range: when it starts. Recurring: the rule's anchor (optional). ISO 8601; "
        "without an offset, read in --timezone.",
    )
    add_cmd.add_argument(
        "--end",
        metavar="ISO",
        type=iso_datetime,
        help="A range: when it ends (a slot at this instant runs). Recurring: no window "
        "starts after it (optional). ISO 8601; without an offset, read in --timezone.",
    )
    add_cmd.add_argument(
        "--rrule",
        metavar="RULE",
        default="",
        help="Recurring: an RFC 5545 rule for the instants each window starts at, read in "
        "--timezone, e.g. 'FREQ=DAILY;BYHOUR=2;BYMINUTE=0'.",
    )
    add_cmd.add_argument(
        "--duration",
        metavar="SECONDS",
        type=int,
        help="Recurring: how long each window lasts, in seconds.",
    )
    add_cmd.add_argument(
        "--timezone",
        metavar="ZONE",
        default="UTC",
        help="IANA time zone the rule, and a --start or --end without an offset, are "
        "read in (default UTC).",
    )
    add_cmd.add_argument(
        "--description", metavar="TEXT", default="", help="What the window is for."
    )
    delete_cmd = verbs.add_parser(
        "delete", help="Delete a window; the schedules that name it go on without it."
    )
    delete_cmd.add_argument("name", metavar="NAME", help="The window's name.")
    for verb, text in _LINK_HELP.items():
        link_cmd = verbs.add_parser(verb, help=text, description=text)
        link_cmd.add_argument("schedule", metavar="SCHEDULE", help="The schedule's name.")
        link_cmd.add_argument("windows", nargs="+", metavar="WINDOW", help="Window names.")


def run(options: dict[str, Any]) -> list[str]:
    """Do the ``blackouts`` subcommand of ``options`` (the parsed arguments); the lines
    to print. Raises ``CommandError`` (nothing written then)."""
    verb = options["blackout_action"]
    if verb == "list":
        return list_lines()
    if verb == "add":
        return add(options)
    if verb == "delete":
        return delete(options["name"])
    return change_links(options["schedule"], options["windows"], unlink=verb == "unlink")


def when(window: BlackoutWindow) -> str:
    """A window's span: ``START .. END`` in UTC for a range; ``RULE, N s each`` for a
    recurring one (read in its zone), with ``from START`` and ``until END`` when set."""
    if not window.rrule:
        return f"{utc(window.start_at)} .. {utc(window.end_at)}"
    text = f"{window.rrule}, {window.duration_seconds} s each"
    if window.start_at is not None:
        text += f", from {utc(window.start_at)}"
    if window.end_at is not None:
        text += f", until {utc(window.end_at)}"
    return text


def list_lines() -> list[str]:
    """``blackouts list``: a header, then one line per window, by name: name, span
    (:func:`when`), zone, how many schedules name it and their names. Two queries."""
    named = Prefetch("schedules", queryset=Schedule.objects.only("id", "name").order_by("name"))
    lines = [f"{'NAME':24} {'WHEN':44} {'ZONE':16} {'USED':>4}  SCHEDULES"]
    for window in BlackoutWindow.objects.order_by("name").prefetch_related(named):
        names = [s.name for s in window.schedules.all()]
        lines.append(
            f"{window.name:24} {when(window):44} {window.timezone:16} {len(names):>4}  "
            f"{', '.join(names) or '-'}"
        )
    return lines


def add(options: dict[str, Any]) -> list[str]:
    """``blackouts add``: a window saved through :func:`..state.save_window`, its naive
    ``--start``/``--end`` read in ``--timezone``. Raises ``CommandError`` with the field
    messages (an unknown zone, a bad rule, an end not after the start, a name taken)."""
    name = options["name"]
    zone_name = timing.canonical_timezone(options["timezone"])
    try:
        zone = ZoneInfo(timing.validate_timezone(zone_name))
    except timing.InvalidSchedule as exc:
        raise CommandError(f"{name}: timezone: {exc.message}") from None
    window = BlackoutWindow(
        name=name,
        description=options["description"],
        timezone=zone_name,
        start_at=_aware(options["start"], zone),
        end_at=_aware(options["end"], zone),
        rrule=options["rrule"],
        duration_seconds=options["duration"],
    )
    try:
        state.save_window(window, source=SOURCE)
    except ValidationError as exc:
        raise CommandError(f"{name}: {validation_text(exc)}") from None
    return [f"{window.name}: added, {when(window)} ({window.timezone})"]


def _aware(value: datetime | None, zone: ZoneInfo) -> datetime | None:
    """``value`` as given when it has an offset; a naive one read in ``zone`` (a wall time
    a DST change repeats: its first reading)."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=zone)


def find_window(name: str) -> BlackoutWindow:
    """The window named ``name``; raises ``CommandError`` naming it when there is none."""
    try:
        return BlackoutWindow.objects.get(name=name)
    except BlackoutWindow.DoesNotExist:
        raise CommandError(f"no blackout window named {name!r}") from None


def delete(name: str) -> list[str]:
    """``blackouts delete``: :func:`..state.delete_window`; says which schedules named it."""
    window = find_window(name)
    names = sorted(s.name for s in window.schedules.only("id", "name"))
    state.delete_window(window, source=SOURCE)
    if not names:
        return [f"{name}: deleted (no schedule named it)"]
    return [
        f"{name}: deleted; the schedules that named it go on without it from the next "
        f"claim: {', '.join(names)}"
    ]


def change_links(schedule_name: str, windows: list[str], *, unlink: bool) -> list[str]:
    """``blackouts link|unlink``: :func:`..state.change_windows` of the schedule named
    ``schedule_name``; says its windows after and its policy. Raises ``CommandError``
    naming an unknown schedule or window (nothing changed then)."""
    try:
        schedule = Schedule.objects.get(name=schedule_name)
    except Schedule.DoesNotExist:
        raise CommandError(f"no schedule named {schedule_name!r}") from None
    known = set(BlackoutWindow.objects.filter(name__in=windows).values_list("name", flat=True))
    missing = sorted(set(windows) - known)
    if missing:
        raise CommandError(f"no blackout window named {', '.join(repr(m) for m in missing)}")
    before = sorted(w.name for w in schedule.blackout_windows.all())
    add_names, remove_names = ([], windows) if unlink else (windows, [])
    try:
        row = state.change_windows(schedule.pk, add=add_names, remove=remove_names, source=SOURCE)
    except ValidationError as exc:
        raise CommandError(f"{schedule.name}: {validation_text(exc)}") from None
    except Schedule.DoesNotExist:  # deleted since it was read
        raise CommandError(f"no schedule named {schedule_name!r}") from None
    after = sorted(w.name for w in row.blackout_windows.all())
    listed = ", ".join(after) or "none"
    if after == before:
        return [f"{schedule.name}: unchanged; blackout windows: {listed}"]
    return [f"{schedule.name}: blackout windows: {listed} (policy {row.blackout_policy})"]
