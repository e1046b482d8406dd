"""The ``NOTIFIERS`` setting, read and validated (totality: a bad entry is reported by the
system check and skipped where it enters; it never stops a worker or an event).

``DURABLE_SCHEDULES["NOTIFIERS"]`` is ``{name: {"BACKEND": dotted path, "OPTIONS": {...},
"EVENTS": [actions]}}``; ``OPTIONS`` and ``EVENTS`` are optional (``EVENTS`` defaults to
:data:`DEFAULT_EVENTS`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from .. import conf
from ..models.choices import EventAction
from .base import Notifier

logger = logging.getLogger("django_durable_schedules.notify")

#: The actions notified when an entry names no ``EVENTS``: the engine's alerts.
DEFAULT_EVENTS = ("deadline_missed", "failing", "degraded", "paused", "recovered")
#: A notifier's name: as a schedule's, at most 100 characters.
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$")
ENTRY_KEYS = frozenset({"BACKEND", "OPTIONS", "EVENTS"})


@dataclass(frozen=True)
class NotifierConfig:
    """One valid ``NOTIFIERS`` entry: its ``name``, backend class, ``options`` and the
    ``events`` (actions) it is told about."""

    name: str
    backend: type[Notifier]
    options: Mapping[str, Any]
    events: frozenset[str]

    def build(self) -> Notifier:
        """A backend instance with the entry's options (may raise what its ``__init__``
        raises: the caller bounds it)."""
        return self.backend(dict(self.options))


def raw_setting() -> Any:
    """``DURABLE_SCHEDULES["NOTIFIERS"]`` as given (``{}`` when unset or unreadable)."""
    try:
        return conf.get("NOTIFIERS")
    except ImproperlyConfigured:  # DURABLE_SCHEDULES is no dict: check E002
        return {}


def parse_entry(name: Any, entry: Any) -> tuple[NotifierConfig | None, list[str]]:
    """One entry read: ``(config, [])`` when it is valid, else ``(None, problems)``.
    Never raises (an import error of the backend is a problem too)."""
    if not isinstance(name, str) or not NAME_RE.match(name):
        return None, [f"name {name!r} must be 1-100 of [A-Za-z0-9_.:-], starting alnum"]
    if not isinstance(entry, Mapping):
        return None, ["must be a dict with 'BACKEND' (and 'OPTIONS', 'EVENTS')"]
    problems = [f"unknown key {k!r}" for k in sorted(map(str, entry)) if k not in ENTRY_KEYS]
    backend = load_backend(entry.get("BACKEND"), problems)
    options = entry.get("OPTIONS", {})
    if not isinstance(options, Mapping):
        problems.append("'OPTIONS' must be a dict")
        options = {}
    events = entry.get("EVENTS", DEFAULT_EVENTS)
    if not isinstance(events, (list, tuple, set, frozenset)) or not all(
        isinstance(e, str) for e in events
    ):
        problems.append("'EVENTS' must be a list of event actions")
        events = ()
    unknown = sorted(e for e in events if e not in EventAction.values)
    if unknown:
        problems.append(f"'EVENTS' names unknown actions: {', '.join(unknown)}")
    if backend is not None:
        try:
            problems += [str(p) for p in backend.check_options(options)]
        except Exception as exc:  # noqa: BLE001 - a backend's own check that raises
            problems.append(f"its check_options raised {type(exc).__name__}: {exc}")
    if problems or backend is None:
        return None, problems
    return NotifierConfig(name, backend, dict(options), frozenset(events)), []


def load_backend(path: Any, problems: list[str]) -> type[Notifier] | None:
    """The class named by ``path`` (a subclass of :class:`.Notifier`), or None with the
    problem appended to ``problems``."""
    if not isinstance(path, str) or not path:
        problems.append("'BACKEND' is required: the dotted path of a Notifier class")
        return None
    try:
        backend = import_string(path)
    except Exception as exc:  # noqa: BLE001 - ImportError, or what the module raises
        problems.append(f"'BACKEND' {path!r} cannot be imported ({type(exc).__name__}: {exc})")
        return None
    if not (isinstance(backend, type) and issubclass(backend, Notifier)):
        problems.append(
            f"'BACKEND' {path!r} is not a subclass of django_durable_schedules.notify.Notifier"
        )
        return None
    return backend


def problems() -> list[str]:
    """Every problem of the setting, each prefixed with its entry's name (for the check)."""
    value = raw_setting()
    if value in (None, {}):
        return []
    if not isinstance(value, Mapping):
        return [f"NOTIFIERS must be a dict of name -> entry, not {type(value).__name__}"]
    found = []
    for name, entry in value.items():
        found += [f"NOTIFIERS[{name!r}]: {p}" for p in parse_entry(name, entry)[1]]
    return found


def configured() -> list[NotifierConfig]:
    """The valid entries of ``NOTIFIERS``, in the setting's order; an invalid one is left
    out (the system check reports it; a warning is logged each time it is read here)."""
    value = raw_setting()
    if not value or not isinstance(value, Mapping):
        if value:
            logger.warning("DURABLE_SCHEDULES['NOTIFIERS'] is not a dict: no notifications")
        return []
    found = []
    for name, entry in value.items():
        config, bad = parse_entry(name, entry)
        if config is None:
            logger.warning("notifier %r is left out: %s", name, "; ".join(bad))
        else:
            found.append(config)
    return found


def notifiers_for(action: str) -> list[str]:
    """Names of the valid notifiers told about ``action``."""
    return [c.name for c in configured() if action in c.events]
