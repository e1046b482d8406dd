"""The worker: one ``run_scheduler`` process's loop and what it needs to run claims.

``Worker`` (the documented sender of the signals) and ``WorkerOptions`` are importable from
here, as ``django_durable_schedules.worker.Worker``; every line the loop logs carries the
logger name ``django_durable_schedules.worker``. The modules:

* :mod:`.loop` - ``Worker``: the loop, a list of duties each with its own cadence;
* :mod:`.options` - ``WorkerOptions`` and ``default_worker_id``;
* :mod:`.stop` - ``StopRequests``: SIGTERM/SIGINT, the first drains, the second forces;
* :mod:`.notify` - ``Notifier``: the signals the worker sends (``run_claimed``, ...);
* :mod:`.inflight` - ``RunsInFlight``: the runs claimed and not yet receipted (starting,
  timing, timeouts, lease renewal, release at a stop, writing their outcomes);
* :mod:`.run_estimate` - claiming ahead's arithmetic (run-time estimate, runs ahead);
* :mod:`.lost_leases` - ``stop_lost``: a run whose lease was lost is killed in its child
  process, or logged (a thread cannot be stopped);
* :mod:`.threads` - ``RunThreads``: the threads that run callbacks;
* :mod:`.clock` - ``WorkerClock``: the database-clock estimate and the next due slot and
  lease expiry;
* :mod:`.outage` - ``reconnect_delay``, ``Outage`` and ``GaveUp``: a database outage;
* :mod:`.execution` - running ONE claim: ``runner`` (call the callback, make the outcome),
  ``dispatch`` (tasks and commands), ``isolation`` and ``isolation_child`` (hard timeouts:
  a child process killed at the deadline), ``placement`` (which claims go to a child).

``Worker`` is imported on first use, not here: a hard-timeout child imports
``.execution.isolation_child`` (and so this package) before ``django.setup()``, when the
loop's imports (``state``, the models) cannot be loaded yet.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .options import WorkerOptions, default_worker_id

if TYPE_CHECKING:
    from .loop import Worker

__all__ = ["Worker", "WorkerOptions", "default_worker_id"]


def __getattr__(name: str) -> type[Worker]:
    if name == "Worker":  # imported on first use: see the module's docstring
        from .loop import Worker

        return Worker
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
