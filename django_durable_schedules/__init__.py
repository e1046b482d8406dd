"""django-durable-schedules: durable, lease-based schedules for Django.

Public API: :func:`register`, the outcome exceptions :class:`SkipRun`, :class:`RetryRun`,
:class:`FailRun`, and :class:`RunContext` (what a callback receives).
"""

from .exceptions import FailRun, RetryRun, SkipRun
from .registry import register

__version__ = "0.1.0.dev0"


def __getattr__(name: str):  # RunContext lives with the runner; import lazily (no Django at import)
    if name == "RunContext":
        from .runner import RunContext

        return RunContext
    raise AttributeError(name)


__all__ = ["FailRun", "RetryRun", "RunContext", "SkipRun", "register"]
