"""``manage.py schedules groups list|add|delete`` (issue #28, item 1): concurrency groups
from the shell, as the admin and the API edit them. ``add`` creates a group or updates
the one of that name through :func:`..state.save_group` (the next claim reads its new
limits); ``delete`` goes through :func:`..state.delete_group`, refused while schedules
name the group. Both write as source ``command`` (:data:`SOURCE`): a change writes a
``group`` event on each schedule that names the group. :func:`add_parser` declares the
arguments; :func:`run` does the work and returns the lines to print; a bad input is a
``CommandError`` naming the field, and writes nothing.
"""

from __future__ import annotations

import argparse
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError
from django.db.models import Count

from .. import state
from ..db.clock import db_now
from ..exceptions import validation_text
from ..models import ConcurrencyGroup, Schedule

#: The audit trail's ``source`` of the command's writes (as the other subcommands).
SOURCE = "command"

_ADD_HELP = (
    "Add a concurrency group, or change the one of that name: at most --max-running runs "
    "of its schedules at once, at most --rate starts per window ('10/m'), or both. The "
    "next claim reads the new limits; a run in flight is never stopped."
)


def max_running_type(value: str) -> int:
    """argparse type of ``--max-running``: a whole number >= 1. Raises
    ``ArgumentTypeError``."""
    try:
        number = int(value.strip())
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number >= 1")
    return number


def add_parser(sub: Any) -> None:
    """Declare ``groups`` and its subcommands on ``sub`` (the ``schedules`` command's
    subparsers); the chosen one is in the option ``group_action``."""
    groups = sub.add_parser("groups", help="Concurrency groups: list, add (or change), delete.")
    verbs = groups.add_subparsers(dest="group_action", required=True)
    verbs.add_parser(
        "list", help="One line per group: name, limits, runs now, due rows waiting, schedules."
    )
    add_cmd = verbs.add_parser("add", help=_ADD_HELP, description=_ADD_HELP)
    add_cmd.add_argument(
        "name", metavar="NAME", help="The group's name, a short slug: 'partner-api'."
    )
    add_cmd.add_argument(
        "--max-running",
        metavar="N",
        type=max_running_type,
        help="The most runs of its schedules at once (left out: no cap).",
    )
    add_cmd.add_argument(
        "--rate",
        metavar="R",
        default="",
        help="The most starts per second, minute or hour: '2/s', '10/m', '100/h' "
        "(left out: no rate limit).",
    )
    add_cmd.add_argument("--description", metavar="TEXT", default="", help="What it limits.")
    delete_cmd = verbs.add_parser("delete", help="Delete a group; refused while schedules name it.")
    delete_cmd.add_argument("name", metavar="NAME", help="The group's name.")


def run(options: dict[str, Any]) -> list[str]:
    """Do the ``groups`` subcommand of ``options`` (the parsed arguments); the lines to
    print. Raises ``CommandError`` (nothing written then)."""
    verb = options["group_action"]
    if verb == "list":
        return list_lines()
    if verb == "add":
        return add(options)
    return delete(options["name"])


def limits(group: ConcurrencyGroup) -> str:
    """A group's limits in words: ``max 3 at once, 10/m``, ``no cap`` or ``no rate`` for a missing one."""
    cap = f"max {group.max_running} at once" if group.max_running else "no cap"
    return f"{cap}, {group.rate or 'no rate'}"


def list_lines() -> list[str]:
    """``groups list``: a header, then one line per group, by name: name, limits
    (:func:`limits`), live runs now, due rows waiting, how many schedules name it."""
    lines = [f"{'NAME':24} {'LIMITS':32} {'RUNNING':>7} {'WAITING':>7} {'USED':>5}"]
    groups = state.with_usage(ConcurrencyGroup.objects.order_by("name"), db_now())
    used = dict(
        Schedule.objects.filter(concurrency_group__isnull=False)
        .order_by()
        .values_list("concurrency_group")
        .annotate(n=Count("pk"))
        .values_list("concurrency_group", "n")
    )
    for group in groups:
        running, waiting = getattr(group, "running", 0), getattr(group, "waiting", 0)
        lines.append(
            f"{group.name:24} {limits(group):32} {running:>7} {waiting:>7} "
            f"{used.get(group.pk, 0):>5}"
        )
    if len(lines) == 1:
        lines.append("(no concurrency groups)")
    return lines


def add(options: dict[str, Any]) -> list[str]:
    """``groups add``: :func:`..state.save_group` (created, or changed when the name is
    taken). Raises ``CommandError`` with the field messages (a bad rate, no limit at all,
    a malformed name)."""
    name = options["name"]
    existed = ConcurrencyGroup.objects.filter(name=name).exists()
    try:
        group = state.save_group(
            name,
            max_running=options["max_running"],
            rate=options["rate"],
            description=options["description"],
            source=SOURCE,
        )
    except ValidationError as exc:
        raise CommandError(f"{name}: {validation_text(exc)}") from None
    return [f"{group.name}: {'changed' if existed else 'added'}, {limits(group)}"]


def delete(name: str) -> list[str]:
    """``groups delete``: :func:`..state.delete_group`. Raises ``CommandError`` for a
    name no group has, or while schedules name it (naming some of them)."""
    try:
        state.delete_group(name, source=SOURCE)
    except ValidationError as exc:
        raise CommandError(" ".join(exc.messages)) from None
    return [f"{name}: deleted"]
