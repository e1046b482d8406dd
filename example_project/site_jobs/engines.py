"""Jobs handed to an execution engine instead of running in the scheduler (docs/scale.md).

The management command is always on. The django.tasks and Celery jobs are off by default:
see the ``DDS_EXAMPLE_TASKS`` / ``DDS_EXAMPLE_CELERY`` notes in the example settings.
"""

import os

from django_durable_schedules import register, register_command

# Daily, in the scheduler process; stdout/stderr land in the receipt (bounded).
register_command("sessions.clearsessions", "clearsessions", cron="15 4 * * *")

if os.environ.get("DDS_EXAMPLE_TASKS") == "db":
    from django.tasks import task

    @task()
    def count_notes(*, label):
        """Runs in `manage.py db_worker`; its result is kept by django-tasks-db."""
        from .models import Note

        return {"label": label, "notes": Note.objects.count()}

    # Enqueued exactly once per occurrence (the task row commits with the receipt).
    register("tasks.count_notes", count_notes, every=30, payload={"label": "django.tasks"})

if os.environ.get("DDS_EXAMPLE_CELERY"):
    from .celery_app import count_notes_celery

    # At-least-once; the Celery task id is the occurrence's idempotency key.
    register(
        "celery.count_notes",
        count_notes_celery,
        every=30,
        payload={"label": "celery"},
        task_options={"queue": "celery"},
    )
