"""Example request bodies of the API's create operations (and of the ``trigger``,
``disable`` and ``duplicate`` actions), as the OpenAPI schema shows them (Swagger's
"Example Value"): each is a real body that succeeds when sent as is to a fresh database
(an action's: on a new active schedule; tests/test_api_edges.py posts every one), not
filler generated from the types.

A schedule's ``callback`` must be a registered name, which only the project knows: the
examples name the first callback registered when the schema is generated
(:data:`PLACEHOLDER_CALLBACK` when there is none).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drf_spectacular.utils import OpenApiExample

from ..registry import registry

#: The ``callback`` of the schedule examples when no callback is registered.
PLACEHOLDER_CALLBACK = "myapp.tasks.send_report"


def _callback() -> str:
    names = sorted(registry.names())
    return names[0] if names else PLACEHOLDER_CALLBACK


def _schedules() -> list[OpenApiExample]:
    callback = _callback()
    return [
        OpenApiExample(
            "Every hour",
            summary="An interval schedule: every 3600 seconds from now.",
            value={
                "name": "hourly-sync",
                "callback": callback,
                "kind": "interval",
                "interval_seconds": 3600,
            },
        ),
        OpenApiExample(
            "Weekdays at 9:00 in Paris",
            summary="A cron schedule in a time zone, with a payload.",
            value={
                "name": "weekday-digest",
                "callback": callback,
                "kind": "cron",
                "cron": "0 9 * * 1-5",
                "timezone": "Europe/Paris",
                "payload": {"recipients": ["ops@example.com"]},
            },
        ),
        OpenApiExample(
            "Once, in five minutes",
            summary="A once schedule due 300 seconds after the database's now.",
            value={
                "name": "one-off-cleanup",
                "callback": callback,
                "kind": "once",
                "run_in_seconds": 300,
            },
        ),
    ]


def _groups() -> list[OpenApiExample]:
    return [
        OpenApiExample(
            "Two at once, ten a minute",
            value={
                "name": "reports",
                "description": "Report generation: bounded by the warehouse's load.",
                "max_running": 2,
                "rate": "10/m",
            },
        )
    ]


def _calendars() -> list[OpenApiExample]:
    return [
        OpenApiExample(
            "Own dates",
            summary="A calendar of its own dates (local to each schedule's zone).",
            value={
                "name": "year-end-freeze",
                "description": "No runs on these days.",
                "dates": [
                    {"date": "2030-12-24", "reason": "Christmas Eve"},
                    {"date": "2030-12-31", "reason": "New Year's Eve"},
                ],
            },
        ),
    ]


def _blackouts() -> list[OpenApiExample]:
    return [
        OpenApiExample(
            "One maintenance range",
            value={
                "name": "db-migration",
                "description": "Database upgrade.",
                "start_at": "2030-01-05T22:00:00Z",
                "end_at": "2030-01-06T02:00:00Z",
            },
        ),
        OpenApiExample(
            "Every Sunday night",
            summary="Recurring: 2 hours from 01:00 Paris time each Sunday.",
            value={
                "name": "sunday-maintenance",
                "rrule": "FREQ=WEEKLY;BYDAY=SU;BYHOUR=1;BYMINUTE=0;BYSECOND=0",
                "timezone": "Europe/Paris",
                "duration_seconds": 7200,
            },
        ),
    ]


def _actions() -> dict[str, list[OpenApiExample]]:
    """The examples of the action bodies that succeed on any active schedule."""
    return {
        "TriggerSerializer": [
            OpenApiExample(
                "Run now with a note",
                value={"note": "re-sent after the partner's outage", "payload": {"dry": False}},
            )
        ],
        "DisableSerializer": [
            OpenApiExample("Pause with a note", value={"note": "paused during the migration"})
        ],
        "DuplicateSerializer": [OpenApiExample("A paused copy", value={"name": "copy-of-sync"})],
    }


#: Request serializer class name -> the examples of its operation's body.
_BY_SERIALIZER: dict[str, Callable[[], list[OpenApiExample]]] = {
    "ScheduleSerializer": _schedules,
    "ConcurrencyGroupSerializer": _groups,
    "ExclusionCalendarSerializer": _calendars,
    "BlackoutWindowSerializer": _blackouts,
    "TriggerSerializer": lambda: _actions()["TriggerSerializer"],
    "DisableSerializer": lambda: _actions()["DisableSerializer"],
    "DuplicateSerializer": lambda: _actions()["DuplicateSerializer"],
}


def create_examples(serializer: Any) -> list[OpenApiExample]:
    """The request examples of the ``POST`` operation (a create, or the ``trigger``,
    ``disable`` or ``duplicate`` action) whose request serializer is ``serializer`` (an
    instance or class); ``[]`` for any other serializer."""
    cls = serializer if isinstance(serializer, type) else type(serializer)
    make = _BY_SERIALIZER.get(cls.__name__)
    if make is None:
        return []
    examples = make()
    for example in examples:
        example.request_only = True
    return examples


__all__ = ["PLACEHOLDER_CALLBACK", "create_examples"]
