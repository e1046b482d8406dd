"""Hand a run to the execution engine the project already runs: a ``django.tasks`` Task, a
Celery task, or a management command. No transactions here: :func:`run` returns an
:class:`~.state.Outcome` and the worker hands it to :func:`.state.complete`.

Delivery guarantees (docs/scale.md has the table):

* django.tasks on django-tasks-db's ``DatabaseBackend``: the task row is written inside the
  completion transaction (``Outcome.enqueue``), after the lease check. A lost lease never
  enqueues, and a crash before the commit rolls the enqueue back with the receipt, so each
  occurrence enqueues exactly one task - provided the task table lives in the same
  database as the schedules.
* any other django.tasks backend, and Celery: the enqueue is a network call that cannot
  join the transaction, so it happens first and the receipt records it after. A scheduler
  that dies between the two enqueues again on the retry: at-least-once. Celery tasks get
  the occurrence's idempotency key as their task id, so a consumer can deduplicate.
* a management command runs in the worker process like any callback (at-least-once).
"""

from __future__ import annotations

import sys
from typing import Any

from ...conf import app_settings
from ...exceptions import FailRun
from ...projection import project_error, project_result, project_traceback
from ...registry import KIND_CELERY_TASK, KIND_COMMAND, KIND_DJANGO_TASK, Registration
from ...state import Claim, Outcome
from . import hooks

#: The backend name recorded for a Celery task (the broker URL may hold a password).
CELERY_BACKEND = "celery"


def run(registration: Registration, claim: Claim) -> Outcome:
    """Enqueue ``claim``'s task or run its command; returns the outcome.

    Raises :class:`~.exceptions.FailRun` for a payload that is not a JSON object (a task's
    keyword arguments); an enqueue error propagates (the runner receipts it ``failed``,
    retried with backoff).
    """
    if registration.kind == KIND_DJANGO_TASK:
        return _django_task(registration, claim)
    if registration.kind == KIND_CELERY_TASK:
        return _celery_task(registration, claim)
    if registration.kind == KIND_COMMAND:
        return _command(registration, claim)
    raise ValueError(f"not a dispatch kind: {registration.kind!r}")  # pragma: no cover


def payload_kwargs(claim: Claim) -> dict[str, Any]:
    """The schedule's payload as keyword arguments: ``{}`` for an empty payload; raises
    :class:`FailRun` (terminal) for anything but a JSON object with string keys."""
    payload = claim.payload
    if payload in (None, "", []):
        return {}
    if type(payload) is not dict or not all(type(k) is str for k in payload):
        raise FailRun("a task schedule's payload must be a JSON object: its keyword arguments")
    return dict(payload)


def joins_transaction(backend: Any) -> bool:
    """True when enqueuing on the django.tasks ``backend`` is a database write that can run
    inside the completion transaction (django-tasks-db's ``DatabaseBackend``)."""
    module = sys.modules.get("django_tasks_db.backend")
    return module is not None and isinstance(backend, module.DatabaseBackend)


def _bounded(value: dict[str, Any]) -> Any:
    return project_result(value, app_settings.RESULT_MAX_BYTES)


def _django_task(registration: Registration, claim: Claim) -> Outcome:
    kwargs = payload_kwargs(claim)
    task = registration.func
    if registration.options:
        task = task.using(**registration.options)

    def enqueue() -> Any:
        result = task.enqueue(**kwargs)
        return _bounded(
            {"task_id": str(result.id), "backend": result.backend, "queue": task.queue_name}
        )

    if joins_transaction(task.get_backend()):
        return Outcome(claim, "enqueued", enqueue=enqueue)
    return Outcome(claim, "enqueued", result=enqueue())


def _celery_task(registration: Registration, claim: Claim) -> Outcome:
    kwargs = payload_kwargs(claim)
    task = registration.func
    options = dict(registration.options)
    headers = hooks.dispatch_headers(claim)  # {} unless an integration adds some (otel)
    if headers:
        options["headers"] = {**headers, **dict(options.get("headers") or {})}
    sent = task.apply_async(kwargs=kwargs, task_id=claim.idempotency_key, **options)
    queue = options.get("queue") or getattr(task, "queue", None)
    if not queue:
        queue = task.app.conf.task_default_queue
    return Outcome(
        claim,
        "enqueued",
        result=_bounded({"task_id": str(sent.id), "backend": CELERY_BACKEND, "queue": queue}),
    )


class _CappedText:
    """A text stream that keeps the first ``limit`` characters and counts the rest."""

    def __init__(self, limit: int):
        self.limit = limit
        self.parts: list[str] = []
        self.kept = 0
        self.dropped = 0

    def write(self, text: str) -> int:
        room = self.limit - self.kept
        if room > 0:
            self.parts.append(text[:room])
            self.kept += min(room, len(text))
        self.dropped += max(0, len(text) - max(room, 0))
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def getvalue(self) -> str:
        return "".join(self.parts)


def _command(registration: Registration, claim: Claim) -> Outcome:
    from django.core.management import call_command

    spec = registration.options
    limit = app_settings.RESULT_MAX_BYTES
    out, err = _CappedText(limit), _CappedText(limit)

    def output() -> Any:
        value: dict[str, Any] = {
            "command": spec["command"],
            "stdout": out.getvalue(),
            "stderr": err.getvalue(),
        }
        if out.dropped or err.dropped:
            value["dropped_chars"] = out.dropped + err.dropped
        return _bounded(value)

    try:
        call_command(spec["command"], *spec["args"], stdout=out, stderr=err, **spec["options"])
    except Exception as exc:  # noqa: BLE001 - CommandError or anything else: a failed run
        error_type, message = project_error(exc, app_settings.ERROR_MESSAGE_MAX_CHARS)
        return Outcome(
            claim,
            "failed",
            error_type=error_type,
            error_message=message,
            result=output(),
            traceback=project_traceback(exc),
        )
    return Outcome(claim, "succeeded", result=output())
