"""Settings for the test suite.

The database comes from ``DATABASE_URL`` (dj-database-url); the default is a SQLite
file, so worker subprocesses started by the process tests can share it.
"""

import os
import tempfile
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent
SECRET_KEY = "tests-only-not-secret"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
ALLOWED_HOSTS = ["*"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "django_durable_schedules",
    "tests.testapp.apps.TestAppConfig",
]

MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]

ROOT_URLCONF = "tests.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
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

_sqlite_dir = os.environ.get("DDS_SQLITE_DIR") or tempfile.gettempdir()
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{_sqlite_dir}/dds-tests.sqlite3")
    )
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # A file, not memory: worker subprocesses in the process tests open the same database.
    DATABASES["default"]["TEST"] = {
        "NAME": os.environ.get(
            "DDS_SQLITE_TEST_NAME", f"{_sqlite_dir}/dds-test-{os.getpid()}.sqlite3"
        )
    }
    # synchronous=OFF: a commit is not fsynced (the file is thrown away after the run, and a
    # killed process loses nothing the OS holds: only a power cut would); ~25 % of the
    # SQLite run's time (tests/test_state.py, test_overlap.py and test_excluded_count.py:
    # 45-51 s -> 33-40 s). DDS_TEST_SQLITE_INIT replaces it (empty: SQLite's default).
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "init_command": os.environ.get("DDS_TEST_SQLITE_INIT", "PRAGMA synchronous=OFF"),
    }
else:
    # One test database per pytest process, so parallel runs on one server never collide.
    DATABASES["default"]["TEST"] = {"NAME": f"test_dds_{os.getpid()}"}
if DATABASES["default"]["ENGINE"].endswith("mysql"):
    DATABASES["default"].setdefault("OPTIONS", {})["charset"] = "utf8mb4"
    DATABASES["default"]["TEST"].update(CHARSET="utf8mb4", COLLATION="utf8mb4_unicode_ci")
# Process tests only (tests/test_callback_connections.py): DDS_TEST_CONN_MAX_AGE=none keeps
# a worker's connections open for good (CONN_MAX_AGE=None), as the docs suggest for workers.
if os.environ.get("DDS_TEST_CONN_MAX_AGE"):
    _age = os.environ["DDS_TEST_CONN_MAX_AGE"]
    DATABASES["default"]["CONN_MAX_AGE"] = None if _age.lower() == "none" else int(_age)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Execution engines (tests/test_dispatch.py): django.tasks (Django 6+) with django-tasks-db's
# DatabaseBackend as alias "db" when it is installed; "default" runs tasks immediately.
try:
    import django.tasks
except ImportError:  # Django 5.2
    pass
else:
    TASKS = {
        "default": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend", "QUEUES": []}
    }
    try:
        import django_tasks_db  # noqa: F401
    except ImportError:
        pass
    else:
        INSTALLED_APPS.append("django_tasks_db")
        TASKS["db"] = {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": []}

DURABLE_SCHEDULES = {}
# Process tests only (tests/test_socket_timeouts.py): a worker subprocess's settings as JSON.
if os.environ.get("DDS_TEST_DURABLE_SCHEDULES"):
    import json

    DURABLE_SCHEDULES.update(json.loads(os.environ["DDS_TEST_DURABLE_SCHEDULES"]))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"django_durable_schedules": {"handlers": ["console"], "level": "WARNING"}},
}

# Django 6.1 replaces EMAIL_BACKEND with MAILERS (and warns when neither is set); the
# MailNotifier tests send through the default mailer, Django's in-memory one in tests.
import django  # noqa: E402

if django.VERSION >= (6, 1):
    MAILERS = {"default": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"}}

# A fast password hasher (Django's advice for tests): pytest-django's ``admin_client`` and
# ``admin_user`` hash "password" for each test, and PBKDF2's 1,500,000 iterations take
# 0.9 s of each such test's setup (2026-12-07): 110 tests of the PostgreSQL lane took
# 0.7 s or more to set up, 117 s in all. No test checks a hash's algorithm.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
