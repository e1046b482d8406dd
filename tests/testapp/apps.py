import multiprocessing
import os
import time

from django.apps import AppConfig


class TestAppConfig(AppConfig):
    name = "tests.testapp"
    label = "testapp"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Process tests only (tests/test_hard_timeouts.py): DDS_TEST_CHILD_START_SECONDS
        # makes a hard-timeout child process (started by multiprocessing, unlike a worker)
        # take that long to set up, a window in which the test freezes its worker.
        delay = os.environ.get("DDS_TEST_CHILD_START_SECONDS")
        if delay and multiprocessing.parent_process() is not None:
            time.sleep(float(delay))
