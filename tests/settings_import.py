"""tests.settings plus django-celery-beat and django-q2, for tests/test_import_schedules.py.

Their migrations are not part of the default run; ``.ci/run`` runs that file once more with
``--ds tests.settings_import`` (the file skips itself when the apps are not installed).
"""

from tests.settings import *  # noqa: F403
from tests.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "django_celery_beat", "django_q"]

Q_CLUSTER = {"name": "tests", "orm": "default", "timeout": 60, "retry": 120}
