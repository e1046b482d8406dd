"""A user's ``schedules.py``, type-checked with ``mypy --strict`` in ``.ci/run``: the
decorators keep the functions' types, and the public names are typed.

Not a test module (pytest does not collect it); ``mypy --strict tests/typing`` is the test.
"""

from __future__ import annotations

from django_durable_schedules import RetryRun, RunContext, SkipRun, register, register_command


@register("reports.nightly", cron="30 2 * * *", timezone="Europe/Paris")
def nightly(ctx: RunContext) -> dict[str, int]:
    if ctx.attempt > 3:
        raise SkipRun("gave up")
    if ctx.lateness > 60:
        raise RetryRun("too late", after_seconds=30)
    return {"rows": ctx.occurrence}


def cleanup(ctx: RunContext) -> None:
    return None


registered = register("cleanup", cleanup, every=3600)
register_command("sessions.clear", "clearsessions", every=86400)


@register("reports.aggregate", after=["reports.nightly"], wait_seconds=600)
def aggregate(ctx: RunContext) -> int:
    return ctx.occurrence


mailed = register("reports.mail", cleanup, after=("reports.aggregate",))
register_command("reports.vacuum", "clearsessions", after=["reports.mail"], wait_seconds=60)


def rows_of(ctx: RunContext) -> int:
    # The decorated function is still the function: its return type is known.
    return nightly(ctx)["rows"] + (0 if registered(ctx) is None else 1) + aggregate(ctx)
