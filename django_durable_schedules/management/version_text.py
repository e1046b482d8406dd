"""``manage.py schedules versions NAME`` and ``manage.py schedules restore NAME --event ID``
(issue #29, item 3): the versions of a schedule's definition, newest first
(:func:`..state.definition_versions`), and the restore of one as an edit
(:func:`..state.restore_definition`, source ``command``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from .. import state
from ..models import Schedule
from ..state.version_rules import VERSIONS_LIMIT, differences
from .schedule_text import utc


def add_parsers(sub: Any) -> None:
    """The ``versions`` and ``restore`` subcommands on ``sub`` (argparse subparsers)."""
    versions = sub.add_parser(
        "versions",
        help=f"The versions of a schedule's definition, newest first (at most "
        f"{VERSIONS_LIMIT}), each with what differs from the current one.",
    )
    versions.add_argument("name", help="The schedule's name.")
    restore = sub.add_parser(
        "restore",
        help="Make an earlier version of a schedule's definition current again, as an "
        "edit (re-planned from now; no run is fired).",
    )
    restore.add_argument("name", help="The schedule's name.")
    restore.add_argument(
        "--event", required=True, help="The version's event id (from 'schedules versions')."
    )


def _value(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def versions_lines(schedule: Schedule) -> Iterator[str]:
    """One block per version of ``schedule``'s definition: its event id, time (UTC), who
    and from where, the fields it changed, and the fields it holds otherwise than the
    current definition (``field: current -> version``)."""
    found = state.definition_versions(schedule)
    if not found:
        yield f"{schedule.name}: no version recorded (no created or edited event)."
        return
    current = state.current_definition(schedule)
    for version in found:
        who = version.actor or version.source
        mark = "  (current)" if version.current else ""
        yield f"{version.event_id}  {utc(version.at)}  {version.action} by {who}{mark}"
        if version.changed:
            yield f"    changed: {', '.join(version.changed)}"
        if version.restored_from:
            yield f"    restored from {version.restored_from}"
        for diff in differences(version.definition, current):
            yield f"    {diff.field}: {_value(diff.current)} -> {_value(diff.version)}"


def restore(schedule: Schedule, options: dict[str, Any]) -> Iterator[str]:
    """Restore the version ``--event`` of ``schedule``; raises ``CommandError`` naming the
    fields for a refusal (an id that is no version of it, a version no longer valid)."""
    before = schedule.updated_at
    try:
        row = state.restore_definition(schedule.pk, options["event"], source="command")
    except ValidationError as exc:
        detail = "; ".join(
            f"{field}: {' '.join(messages)}" for field, messages in exc.message_dict.items()
        )
        raise CommandError(f"{schedule.name}: not restored: {detail}") from None
    except Schedule.DoesNotExist:
        raise CommandError(f"{schedule.name} was deleted meanwhile") from None
    if row.updated_at == before:
        yield f"{row.name}: that version is the current definition; nothing changed."
        return
    yield (
        f"{row.name}: version {options['event']} restored (an edit: it takes effect at the "
        f"next worker pass; no run was fired); next run {utc(row.next_run_at)}."
    )


__all__ = ["add_parsers", "restore", "versions_lines"]
