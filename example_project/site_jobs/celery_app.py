"""The example's Celery app (only with ``DDS_EXAMPLE_CELERY=<broker url>``).

Worker: ``cd example_project && DDS_EXAMPLE_CELERY=redis://127.0.0.1:6379/0
DJANGO_SETTINGS_MODULE=example_project.settings celery -A site_jobs.celery_app worker``.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")

app = Celery("example_project", broker=os.environ.get("DDS_EXAMPLE_CELERY"))
app.conf.broker_connection_retry_on_startup = True


@app.task(bind=True)
def count_notes_celery(self, *, label):
    from .models import Note

    return {"label": label, "notes": Note.objects.count(), "task_id": self.request.id}
