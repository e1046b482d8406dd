"""What a ``register()`` call declares besides its callback: the callback name's rule
(``NAME_RE``), the schedule declared in code (:class:`Declaration`, built and checked by
:func:`build_declaration`), its flow control (:class:`Flow`: worker pool and claim
priority, ``POOL_RE``, the priority bounds, :func:`check_flow`; concurrency group's name,
:func:`check_group_name`), and the owner-scoped access it opens
(:func:`check_owner_access`). Pure: no Django, no database; the models' validators use the
same rules (``models/choices.py``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from .limits import CHAIN_WAIT_MAX_SECONDS
from .timing.business_days import POLICIES

NAME_RE = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}\Z")  # \Z: no trailing newline
#: A pool's name (``Schedule.pool``, ``models.pool_validator``, ``register(pool=)``).
POOL_RE = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}\Z"
POOL_MESSAGE = "1-64 of letters, digits, '_', '.', ':' or '-', starting with a letter or digit."
#: A concurrency group's name (``ConcurrencyGroup.name``, ``register(concurrency_group=)``).
GROUP_NAME_RE = r"^[a-z0-9][a-z0-9_-]{0,63}\Z"
#: ``Schedule.priority``'s range (a 16-bit integer on every database).
PRIORITY_MIN, PRIORITY_MAX = -32768, 32767

#: ``owner_min_interval`` when not given: owner-scoped users' schedules of a callback open
#: to them run at most every 5 minutes.
DEFAULT_OWNER_MIN_INTERVAL = 300


@dataclass(frozen=True)
class Flow:
    """The flow control a ``register()`` or ``register_command()`` call declares for its
    schedule, each None when not given: the worker ``pool`` and the claim ``priority``
    (a new row then takes the model's defaults, ``"default"`` and 0; an existing row keeps
    its values) and the ``concurrency_group``'s name (an existing row keeps its group)."""

    pool: str | None = None
    priority: int | None = None
    concurrency_group: str | None = None

    def check(self) -> None:
        """Check the values as the models' validators would (:func:`check_flow`,
        :func:`check_group_name`). Raises ``ValueError`` for a malformed pool or group
        name or a priority out of range, ``TypeError`` for a priority that is not an int."""
        check_flow(self.pool, self.priority)
        check_group_name(self.concurrency_group)

    def given(self) -> list[str]:
        """The names of the arguments given (not None), in the signature's order."""
        return [f.name for f in fields(self) if getattr(self, f.name) is not None]


@dataclass(frozen=True)
class Declaration:
    """A schedule declared in code next to its callback.

    Exactly one of ``every`` (seconds), ``cron``, ``at`` (aware datetime) or ``rrule`` (an
    RFC 5545 rule) is set, or ``manual`` (kind ``manual``: no spec, it runs only when
    triggered) or ``after`` (kind ``after``: it runs after those schedules) and none of them.
    """

    every: int | None = None
    cron: str | None = None
    at: datetime | None = None
    rrule: str | None = None
    #: Further cron expressions or rules (``Schedule.extra_specs``), with ``cron`` or ``rrule``.
    extra_specs: tuple[str, ...] = ()
    #: ``Schedule.exclusion_policy`` and ``Schedule.rrule_business_days`` (None: not given,
    #: a new row takes the default and an existing row keeps its value).
    exclusion_policy: str | None = None
    rrule_business_days: bool | None = None
    timezone: str | None = None
    payload: Any = None
    start_at: datetime | None = None
    end_at: datetime | None = None
    max_runs: int | None = None
    manual: bool = False
    #: Its worker pool, claim priority and concurrency group (:class:`Flow`).
    flow: Flow = field(default_factory=Flow)
    #: Kind ``after``: the names of the schedules it runs after (``Schedule.upstream``);
    #: empty for any other kind. ``wait_seconds``: None, not given (a new row takes the
    #: model's default, an existing row keeps its value).
    after: tuple[str, ...] = ()
    wait_seconds: int | None = None

    @property
    def kind(self) -> str:
        if self.after:
            return "after"
        if self.manual:
            return "manual"
        if self.every is not None:
            return "interval"
        if self.cron is not None:
            return "cron"
        if self.rrule is not None:
            return "rrule"
        return "once"


def check_owner_access(owner_scoped: Any, owner_min_interval: Any) -> None:
    """Check ``register(owner_scoped=, owner_min_interval=)``. Raises ``TypeError`` for an
    ``owner_scoped`` that is not True or False, ``ValueError`` for an ``owner_min_interval``
    that is not a whole number of seconds >= 0 (True/False are refused)."""
    if not isinstance(owner_scoped, bool):
        raise TypeError("owner_scoped must be True or False")
    valid = isinstance(owner_min_interval, int) and not isinstance(owner_min_interval, bool)
    if not valid or owner_min_interval < 0:
        raise ValueError(
            f"owner_min_interval must be a whole number of seconds >= 0, not {owner_min_interval!r}"
        )


