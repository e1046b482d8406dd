"""Sentry Crons check-ins of every run, through ``sentry_sdk.crons.capture_checkin``.

Needs the ``sentry`` extra (``pip install django-durable-schedules[sentry]``) and an
initialised SDK (``sentry_sdk.init(dsn=...)``) in the ``run_scheduler`` process. Turn it on
with ``DURABLE_SCHEDULES["SENTRY_CRONS"] = True`` (installed when the app is ready) or call
:func:`install` yourself (e.g. in your ``AppConfig.ready()``).

Each schedule is one monitor, its slug made from the schedule's name (:func:`monitor_slug`).
Each attempt sends:

* ``in_progress`` when the worker has claimed it (``run_claimed``), with the schedule's
  definition as the monitor's config (:func:`monitor_config`: a cron expression as a
  ``crontab`` schedule, an interval as an ``interval`` schedule, its ``timezone``,
  ``checkin_margin`` from the jitter, ``max_runtime`` from ``timeout_seconds``), so Sentry
  creates or updates the monitor; once and rrule schedules send no config (create their
  monitor in Sentry);
* ``ok`` or ``error`` when its receipt is written (``run_finished``), with the same
  ``check_in_id`` (the attempt's id) and the run's duration: ``ok`` for ``succeeded``,
  ``enqueued``, ``skipped`` (the callback chose not to run: ``SkipRun``), ``released``
  (handed back at a shutdown, re-run by the next claim, which checks in again) and
  ``replaced`` (stopped for the next slot: ``overlap_policy`` replace); ``error``
  for ``failed``, ``degraded``, ``lease_lost``, ``lease_expired``, ``missed`` and
  anything else.

A run whose worker died sends no closing check-in: Sentry reports it when ``max_runtime``
passes. Check-ins never raise into the worker (an error is logged at WARNING). The monitor
configs are read from the database at most once per :data:`CONFIG_TTL_SECONDS` per schedule
(one query, only while installed); nothing is done per run when not installed.
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import threading
import time
from typing import Any

from sentry_sdk.crons import capture_checkin
from sentry_sdk.crons.consts import MonitorStatus

from .. import signals
from .labels import FAILURE_STATUSES, STATUSES

logger = logging.getLogger(__name__)

#: How long a schedule's monitor config is reused before it is read again (seconds).
CONFIG_TTL_SECONDS = 300.0
#: Longest monitor slug Sentry accepts (characters).
MAX_SLUG = 50
#: Most monitor configs kept in memory (the cache is emptied when it is full).
MAX_CACHED = 10_000
#: Cron macros Sentry reads as they are.
CRON_MACROS = frozenset({"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@hourly"})
_DISPATCH_UID = "dds-sentry-crons"
_configs: dict[Any, tuple[float, dict[str, Any] | None]] = {}
_lock = threading.Lock()
_state = {"installed": False}


def monitor_slug(name: str) -> str:
    """The Sentry monitor slug of schedule ``name``: lower case, each run of characters
    other than ``a-z 0-9 _ -`` as one ``-``; one longer than :data:`MAX_SLUG` is cut and
    ends with 8 hex digits of the name's hash (so two long names stay apart)."""
    slug = re.sub(r"[^a-z0-9_-]+", "-", str(name).lower()).strip("-") or "schedule"
    if len(slug) > MAX_SLUG:
        digest = hashlib.sha1(str(name).encode(), usedforsecurity=False).hexdigest()[:8]
        slug = f"{slug[: MAX_SLUG - 9]}-{digest}"
    return slug


