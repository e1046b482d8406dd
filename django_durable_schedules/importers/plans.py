"""What the importers share: the sources, :class:`Plan` (one source row mapped to a
schedule) and :class:`Result`, and the helpers that map names, callbacks, instants and
arguments (pure, no database)."""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..declarations import NAME_RE

CELERY_BEAT = "celery-beat"
DJANGO_Q = "django-q2"
SOURCES = (CELERY_BEAT, DJANGO_Q)
#: The source models as (app label, model name); looked up at run time (optional apps).
CELERY_BEAT_MODEL: tuple[str, str] = ("django_celery_beat", "PeriodicTask")
DJANGO_Q_MODEL: tuple[str, str] = ("django_q", "Schedule")


@dataclass(frozen=True)
class Plan:
    """One source row mapped to a schedule.

    ``fields`` are :func:`.state.create_schedule` keyword arguments, or ``None`` when the
    row cannot be imported (``skip`` says why). ``enabled`` False: the schedule is created
    and then paused. ``notes``: what was changed or dropped on the way.
    """

    source: str
    source_id: str
    source_name: str
    name: str
    fields: dict[str, Any] | None
    enabled: bool = True
    skip: str = ""
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Result:
    """What :func:`apply` did with one plan: ``action`` is ``created``, ``would create``
    (dry run), ``exists`` (a schedule of that name is there), ``skipped`` (the plan's
    ``skip``) or ``invalid`` (our validation refused it; ``detail`` has the messages)."""

    plan: Plan
    action: str
    detail: str = ""
    schedule: Any = None


class Skip(Exception):
    """A source row that cannot be imported; its message says why (:attr:`Plan.skip`)."""


def schedule_name(text: str, fallback: str) -> str:
    """A valid schedule name from a free-text source name: accents are dropped
    (``Rapport été`` -> ``Rapport-ete``), runs of characters outside ``[A-Za-z0-9_.:-]``
    become ``-``, at most 128 characters, starting with a letter or a
    digit; ``fallback`` when nothing is left."""
    # Accented letters keep their base letter (é -> e), as django.utils.text.slugify does.
    ascii_text = unicodedata.normalize("NFKD", text or "").encode("ascii", "ignore").decode()
    name = re.sub(r"[^A-Za-z0-9_.:-]+", "-", ascii_text.strip())
    name = re.sub(r"^[^A-Za-z0-9]+", "", name)[:128].rstrip("-")
    return name if name and NAME_RE.match(name) else fallback


def parse_callback_map(items: Iterable[str]) -> dict[str, str]:
    """``["app.tasks.send=send-report", ...]`` -> ``{"app.tasks.send": "send-report"}``.
    Raises ``ValueError`` for an item without ``=``."""
    mapping = {}
    for item in items:
        source, sep, target = item.partition("=")
        if not sep or not source.strip() or not target.strip():
            raise ValueError(f"{item!r} is not SOURCE=REGISTERED_NAME")
        mapping[source.strip()] = target.strip()
    return mapping


def registered_callback(
    task: str, callback_map: Mapping[str, str], registered: Container[str]
) -> str:
    """The registered callback name of the source's task path ``task`` (mapped through
    ``callback_map`` first). Raises :class:`Skip` when that name is not in ``registered``."""
    name = callback_map.get(task, task)
    if name not in registered:
        if task in callback_map:
            raise Skip(f"--callback-map maps {task!r} to {name!r}, which is not registered")
        raise Skip(f"{task!r} is not a registered callback (map it with --callback-map)")
    return name


def whole_second(value: datetime | None) -> datetime | None:
    """The aware ``value`` in UTC, truncated to whole seconds (None stays None)."""
    return None if value is None else value.replace(microsecond=0).astimezone(UTC)


def _json(value: Any, what: str) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        raise Skip(f"{what} is not JSON: {value!r:.80}") from None
    return value


def payload_of(args: Any, kwargs: Any, notes: list[str]) -> dict[str, Any]:
    """A source task's arguments as a schedule's payload: its keyword arguments, and its
    positional ones under ``"args"`` (noted in ``notes``). Raises :class:`Skip` when they
    collide or are not JSON."""
    payload = dict(kwargs or {})
    if args:
        if "args" in payload:
            raise Skip("both positional args and a keyword named 'args'")
        payload["args"] = list(args)
        notes.append("positional args are in payload['args']")
    _json(payload, "the arguments")
    return payload


def make_plan(source: str, source_id: Any, source_name: str, fallback: str, build: Any) -> Plan:
    """The :class:`Plan` of one source row: its schedule name from ``source_name`` (else
    ``fallback``), and ``build(notes)`` -> ``(create_schedule fields, enabled)``; a
    :class:`Skip` raised by ``build`` makes a skipped plan."""
    name = schedule_name(source_name, fallback)
    notes: list[str] = []
    if name != source_name:
        notes.append(f"renamed from {source_name!r}")
    try:
        fields, enabled = build(notes)
    except Skip as exc:
        return Plan(source, str(source_id), source_name, name, None, skip=str(exc))
    fields["name"] = name
    metadata = {"imported_from": source, "source_id": str(source_id)}
    fields["metadata"] = {**metadata, **fields.get("metadata", {})}
    return Plan(source, str(source_id), source_name, name, fields, enabled, notes=tuple(notes))
