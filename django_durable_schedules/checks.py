"""System checks (``manage.py check``), ids ``durable_schedules.E0xx`` / ``W0xx``."""

from __future__ import annotations

import math
from typing import Any

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.core.exceptions import ImproperlyConfigured

from . import conf
from .exceptions import validation_text
from .notify import checks as notify_checks  # noqa: F401  (registers E020, E021)


@register(Tags.compatibility)
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    errors: list[Any] = []
    if not settings.USE_TZ:
        errors.append(
            Error(
                "django-durable-schedules requires USE_TZ = True.",
                hint="Schedules store aware UTC instants; with USE_TZ = False local and UTC "
                "times mix and runs land hours off. Set USE_TZ = True.",
                id="durable_schedules.E001",
            )
        )
    try:
        unknown = conf.unknown_keys()
    except ImproperlyConfigured as exc:  # settings.DURABLE_SCHEDULES is not a dict
        return errors + [Error(str(exc), id="durable_schedules.E002")]
    if unknown:
        errors.append(
            Error(
                f"Unknown DURABLE_SCHEDULES keys: {', '.join(unknown)}.",
                hint=f"Known keys: {', '.join(sorted(conf.DEFAULTS))}.",
                id="durable_schedules.E003",
            )
        )
    positive = (
        "LEASE_SECONDS",
        "BATCH_SIZE",
        "CONCURRENCY",
        "POLL_MAX_SECONDS",
        "MAX_ATTEMPTS",
        "BACKFILL_MAX_SLOTS",
        "BACKOFF_BASE_SECONDS",
        "BACKOFF_CAP_SECONDS",
        "RESULT_MAX_BYTES",
        "ERROR_MESSAGE_MAX_CHARS",
        "WORKER_STALE_SECONDS",
        "RETRY_AFTER_MAX_SECONDS",
        "LOCK_TIMEOUT_SECONDS",
    )
    # Counts (and the lease, read as whole seconds) must be whole numbers >= 1: 0.5
    # threads or a batch of 0.5 would pass "positive" and stop the worker (found by a
    # newcomer). Every value must be finite (nan and 1e400 are floats too).
    whole = {
        "LEASE_SECONDS",
        "BATCH_SIZE",
        "CONCURRENCY",
        "MAX_ATTEMPTS",
        "BACKFILL_MAX_SLOTS",
        "RESULT_MAX_BYTES",
        "ERROR_MESSAGE_MAX_CHARS",
    }
    for key in positive:
        value = conf.get(key)
        valid = _is_number(value) and math.isfinite(value) and value > 0
        if valid and key in whole:
            valid = value >= 1 and value == int(value)
        if not valid:
            kind = "a whole number >= 1" if key in whole else "a positive, finite number"
            errors.append(
                Error(
                    f"DURABLE_SCHEDULES[{key!r}] must be {kind}, not {value!r}.",
                    id="durable_schedules.E004",
                )
            )
    ahead = conf.get("CLAIM_AHEAD_SECONDS")
    if not (_is_number(ahead) and math.isfinite(ahead) and 0 <= ahead <= 60):
        errors.append(
            Error(
                "DURABLE_SCHEDULES['CLAIM_AHEAD_SECONDS'] must be a number of seconds from 0 "
                f"to 60, not {ahead!r}.",
                id="durable_schedules.E004",
            )
        )
    # Each check reports on its own: E005 needs only the two values it compares to be valid
    # (an invalid one is E004 / E006), whatever else is wrong.
    lease, renew_setting = conf.get("LEASE_SECONDS"), conf.get("RENEW_EVERY_SECONDS")
    lease_valid = _is_number(lease) and math.isfinite(lease) and lease >= 1
    renew_valid = renew_setting is None or (
        _is_number(renew_setting) and math.isfinite(renew_setting) and renew_setting > 0
    )
    if lease_valid and renew_valid:
        renew = conf.app_settings.RENEW_EVERY_SECONDS
        if renew >= conf.app_settings.LEASE_SECONDS:
            errors.append(
                Error(
                    "RENEW_EVERY_SECONDS must be shorter than LEASE_SECONDS.",
                    hint="Leases would expire between renewals and runs would be stolen.",
                    id="durable_schedules.E005",
                )
            )
    return errors


