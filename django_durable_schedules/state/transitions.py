"""The transition table and the rules that implement it.

Every row of the table (:data:`TABLE`, data in :mod:`.transition_table`) has a stable id,
and every rule of the state machine declares the rows it implements with
:func:`implements`, a decorator that records and returns the function unchanged (no cost
when the rule runs)::

    @implements("outcome.lease_expired", "recovery.foreign_lease")
    def _expire_batch(...): ...

:func:`problems` lists a row with no rule and a rule naming no row (a test holds it
empty); rules that live outside the state package, which cannot import it (the model's
``save()``, the database triggers of :mod:`..db.edits`), are declared in
:data:`ELSEWHERE`. docs/concepts.md shows the table as :func:`render_markdown` renders it
(a test holds that too; ``scripts/transition-table`` rewrites it). :mod:`.control` drives
the operator actions from :data:`.control.ALLOWED`, which a test holds to the control rows.

:func:`allows` says whether an observed worker step is a declared row: the property tests
record ``(status before, event, status after)`` for each step they take.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from .transition_table import TABLE
from .transition_terms import (
    ACTIVE,
    ANY,
    LEASED,
    NEW,
    PAUSED,
    RUNNABLE,
    SAME,
    Transition,
)

__all__ = [
    "ACTIVE",
    "ANY",
    "ELSEWHERE",
    "LEASED",
    "NEW",
    "PAUSED",
    "RULES",
    "RUNNABLE",
    "SAME",
    "STEPS",
    "TABLE",
    "Transition",
    "allows",
    "implements",
    "problems",
    "render_markdown",
    "row",
    "rows_allowing",
]

F = TypeVar("F", bound=Callable[..., object])

#: Row id -> the qualified names (``module.function``) of the rules that declared it,
#: filled as the modules of the state package are imported.
RULES: dict[str, list[str]] = {}
#: Rules naming an id that is no row: (qualified name, id). Kept for :func:`problems`.
_UNKNOWN: list[tuple[str, str]] = []
_IDS = frozenset(t.id for t in TABLE)

#: Rows whose rule lives outside the state package (which it cannot import without a
#: cycle): row id -> dotted paths of the functions that implement it.
ELSEWHERE: dict[str, tuple[str, ...]] = {
    "control.create": (
        "django_durable_schedules.models.schedule.Schedule.save",
        "django_durable_schedules.models.queries.ScheduleQuerySet.bulk_create",
    ),
    "control.edit": ("django_durable_schedules.models.schedule.Schedule.save",),
    # The triggers (SQLite dds_schedule_edited/paused/resumed; one BEFORE UPDATE function
    # on PostgreSQL and MariaDB/MySQL), installed by the migrations.
    "control.edit_behind_save": ("django_durable_schedules.db.edits.install",),
    "control.pause_behind_save": ("django_durable_schedules.db.edits.install",),
    "control.resume_behind_save": ("django_durable_schedules.db.edits.install",),
}

#: The worker steps an observed event names (``"<step>:<what>"``): ``claim``
#: (:func:`.claim_due`), ``complete`` (:func:`.complete`), ``expire``
#: (:func:`.expire_leases`), ``recover`` (:func:`.recover_degraded`), ``resume``
#: (:func:`.pauses.resume_paused`) and the operator
#: actions; ``what`` is the receipt status written for the schedule's attempt in that step,
#: ``leased`` for an attempt given a live lease, or ``none`` when the step changed the
#: schedule's status without writing either.
STEPS = (
    "claim",
    "complete",
    "expire",
    "recover",
    "regrid",
    "resume",
    "enable",
    "disable",
    "trigger",
    "cancel",
)


def implements(*ids: str) -> Callable[[F], F]:
    """Declare that the decorated function implements the rows ``ids`` of :data:`TABLE`.
    Records it in :data:`RULES` and returns the function itself, unchanged. An id that is
    no row is recorded too, for :func:`problems` to report (a test fails on it)."""

    def record(func: F) -> F:
        name = f"{func.__module__}.{func.__qualname__}"
        for id_ in ids:
            RULES.setdefault(id_, []).append(name)
            if id_ not in _IDS:
                _UNKNOWN.append((name, id_))
        return func

    return record


def row(id_: str) -> Transition:
    """The row ``id_``; raises ``KeyError`` for an unknown id."""
    for t in TABLE:
        if t.id == id_:
            return t
    raise KeyError(id_)


def problems() -> list[str]:
    """What keeps the table and the rules from matching, as sentences: a row that no rule
    declares (in the state package or :data:`ELSEWHERE`), a rule that names no row, an id
    used twice. Empty when every row has a rule and every rule a row. Complete only once
    the state package is imported (as importing this module does)."""
    found = []
    seen: set[str] = set()
    for t in TABLE:
        if t.id in seen:
            found.append(f"row {t.id!r} appears twice in the table")
        seen.add(t.id)
        if t.id not in RULES and t.id not in ELSEWHERE:
            found.append(f"row {t.id!r} has no rule: decorate its rule with @implements")
    found += [f"{name} implements {id_!r}, which is no row" for name, id_ in _UNKNOWN]
    found += [f"ELSEWHERE names {id_!r}, which is no row" for id_ in ELSEWHERE if id_ not in _IDS]
    return found


def rows_allowing(before: str, event: str, after: str) -> list[Transition]:
    """The rows that allow a step observed as ``event`` (see :data:`STEPS`) to take a
    schedule from status ``before`` to status ``after``. Pure."""
    return [
        t
        for t in TABLE
        if event in t.seen_as
        and before in t.sources
        and (after in t.moves_to or (SAME in t.moves_to and after == before))
    ]


def allows(before: str, event: str, after: str) -> bool:
    """Whether a declared row allows the step ``(before, event, after)``
    (:func:`rows_allowing`)."""
    return bool(rows_allowing(before, event, after))


def render_markdown() -> str:
    """:data:`TABLE` as the Markdown that docs/concepts.md shows between its markers
    (:mod:`.transition_docs`)."""
    from .transition_docs import render_markdown as render

    return render()
