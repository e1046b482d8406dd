"""System checks (``manage.py check``), ids ``durable_schedules.E0xx`` / ``W0xx``."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.core.exceptions import ImproperlyConfigured

from . import conf


@register(Tags.compatibility)
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    errors: list[Any] = []
    if not settings.USE_TZ:
        errors.append(
            Error(
                "django-durable-schedules requires USE_TZ = True.",
                hint="Schedules store aware UTC instants; with USE_TZ = False local and UTC "
                "times mix and runs land hours off (field report B10). Set USE_TZ = True.",
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
        "BACKOFF_BASE_SECONDS",
        "BACKOFF_CAP_SECONDS",
        "RESULT_MAX_BYTES",
        "ERROR_MESSAGE_MAX_CHARS",
        "WORKER_STALE_SECONDS",
    )
    for key in positive:
        value = conf.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            errors.append(
                Error(
                    f"DURABLE_SCHEDULES[{key!r}] must be a positive number, not {value!r}.",
                    id="durable_schedules.E004",
                )
            )
    if not errors:
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