def interval_schedule(seconds: int) -> dict[str, Any]:
    """An interval of ``seconds`` as a Sentry ``interval`` schedule: in days, hours or
    minutes when it is a whole number of them, else in minutes rounded up (Sentry has no
    seconds; at least 1)."""
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds % size == 0:
            return {"type": "interval", "value": seconds // size, "unit": unit}
    return {"type": "interval", "value": max(1, math.ceil(seconds / 60)), "unit": "minute"}


def monitor_config(row: Any) -> dict[str, Any] | None:
    """The Sentry monitor config of the schedule ``row`` (a ``Schedule`` or an object with
    its fields), or None when its timing has no Sentry form (once, rrule, manual, a cron the
    engine cannot read)."""
    from ..timing.cron_syntax import expand_cron

    schedule: dict[str, Any] | None = None
    if row.kind == "cron" and row.cron:
        text = str(row.cron).strip()
        if text.lower() in CRON_MACROS:
            schedule = {"type": "crontab", "value": text.lower()}
        else:
            try:
                schedule = {"type": "crontab", "value": expand_cron(text)[1]}
            except Exception:  # noqa: BLE001 - that schedule's problem: no config
                schedule = None
    elif row.kind == "interval" and isinstance(row.interval_seconds, int):
        if row.interval_seconds >= 1:
            schedule = interval_schedule(row.interval_seconds)
    if schedule is None:
        return None
    config: dict[str, Any] = {
        "schedule": schedule,
        "timezone": str(row.timezone or "UTC"),
        "checkin_margin": 1 + math.ceil((row.jitter_seconds or 0) / 60),
    }
    timeout = row.timeout_seconds
    if isinstance(timeout, (int, float)) and math.isfinite(timeout) and timeout > 0:
        config["max_runtime"] = max(1, math.ceil(timeout / 60))
    return config


def config_for(schedule_id: Any) -> dict[str, Any] | None:
    """The monitor config of schedule ``schedule_id``, from the cache when read less than
    :data:`CONFIG_TTL_SECONDS` ago, else from the database (one query); None when it has
    none or is gone."""
    now = time.monotonic()
    cached = _configs.get(schedule_id)
    if cached is not None and now - cached[0] < CONFIG_TTL_SECONDS:
        return cached[1]
    from ..models import Schedule

    row = Schedule.objects.filter(pk=schedule_id).only(
        "kind", "cron", "interval_seconds", "timezone", "jitter_seconds", "timeout_seconds"
    )
    found = next(iter(row), None)
    config = None if found is None else monitor_config(found)
    with _lock:
        if len(_configs) >= MAX_CACHED:
            _configs.clear()
        _configs[schedule_id] = (now, config)
    return config


def on_claimed(sender: Any, claim: Any, **kwargs: Any) -> None:
    """``run_claimed`` receiver: the ``in_progress`` check-in (never raises)."""
    try:
        config = config_for(claim.schedule_id)
    except Exception as exc:  # noqa: BLE001 - checked in without a config
        logger.warning("monitor config of %s not read: %s", claim.schedule_name, exc)
        config = None
    try:
        capture_checkin(
            monitor_slug=monitor_slug(claim.schedule_name),
            check_in_id=claim.attempt_id.hex,
            status=MonitorStatus.IN_PROGRESS,
            monitor_config=config,  # type: ignore[arg-type]  # a MonitorConfig's keys
        )
    except Exception as exc:  # noqa: BLE001 - never into the worker
        logger.warning("Sentry check-in of %s failed: %s", claim.schedule_name, exc)


def on_finished(
    sender: Any, receipt: Any, claim: Any, duration: float | None = None, **kwargs: Any
) -> None:
    """``run_finished`` receiver: the ``ok`` / ``error`` check-in (never raises)."""
    try:
        failed = str(receipt.status) in FAILURE_STATUSES or receipt.status not in STATUSES
        status = MonitorStatus.ERROR if failed else MonitorStatus.OK
        capture_checkin(
            monitor_slug=monitor_slug(claim.schedule_name),
            check_in_id=claim.attempt_id.hex,
            status=status,
            duration=duration,
        )
    except Exception as exc:  # noqa: BLE001 - never into the worker
        logger.warning("Sentry check-in of %s failed: %s", claim.schedule_name, exc)


def install() -> None:
    """Connect the check-ins to the worker's signals (idempotent)."""
    signals.run_claimed.connect(on_claimed, weak=False, dispatch_uid=f"{_DISPATCH_UID}-claimed")
    signals.run_finished.connect(on_finished, weak=False, dispatch_uid=f"{_DISPATCH_UID}-finished")
    _state["installed"] = True


def uninstall() -> None:
    """Disconnect them and forget the cached configs (a no-op when not installed)."""
    signals.run_claimed.disconnect(dispatch_uid=f"{_DISPATCH_UID}-claimed")
    signals.run_finished.disconnect(dispatch_uid=f"{_DISPATCH_UID}-finished")
    with _lock:
        _configs.clear()
    _state["installed"] = False


def is_installed() -> bool:
    """Whether :func:`install` was called (and not undone)."""
    return _state["installed"]
