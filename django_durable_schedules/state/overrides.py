"""A trigger's payload override (issue #27): checked where it enters
(:func:`check_override`, called by :func:`.control.trigger`) and merged by the claim
(:func:`effective_payload`).

The override is a JSON object merged over the schedule's payload at the top level; it is
stored on the row (``Schedule.trigger_payload``) with the trigger, and cleared with
``triggered_at`` wherever a pending trigger is dropped (:func:`.machine.clear_trigger`).
The claim of the trigger keeps it as the occurrence's override, so a retry of that
occurrence runs with it too (:func:`.rules.grant_lease`); the claim of a new occurrence of
any other origin clears it.
Pure: no database access.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError

from ..models import EventAction, Schedule, ScheduleEvent
from ..payload_schemas import declared_keys, schema_problems
from ..payloads import payload_errors
from ..registry import registry
from ..uuids import uuid4
from .transitions import implements

#: Longest ``note`` a trigger keeps (characters).
NOTE_MAX_CHARS = 500


def merged(payload: Any, override: dict[str, Any]) -> dict[str, Any] | None:
    """``override`` merged over the schedule's ``payload`` at the top level (a blank
    payload counts as ``{}``); None when ``payload`` is not a JSON object (nothing to merge
    over)."""
    if payload is None:
        payload = {}
    if not isinstance(payload, dict):
        return None
    return {**payload, **override}


def check_override(
    row: Schedule, payload: Any, note: Any, ignore_blackout: Any, *, declared_only: bool
) -> None:
    """Raise ``ValidationError`` (field messages under ``payload``, ``note`` or
    ``ignore_blackout``) unless a trigger of ``row`` may run with them: ``payload`` None
    or a JSON object whose merge over ``row.payload`` (:func:`merged`) keeps the payload
    rules (:func:`..payloads.payload_errors`) and, when the callback declares a
    ``payload_schema``, is valid against it (each problem with its path); with
    ``declared_only`` (an owner-scoped API user) only keys the schema declares in
    ``properties`` may be overridden; ``note`` text of at most :data:`NOTE_MAX_CHARS`;
    ``ignore_blackout`` a bool."""
    errors: dict[str, list[str]] = {}
    if not isinstance(note, str):
        errors["note"] = ["Must be text."]
    elif len(note) > NOTE_MAX_CHARS:
        errors["note"] = [f"At most {NOTE_MAX_CHARS} characters."]
    if not isinstance(ignore_blackout, bool):
        errors["ignore_blackout"] = ["Must be true or false."]
    if payload is not None:
        problems = _payload_problems(row, payload, declared_only)
        if problems:
            errors["payload"] = problems
    if errors:
        raise ValidationError(errors)


def trigger_changes(payload: Any, note: str, ignore_blackout: bool) -> dict[str, Any]:
    """The ``changes`` of a ``triggered`` event: ``note``, ``payload`` (the override) and
    ``ignore_blackout``, each only when given."""
    changes: dict[str, Any] = {"note": note} if note else {}
    if payload is not None:
        changes["payload"] = payload
    if ignore_blackout:
        changes["ignore_blackout"] = True
    return changes


def _payload_problems(row: Schedule, payload: Any, declared_only: bool) -> list[str]:
    if not isinstance(payload, dict):
        return ["The override must be a JSON object (its keys replace the payload's)."]
    if not all(isinstance(k, str) for k in payload):
        return ["The override's keys must be strings."]
    errors = payload_errors(payload, None).get("payload")
    if errors:
        return [e.replace("The payload", "The override", 1) for e in errors]
    result = merged(row.payload, payload)
    if result is None:
        return ["The schedule's payload is not a JSON object: an override cannot be merged."]
    errors = payload_errors(result, None).get("payload")
    if errors:
        return [e.replace("The payload", "The merged payload", 1) for e in errors]
    schema = registry.get(row.callback).payload_schema if row.callback in registry else None
    if declared_only:
        undeclared = sorted(set(payload) - declared_keys(schema))
        if undeclared:
            return [f"Not a key the callback's payload schema declares: {', '.join(undeclared)}."]
    if schema is not None:
        return schema_problems(schema, result)
    return []


def effective_payload(row: Schedule) -> tuple[Any, str]:
    """What the claim of ``row``'s pending trigger runs with: its override
    (``trigger_payload``) merged over ``payload``, or ``payload`` itself when there is no
    override; and why an override was ignored (``""``: it was not). An override written
    behind ``save()`` that is no JSON object, or whose merge breaks the payload rules, is
    ignored, never raised: the claim runs the schedule's payload and records why."""
    override = row.trigger_payload
    if override is None:
        return row.payload, ""
    if not isinstance(override, dict) or not all(isinstance(k, str) for k in override):
        return row.payload, "the pending trigger's payload override is not a JSON object"
    result = merged(row.payload, override)
    if result is None:
        return row.payload, "the schedule's payload is not a JSON object"
    errors = payload_errors(result, None).get("payload")
    if errors:
        return row.payload, errors[0].replace("The payload", "the merged payload", 1)
    return result, ""


@implements("claim.run", "claim.triggered_paused")
def take_override(row: Schedule, now: datetime, events: list[ScheduleEvent]) -> Any:
    """The claim of ``row``'s pending trigger at ``now``: the payload its attempt records
    (the effective payload, :func:`effective_payload`, when it differs from the
    schedule's; else None). An ignored override appends a ``triggered`` event (source
    ``worker``) whose ``changes`` say why (``{"override_ignored": reason}``) to
    ``events`` and is dropped from the row; the batch goes on."""
    payload, ignored = effective_payload(row)
    if ignored:
        row.trigger_payload = None  # not the occurrence's: its retries run the payload
        events.append(
            ScheduleEvent(
                id=uuid4(),
                schedule_id=row.pk,
                schedule_name=row.name,
                action=EventAction.TRIGGERED,
                at=now,
                actor_repr="",
                source="worker",
                changes={"override_ignored": ignored},
                occurrence=row.occurrence + 1,
            )
        )
    return None if payload == row.payload else payload
