"""Typed view of ``settings.DURABLE_SCHEDULES``.

Every key is optional. Values are read at call time (not import time), so
``override_settings(DURABLE_SCHEDULES={...})`` works in tests.

========================  =========  ===========================================================
key                       default    meaning (unit)
========================  =========  ===========================================================
LEASE_SECONDS             30         how long a claim is owned before another worker may
                                     recover it (seconds); renewed while the callback runs
RENEW_EVERY_SECONDS       None       how often a worker renews its leases and heartbeat
                                     (seconds); default: a third of LEASE_SECONDS
BATCH_SIZE                100        most schedules claimed in one transaction
CONCURRENCY               4          callbacks run at once per worker (threads)
CLAIM_AHEAD_SECONDS       0.05       a worker claims beyond its free threads as many runs as
                                     they are expected to start within this, by the observed
                                     run time (seconds); 0: only what free threads can start
POLL_MAX_SECONDS          5.0        longest idle sleep between checks (seconds)
BACKOFF_BASE_SECONDS      5.0        first retry delay after a failure (seconds); doubles
BACKOFF_CAP_SECONDS       3600.0     longest retry delay (seconds)
MAX_ATTEMPTS              3          attempts per occurrence before it is given up
BACKFILL_MAX_SLOTS        1000       most slots one backfill may run (a longer range is refused)
BACKFILL_SHARE            0.25       share of every claim batch kept for backfill slots while
                                     live slots and backfill slots both wait (0 to 1; 0: live
                                     slots first, backfills only get what they leave); what the
                                     backfills do not use goes to live slots
BACKFILL_STALL_SECONDS    600        an open backfill with no slot claimed for longer is listed
                                     in health as stalled, a warning (seconds)
RESULT_MAX_BYTES          8192       largest JSON result kept in a receipt (bytes)
ERROR_MESSAGE_MAX_CHARS   1000       longest error message kept in a receipt (characters)
RETRY_AFTER_MAX_SECONDS   2592000    longest retry delay a callback may ask for with
                                     ``RetryRun(after_seconds=...)`` (seconds, 30 days); a
                                     longer (or infinite) one is clamped, with the reason in
                                     the receipt
LOCK_TIMEOUT_SECONDS      5.0        longest wait of a worker's own transactions for a row
                                     lock (seconds; PostgreSQL ``lock_timeout``, MariaDB/MySQL
                                     ``innodb_lock_wait_timeout``, whole seconds); SQLite keeps
                                     its ``OPTIONS["timeout"]``
SOCKET_TIMEOUT_SECONDS    15.0       longest wait of a worker's own connection for the database
                                     to answer or take a write (seconds; libpq keepalives,
                                     ``tcp_user_timeout`` and psycopg's wait on PostgreSQL,
                                     mysqlclient ``read_timeout``/``write_timeout`` on
                                     MariaDB/MySQL); None: no bound. Keep it above
                                     LOCK_TIMEOUT_SECONDS
HEAP_TRIM_SECONDS         60.0       how often an idle worker hands the heap memory its threads
                                     freed back to the system (glibc ``malloc_trim``; seconds);
                                     None or 0: never
HARD_TIMEOUTS             True       run callbacks that have ``timeout_seconds`` in a child
                                     process that is killed at the deadline
WORKER_STALE_SECONDS      90         a worker whose heartbeat is older is counted dead (seconds)
SKEW_WARN_SECONDS         5.0        host/database clock difference that health reports
AUTODISCOVER              True       import ``schedules.py`` of every installed app at start
SYNC_ON_MIGRATE           True       create/update schedules declared in code after ``migrate``
NOTIFY_CHANNEL            (note)     PostgreSQL LISTEN/NOTIFY channel that wakes idle workers when a
                                     schedule changes; default ``"durable_schedules"``; None turns
                                     wake-ups off (workers only poll)
API_PERMISSION_CLASSES    [IsAdmin]  DRF permission classes (dotted paths) of the API
API_OWNER_SCOPED          False      non-staff users see and control only their own schedules
PROBE_PUBLIC              True       anyone may read the fleet probe (``health/probe/``: no
                                     schedule names); False: the API's permission classes
PROBE_MIN_WORKERS         1          live workers health and the probe need while a schedule waits
PROBE_MAX_LAG_SECONDS     60.0       the probe fails when a due schedule has waited longer
                                     than this for a claim (seconds)
METRICS_MAX_SCHEDULES     500        schedules that get their own ``schedule`` label in the
                                     Prometheus metrics (``contrib.prometheus``); the ones
                                     first seen after that are summed under ``_other``
SENTRY_CRONS              False      send Sentry Crons check-ins of every run (the ``sentry``
                                     extra, ``contrib.sentry``)
OTEL_SPANS                False      one OpenTelemetry span per run, its context handed to
                                     Celery tasks (the ``otel`` extra, ``contrib.otel``)
FAILING_AFTER             3          consecutive failed attempts after which a schedule's
                                     ``failing`` alert opens (one event per episode, closed by
                                     its next success)
CATCH_UP_MAX              100        most missed slots a ``misfire_policy="all"`` schedule runs
                                     after downtime, oldest first; the older ones are counted
                                     missed (a whole number from 1 to 1000000)
BUFFER_MAX                100        most slots an ``overlap_policy="buffer_all"`` schedule
                                     queues while a run runs (each then runs, oldest first);
                                     the older ones are counted skipped (1 to 1000000)
========================  =========  ===========================================================

Alert notifications (docs/monitoring.md): ``NOTIFIERS`` (default ``{}``): Django-style
``{"ops": {"BACKEND": "django_durable_schedules.notify.WebhookNotifier", "OPTIONS": {"url":
...}, "EVENTS": [...]}}``; ``NOTIFY_MAX_TRIES`` (10): sends of one notification before it is
abandoned; ``NOTIFY_BACKOFF_BASE_SECONDS`` (10.0): the first retry delay of a failed send,
doubling, up to ``NOTIFY_BACKOFF_CAP_SECONDS`` (3600.0); ``NOTIFY_POLL_SECONDS`` (5.0): the
longest wait of an idle delivery thread before it looks for due notifications again.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

DEFAULTS: dict[str, Any] = {
    "LEASE_SECONDS": 30,
    "RENEW_EVERY_SECONDS": None,
    "BATCH_SIZE": 100,
    "CONCURRENCY": 4,
    "CLAIM_AHEAD_SECONDS": 0.05,
    "POLL_MAX_SECONDS": 5.0,
    "BACKOFF_BASE_SECONDS": 5.0,
    "BACKOFF_CAP_SECONDS": 3600.0,
    "MAX_ATTEMPTS": 3,
    "BACKFILL_MAX_SLOTS": 1000,
    "BACKFILL_SHARE": 0.25,
    "BACKFILL_STALL_SECONDS": 600,
    "RESULT_MAX_BYTES": 8192,
    "ERROR_MESSAGE_MAX_CHARS": 1000,
    "RETRY_AFTER_MAX_SECONDS": 30 * 86400,
    "LOCK_TIMEOUT_SECONDS": 5.0,
    "SOCKET_TIMEOUT_SECONDS": 15.0,
    "HEAP_TRIM_SECONDS": 60.0,
    "HARD_TIMEOUTS": True,
    "WORKER_STALE_SECONDS": 90,
    "SKEW_WARN_SECONDS": 5.0,
    "AUTODISCOVER": True,
    "SYNC_ON_MIGRATE": True,
    "NOTIFY_CHANNEL": "durable_schedules",
    "API_PERMISSION_CLASSES": ["rest_framework.permissions.IsAdminUser"],
    "API_OWNER_SCOPED": False,
    "PROBE_PUBLIC": True,
    "PROBE_MIN_WORKERS": 1,
    "PROBE_MAX_LAG_SECONDS": 60.0,
    "METRICS_MAX_SCHEDULES": 500,
    "SENTRY_CRONS": False,
    "OTEL_SPANS": False,
    "NOTIFIERS": {},
    "NOTIFY_MAX_TRIES": 10,
    "NOTIFY_BACKOFF_BASE_SECONDS": 10.0,
    "NOTIFY_BACKOFF_CAP_SECONDS": 3600.0,
    "NOTIFY_POLL_SECONDS": 5.0,
    "FAILING_AFTER": 3,
    "CATCH_UP_MAX": 100,
    "BUFFER_MAX": 100,
}


def user_settings() -> dict[str, Any]:
    """The project's ``DURABLE_SCHEDULES`` dict as given (``{}`` when unset), read at call time.
    Raises ``ImproperlyConfigured`` when it is not a dict."""
    value = getattr(settings, "DURABLE_SCHEDULES", {}) or {}
    if not isinstance(value, dict):
        raise ImproperlyConfigured("settings.DURABLE_SCHEDULES must be a dict")
    return value


def get(key: str) -> Any:
    """Return one setting, falling back to its documented default.

    Raises ``KeyError`` for a key that is not documented.
    """
    if key not in DEFAULTS:
        raise KeyError(key)
    return user_settings().get(key, DEFAULTS[key])


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _bounded(value: Any, default: float, low: float, high: float) -> float:
    """``value`` as a float in ``[low, high]`` (clamped); ``default`` when it is no number
    (a string, a bool, NaN); an infinity is clamped like any number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return float(default)
    number = float(value)
    if number != number:  # NaN
        return float(default)
    return min(high, max(low, number))


