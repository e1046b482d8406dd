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
"""

from __future__ import annotations

import inspect
import re
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar, overload

from .exceptions import NotRegistered
from .payload_schemas import check_schema

#: The type of what is registered (a function, a Task): ``register`` returns it unchanged,
#: so a decorated function keeps its signature for type checkers (``mypy --strict``).
F = TypeVar("F")

NAME_RE = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}\Z")  # \Z: no trailing newline
#: A pool's name (``Schedule.pool``, ``models.pool_validator``, ``register(pool=)``).
POOL_RE = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}\Z"
POOL_MESSAGE = "1-64 of letters, digits, '_', '.', ':' or '-', starting with a letter or digit."
#: ``Schedule.priority``'s range (a 16-bit integer on every database).
PRIORITY_MIN, PRIORITY_MAX = -32768, 32767


@dataclass(frozen=True)
class Declaration:
    """A schedule declared in code next to its callback.

    Exactly one of ``every`` (seconds), ``cron``, ``at`` (aware datetime) or ``rrule`` (an
    RFC 5545 rule) is set, or ``manual`` (kind ``manual``: no spec, it runs only when
    triggered) and none of them.
    """

    every: int | None = None
    cron: str | None = None
    at: datetime | None = None
    rrule: str | None = None
    timezone: str | None = None
    payload: Any = None
    start_at: datetime | None = None
    end_at: datetime | None = None
    max_runs: int | None = None
    manual: bool = False
    #: The worker pool and the claim priority (None: the model's defaults, ``"default"``
    #: and 0, on a new row; an existing row's values are then left as they are).
    pool: str | None = None
    priority: int | None = None

    @property
    def kind(self) -> str:
        if self.manual:
            return "manual"
        if self.every is not None:
            return "interval"
        if self.cron is not None:
            return "cron"
        if self.rrule is not None:
            return "rrule"
        return "once"


#: What a registration runs: a Python callable (called with the run context), a
#: ``django.tasks`` Task or a Celery task (enqueued with the payload as keyword arguments),
#: or a management command (``call_command`` in the worker).
KIND_CALLABLE = "callable"
KIND_DJANGO_TASK = "django_task"
KIND_CELERY_TASK = "celery_task"
KIND_COMMAND = "command"

#: ``owner_min_interval`` when not given: owner-scoped users' schedules of a callback open
#: to them run at most every 5 minutes.
DEFAULT_OWNER_MIN_INTERVAL = 300

#: ``task_options`` a ``django.tasks`` Task accepts (passed to ``Task.using()``).
DJANGO_TASK_OPTIONS = frozenset({"priority", "queue_name", "run_after", "backend"})


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
    manual: bool = False,
    timezone: str | None = None,
    payload: Any = None,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
    max_runs: int | None = None,
    pool: str | None = None,
    priority: int | None = None,
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
    manual: bool = False,
    timezone: str | None = None,
    payload: Any = None,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
    max_runs: int | None = None,
    pool: str | None = None,
    priority: int | None = None,
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
    manual: bool = False,
    timezone: str | None = None,
    payload: Any = None,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
    max_runs: int | None = None,
    pool: str | None = None,
    priority: int | None = None,
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
    admin or the API) as they are. Both need a declared schedule (every/cron/rrule/at or
    ``manual=True``).

    Raises ``ValueError`` for a malformed name, more than one of every/cron/at/rrule,
    a malformed ``pool`` or a ``priority`` out of range,
    ``task_options`` that the callback's kind does not take, or a negative
    ``owner_min_interval``; ``TypeError`` if ``func`` is not callable, if ``payload_schema``
    is not a dict, for ``manual=True`` with any of every/cron/rrule/at/start_at/end_at/
    max_runs, a ``manual`` that is not True or False, or a ``priority`` that is not an int; ``ImproperlyConfigured`` for a
    ``payload_schema`` that is no valid JSON Schema. Returns ``func`` (so
    the decorator form leaves the function usable).
    """
    declaration = _declaration(
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
        manual=manual,
        pool=pool,
        priority=priority,
    )
    _check_owner_access(owner_scoped, owner_min_interval)
    schema = check_schema(name, payload_schema)

    def decorator(f: Any) -> Any:
        kind = _task_kind(f)
        options = dict(task_options or {})
        if kind == KIND_CALLABLE:
            if not callable(f):
                raise TypeError(f"callback {name!r} is not callable")
            if options:
                raise ValueError(f"task_options= only apply to a task; {name!r} is a function")
        elif kind == KIND_DJANGO_TASK:
            unknown = ", ".join(sorted(set(options) - DJANGO_TASK_OPTIONS))
            if unknown:
                raise ValueError(f"task_options not taken by a django.tasks Task: {unknown}")
            if options:
                f.using(**options)  # the backend validates them now (e.g. an unknown queue)
        elif kind == KIND_CELERY_TASK and {"args", "kwargs", "task_id"} & set(options):
            raise ValueError(
                "task_options must not set args, kwargs or task_id (the run sets them)"
            )
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
    timezone: str | None = None,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
    max_runs: int | None = None,
    pool: str | None = None,
    priority: int | None = None,
    owner_scoped: bool = False,
    owner_min_interval: int = DEFAULT_OWNER_MIN_INTERVAL,
) -> None:
    """Register the management command ``command`` (e.g. ``"clearsessions"``) under ``name``.

    A run calls ``call_command(command, *args, **options)`` in the worker process and keeps
    its stdout and stderr, cut to ``RESULT_MAX_BYTES``, in the receipt's result; a
    ``CommandError`` (or any exception) is a ``failed`` receipt, retried like any failure.
    The registration is the allow-list: only commands registered in code can run, always
    with the arguments given here (the schedule's payload is not passed to them).
    ``every``/``cron``/``at``... declare its schedule (``pool``/``priority``: its worker
    pool and claim priority), and ``owner_scoped`` / ``owner_min_interval`` open it to
    owner-scoped API users, as for :func:`register`.

    Raises ``ValueError`` for a malformed name, command name or pool, or a priority out of
    range; ``TypeError`` if ``args`` is not a sequence of strings or ``priority`` not an int.
    """
    declaration = _declaration(
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
        pool=pool,
        priority=priority,
    )
    _check_owner_access(owner_scoped, owner_min_interval)
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