def build_declaration(
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
    extra_specs: Any = None,
    manual: bool = False,
    flow: Flow | None = None,
    exclusion_policy: Any = None,
    rrule_business_days: Any = None,
    after: Any = None,
    wait_seconds: Any = None,
) -> Declaration | None:
    """Validate ``name`` and the schedule declared with it: the :class:`Declaration`, or
    ``None`` when none is (no every/cron/at/rrule and not ``manual``).

    ``flow`` (None: none given) is checked (:meth:`Flow.check`) and carried as it is.
    Errors follow one rule: ``TypeError`` for a value of the wrong type, ``ValueError``
    for a bad value *or arguments that cannot go together*. A clash of arguments is a
    ``ValueError`` as in the standard library (``open(..., "rb", encoding=...)``,
    ``subprocess.run(input=..., stdin=...)``, ``dataclasses.field(default=...,
    default_factory=...)``): each argument is well typed, their combination is what is
    wrong. So ``manual=True`` with a timing argument is a ``ValueError``, like ``after=``
    with one.

    Raises ``ValueError`` for a malformed name, more than one of every/cron/at/rrule,
    ``manual=True`` with any timing argument, a malformed pool or group name, a priority
    out of range, or timezone/payload/start_at/end_at/max_runs or any of ``flow`` without
    a schedule (the message names those given); ``TypeError`` for a ``manual`` that is not
    True or False, a priority that is not an int, or ``extra_specs`` that is not a list of
    texts. ``extra_specs`` with another schedule than ``cron``/``rrule`` is a
    ``ValueError`` (what each item means is checked when the schedule is synced).
    ``exclusion_policy`` (None: not given) must be one of ``skip``,
    ``previous_business_day``, ``next_business_day`` (``ValueError``) and
    ``rrule_business_days`` True or False (``TypeError``); both need a declared schedule.
    ``after`` (None: not given) declares kind ``after``: a list or tuple of schedule names
    (``TypeError`` for a text alone or anything else, ``ValueError`` for an empty one, with
    any timing argument or ``manual=True``: the message names them); ``wait_seconds`` (an
    int, 1 to 31 days in seconds, ``TypeError``/``ValueError``) needs ``after``.
    """
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise ValueError(
            f"invalid callback name {name!r}: 1-128 of [A-Za-z0-9_.:-], starting with a letter or digit"
        )
    flow = Flow() if flow is None else flow
    flow.check()
    extra = _extra_specs(extra_specs)
    if exclusion_policy is not None and exclusion_policy not in POLICIES:
        raise ValueError(
            f"exclusion_policy must be one of {', '.join(POLICIES)}, not {exclusion_policy!r}"
        )
    if rrule_business_days is not None and not isinstance(rrule_business_days, bool):
        raise TypeError(f"rrule_business_days must be True or False, not {rrule_business_days!r}")
    if not isinstance(manual, bool):
        raise TypeError(f"manual must be True or False, not {manual!r}")
    wait = _wait_seconds(wait_seconds, after)
    if after is not None:
        timing_given = {
            "every": every,
            "cron": cron,
            "rrule": rrule,
            "at": at,
            "start_at": start_at,
            "end_at": end_at,
            "max_runs": max_runs,
            "manual": manual or None,
            "extra_specs": extra_specs,
            "exclusion_policy": exclusion_policy,
            "rrule_business_days": rrule_business_days,
        }
        return Declaration(
            after=_after(name, after, [k for k, v in timing_given.items() if v is not None]),
            wait_seconds=wait,
            timezone=timezone,
            payload=payload,
            flow=flow,
        )
    if manual:
        timing_args = {
            "every": every,
            "cron": cron,
            "rrule": rrule,
            "at": at,
            "start_at": start_at,
            "end_at": end_at,
            "max_runs": max_runs,
            "extra_specs": extra_specs,
            "exclusion_policy": exclusion_policy,
            "rrule_business_days": rrule_business_days,
        }
        clash = [k for k, v in timing_args.items() if v is not None]
        if clash:  # arguments that cannot go together: ValueError (see the docstring)
            raise ValueError(
                f"register({name!r}, manual=True) takes no {'=, '.join(clash)}=: a manual "
                "schedule has no timing, it runs only when triggered"
            )
        return Declaration(
            timezone=timezone,
            payload=payload,
            manual=True,
            flow=flow,
        )
    given = [v for v in (every, cron, at, rrule) if v is not None]
    if len(given) > 1:
        raise ValueError("declare at most one of every=, cron=, rrule= or at=")
    if extra and cron is None and rrule is None:
        raise ValueError("extra_specs= needs cron= or rrule= (the union's main spec)")
    if given:
        return Declaration(
            every=every,
            cron=cron,
            at=at,
            rrule=rrule,
            extra_specs=extra,
            exclusion_policy=exclusion_policy,
            rrule_business_days=rrule_business_days,
            timezone=timezone,
            payload=payload,
            start_at=start_at,
            end_at=end_at,
            max_runs=max_runs,
            flow=flow,
        )
    spec: dict[str, Any] = {
        "timezone": timezone,
        "payload": payload,
        "start_at": start_at,
        "end_at": end_at,
        "max_runs": max_runs,
        "exclusion_policy": exclusion_policy,
        "rrule_business_days": rrule_business_days,
    }
    stray = [k for k, v in spec.items() if v is not None] + flow.given()
    if stray:
        raise ValueError(
            f"{'/'.join(stray)} need{'s' if len(stray) == 1 else ''} one of every=, cron=, "
            "rrule=, at= or manual=True"
        )
    return None