@register(Tags.database)
def check_unregistered_callbacks(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[Any]:
    """Warn about active schedules whose callback is not registered (run with --database)."""
    if not databases:
        return []
    from django.db import DatabaseError

    from .models import Schedule, Status
    from .registry import registry

    try:
        names = set(
            Schedule.objects.filter(status=Status.ACTIVE)
            .values_list("callback", flat=True)
            .distinct()
        )
    except DatabaseError:
        return []
    missing = sorted(names - set(registry.names()))
    if not missing:
        return []
    return [
        Warning(
            f"Active schedules use callbacks that are not registered: {', '.join(missing)}.",
            hint="Register them (schedules.py) or pause the schedules; a worker degrades them.",
            id="durable_schedules.W001",
        )
    ]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


#: Settings that are not positive numbers, and what they must be (check E006).
_TYPED: dict[str, tuple[str, Any]] = {
    "RENEW_EVERY_SECONDS": (
        "None or a positive number",
        lambda v: v is None or _is_number(v) and v > 0,
    ),
    "SKEW_WARN_SECONDS": ("a number >= 0", lambda v: _is_number(v) and v >= 0),
    "BACKFILL_SHARE": (
        "a number from 0 to 1",
        lambda v: _is_number(v) and math.isfinite(v) and 0 <= v <= 1,
    ),
    "BACKFILL_STALL_SECONDS": (
        "a positive number of seconds",
        lambda v: _is_number(v) and math.isfinite(v) and v > 0,
    ),
    "HEAP_TRIM_SECONDS": (
        "None or a number of seconds",
        lambda v: v is None or _is_number(v) and not math.isnan(v),
    ),
    "AUTODISCOVER": ("True or False", lambda v: isinstance(v, bool)),
    "SYNC_ON_MIGRATE": ("True or False", lambda v: isinstance(v, bool)),
    "API_OWNER_SCOPED": ("True or False", lambda v: isinstance(v, bool)),
    "PROBE_PUBLIC": ("True or False", lambda v: isinstance(v, bool)),
    "PROBE_MIN_WORKERS": (
        "a whole number >= 0",
        lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
    ),
    "FAILING_AFTER": (
        "a whole number from 1 to 1000000",
        lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 10**6,
    ),
    "CATCH_UP_MAX": (
        "a whole number from 1 to 1000000",
        lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 10**6,
    ),
    "BUFFER_MAX": (
        "a whole number from 1 to 1000000",
        lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 10**6,
    ),
    "PROBE_MAX_LAG_SECONDS": (
        "a positive number",
        lambda v: _is_number(v) and math.isfinite(v) and v > 0,
    ),
    "API_PERMISSION_CLASSES": (
        "a list of dotted paths",
        lambda v: isinstance(v, (list, tuple)) and all(isinstance(p, str) and "." in p for p in v),
    ),
    "METRICS_MAX_SCHEDULES": (
        "a whole number from 0 to 100000",
        lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 100_000,
    ),
    "SENTRY_CRONS": ("True or False", lambda v: isinstance(v, bool)),
    "OTEL_SPANS": ("True or False", lambda v: isinstance(v, bool)),
    "NOTIFY_CHANNEL": ("None or a channel name", lambda v: v is None or isinstance(v, str)),
    "SOCKET_TIMEOUT_SECONDS": (
        "None or a positive number",
        lambda v: v is None or _is_number(v) and math.isfinite(v) and v > 0,
    ),
}

#: Apps this app's models and admin rely on (check E007).
REQUIRED_APPS = ("django.contrib.contenttypes", "django.contrib.auth")


@register(Tags.compatibility)
def check_setting_types(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """E006: a setting of the wrong type; W003: a backoff cap below its base; W004: a
    socket timeout not above the lock timeout; E007: an app this one needs is not
    installed."""
    from django.apps import apps

    messages: list[Any] = []
    try:
        user = conf.user_settings()
    except ImproperlyConfigured:
        user = {}  # reported by E002
    for key, (expected, valid) in _TYPED.items():
        if key in user and key in conf.DEFAULTS and not valid(user[key]):
            messages.append(
                Error(
                    f"DURABLE_SCHEDULES[{key!r}] must be {expected}, not {user[key]!r}.",
                    id="durable_schedules.E006",
                )
            )
    base, cap = user.get("BACKOFF_BASE_SECONDS"), user.get("BACKOFF_CAP_SECONDS")
    base = conf.DEFAULTS["BACKOFF_BASE_SECONDS"] if base is None else base
    cap = conf.DEFAULTS["BACKOFF_CAP_SECONDS"] if cap is None else cap
    if _is_number(base) and _is_number(cap) and 0 < cap < base:
        messages.append(
            Warning(
                f"BACKOFF_CAP_SECONDS ({cap}) is below BACKOFF_BASE_SECONDS ({base}).",
                hint="Every retry would wait the cap; raise the cap or lower the base.",
                id="durable_schedules.W003",
            )
        )
    socket = user.get("SOCKET_TIMEOUT_SECONDS", conf.DEFAULTS["SOCKET_TIMEOUT_SECONDS"])
    lock = user.get("LOCK_TIMEOUT_SECONDS", conf.DEFAULTS["LOCK_TIMEOUT_SECONDS"])
    if _is_number(socket) and _is_number(lock) and 0 < socket <= lock:
        messages.append(
            Warning(
                f"SOCKET_TIMEOUT_SECONDS ({socket}) is not above LOCK_TIMEOUT_SECONDS ({lock}).",
                hint=(
                    "A worker's lock wait would end in a dropped connection instead of a lock"
                    " timeout; raise SOCKET_TIMEOUT_SECONDS."
                ),
                id="durable_schedules.W004",
            )
        )
    for name in REQUIRED_APPS:
        if not apps.is_installed(name):
            messages.append(
                Error(
                    f"django-durable-schedules needs {name!r} in INSTALLED_APPS.",
                    hint="Schedule.owner and the audit trail's actor point at the user model.",
                    id="durable_schedules.E007",
                )
            )
    return messages


def live_sqlite_workers(using: str = "default") -> list[str]:
    """Ids of the workers alive on database ``using`` (heartbeat newer than
    ``WORKER_STALE_SECONDS``, not stopped) when it is SQLite; ``[]`` for any other
    database, or when the table cannot be read (not migrated yet). Read-only."""
    from datetime import timedelta

    from django.db import DatabaseError, connections

    if connections[using].vendor != "sqlite":
        return []
    from .models import WorkerHeartbeat
    from .state import db_now

    if not settings.USE_TZ:
        return []  # E001 says so; aware datetimes cannot even be queried then
    try:
        stale = db_now(using) - timedelta(seconds=conf.app_settings.WORKER_STALE_SECONDS)
        return list(
            WorkerHeartbeat.objects.using(using)
            .filter(stopped_at__isnull=True, last_seen_at__gte=stale)
            .values_list("worker_id", flat=True)
        )
    except (DatabaseError, ValueError, ImproperlyConfigured):
        return []


@register(Tags.database)
def check_sqlite_workers(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[Any]:
    """W002: several live workers share a SQLite database (run with ``--database``)."""
    messages: list[Any] = []
    for alias in databases or ():
        workers = live_sqlite_workers(alias)
        if len(workers) > 1:
            messages.append(
                Warning(
                    f"{len(workers)} workers are alive on the SQLite database {alias!r}: "
                    f"{', '.join(sorted(workers)[:5])}.",
                    hint="SQLite allows one writer at a time: extra workers only wait for its "
                    "lock. Run one worker (raise --concurrency instead), or use PostgreSQL "
                    "or MariaDB/MySQL for several.",
                    id="durable_schedules.W002",
                )
            )
    return messages


@register(Tags.compatibility)
def check_declared_schedules(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    """E008: a schedule declared in code (``register(..., every=/cron=/rrule=/at=)``) that would not
    validate, reported before ``migrate`` or a worker tries to create it."""
    from django.core.exceptions import ValidationError

    from .models import Schedule
    from .registry import registry
    from .state import declared_fields

    errors: list[Any] = []
    for reg in registry.declared():
        row = Schedule(name=reg.name, **declared_fields(reg, using=None))  # no query
        try:
            row.clean_fields()
            row.clean()
        except ValidationError as exc:
            detail = validation_text(exc)
            errors.append(
                Error(
                    f"The schedule declared in code for {reg.name!r} is invalid: {detail}",
                    hint="Fix the every=/cron=/rrule=/timezone=/at= arguments of its register(...) call.",
                    obj=reg.name,
                    id="durable_schedules.E008",
                )
            )
    return errors


@register(Tags.database)
def check_declared_groups(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[Any]:
    """W005: a schedule declared in code names a concurrency group that does not exist in
    a database checked (``check --database``; the sync logs it and skips that schedule).
    A warning: ``migrate`` and the test runner run the database checks before anyone could
    create the group. Nothing is reported for a database not migrated yet."""
    from django.db import DatabaseError

    from .registry import registry
    from .state.group_defs import UNKNOWN_GROUP_HINT, unknown_declared_groups, unknown_group_text

    messages: list[Any] = []
    for alias in databases or ():
        try:
            unknown = unknown_declared_groups(registry.declared(), alias)
        except DatabaseError:  # not migrated yet
            continue
        for schedule, group in unknown:
            text = unknown_group_text(schedule, group)
            messages.append(
                Warning(
                    f"{text} (database {alias!r})",
                    hint=UNKNOWN_GROUP_HINT,
                    obj=schedule,
                    id="durable_schedules.W005",
                )
            )
    return messages
