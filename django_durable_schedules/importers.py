"""Import schedule rows from django-celery-beat and django-q2 (``manage.py import_schedules``).

Two halves: ``plan_*`` functions map one source row to the fields of our
:class:`~.models.Schedule` - pure, no database (the row's related objects must already be
loaded) - and :func:`apply` creates the planned schedules through
:func:`.state.create_schedule` (audit source ``"import"``). What maps and what does not is
documented in ``docs/migrating.md``.

A source task becomes a schedule only when its task/function name maps to a *registered*
callback - by ``--callback-map source=registered`` or by having the same name; never by
importing a dotted path. Re-running is harmless: a schedule whose name exists is left alone.
"""

from __future__ import annotations

import ast
import json
import re
import unicodedata
from collections.abc import Container, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from django.core.exceptions import ValidationError

from .exceptions import validation_text
from .limits import METADATA_MAX_VALUE_CHARS
from .registry import NAME_RE

CELERY_BEAT = "celery-beat"
DJANGO_Q = "django-q2"
SOURCES = (CELERY_BEAT, DJANGO_Q)
#: The source models as (app label, model name); looked up at run time (optional apps).
CELERY_BEAT_MODEL: tuple[str, str] = ("django_celery_beat", "PeriodicTask")
DJANGO_Q_MODEL: tuple[str, str] = ("django_q", "Schedule")

_CELERY_PERIOD_SECONDS = {"days": 86400, "hours": 3600, "minutes": 60, "seconds": 1}


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


class _Skip(Exception):
    pass


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


def _callback(task: str, callback_map: Mapping[str, str], registered: Container[str]) -> str:
    name = callback_map.get(task, task)
    if name not in registered:
        if task in callback_map:
            raise _Skip(f"--callback-map maps {task!r} to {name!r}, which is not registered")
        raise _Skip(f"{task!r} is not a registered callback (map it with --callback-map)")
    return name


def _second(value: datetime | None) -> datetime | None:
    return None if value is None else value.replace(microsecond=0).astimezone(UTC)


def _json(value: Any, what: str) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        raise _Skip(f"{what} is not JSON: {value!r:.80}") from None
    return value


def _payload(args: Any, kwargs: Any, notes: list[str]) -> dict[str, Any]:
    payload = dict(kwargs or {})
    if args:
        if "args" in payload:
            raise _Skip("both positional args and a keyword named 'args'")
        payload["args"] = list(args)
        notes.append("positional args are in payload['args']")
    _json(payload, "the arguments")
    return payload


def _plan(source: str, source_id: Any, source_name: str, fallback: str, build: Any) -> Plan:
    name = schedule_name(source_name, fallback)
    notes: list[str] = []
    if name != source_name:
        notes.append(f"renamed from {source_name!r}")
    try:
        fields, enabled = build(notes)
    except _Skip as exc:
        return Plan(source, str(source_id), source_name, name, None, skip=str(exc))
    fields["name"] = name
    metadata = {"imported_from": source, "source_id": str(source_id)}
    fields["metadata"] = {**metadata, **fields.get("metadata", {})}
    return Plan(source, str(source_id), source_name, name, fields, enabled, notes=tuple(notes))


# ------------------------------------------------------------------- django-celery-beat


