"""``manage.py schedules calendars list|add-date|remove-date``: exclusion calendars from the
shell. ``add-date`` and ``remove-date`` go through :func:`..state.add_dates` and
:func:`..state.remove_dates`, which re-plan the schedules that name the calendar.
:func:`add_parser` declares the arguments; :func:`run` does the work and returns the lines
to print; a bad input is a ``CommandError`` and writes nothing.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from .. import state
from ..models import ExclusionCalendar
from .schedule_text import field_messages


def add_parser(sub: Any) -> None:
    """Declare ``calendars`` and its subcommands on ``sub`` (the ``schedules`` command's
    subparsers); the chosen one is in the option ``calendar_action``."""
    calendars = sub.add_parser("calendars", help="Exclusion calendars: list, add or remove dates.")
    cal = calendars.add_subparsers(dest="calendar_action", required=True)
    cal.add_parser("list", help="One line per calendar: holidays, dates, schedules.")
    for verb in ("add-date", "remove-date"):
        edit = cal.add_parser(verb, help=f"{verb.split('-')[0].title()} a local date.")
        edit.add_argument("calendar", help="The calendar's name.")
        edit.add_argument("date", type=date.fromisoformat, help="A local date, YYYY-MM-DD.")
        if verb == "add-date":
            edit.add_argument("--reason", default="", help="Why (shown with the date).")


def run(options: dict[str, Any]) -> list[str]:
    """The ``calendars`` subcommand in ``options["calendar_action"]``: the lines to print.
    Raises ``CommandError`` for an unknown calendar, a date it does not have, or field
    messages from the state package."""
    verb = options["calendar_action"]
    if verb == "list":
        lines = [f"{'NAME':24} {'HOLIDAYS':10} {'DATES':>5}  SCHEDULES"]
        for cal in ExclusionCalendar.objects.prefetch_related("dates", "schedules"):
            where = "-".join(p for p in (cal.holidays_country, cal.holidays_subdivision) if p)
            names = ", ".join(s.name for s in cal.schedules.all()) or "-"
            lines.append(f"{cal.name:24} {where or '-':10} {len(cal.dates.all()):>5}  {names}")
        return lines
    try:
        if verb == "add-date":
            state.add_dates(options["calendar"], [(options["date"], options["reason"])])
        else:
            if not state.remove_dates(options["calendar"], [options["date"]]):
                raise CommandError(f"{options['calendar']}: has no date {options['date']}")
    except ValidationError as exc:
        raise CommandError(field_messages(exc)) from None
    done = "added to" if verb == "add-date" else "removed from"
    return [f"{options['date']}: {done} {options['calendar']}; its schedules are re-planned."]
