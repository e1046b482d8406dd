"""Django settings of the chaos soak (bench/chaos.py): this app, the soak's callbacks
(``chaos_app``) and the database of ``$DATABASE_URL``. ``bench/`` must be on the path."""

import os

import dj_database_url

SECRET_KEY = "chaos-soak-not-secret"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django_durable_schedules",
    "chaos_app",
]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

DATABASES = {"default": dj_database_url.parse(os.environ["DATABASE_URL"])}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    DATABASES["default"]["OPTIONS"] = {"timeout": 30}
if DATABASES["default"]["ENGINE"].endswith("mysql"):
    DATABASES["default"]["OPTIONS"] = {"charset": "utf8mb4"}

DURABLE_SCHEDULES = {
    "LEASE_SECONDS": float(os.environ.get("CHAOS_LEASE_SECONDS", "4")),
    "AUTODISCOVER": True,
}
if "DDS_HEAP_TRIM_SECONDS" in os.environ:  # bench/memory_soak.py --env: 0 turns trims off
    DURABLE_SCHEDULES["HEAP_TRIM_SECONDS"] = float(os.environ["DDS_HEAP_TRIM_SECONDS"])
