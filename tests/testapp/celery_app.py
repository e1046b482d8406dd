"""A Celery app and task for tests/test_dispatch.py (imported only when Celery is installed).

The broker is Redis (``DDS_REDIS_URL``, default database 15 on 127.0.0.1:6379); the queue
name (``DDS_CELERY_QUEUE``) is set once per pytest process and inherited by the scheduler
and Celery worker subprocesses, so parallel test runs never share a queue. No Django import
at module level: ``celery -A tests.testapp.celery_app worker`` loads this module before
Celery's Django fix-up calls ``django.setup()``.
"""

import os

from celery import Celery

REDIS_URL = os.environ.get("DDS_REDIS_URL", "redis://127.0.0.1:6379/15")
QUEUE = os.environ.setdefault("DDS_CELERY_QUEUE", f"dds-tests-{os.getpid()}")

app = Celery("dds_tests", broker=REDIS_URL, set_as_current=False)
app.conf.update(
    task_default_queue=QUEUE,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
)


@app.task(name="tests.celery_record", bind=True)
def celery_record(self, **payload):
    """Records one SideEffect whose idempotency_key is the Celery task id."""
    from .models import SideEffect

    SideEffect.objects.create(
        schedule_name=f"celery:{payload.get('tag', '')}",
        occurrence=0,
        attempt=0,
        idempotency_key=self.request.id,
        pid=os.getpid(),
    )
    return payload.get("tag")
