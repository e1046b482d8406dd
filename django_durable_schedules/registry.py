"""The callback registry: names in code mapped to callables. No database access here.

Callbacks are registered with :func:`register`, as a decorator or a call::

    @register("cleanup", every=3600)
    def cleanup(ctx): ...

    register("digest", build_digest, cron="0 7 * * *", timezone="Europe/Paris")

A registered callback may also be a ``django.tasks`` Task or a Celery task (the run
enqueues it, see :mod:`.dispatch`), or a management command
(:func:`register_command`). Only registered names can be run: the admin and API choose among them, never an
import path. ``schedules.py`` modules of installed apps are imported at start-up
(:func:`autodiscover`).

This module owns the registry itself (:class:`Registration`, :class:`Registry`,
``registry``) and the registering calls. The rules of what a call declares (the name, the
schedule, pool and priority, owner access) live in :mod:`.declarations`, what kind of
callable it is in :mod:`.task_kinds`; their public names are re-exported here.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar, overload

from .declarations import DEFAULT_OWNER_MIN_INTERVAL as DEFAULT_OWNER_MIN_INTERVAL
from .declarations import NAME_RE as NAME_RE
from .declarations import POOL_MESSAGE as POOL_MESSAGE
from .declarations import POOL_RE as POOL_RE
from .declarations import PRIORITY_MAX as PRIORITY_MAX
from .declarations import PRIORITY_MIN as PRIORITY_MIN
from .declarations import Declaration as Declaration
from .declarations import Flow, build_declaration, check_owner_access
from .exceptions import NotRegistered
from .payload_schemas import check_schema
from .task_kinds import DJANGO_TASK_OPTIONS as DJANGO_TASK_OPTIONS
from .task_kinds import KIND_CALLABLE as KIND_CALLABLE
from .task_kinds import KIND_CELERY_TASK as KIND_CELERY_TASK
from .task_kinds import KIND_COMMAND as KIND_COMMAND
from .task_kinds import KIND_DJANGO_TASK as KIND_DJANGO_TASK
from .task_kinds import check_task_options, task_kind

#: The type of what is registered (a function, a Task): ``register`` returns it unchanged,
#: so a decorated function keeps its signature for type checkers (``mypy --strict``).
F = TypeVar("F")


@dataclass(frozen=True)
class Registration:
    """One registered callback: ``name`` -> ``func`` (sync or async), plus its optional
    declaration. ``kind`` is one of the ``KIND_*`` values; ``options`` are the task options
    (``task_options=``) or, for a command, ``{"command", "args", "options"}``."""

    name: str
    func: Any
    declaration: Declaration | None = None
    is_async: bool = field(default=False)
    kind: str = KIND_CALLABLE
    options: Mapping[str, Any] = field(default_factory=dict)
    #: Owner-scoped API users (``API_OWNER_SCOPED``, not staff) may schedule this callback.
    owner_scoped: bool = False
    #: The shortest gap between two runs their schedules may have (seconds).
    owner_min_interval: int = 0
    #: The JSON Schema of its payload (``register(payload_schema=...)``), or None.
    payload_schema: Mapping[str, Any] | None = None


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

    def owner_scoped_names(self) -> list[str]:
        """Sorted names owner-scoped API users may schedule (``register(owner_scoped=True)``)."""
        return sorted(n for n, r in self._items.items() if r.owner_scoped)

    def declared(self) -> list[Registration]:
        """Registrations that declare a schedule in code."""
        return [r for r in self._items.values() if r.declaration is not None]


registry = Registry()


@overload
def register(
    name: str,
    func: F,
    *,
    every: int | None = None,
    cron: str | None = None,
    at: datetime | None = None,
    rrule: str | None = None,
    extra_specs: Sequence[str] | None = None,
    exclusion_policy: str | None = None,
    rrule_business_days: bool | None = None,
    manual: bool = False,
    after: list[str] | tuple[str, ...] | None = None,
    wait_seconds: int | None = None,
    timezone: str | None = None,
    payload: Any = None,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
    max_runs: int | None = None,
    pool: str | None = None,
    priority: int | None = None,
    concurrency_group: str | None = None,
    task_options: Mapping[str, Any] | None = None,
    owner_scoped: bool = False,
    owner_min_interval: int = ...,
    payload_schema: Mapping[str, Any] | None = None,
) -> F: ...


@overload
def register(
    name: str,
    func: None = None,
    *,
    every: int | None = None,
    cron: str | None = None,
    at: datetime | None = None,
    rrule: str | None = None,
    extra_specs: Sequence[str] | None = None,
    exclusion_policy: str | None = None,
    rrule_business_days: bool | None = None,
    manual: bool = False,
    after: list[str] | tuple[str, ...] | None = None,
    wait_seconds: int | None = None,
    timezone: str | None = None,
    payload: Any = None,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
    max_runs: int | None = None,
    pool: str | None = None,
    priority: int | None = None,
    concurrency_group: str | None = None,
    task_options: Mapping[str, Any] | None = None,
    owner_scoped: bool = False,
    owner_min_interval: int = ...,
    payload_schema: Mapping[str, Any] | None = None,
) -> Callable[[F], F]: ...


def register(
    name: str,
    func: Any = None,
    *,
    every: int | None = None,
    cron: str | None = None,
    at: datetime | None = None,
    rrule: str | None = None,
    extra_specs: Sequence[str] | None = None,
    exclusion_policy: str | None = None,
    rrule_business_days: bool | None = None,
    manual: bool = False,
    after: list[str] | tuple[str, ...] | None = None,
    wait_seconds: int | None = None,
    timezone: str | None = None,
    payload: Any = None,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
    max_runs: int | None = None,
    pool: str | None = None,
    priority: int | None = None,
    concurrency_group: str | None = None,
    task_options: Mapping[str, Any] | None = None,
    owner_scoped: bool = False,
    owner_min_interval: int = DEFAULT_OWNER_MIN_INTERVAL,
    payload_schema: Mapping[str, Any] | None = None,
) -> Any:
    """Register ``func`` under ``name``; usable as ``@register("name")`` or ``register("name", f)``.

    ``func`` takes one argument, a :class:`~django_durable_schedules.RunContext`, and may
    be sync or ``async def``. Passing one of ``every`` (int, seconds), ``cron`` (5-field
    expression, evaluated in ``timezone``, an IANA name defaulting to ``settings.TIME_ZONE``),
    ``rrule`` (an RFC 5545 rule such as ``"FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1"``,
    in ``timezone`` too) or ``at`` (aware datetime) also declares a schedule of the same name, created or updated
    (keeping its run state) on ``migrate`` and at worker start. ``manual=True`` declares one
    of kind ``manual`` instead: no spec, never due by itself, it runs only when triggered
    (admin "Trigger now", API ``trigger/``, ``state.trigger``); it takes ``payload`` (and
    ``timezone``) but none of every/cron/rrule/at/start_at/end_at/max_runs.
    ``after=["reports.import"]`` (a list of schedule names) declares one of kind ``after``:
    it runs each nominal instant of those schedules once they all succeeded for it, waiting
    ``wait_seconds`` at most (left out: a new row's default, an existing row's value kept);
    it takes none of every/cron/rrule/at/start_at/end_at/max_runs/manual/extra_specs
    (``ValueError``). The sync links it (a name no schedule has, or links the chaining
    checks refuse: logged, that declaration not synced; the others are).
    ``extra_specs`` (with ``cron`` or ``rrule``): further cron expressions or rules the
    schedule fires on too (``Schedule.extra_specs``: the union, in the same zone and window).
    ``exclusion_policy`` (``"skip"``, ``"previous_business_day"``, ``"next_business_day"``)
    and ``rrule_business_days`` (True: the rule's BYMONTHDAY/BYSETPOS count business days)
    set those fields (left out: a new row's default, an existing row's value kept).

    ``func`` may instead be a ``django.tasks`` Task (Django 6+) or a Celery task: a run then
    enqueues it with the schedule's payload (a JSON object) as keyword arguments and is
    receipted ``enqueued`` with ``{"task_id", "backend", "queue"}`` (see :mod:`.dispatch`).
    ``task_options`` go with it: for a django.tasks Task any of ``priority``, ``queue_name``,
    ``run_after``, ``backend`` (``Task.using()``); for a Celery task ``apply_async`` options
    such as ``queue``, ``routing_key``, ``priority``, ``expires``.

    ``owner_scoped=True`` lets owner-scoped API users (``API_OWNER_SCOPED``: non-staff users
    who see and control only their own schedules) create schedules of this callback, with no
    two runs closer than ``owner_min_interval`` seconds (default 300); by default they may
    schedule no callback at all. Staff and code are not limited by either.

    ``payload_schema`` (a JSON Schema, as a dict) declares what its payload looks like: a
    trigger's payload override is validated against it (the merged payload), owner-scoped
    API users may override only the keys it declares in ``properties``, and the admin's
    "Run now…" page renders a form of those properties (:mod:`.payload_schemas`).

    ``pool`` (a name such as ``"reports"``) puts the declared schedule in that worker pool:
    only workers started with ``run_scheduler --pool reports`` claim it. ``priority`` (an
    int, -32768 to 32767, higher first) orders it among schedules due at once: a claim takes
    the higher priorities first, then the earliest due. Left out, a new schedule gets the
    pool ``"default"`` and priority 0, and sync leaves an existing row's values (set in the
    admin or the API) as they are. ``concurrency_group`` (a group's name, ``"partner-api"``)
    puts it in that :class:`~.models.ConcurrencyGroup` (which must exist when the schedule
    is synced: otherwise the sync logs an error naming both and skips that schedule, and
    check W005 reports it); left out, sync leaves the
    row's group as it is. All three need a declared schedule (every/cron/rrule/at or
    ``manual=True``).

    Raises ``ValueError`` for a bad value or for arguments that cannot go together (as
    the standard library does: ``open(..., "rb", encoding=...)``; each argument is well
    typed, their combination is wrong): a malformed name, more than one of
    every/cron/at/rrule, ``manual=True`` or ``after=`` with any of every/cron/rrule/at/
    start_at/end_at/max_runs, a malformed ``pool`` or a ``priority`` out of range,
    ``task_options`` that the callback's kind does not take, or a negative
    ``owner_min_interval``; ``TypeError`` for a value of the wrong type: ``func`` not
    callable, a ``payload_schema`` that is not a dict, a ``manual`` that is not True or
    False, an ``after`` that is not a list of names, or a ``priority`` that is not an
    int; ``ImproperlyConfigured`` for a ``payload_schema`` that is no valid JSON Schema.
    Returns ``func`` (so the decorator form leaves the function usable).
    """
    declaration = build_declaration(
        name,
        every,
        cron,
        at,
        timezone,
        payload,
        start_at,
        end_at,
        max_runs,
        rrule=rrule,
        extra_specs=extra_specs,
        manual=manual,
        flow=Flow(pool, priority, concurrency_group),
        exclusion_policy=exclusion_policy,
        rrule_business_days=rrule_business_days,
        after=after,
        wait_seconds=wait_seconds,
    )
    check_owner_access(owner_scoped, owner_min_interval)
    schema = check_schema(name, payload_schema)

    def decorator(f: Any) -> Any:
        kind = task_kind(f)
        options = dict(task_options or {})
        check_task_options(name, f, kind, options)
        registry.add(
            Registration(
                name=name,
                func=f,
                declaration=declaration,
                is_async=kind == KIND_CALLABLE and inspect.iscoroutinefunction(f),
                kind=kind,
                options=options,
                owner_scoped=owner_scoped,
                owner_min_interval=owner_min_interval,
                payload_schema=schema,
            )
        )
        return f

    if func is not None:
        return decorator(func)
    return decorator


def register_command(
    name: str,
    command: str,
    *,
    args: Sequence[str] = (),
    options: Mapping[str, Any] | None = None,
    every: int | None = None,
    cron: str | None = None,
    at: datetime | None = None,
    rrule: str | None = None,
    extra_specs: Sequence[str] | None = None,
    exclusion_policy: str | None = None,
    rrule_business_days: bool | None = None,
    after: list[str] | tuple[str, ...] | None = None,
    wait_seconds: int | None = None,
    timezone: str | None = None,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
    max_runs: int | None = None,
    pool: str | None = None,
    priority: int | None = None,
    concurrency_group: str | None = None,
    owner_scoped: bool = False,
    owner_min_interval: int = DEFAULT_OWNER_MIN_INTERVAL,
) -> None:
    """Register the management command ``command`` (e.g. ``"clearsessions"``) under ``name``.

    A run calls ``call_command(command, *args, **options)`` in the worker process and keeps
    its stdout and stderr, cut to ``RESULT_MAX_BYTES``, in the receipt's result; a
    ``CommandError`` (or any exception) is a ``failed`` receipt, retried like any failure.
    The registration is the allow-list: only commands registered in code can run, always
    with the arguments given here (the schedule's payload is not passed to them).
    ``every``/``cron``/``at``/``after``... declare its schedule (``pool``/``priority``: its worker
    pool and claim priority; ``concurrency_group``: its group's name), and ``owner_scoped`` / ``owner_min_interval`` open it to
    owner-scoped API users, as for :func:`register`.

    Raises ``ValueError`` for a malformed name, command name or pool, or a priority out of
    range; ``TypeError`` if ``args`` is not a sequence of strings or ``priority`` not an int.
    """
    declaration = build_declaration(
        name,
        every,
        cron,
        at,
        timezone,
        None,
        start_at,
        end_at,
        max_runs,
        rrule=rrule,
        extra_specs=extra_specs,
        flow=Flow(pool, priority, concurrency_group),
        exclusion_policy=exclusion_policy,
        rrule_business_days=rrule_business_days,
        after=after,
        wait_seconds=wait_seconds,
    )
    check_owner_access(owner_scoped, owner_min_interval)
    if not isinstance(command, str) or not command or command.strip() != command:
        raise ValueError(f"invalid management command name {command!r}")
    if isinstance(args, str) or not all(isinstance(a, str) for a in args):
        raise TypeError("args must be a sequence of strings, e.g. args=['--noinput']")
    registry.add(
        Registration(
            name=name,
            func=command,
            declaration=declaration,
            kind=KIND_COMMAND,
            options={"command": command, "args": tuple(args), "options": dict(options or {})},
            owner_scoped=owner_scoped,
            owner_min_interval=owner_min_interval,
        )
    )


def autodiscover() -> None:
    """Import the ``schedules`` module of every installed app (errors propagate)."""
    from django.utils.module_loading import autodiscover_modules

    autodiscover_modules("schedules")
