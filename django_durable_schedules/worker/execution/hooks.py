"""Where an integration (``contrib.otel``) reaches into a run's execution: a context entered
around each run in the thread that runs it (:func:`around`), and headers added to a Celery
dispatch (:func:`dispatch_headers`). Both lists are empty unless an integration installed
itself: then :func:`.runner.execute` checks one list and does nothing more.

A hook that raises is logged (``django_durable_schedules.worker``, WARNING) and skipped:
it never fails a run. Runs in a child process (hard timeouts) are not wrapped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...state import Claim

logger = logging.getLogger("django_durable_schedules.worker")

#: Factories of a context manager entered around each run (``factory(claim)``), in order.
RUN_CONTEXTS: list[Callable[[Claim], AbstractContextManager[Any]]] = []
#: Functions returning headers (``{name: text}``) for a run's Celery task (``f(claim)``).
DISPATCH_HEADERS: list[Callable[[Claim], dict[str, str]]] = []


def add(
    run_context: Callable[[Claim], AbstractContextManager[Any]] | None = None,
    headers: Callable[[Claim], dict[str, str]] | None = None,
) -> None:
    """Install hooks (each at most once)."""
    if run_context is not None and run_context not in RUN_CONTEXTS:
        RUN_CONTEXTS.append(run_context)
    if headers is not None and headers not in DISPATCH_HEADERS:
        DISPATCH_HEADERS.append(headers)


def remove(
    run_context: Callable[[Claim], AbstractContextManager[Any]] | None = None,
    headers: Callable[[Claim], dict[str, str]] | None = None,
) -> None:
    """Uninstall hooks (a hook not installed is ignored)."""
    if run_context in RUN_CONTEXTS:
        RUN_CONTEXTS.remove(run_context)
    if headers in DISPATCH_HEADERS:
        DISPATCH_HEADERS.remove(headers)


@contextmanager
def around(claim: Claim) -> Iterator[None]:
    """Enter every :data:`RUN_CONTEXTS` hook for ``claim``, run the body, exit them in
    reverse order. A hook that raises on entry or exit is logged and skipped; the body's
    own exception (none: :func:`.runner.execute` never raises) propagates."""
    entered: list[AbstractContextManager[Any]] = []
    for factory in list(RUN_CONTEXTS):
        try:
            manager = factory(claim)
            manager.__enter__()
        except Exception as exc:  # noqa: BLE001 - an integration never fails a run
            logger.warning("run hook %r failed on entry: %s", factory, exc)
            continue
        entered.append(manager)
    try:
        yield
    finally:
        for manager in reversed(entered):
            try:
                manager.__exit__(None, None, None)
            except Exception as exc:  # noqa: BLE001
                logger.warning("run hook %r failed on exit: %s", manager, exc)


def dispatch_headers(claim: Claim) -> dict[str, str]:
    """The headers every :data:`DISPATCH_HEADERS` hook gives ``claim``'s task (text keys
    and values only, the first hook's value kept on a clash); ``{}`` without hooks."""
    if not DISPATCH_HEADERS:
        return {}
    found: dict[str, str] = {}
    for hook in list(DISPATCH_HEADERS):
        try:
            for key, value in dict(hook(claim)).items():
                if isinstance(key, str) and isinstance(value, str):
                    found.setdefault(key, value)
        except Exception as exc:  # noqa: BLE001 - an integration never fails a run
            logger.warning("dispatch header hook %r failed: %s", hook, exc)
    return found