def unknown_keys() -> list[str]:
    """Keys of ``DURABLE_SCHEDULES`` that this app does not know (for the system check)."""
    return sorted(set(user_settings()) - set(DEFAULTS))


class _Settings:
    """Attribute access to the settings: ``app_settings.LEASE_SECONDS``."""

    @property
    def LEASE_SECONDS(self) -> int:
        return int(get("LEASE_SECONDS"))

    @property
    def RENEW_EVERY_SECONDS(self) -> float:
        value = get("RENEW_EVERY_SECONDS")
        return float(value) if value is not None else self.LEASE_SECONDS / 3

    @property
    def BATCH_SIZE(self) -> int:
        return int(get("BATCH_SIZE"))

    @property
    def CONCURRENCY(self) -> int:
        return int(get("CONCURRENCY"))

    @property
    def CLAIM_AHEAD_SECONDS(self) -> float:
        return float(get("CLAIM_AHEAD_SECONDS"))

    @property
    def POLL_MAX_SECONDS(self) -> float:
        return float(get("POLL_MAX_SECONDS"))

    @property
    def BACKOFF_BASE_SECONDS(self) -> float:
        return float(get("BACKOFF_BASE_SECONDS"))

    @property
    def BACKOFF_CAP_SECONDS(self) -> float:
        return float(get("BACKOFF_CAP_SECONDS"))

    @property
    def MAX_ATTEMPTS(self) -> int:
        return int(get("MAX_ATTEMPTS"))

    @property
    def BACKFILL_MAX_SLOTS(self) -> int:
        return int(get("BACKFILL_MAX_SLOTS"))

    @property
    def BACKFILL_SHARE(self) -> float:
        """The share, bounded to ``[0, 1]``; a value that is no number is the default
        (the system check reports it, E006)."""
        return _bounded(get("BACKFILL_SHARE"), DEFAULTS["BACKFILL_SHARE"], 0.0, 1.0)

    @property
    def BACKFILL_STALL_SECONDS(self) -> float:
        """The threshold, bounded to ``[1, 10 years]``; a value that is no number is the
        default (the system check reports it, E006)."""
        return _bounded(
            get("BACKFILL_STALL_SECONDS"), DEFAULTS["BACKFILL_STALL_SECONDS"], 1.0, 3650 * 86400.0
        )

    @property
    def RESULT_MAX_BYTES(self) -> int:
        return int(get("RESULT_MAX_BYTES"))

    @property
    def ERROR_MESSAGE_MAX_CHARS(self) -> int:
        return int(get("ERROR_MESSAGE_MAX_CHARS"))

    @property
    def RETRY_AFTER_MAX_SECONDS(self) -> float:
        return float(get("RETRY_AFTER_MAX_SECONDS"))

    @property
    def LOCK_TIMEOUT_SECONDS(self) -> float:
        return float(get("LOCK_TIMEOUT_SECONDS"))

    @property
    def SOCKET_TIMEOUT_SECONDS(self) -> Any:
        # As given: db.sockets.valid_seconds bounds it (a bad value means no bound).
        return get("SOCKET_TIMEOUT_SECONDS")

    @property
    def HEAP_TRIM_SECONDS(self) -> float:
        """Seconds between heap trims, bounded to ``[1, 1 day]``; ``0`` (from None, 0 or
        a negative number): never. A value that is no number is the default (the system
        check reports it, E006)."""
        value = get("HEAP_TRIM_SECONDS")
        if value is None or (_is_number(value) and value <= 0):
            return 0.0
        return _bounded(value, DEFAULTS["HEAP_TRIM_SECONDS"], 1.0, 86400.0)

    @property
    def HARD_TIMEOUTS(self) -> bool:
        return bool(get("HARD_TIMEOUTS"))

    @property
    def WORKER_STALE_SECONDS(self) -> float:
        return float(get("WORKER_STALE_SECONDS"))

    @property
    def SKEW_WARN_SECONDS(self) -> float:
        return float(get("SKEW_WARN_SECONDS"))

    @property
    def AUTODISCOVER(self) -> bool:
        return bool(get("AUTODISCOVER"))

    @property
    def SYNC_ON_MIGRATE(self) -> bool:
        return bool(get("SYNC_ON_MIGRATE"))

    @property
    def NOTIFY_CHANNEL(self) -> str | None:
        value = get("NOTIFY_CHANNEL")
        return str(value) if value else None

    @property
    def PROBE_PUBLIC(self) -> bool:
        return bool(get("PROBE_PUBLIC"))

    @property
    def PROBE_MIN_WORKERS(self) -> int:
        return int(get("PROBE_MIN_WORKERS"))

    @property
    def PROBE_MAX_LAG_SECONDS(self) -> float:
        return float(get("PROBE_MAX_LAG_SECONDS"))

    @property
    def METRICS_MAX_SCHEDULES(self) -> int:
        """Schedules with a label of their own, bounded to ``[0, 100000]``; a value that is
        no whole number is the default (the system check reports it, E006)."""
        value = get("METRICS_MAX_SCHEDULES")
        if not isinstance(value, int) or isinstance(value, bool):
            value = DEFAULTS["METRICS_MAX_SCHEDULES"]
        return min(100_000, max(0, int(value)))

    @property
    def SENTRY_CRONS(self) -> bool:
        return get("SENTRY_CRONS") is True

    @property
    def OTEL_SPANS(self) -> bool:
        return get("OTEL_SPANS") is True

    @property
    def NOTIFY_MAX_TRIES(self) -> int:
        """Sends before a notification is abandoned, bounded to ``[1, 1000]``; a value
        that is no number is the default (the system check reports it)."""
        return int(_bounded(get("NOTIFY_MAX_TRIES"), DEFAULTS["NOTIFY_MAX_TRIES"], 1, 1000))

    @property
    def NOTIFY_BACKOFF_BASE_SECONDS(self) -> float:
        """Bounded to ``[0.01, 1 day]`` (seconds)."""
        default = DEFAULTS["NOTIFY_BACKOFF_BASE_SECONDS"]
        return _bounded(get("NOTIFY_BACKOFF_BASE_SECONDS"), default, 0.01, 86400.0)

    @property
    def NOTIFY_BACKOFF_CAP_SECONDS(self) -> float:
        """Bounded to ``[0.01, 1 day]`` (seconds)."""
        default = DEFAULTS["NOTIFY_BACKOFF_CAP_SECONDS"]
        return _bounded(get("NOTIFY_BACKOFF_CAP_SECONDS"), default, 0.01, 86400.0)

    @property
    def NOTIFY_POLL_SECONDS(self) -> float:
        """Bounded to ``[0.05, 1 hour]`` (seconds)."""
        default = DEFAULTS["NOTIFY_POLL_SECONDS"]
        return _bounded(get("NOTIFY_POLL_SECONDS"), default, 0.05, 3600.0)

    @property
    def FAILING_AFTER(self) -> int:
        """The failure streak that opens a ``failing`` alert, a whole number in ``[1,
        10**6]``; a value that is no whole number is the default (the system check
        reports it, E006)."""
        value = get("FAILING_AFTER")
        if isinstance(value, bool) or not isinstance(value, int):
            return int(DEFAULTS["FAILING_AFTER"])
        return min(10**6, max(1, value))

    @property
    def CATCH_UP_MAX(self) -> int:
        """The most missed slots a ``misfire_policy="all"`` schedule runs after downtime,
        a whole number in ``[1, 10**6]``; a value that is no whole number is the default
        (the system check reports it, E006)."""
        value = get("CATCH_UP_MAX")
        if isinstance(value, bool) or not isinstance(value, int):
            return int(DEFAULTS["CATCH_UP_MAX"])
        return min(10**6, max(1, value))

    @property
    def BUFFER_MAX(self) -> int:
        """The most slots an ``overlap_policy="buffer_all"`` schedule queues while a run
        runs, a whole number in ``[1, 10**6]``; a value that is no whole number is the
        default (the system check reports it, E006)."""
        value = get("BUFFER_MAX")
        if isinstance(value, bool) or not isinstance(value, int):
            return int(DEFAULTS["BUFFER_MAX"])
        return min(10**6, max(1, value))


app_settings = _Settings()
