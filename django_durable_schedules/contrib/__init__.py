"""Optional integrations; each module needs its own extra (e.g. ``prometheus``)."""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)


def install_configured() -> list[str]:
    """Install the integrations the settings turn on (``SENTRY_CRONS``: :mod:`.sentry`,
    ``OTEL_SPANS``: :mod:`.otel`); called when the app is ready. An integration whose extra
    is not installed is logged (ERROR) and left out, never an exception at start-up.
    Returns the names installed."""
    from django.core.exceptions import ImproperlyConfigured

    from ..conf import app_settings

    try:
        wanted = [
            name
            for name, on in (
                ("sentry", app_settings.SENTRY_CRONS),
                ("otel", app_settings.OTEL_SPANS),
            )
            if on
        ]
    except ImproperlyConfigured:  # DURABLE_SCHEDULES is not a dict: check E002 says so
        return []
    installed = []
    for name in wanted:
        try:
            if name == "sentry":
                from . import sentry

                sentry.install()
            else:
                from . import otel

                otel.install()
        except ImportError as exc:
            logger.error(
                "DURABLE_SCHEDULES turns on %s but its extra is not installed "
                "(pip install 'django-durable-schedules[%s]'): %s",
                name,
                name,
                exc,
            )
            continue
        installed.append(name)
    return installed