def _after(name: str, value: Any, clash: list[str]) -> tuple[str, ...]:
    """``register(after=)`` as a tuple of names, in the order given. Raises ``TypeError``
    for a value that is not a list or tuple of texts (a text alone is refused: wrap it in a
    list), ``ValueError`` for an empty one or for ``clash`` (the timing arguments given
    with it: an ``after`` schedule's grid is its upstreams')."""
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise TypeError(
            f"after must be a list of schedule names, e.g. after=['reports.import'], not {value!r:.60}"
        )
    if not value:
        raise ValueError(f"register({name!r}, after=[]) names no schedule to run after")
    if clash:
        raise ValueError(
            f"register({name!r}, after=...) takes no {'=, '.join(clash)}=: a schedule of kind "
            "'after' runs the instants of the schedules it runs after"
        )
    return tuple(dict.fromkeys(value))


def _wait_seconds(value: Any, after: Any) -> int | None:
    """``register(wait_seconds=)`` checked (None: not given). Raises ``TypeError`` for a
    value that is not an int (True/False are refused), ``ValueError`` for one out of 1 s to
    31 days or given without ``after``."""
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"wait_seconds must be an int (seconds), not {value!r}")
    if not 1 <= value <= CHAIN_WAIT_MAX_SECONDS:
        raise ValueError(f"wait_seconds must be from 1 to {CHAIN_WAIT_MAX_SECONDS}, not {value}")
    if after is None:
        raise ValueError("wait_seconds= needs after= (how long a kind 'after' waits)")
    return value


def _extra_specs(value: Any) -> tuple[str, ...]:
    """``register(extra_specs=)`` as a tuple (None: none). Raises ``TypeError`` for a value
    that is not a list or tuple of texts (a text alone is refused: wrap it in a list)."""
    if value is None:
        return ()
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise TypeError(
            f"extra_specs must be a list of cron expressions or rules, not {value!r:.60}"
        )
    return tuple(value)


def check_group_name(name: Any) -> None:
    """Check ``register(concurrency_group=)`` (None: not given): a group's name, a short
    slug. Raises ``ValueError`` for anything else. Whether the group exists is known only
    at sync (``ImproperlyConfigured`` then)."""
    if name is not None and not (isinstance(name, str) and re.match(GROUP_NAME_RE, name)):
        raise ValueError(
            f"invalid concurrency_group {name!r}: a group's name, a short slug such as "
            "'partner-api'"
        )


def check_flow(pool: Any, priority: Any) -> None:
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


def sync_order(registrations: Sequence[Any]) -> list[Any]:
    """``registrations`` (each with ``.name`` and a :class:`Declaration`) in the order a
    sync writes them: those of kind ``after`` last, each after the declarations it runs
    after (depth first, in the order given; a cycle is cut anywhere: the sync's graph check
    refuses it), so an upstream declared in code exists before the schedule linked to it."""
    by_name = {r.name: r for r in registrations}
    ordered: list[Any] = [r for r in registrations if not r.declaration.after]
    placed = {r.name for r in ordered}

    def place(reg: Any) -> None:
        placed.add(reg.name)
        for name in reg.declaration.after:
            if name in by_name and name not in placed:
                place(by_name[name])
        ordered.append(reg)

    for reg in registrations:
        if reg.name not in placed:
            place(reg)
    return ordered
