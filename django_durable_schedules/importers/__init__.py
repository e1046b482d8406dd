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

from .apply import Summary, apply
from .celery_beat import disable_celery_beat, load_celery_beat, plan_celery_beat
from .django_q import disable_django_q, load_django_q, plan_django_q
from .plans import (
    CELERY_BEAT,
    CELERY_BEAT_MODEL,
    DJANGO_Q,
    DJANGO_Q_MODEL,
    SOURCES,
    Plan,
    Result,
    parse_callback_map,
    schedule_name,
)

__all__ = [
    "CELERY_BEAT",
    "CELERY_BEAT_MODEL",
    "DJANGO_Q",
    "DJANGO_Q_MODEL",
    "SOURCES",
    "Plan",
    "Result",
    "Summary",
    "apply",
    "disable_celery_beat",
    "disable_django_q",
    "load_celery_beat",
    "load_django_q",
    "parse_callback_map",
    "plan_celery_beat",
    "plan_django_q",
    "schedule_name",
]