def plan_celery_beat(
    task: Any, callback_map: Mapping[str, str], registered: Container[str]
) -> Plan:
    """Map a ``django_celery_beat.models.PeriodicTask`` (with ``interval``, ``crontab``,
    ``solar`` and ``clocked`` loaded).

    interval -> ``interval`` (anchored at ``start_time``, else ``last_run_at``, so the phase
    is kept); crontab -> ``cron`` in the crontab's time zone; clocked -> ``once`` at
    ``clocked_time``; ``one_off`` -> ``max_runs=1``; ``start_time``/``expires`` ->
    ``start_at``/``end_at``; ``kwargs`` (+ ``args`` as ``payload["args"]``) -> ``payload``;
    ``enabled=False`` -> created paused. Solar schedules and sub-second intervals are
    skipped; a crontab whose day-of-month and day-of-week are both restricted is skipped
    (Celery requires both to match, cron either).
    """

    def build(notes: list[str]) -> tuple[dict[str, Any], bool]:
        callback = _callback(task.task, callback_map, registered)
        try:
            args = json.loads(task.args or "[]")
            kwargs = json.loads(task.kwargs or "{}")
        except ValueError as exc:
            raise _Skip(f"args/kwargs are not JSON: {exc}") from None
        if not isinstance(kwargs, dict) or not isinstance(args, list):
            raise _Skip("args must be a JSON list and kwargs a JSON object")
        fields: dict[str, Any] = {"callback": callback, "payload": _payload(args, kwargs, notes)}
        if getattr(task, "solar", None) is not None:
            raise _Skip("solar schedules have no equivalent")
        if task.clocked is not None:
            fields.update(kind="once", run_at=_second(task.clocked.clocked_time))
        elif task.interval is not None:
            per = _CELERY_PERIOD_SECONDS.get(task.interval.period)
            if per is None:
                raise _Skip(f"an interval in {task.interval.period} is below one second")
            fields.update(kind="interval", interval_seconds=task.interval.every * per)
            anchor = task.start_time or task.last_run_at
            if anchor is not None:
                fields["start_at"] = _second(anchor)
            else:
                notes.append("interval anchored at the import (it never ran)")
        elif task.crontab is not None:
            c = task.crontab
            if not str(c.day_of_month).startswith("*") and not str(c.day_of_week).startswith("*"):
                raise _Skip(
                    "day_of_month and day_of_week are both restricted: Celery runs when both "
                    "match, cron when either does"
                )
            cron = " ".join(
                str(v) for v in (c.minute, c.hour, c.day_of_month, c.month_of_year, c.day_of_week)
            )
            tz = getattr(c.timezone, "key", None) or str(c.timezone or "UTC")
            fields.update(kind="cron", cron=cron, timezone=tz)
        else:
            raise _Skip("no schedule attached")
        if task.one_off and fields["kind"] != "once":
            fields["max_runs"] = 1
        if task.start_time is not None and fields["kind"] != "once":
            fields["start_at"] = _second(task.start_time)
        if task.expires is not None:
            fields["end_at"] = _second(task.expires)
        dropped = [
            f
            for f in ("queue", "exchange", "routing_key", "priority", "expire_seconds")
            if getattr(task, f, None)
        ]
        if getattr(task, "headers", "{}") not in ("", "{}", None):
            dropped.append("headers")
        if dropped:
            notes.append(f"not mapped: {', '.join(dropped)}")
        description = (getattr(task, "description", "") or "").strip()
        if description:
            # metadata values are at most METADATA_MAX_VALUE_CHARS: a longer one is cut.
            fields["metadata"] = {"description": description[:METADATA_MAX_VALUE_CHARS]}
            too_long = len(description) > METADATA_MAX_VALUE_CHARS
            cut = f" (cut to {METADATA_MAX_VALUE_CHARS} characters)" if too_long else ""
            notes.append(f"description kept in metadata['description']{cut}")
        return fields, bool(task.enabled)

    return _plan(CELERY_BEAT, task.pk, task.name, f"celery-beat-{task.pk}", build)


def load_celery_beat() -> Iterator[Any]:
    """Every ``PeriodicTask``, related schedules loaded. Raises ``LookupError`` when
    django_celery_beat is not installed."""
    from django.apps import apps

    model = apps.get_model(*CELERY_BEAT_MODEL)
    return iter(
        model.objects.select_related("interval", "crontab", "solar", "clocked").order_by("pk")
    )


def disable_celery_beat(task: Any) -> None:
    """Set ``enabled=False`` on the source task (its ``save()`` tells beat)."""
    task.enabled = False
    task.save(update_fields=["enabled"])


# ---------------------------------------------------------------------------- django-q2


