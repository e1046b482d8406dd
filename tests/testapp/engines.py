"""Callbacks that hand runs to execution engines (tests/test_dispatch.py).

Registered from ``schedules.py`` so worker subprocesses have them too. What exists depends
on what is installed: django.tasks (Django 6+), django-tasks-db (alias "db"), Celery.

``DDS_TEST_BLOCK_ENQUEUE=before|after`` (worker subprocesses only) makes the scheduler stop
inside the completion transaction just before / after the in-transaction enqueue: it
writes ``DDS_TEST_BLOCK_FILE`` and sleeps, so a test can SIGKILL it there.
"""

import os
import time
from pathlib import Path

from django.conf import settings

from django_durable_schedules import register, register_command

register_command("tests.cmd_check", "check", args=["--fail-level", "ERROR"])
register_command("tests.cmd_bad_tag", "check", args=["--tag", "no_such_tag"])
register_command("tests.cmd_dds", "schedules", args=["list"])

try:
    from django.tasks import task
except ImportError:  # Django 5.2
    task = None

if task is not None:

    @task(takes_context=True)
    def immediate_record(context, **payload):
        from .models import SideEffect

        SideEffect.objects.create(
            schedule_name=f"task:{payload.get('tag', '')}",
            occurrence=0,
            attempt=context.attempt,
            idempotency_key=str(context.task_result.id),
            pid=os.getpid(),
        )
        return payload.get("tag")

    register("tests.task_immediate", immediate_record, task_options={"queue_name": "fast"})

    if "db" in getattr(settings, "TASKS", {}):

        @task(backend="db", takes_context=True)
        def db_record(context, **payload):
            from .models import SideEffect

            SideEffect.objects.create(
                schedule_name=f"task:{payload.get('tag', '')}",
                occurrence=0,
                attempt=context.attempt,
                idempotency_key=str(context.task_result.id),
                pid=os.getpid(),
            )
            return payload.get("tag")

        register("tests.task_db", db_record)

try:
    from .celery_app import celery_record
except ImportError:  # Celery is not installed
    celery_record = None
else:
    register("tests.celery", celery_record, task_options={"priority": 3})


_block = os.environ.get("DDS_TEST_BLOCK_ENQUEUE")
if _block:
    from django_durable_schedules.state import enqueues

    def _stop_here(stage, outcome):
        if stage == _block:
            Path(os.environ["DDS_TEST_BLOCK_FILE"]).write_text(f"{stage} {os.getpid()}")
            time.sleep(3600)

    enqueues.enqueue_hook = _stop_here
