"""Example site using django-durable-schedules.

SQLite by default (``example_project/db.sqlite3``); set ``DATABASE_URL`` for PostgreSQL
(``postgres://postgres@127.0.0.1:5432/example``) or MariaDB (``mysql://root@127.0.0.1:3306/example``).
"""

import os
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "example-only-not-secret")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = ["localhost", "127.0.0.1"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "django_durable_schedules",
    "site_jobs",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "example_project.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

DATABASES = {"default": dj_database_url.config(default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}")}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    DATABASES["default"]["OPTIONS"] = {"timeout": 20}

USE_TZ = True  # required by django-durable-schedules
TIME_ZONE = "Europe/Paris"
LANGUAGE_CODE = "en-us"
STATIC_URL = "static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

DURABLE_SCHEDULES = {
    "LEASE_SECONDS": 30,
    "POLL_MAX_SECONDS": 2,
    "BACKOFF_BASE_SECONDS": 2,
    "BACKOFF_CAP_SECONDS": 60,
}

# Execution engines, off by default (docs/scale.md). With one of these set, the jobs in
# site_jobs/engines.py hand their work to the engine instead of running in the scheduler:
#   DDS_EXAMPLE_TASKS=db      django.tasks on django-tasks-db (pip install django-tasks-db;
#                             run `manage.py db_worker` next to `manage.py run_scheduler`)
#   DDS_EXAMPLE_CELERY=redis://127.0.0.1:6379/0   Celery (pip install 'celery[redis]'; run
#                             `celery -A site_jobs.celery_app worker` from example_project/)
if os.environ.get("DDS_EXAMPLE_TASKS") == "db":
    INSTALLED_APPS.append("django_tasks_db")
    TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
CELERY_BROKER_URL = os.environ.get("DDS_EXAMPLE_CELERY", "")

# The REST API (django_durable_schedules.api): staff-only by default; its OpenAPI schema is
# served at /api/schema/ with Swagger UI at /api/docs/.
REST_FRAMEWORK = {"DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema"}
INSTALLED_APPS.append("drf_spectacular_sidecar")  # Swagger UI's files, served locally
SPECTACULAR_SETTINGS = {
    # Request bodies get their own components (ScheduleRequest: no server-set fields), so a
    # client generated from the schema creates a schedule with just what it must send.
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",  # no CDN: works offline and under a strict CSP
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "TITLE": "django-durable-schedules example API",
    "DESCRIPTION": "Schedules, their run attempts and receipts, and health.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAdminUser"],
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "django_durable_schedules": {"handlers": ["console"], "level": "INFO", "propagate": False}
    },
}