def _q_arguments(args: str | None, kwargs: str | None) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Parse django-q's Python-literal ``args`` (``"1, 'a'"``) and ``kwargs`` the way its
    scheduler does (``django_q/scheduler.py``), without evaluating code: ``kwargs`` as a
    dict literal first (``"{'x': 1, 'y': 'b'}"``, what django-q2's own ``schedule()``
    stores), else as keyword syntax (``"x=1, y='b'"``). Where django-q falls back to no
    arguments on text it cannot read, the row is skipped with the reason instead."""
    parsed_args: tuple[Any, ...] = ()
    parsed_kwargs: dict[str, Any] = {}
    try:
        if args:
            value = ast.literal_eval(args)
            parsed_args = value if isinstance(value, tuple) else (value,)
        if kwargs:
            parsed_kwargs = _q_kwargs(kwargs)
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        raise _Skip("args/kwargs are not Python literals") from None
    return parsed_args, parsed_kwargs


def _q_kwargs(text: str) -> dict[str, Any]:
    try:
        value = ast.literal_eval(text)
    except (SyntaxError, ValueError):
        value = None
    if isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):
            raise ValueError("kwargs keys must be strings")
        return value
    call = ast.parse(f"f({text})", mode="eval").body
    if not isinstance(call, ast.Call) or call.args:
        raise ValueError(text)
    parsed: dict[str, Any] = {}
    for keyword in call.keywords:
        if keyword.arg is None:
            raise ValueError(text)
        parsed[keyword.arg] = ast.literal_eval(keyword.value)
    return parsed


def plan_django_q(
    schedule: Any, callback_map: Mapping[str, str], registered: Container[str], time_zone: str
) -> Plan:
    """Map a ``django_q.models.Schedule``. ``time_zone``: ``settings.TIME_ZONE`` (django-q
    computes daily and longer periods, and cron, in local time).

    O -> ``once`` at ``next_run``; I/H -> ``interval`` of ``minutes``/one hour anchored at
    ``next_run``; D/W/M/BM/Q/Y -> ``cron`` at ``next_run``'s local minute, hour, day and
    month; BW -> a 14-day ``interval``; C -> ``cron`` as is. ``repeats`` n > 0 ->
    ``max_runs=n``; 0 (nothing left to run) is skipped. ``func`` -> callback;
    ``args``/``kwargs`` -> ``payload``; ``hook``, ``cluster``, ``intended_date_kwarg`` and
    ``q_options`` are not mapped.
    """

    def build(notes: list[str]) -> tuple[dict[str, Any], bool]:
        callback = _callback(schedule.func, callback_map, registered)
        if schedule.repeats == 0:
            raise _Skip("repeats is 0: nothing left to run")
        args, kwargs = _q_arguments(schedule.args, schedule.kwargs)
        if kwargs.pop("q_options", None) is not None:
            notes.append("q_options dropped")
        fields: dict[str, Any] = {"callback": callback, "payload": _payload(args, kwargs, notes)}
        kind = schedule.schedule_type
        next_run = _second(schedule.next_run)
        if next_run is None and kind != "C":
            raise _Skip("no next_run")
        local = next_run.astimezone(ZoneInfo(time_zone)) if next_run else None
        if local is not None and local.second and kind in ("D", "W", "M", "BM", "Q", "Y"):
            notes.append("seconds of next_run dropped (cron runs on whole minutes)")
        if kind == "O":
            fields.update(kind="once", run_at=next_run)
        elif kind in ("I", "H", "BW"):
            seconds = {"I": (schedule.minutes or 1) * 60, "H": 3600, "BW": 14 * 86400}[kind]
            fields.update(kind="interval", interval_seconds=seconds, start_at=next_run)
            if kind == "BW":
                notes.append("biweekly is every 14 x 24 h: a DST change moves its local time")
        elif kind in ("D", "W", "M", "BM", "Q", "Y"):
            assert local is not None
            m, h, d, mo = local.minute, local.hour, local.day, local.month
            cron = {
                "D": f"{m} {h} * * *",
                "W": f"{m} {h} * * {local.isoweekday() % 7}",
                "M": f"{m} {h} {d} * *",
                "BM": f"{m} {h} {d} {2 - mo % 2}-12/2 *",
                "Q": f"{m} {h} {d} {(mo - 1) % 3 + 1}-12/3 *",
                "Y": f"{m} {h} {d} {mo} *",
            }[kind]
            if kind in ("M", "BM", "Q") and d > 28:
                notes.append(f"day {d}: months without it are skipped (django-q moved back)")
            fields.update(kind="cron", cron=cron, timezone=time_zone, start_at=next_run)
        elif kind == "C":
            fields.update(kind="cron", cron=(schedule.cron or "").strip(), timezone=time_zone)
        else:
            raise _Skip(f"unknown schedule_type {kind!r}")
        if schedule.repeats > 0 and kind != "O":
            fields["max_runs"] = schedule.repeats
        dropped = [
            f for f in ("hook", "cluster", "intended_date_kwarg") if getattr(schedule, f, None)
        ]
        if dropped:
            notes.append(f"not mapped: {', '.join(dropped)}")
        return fields, True

    return _plan(DJANGO_Q, schedule.pk, schedule.name or "", f"django-q-{schedule.pk}", build)


def load_django_q() -> Iterator[Any]:
    """Every django-q ``Schedule``. Raises ``LookupError`` when django_q is not installed."""
    from django.apps import apps

    return iter(apps.get_model(*DJANGO_Q_MODEL).objects.order_by("pk"))


def disable_django_q(schedule: Any) -> None:
    """Stop django-q from running the source schedule: ``repeats = 0`` (its scheduler skips
    those; the old value is kept in our schedule's ``max_runs``)."""
    schedule.repeats = 0
    schedule.save(update_fields=["repeats"])


# --------------------------------------------------------------------------------- apply


def apply(plans: Iterable[Plan], *, dry_run: bool = False, using: str = "default") -> list[Result]:
    """Create the planned schedules (``state.create_schedule(source="import")``; a disabled
    source is created paused, in the same transaction). A plan whose name is taken is left
    alone (``exists``), so re-running imports nothing twice. Nothing is written with
    ``dry_run``; plans are still validated."""
    from . import state
    from .models import Schedule

    plans = list(plans)
    existing = {
        row.name: row
        for row in Schedule.objects.using(using).filter(name__in=[p.name for p in plans])
    }
    results = []
    taken: set[str] = set()  # names this import creates (or would): two plans, one name
    for plan in plans:
        row = existing.get(plan.name)
        same = row is not None and (
            row.metadata.get("imported_from") == plan.source
            and row.metadata.get("source_id") == plan.source_id
        )
        if same:
            results.append(Result(plan, "exists", "already imported", row))
            continue
        if plan.fields is None:
            results.append(Result(plan, "skipped", plan.skip))
            continue
        if row is not None:
            results.append(Result(plan, "exists", "a different schedule has this name", row))
            continue
        if plan.name in taken:  # the same verdict in a dry run as in the real run
            detail = f"name: another schedule of this import is named {plan.name!r}"
            results.append(Result(plan, "invalid", detail))
            continue
        try:
            if dry_run:
                state.validate_schedule(Schedule(**plan.fields))
                taken.add(plan.name)
                results.append(Result(plan, "would create"))
                continue
            # A disabled source is created paused in the same transaction: no worker can
            # run it in between.
            row = state.create_schedule(
                source="import", paused=not plan.enabled, using=using, **plan.fields
            )
        except ValidationError as exc:
            results.append(Result(plan, "invalid", validation_text(exc)))
            continue
        taken.add(plan.name)
        results.append(Result(plan, "created", "" if plan.enabled else "paused", row))
    return results


@dataclass
class Summary:
    """Counts of :func:`apply` results by action."""

    counts: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, results: Iterable[Result]) -> Summary:
        counts: dict[str, int] = {}
        for r in results:
            counts[r.action] = counts.get(r.action, 0) + 1
        return cls(counts)

    def __str__(self) -> str:
        order = ["created", "would create", "exists", "invalid", "skipped"]
        parts = [f"{self.counts[a]} {a}" for a in order if self.counts.get(a)]
        return ", ".join(parts) or "nothing"
