from typing import Any

from django.apps import AppConfig
from django.core.exceptions import ImproperlyConfigured
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created
from django.db.models.signals import post_migrate, post_save


class DurableSchedulesConfig(AppConfig):
    """App config: label ``durable_schedules``; imports every app's ``schedules.py`` at
    start-up, registers the system checks and syncs code-declared schedules after migrate."""

    name = "django_durable_schedules"
    label = "durable_schedules"
    verbose_name = "Durable schedules"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the checks)
        from .conf import app_settings
        from .registry import autodiscover

        try:
            discover = app_settings.AUTODISCOVER
        except ImproperlyConfigured:  # DURABLE_SCHEDULES is not a dict: check E002 says so
            discover = True
        if discover:
            autodiscover()
        post_migrate.connect(_sync_after_migrate, sender=self)
        connection_created.connect(
            _on_connection_created, dispatch_uid="durable_schedules_sqlite_gate"
        )
        from .db.wakeups import schedule_saved
        from .models import Schedule

        # PostgreSQL: NOTIFY idle workers in the saving transaction (docs/operations.md).
        post_save.connect(schedule_saved, sender=Schedule, dispatch_uid="durable_schedules_wakeup")
        from .contrib import install_configured

        install_configured()  # SENTRY_CRONS, OTEL_SPANS (docs/monitoring-integrations.md)


def _on_connection_created(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    from .db.guards import register_sqlite_gate

    register_sqlite_gate(connection)


def _sync_after_migrate(sender: Any, using: str = "default", **kwargs: Any) -> None:
    from .conf import app_settings
    from .state import sync_declared

    try:
        sync = app_settings.SYNC_ON_MIGRATE
    except ImproperlyConfigured:  # check E002 stops migrate before this in practice
        return
    if sync:
        sync_declared(using=using)