def _check_owner_access(owner_scoped: Any, owner_min_interval: Any) -> None:
    if not isinstance(owner_scoped, bool):
        raise TypeError("owner_scoped must be True or False")
    valid = isinstance(owner_min_interval, int) and not isinstance(owner_min_interval, bool)
    if not valid or owner_min_interval < 0:
        raise ValueError(
            f"owner_min_interval must be a whole number of seconds >= 0, not {owner_min_interval!r}"
        )


def _declaration(
    name: str,
    every: int | None,
    cron: str | None,
    at: datetime | None,
    timezone: str | None,
    payload: Any,
    start_at: datetime | None,
    end_at: datetime | None,
    max_runs: int | None,
    *,
    rrule: str | None = None,
    manual: bool = False,
    pool: str | None = None,
    priority: int | None = None,
) -> Declaration | None:
    """Validate ``name`` and the schedule declared with it (``None`` when none is)."""
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise ValueError(
            f"invalid callback name {name!r}: 1-128 of [A-Za-z0-9_.:-], starting with a letter or digit"
        )
    _check_flow(pool, priority)
    if not isinstance(manual, bool):
        raise TypeError(f"manual must be True or False, not {manual!r}")
    if manual:
        timing_args = {
            "every": every,
            "cron": cron,
            "rrule": rrule,
            "at": at,
            "start_at": start_at,
            "end_at": end_at,
            "max_runs": max_runs,
        }
        clash = [k for k, v in timing_args.items() if v is not None]
        if clash:
            raise TypeError(
                f"register({name!r}, manual=True) takes no {'=, '.join(clash)}=: a manual "
                "schedule has no timing, it runs only when triggered"
            )
        return Declaration(
            timezone=timezone, payload=payload, manual=True, pool=pool, priority=priority
        )
    given = [v for v in (every, cron, at, rrule) if v is not None]
    if len(given) > 1:
        raise ValueError("declare at most one of every=, cron=, rrule= or at=")
    if given:
        return Declaration(
            every=every,
            cron=cron,
            at=at,
            rrule=rrule,
            timezone=timezone,
            payload=payload,
            start_at=start_at,
            end_at=end_at,
            max_runs=max_runs,
            pool=pool,
            priority=priority,
        )
    if any(v is not None for v in (timezone, payload, start_at, end_at, max_runs, pool, priority)):
        raise ValueError(
            "timezone/payload/start_at/end_at/max_runs/pool/priority need one of every=, "
            "cron=, rrule=, at= or manual=True"
        )
    return None


def _check_flow(pool: Any, priority: Any) -> None:
    """Check ``register(pool=, priority=)`` as the model's validators would (None: not
    given). Raises ``ValueError`` for a malformed pool or a priority out of range,
    ``TypeError`` for a priority that is not an int (True/False are refused)."""
    if pool is not None and not (isinstance(pool, str) and re.match(POOL_RE, pool)):
        raise ValueError(f"invalid pool {pool!r}: {POOL_MESSAGE}")
    if priority is None:
        return
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise TypeError(f"priority must be an int, not {priority!r}")
    if not PRIORITY_MIN <= priority <= PRIORITY_MAX:
        raise ValueError(
            f"priority must be from {PRIORITY_MIN} to {PRIORITY_MAX} (higher first), not {priority}"
        )


def _task_kind(obj: Any) -> str:
    """``KIND_DJANGO_TASK``, ``KIND_CELERY_TASK`` or ``KIND_CALLABLE`` for ``obj``.

    Looks only at modules already imported (an object of a library's class means the
    library is loaded), so neither ``django.tasks`` (Django 6+) nor Celery is required,
    and at ``type(obj)``: a Celery ``shared_task`` proxy is recognised without evaluating
    it (which would finalize the Celery app at import time).
    """
    cls = type(obj)
    for module_name in ("django.tasks.base", "django_tasks.base"):
        module = sys.modules.get(module_name)
        if module is not None and issubclass(cls, module.Task):
            return KIND_DJANGO_TASK
    celery_task = sys.modules.get("celery.app.task")
    if celery_task is not None and issubclass(cls, celery_task.Task):
        return KIND_CELERY_TASK
    celery_local = sys.modules.get("celery.local")
    if celery_local is not None and issubclass(cls, celery_local.Proxy):
        return KIND_CELERY_TASK
    return KIND_CALLABLE


def autodiscover() -> None:
    """Import the ``schedules`` module of every installed app (errors propagate)."""
    from django.utils.module_loading import autodiscover_modules

    autodiscover_modules("schedules")
