"""``manage.py schedules backfill``, ``cancel-backfill`` and ``rerun``: past occurrences run
(again) from the shell, through :func:`..state.plan_backfill` (``--dry-run``),
:func:`..state.request_backfill`, :func:`..state.cancel_backfill` and
:func:`..state.rerun`, recorded with source ``command``. :func:`add_parsers` declares the
three subcommands; :func:`backfill` and :func:`rerun` do the work and return the lines to
print; a refused request is a ``CommandError`` and writes nothing.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from .. import state
from ..exceptions import StateConflict
from ..models import Schedule
from .arguments import aware_datetime
from .schedule_text import field_messages, in_zone

_BACKFILL_HELP = (
    "Run every slot of a past range [--from, --to) of a schedule, in order, one at a time, "
    "each as its own occurrence (slots that already succeeded are left out)."
)

_RERUN_HELP = (
    "Run occurrence N of a schedule again, as a new attempt under its own idempotency key "
    "(one attempt, the grid unchanged); --force for one that succeeded."
)


def add_parsers(sub: Any) -> None:
    """Declare ``backfill``, ``rerun`` and ``cancel-backfill`` on ``sub`` (the ``schedules``
    command's subparsers), in that order."""
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
        "--cascade",
        action="store_true",
        help="Run the schedules downstream of it (kind 'after') again for each slot that succeeds.",
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


def backfill(schedule: Schedule, options: dict[str, Any]) -> list[str]:
    """``backfill`` (or, for the action ``cancel-backfill``, the cancel) of ``schedule``:
    the lines to print, the slots in order. Raises ``CommandError`` for a request the
    state package refuses (a conflict, or field messages)."""
    try:
        if options["action"] == "cancel-backfill":
            done = state.cancel_backfill(schedule.pk, source="command")
            return [
                f"{schedule.name}: backfill cancelled after {done.position} of "
                f"{slots_words(len(done.slots))} (a slot running now finishes)."
            ]
        kw = {"include_succeeded": options["include_succeeded"]}
        if options["dry_run"]:
            plan = state.plan_backfill(schedule, options["start"], options["end"], **kw)
            slots, skipped = plan.slots, plan.skipped_succeeded
        else:
            made = state.request_backfill(
                schedule.pk,
                options["start"],
                options["end"],
                source="command",
                cascade=options.get("cascade", False),
                **kw,
            )
            slots, skipped = made.slot_instants, made.skipped_succeeded
    except StateConflict as exc:
        raise CommandError(f"{schedule.name}: {exc.reason}") from None
    except ValidationError as exc:
        raise CommandError(f"{schedule.name}: {field_messages(exc)}") from None
    verb = "would run (dry run, nothing changed)" if options["dry_run"] else "will run"
    note = f"; {skipped} already succeeded, left out" if skipped else ""
    lines = [f"{schedule.name}: backfill {verb} {slots_words(len(slots))}, in order{note}:"]
    lines += [f"  {in_zone(slot, schedule.timezone)}" for slot in slots]
    return lines


def rerun(schedule: Schedule, options: dict[str, Any]) -> list[str]:
    """``rerun``: occurrence ``options["occurrence"]`` of ``schedule`` run again; the line to
    print. Raises ``CommandError`` for a re-run the state package refuses."""
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
        raise CommandError(f"{schedule.name}: {field_messages(exc)}") from None
    return [
        f"{schedule.name}: occurrence {occurrence} re-run requested; it runs at the next "
        f"worker pass under its key {state.idempotency_key(schedule.pk, occurrence)}, "
        "and its grid is unchanged."
    ]


def slots_words(count: int) -> str:
    """``1 slot``, ``3 slots``."""
    return f"{count} slot" if count == 1 else f"{count} slots"
