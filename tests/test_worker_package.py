"""The worker's shape (issue #25, item 4), held against the code: ``Worker.run`` stays a
short list of duties, and a hard-timeout child can import its module before
``django.setup()`` (so ``django_durable_schedules.worker`` imports the loop lazily)."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

from django_durable_schedules.worker import Worker
from django_durable_schedules.worker.loop import Worker as LoopWorker

#: Longest ``Worker.run`` (lines, docstring included): issue #25's goal.
RUN_MAX_LINES = 40
ROOT = Path(__file__).resolve().parent.parent


def test_worker_run_is_at_most_40_lines():
    lines = inspect.getsource(Worker.run).splitlines()
    assert len(lines) <= RUN_MAX_LINES, f"Worker.run is {len(lines)} lines"


def test_worker_is_the_loops_worker():
    assert Worker is LoopWorker


def test_the_isolation_child_imports_before_django_setup():
    """A spawned child unpickles its target (``isolation_child._child_main``) before it
    calls ``django.setup()``: importing that module, and so the worker package, must not
    need the app registry."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    code = (
        "import django_durable_schedules.worker.execution.isolation_child as m; "
        "assert callable(m.Child)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
