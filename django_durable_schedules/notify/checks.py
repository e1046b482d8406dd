"""The system checks of notifications: ``durable_schedules.E020`` (a ``NOTIFIERS`` entry
that is not valid: bad ``BACKEND`` path, missing ``url``, bad option types) and ``E021``
(a ``NOTIFY_*`` number out of range)."""

from __future__ import annotations

import math
from typing import Any

from django.core.checks import Error, Tags, register
from django.core.exceptions import ImproperlyConfigured

from .. import conf
from . import config

#: The numeric settings and their bounds (inclusive).
NUMBERS = {
    "NOTIFY_MAX_TRIES": (1, 1000, True),
    "NOTIFY_BACKOFF_BASE_SECONDS": (0.01, 86400, False),
    "NOTIFY_BACKOFF_CAP_SECONDS": (0.01, 86400, False),
    "NOTIFY_POLL_SECONDS": (0.05, 3600, False),
}


def number_problems(user: dict[str, Any]) -> list[str]:
    """Messages for the ``NOTIFY_*`` numbers of ``user`` that are out of range."""
    found = []
    for key, (low, high, whole) in NUMBERS.items():
        if key not in user:
            continue
        value = user[key]
        ok = (
            isinstance(value, (int, float))
            and not isinstance(value, bool)
            and math.isfinite(value)
            and low <= value <= high
            and (not whole or value == int(value))
        )
        if not ok:
            kind = "a whole number" if whole else "a number of seconds"
            found.append(
                f"DURABLE_SCHEDULES[{key!r}] must be {kind} from {low} to {high}, not {value!r}."
            )
    return found


@register(Tags.compatibility)
def check_notifiers(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """E020: each problem of ``NOTIFIERS``; E021: a ``NOTIFY_*`` number out of range."""
    try:
        user = conf.user_settings()
    except ImproperlyConfigured:
        return []  # E002 says so
    messages: list[Any] = [
        Error(
            problem,
            hint="See docs/monitoring.md for the NOTIFIERS setting; this entry sends nothing.",
            id="durable_schedules.E020",
        )
        for problem in config.problems()
    ]
    messages += [Error(p, id="durable_schedules.E021") for p in number_problems(user)]
    return messages
