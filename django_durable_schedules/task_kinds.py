"""What kind of thing a callback is (:func:`task_kind`: a Python callable, a ``django.tasks``
Task, a Celery task; ``KIND_COMMAND`` for :func:`..registry.register_command`), and the
``task_options=`` each kind takes (:func:`check_task_options`). Looks only at the modules
already imported: neither ``django.tasks`` nor Celery is required. No database access.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Mapping
from typing import Any

#: What a registration runs: a Python callable (called with the run context), a
#: ``django.tasks`` Task or a Celery task (enqueued with the payload as keyword arguments),
#: or a management command (``call_command`` in the worker).
KIND_CALLABLE = "callable"
KIND_DJANGO_TASK = "django_task"
KIND_CELERY_TASK = "celery_task"
KIND_COMMAND = "command"

#: ``task_options`` a ``django.tasks`` Task accepts (passed to ``Task.using()``).
DJANGO_TASK_OPTIONS = frozenset({"priority", "queue_name", "run_after", "backend"})


def task_kind(obj: Any) -> str:
    """``KIND_DJANGO_TASK``, ``KIND_CELERY_TASK`` or ``KIND_CALLABLE`` for ``obj``.

    Looks only at modules already imported (an object of a library's class means the
    library is loaded), so neither ``django.tasks`` (Django 6+) nor Celery is required,
    and at ``type(obj)``: a Celery ``shared_task`` proxy is recognised without evaluating
    it (which would finalize the Celery app at import time).
    """
    cls = type(obj)
    for module_name in ("django.tasks.base", "django_tasks.base"):
        module = sys.modules.get(module_name)
        if module is not None and issubclass(cls, module.Task):
            return KIND_DJANGO_TASK
    celery_task = sys.modules.get("celery.app.task")
    if celery_task is not None and issubclass(cls, celery_task.Task):
        return KIND_CELERY_TASK
    celery_local = sys.modules.get("celery.local")
    if celery_local is not None and issubclass(cls, celery_local.Proxy):
        return KIND_CELERY_TASK
    return KIND_CALLABLE


def check_task_options(name: str, obj: Any, kind: str, options: Mapping[str, Any]) -> None:
    """Check the ``task_options`` given with callback ``name`` (``obj``, of ``kind``, one of
    ``KIND_CALLABLE``, ``KIND_DJANGO_TASK``, ``KIND_CELERY_TASK``).

    Raises ``TypeError`` if a ``KIND_CALLABLE`` ``obj`` is not callable or is a generator
    function (sync or async: calling it runs none of its body); ``ValueError`` for
    any option given with a function, an option a ``django.tasks`` Task does not take (not in
    :data:`DJANGO_TASK_OPTIONS`), or a Celery task's ``args``/``kwargs``/``task_id`` (the
    run sets them). A django.tasks Task's options are passed to ``obj.using()`` now, so its
    backend refuses a bad one (e.g. an unknown queue) at registration.
    """
    if kind == KIND_CALLABLE:
        if not callable(obj):
            raise TypeError(f"callback {name!r} is not callable")
        if inspect.isgeneratorfunction(obj) or inspect.isasyncgenfunction(obj):
            raise TypeError(
                f"callback {name!r} is a generator function: calling it runs none of its "
                "body (a run would do nothing and count as succeeded); return, do not yield"
            )
        if options:
            raise ValueError(f"task_options= only apply to a task; {name!r} is a function")
    elif kind == KIND_DJANGO_TASK:
        unknown = ", ".join(sorted(set(options) - DJANGO_TASK_OPTIONS))
        if unknown:
            raise ValueError(f"task_options not taken by a django.tasks Task: {unknown}")
        if options:
            obj.using(**options)  # the backend validates them now (e.g. an unknown queue)
    elif kind == KIND_CELERY_TASK and {"args", "kwargs", "task_id"} & set(options):
        raise ValueError("task_options must not set args, kwargs or task_id (the run sets them)")
