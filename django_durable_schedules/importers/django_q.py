"""django-q2's ``Schedule`` rows: load, map to a :class:`.Plan`, disable."""

from __future__ import annotations

import ast
from collections.abc import Container, Iterator, Mapping
from typing import Any
from zoneinfo import ZoneInfo

from .plans import (
    DJANGO_Q,
    DJANGO_Q_MODEL,
    Plan,
    Skip,
    make_plan,
    payload_of,
    registered_callback,
    whole_second,
)


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
        raise Skip("args/kwargs are not Python literals") from None
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
        callback = registered_callback(schedule.func, callback_map, registered)
        if schedule.repeats == 0:
            raise Skip("repeats is 0: nothing left to run")
        args, kwargs = _q_arguments(schedule.args, schedule.kwargs)
        if kwargs.pop("q_options", None) is not None:
            notes.append("q_options dropped")
        fields: dict[str, Any] = {"callback": callback, "payload": payload_of(args, kwargs, notes)}
        kind = schedule.schedule_type
        next_run = whole_second(schedule.next_run)
        if next_run is None and kind != "C":
            raise Skip("no next_run")
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
            raise Skip(f"unknown schedule_type {kind!r}")
        if schedule.repeats > 0 and kind != "O":
            fields["max_runs"] = schedule.repeats
        dropped = [
            f for f in ("hook", "cluster", "intended_date_kwarg") if getattr(schedule, f, None)
        ]
        if dropped:
            notes.append(f"not mapped: {', '.join(dropped)}")
        return fields, True

    return make_plan(DJANGO_Q, schedule.pk, schedule.name or "", f"django-q-{schedule.pk}", build)


def load_django_q() -> Iterator[Any]:
    """Every django-q ``Schedule``. Raises ``LookupError`` when django_q is not installed."""
    from django.apps import apps

    return iter(apps.get_model(*DJANGO_Q_MODEL).objects.order_by("pk"))


def disable_django_q(schedule: Any) -> None:
    """Stop django-q from running the source schedule: ``repeats = 0`` (its scheduler skips
    those; the old value is kept in our schedule's ``max_runs``)."""
    schedule.repeats = 0
    schedule.save(update_fields=["repeats"])
