"""django-celery-beat's ``PeriodicTask`` rows: load, map to a :class:`.Plan`, disable."""

from __future__ import annotations

import json
from collections.abc import Container, Iterator, Mapping
from typing import Any

from ..limits import METADATA_MAX_VALUE_CHARS
from .plans import (
    CELERY_BEAT,
    CELERY_BEAT_MODEL,
    Plan,
    Skip,
    make_plan,
    payload_of,
    registered_callback,
    whole_second,
)

_CELERY_PERIOD_SECONDS = {"days": 86400, "hours": 3600, "minutes": 60, "seconds": 1}


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
        callback = registered_callback(task.task, callback_map, registered)
        try:
            args = json.loads(task.args or "[]")
            kwargs = json.loads(task.kwargs or "{}")
        except ValueError as exc:
            raise Skip(f"args/kwargs are not JSON: {exc}") from None
        if not isinstance(kwargs, dict) or not isinstance(args, list):
            raise Skip("args must be a JSON list and kwargs a JSON object")
        fields: dict[str, Any] = {"callback": callback, "payload": payload_of(args, kwargs, notes)}
        if getattr(task, "solar", None) is not None:
            raise Skip("solar schedules have no equivalent")
        if task.clocked is not None:
            fields.update(kind="once", run_at=whole_second(task.clocked.clocked_time))
        elif task.interval is not None:
            per = _CELERY_PERIOD_SECONDS.get(task.interval.period)
            if per is None:
                raise Skip(f"an interval in {task.interval.period} is below one second")
            fields.update(kind="interval", interval_seconds=task.interval.every * per)
            anchor = task.start_time or task.last_run_at
            if anchor is not None:
                fields["start_at"] = whole_second(anchor)
            else:
                notes.append("interval anchored at the import (it never ran)")
        elif task.crontab is not None:
            c = task.crontab
            if not str(c.day_of_month).startswith("*") and not str(c.day_of_week).startswith("*"):
                raise Skip(
                    "day_of_month and day_of_week are both restricted: Celery runs when both "
                    "match, cron when either does"
                )
            cron = " ".join(
                str(v) for v in (c.minute, c.hour, c.day_of_month, c.month_of_year, c.day_of_week)
            )
            tz = getattr(c.timezone, "key", None) or str(c.timezone or "UTC")
            fields.update(kind="cron", cron=cron, timezone=tz)
        else:
            raise Skip("no schedule attached")
        if task.one_off and fields["kind"] != "once":
            fields["max_runs"] = 1
        if task.start_time is not None and fields["kind"] != "once":
            fields["start_at"] = whole_second(task.start_time)
        if task.expires is not None:
            fields["end_at"] = whole_second(task.expires)
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

    return make_plan(CELERY_BEAT, task.pk, task.name, f"celery-beat-{task.pk}", build)


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
