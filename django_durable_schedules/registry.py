"""The callback registry: names in code mapped to callables. No database access here.

Callbacks are registered with :func:`register`, as a decorator or a call::

    @register("cleanup", every=3600)
    def cleanup(ctx): ...

    register("digest", build_digest, cron="0 7 * * *", timezone="Europe/Paris")

Only registered names can be run: the admin and API choose among them, never an
import path. ``schedules.py`` modules of installed apps are imported at start-up
(:func:`autodiscover`).
"""

from __future__ import annotations

import inspect
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .exceptions import NotRegistered

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")


@dataclass(frozen=True)
class Declaration:
    """A schedule declared in code next to its callback.

    Exactly one of ``every`` (seconds), ``cron`` or ``at`` (aware datetime) is set.
    """

    every: int | None = None
    cron: str | None = None
    at: datetime | None = None
    timezone: str | None = None
    payload: Any = None
    start_at: datetime | None = None
    end_at: datetime | None = None
    max_runs: int | None = None

    @property
    def kind(self) -> str:
        if self.every is not None:
            return "interval"
        if self.cron is not None:
            return "cron"
        return "once"


@dataclass(frozen=True)
class Registration:
    """One registered callback: ``name`` -> ``func`` (sync or async), plus its optional declaration."""

    name: str
    func: Callable[..., Any]
    declaration: Declaration | None = None
    is_async: bool = field(default=False)


class Registry:
    """Thread-safe mapping of callback names to :class:`Registration`."""

    def __init__(self) -> None:
        self._items: dict[str, Registration] = {}
        self._lock = threading.Lock()

    def add(self, registration: Registration) -> None:
        with self._lock:
            self._items[registration.name] = registration

    def remove(self, name: str) -> None:
        with self._lock:
            self._items.pop(name, None)

    def get(self, name: str) -> Registration:
        """Return the registration for ``name``; raises :class:`NotRegistered`."""
        try:
            return self._items[name]
        except KeyError:
            raise NotRegistered(f"no callback registered as {name!r}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def names(self) -> list[str]:
        """Sorted registered names (the only values ``Schedule.callback`` may take)."""
        return sorted(self._items)

    def declared(self) -> list[Registration]:
        """Registrations that declare a schedule in code."""
        return [r for r in self._items.values() if r.declaration is not None]


registry = Registry()


def register(
    name: str,
    func: Callable[..., Any] | None = None,
    *,
    every: int | None = None,
    cron: str | None = None,
    at: datetime | None = None,
    timezone: str | None = None,
    payload: Any = None,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
    max_runs: int | None = None,
) -> Any:
    """Register ``func`` under ``name``; usable as ``@register("name")`` or ``register("name", f)``.

    ``func`` takes one argument, a :class:`~django_durable_schedules.runner.RunContext`, and may
    be sync or ``async def``. Passing one of ``every`` (int, seconds), ``cron`` (5-field
    expression, evaluated in ``timezone``, an IANA name defaulting to ``settings.TIME_ZONE``)
    or ``at`` (aware datetime) also declares a schedule of the same name, created or updated
    (keeping its run state) on ``migrate`` and at worker start.

    Raises ``ValueError`` for a malformed name or more than one of every/cron/at.
    Returns ``func`` (so the decorator form leaves the function usable).
    """
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise ValueError(
            f"invalid callback name {name!r}: 1-128 of [A-Za-z0-9_.:-], starting with a letter or digit"
        )
    given = [v for v in (every, cron, at) if v is not None]
    if len(given) > 1:
        raise ValueError("declare at most one of every=, cron= or at=")
    declaration = None
    if given:
        declaration = Declaration(
            every=every,
            cron=cron,
            at=at,
            timezone=timezone,
            payload=payload,
            start_at=start_at,
            end_at=end_at,
            max_runs=max_runs,
        )
    elif any(v is not None for v in (timezone, payload, start_at, end_at, max_runs)):
        raise ValueError(
            "timezone/payload/start_at/end_at/max_runs need one of every=, cron= or at="
        )

    def decorator(f: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(f):
            raise TypeError(f"callback {name!r} is not callable")
        registry.add(
            Registration(
                name=name,
                func=f,
                declaration=declaration,
                is_async=inspect.iscoroutinefunction(f),
            )
        )
        return f

    if func is not None:
        return decorator(func)
    return decorator


def autodiscover() -> None:
    """Import the ``schedules`` module of every installed app (errors propagate)."""
    from django.utils.module_loading import autodiscover_modules

    autodiscover_modules("schedules")
