"""django-durable-schedules: durable, lease-based schedules for Django.

Public API: :func:`register`, :func:`register_command`, the outcome exceptions :class:`SkipRun`, :class:`RetryRun`,
:class:`FailRun`, :class:`RunContext` (what a callback receives) and :class:`Previous` (its
``previous``: the last successful run).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .exceptions import FailRun, RetryRun, SkipRun
from .registry import register, register_command

if TYPE_CHECKING:
    from .state.values import Previous
    from .worker.execution.runner import RunContext

__version__ = "0.1.0.dev0"


def __getattr__(name: str) -> type[RunContext] | type[Previous]:
    # RunContext lives with the runner, Previous with the state's values; import lazily
    # (no Django at import)
    if name == "RunContext":
        from .worker.execution.runner import RunContext

        return RunContext
    if name == "Previous":
        from .state.values import Previous

        return Previous
    raise AttributeError(name)


__all__ = [
    "FailRun",
    "Previous",
    "RetryRun",
    "RunContext",
    "SkipRun",
    "register",
    "register_command",
]
