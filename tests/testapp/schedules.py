"""Callbacks the test suite needs (autodiscovered, also inside worker subprocesses)."""

import os
import time

from django_durable_schedules import FailRun, RetryRun, SkipRun, register

from .models import SideEffect


def _record(ctx):
    SideEffect.objects.create(
        schedule_name=ctx.schedule_name,
        occurrence=ctx.occurrence,
        attempt=ctx.attempt,
        idempotency_key=ctx.idempotency_key,
        pid=os.getpid(),
    )


@register("tests.noop")
def noop(ctx):
    return None


@register("tests.echo")
def echo(ctx):
    return {"payload": ctx.payload, "occurrence": ctx.occurrence, "attempt": ctx.attempt}


@register("tests.record")
def record(ctx):
    _record(ctx)
    return "recorded"


@register("tests.sleep")
def sleep(ctx):
    """Sleeps payload['seconds'] (default 2), then records a side effect."""
    time.sleep(float((ctx.payload or {}).get("seconds", 2)))
    _record(ctx)
    return "slept"


@register("tests.fail")
def fail(ctx):
    raise RuntimeError("boom")


@register("tests.skip")
def skip(ctx):
    raise SkipRun("nothing to do")


@register("tests.retry")
def retry(ctx):
    raise RetryRun("later", after_seconds=(ctx.payload or {}).get("after", 30))


@register("tests.fatal")
def fatal(ctx):
    raise FailRun("never again")


@register("tests.async_echo")
async def async_echo(ctx):
    return {"async": True, "occurrence": ctx.occurrence}


class Hostile:
    def __repr__(self):
        raise RuntimeError("repr exploded")

    def __eq__(self, other):
        raise RuntimeError("eq exploded")

    __hash__ = None
    __str__ = __repr__


@register("tests.hostile_cycle")
def hostile_cycle(ctx):
    a = {"name": "a"}
    a["self"] = a
    lst = [1, 2]
    lst.append(lst)
    a["list"] = lst
    return a


@register("tests.hostile_big")
def hostile_big(ctx):
    return "x" * (10 * 1024 * 1024)


@register("tests.hostile_object")
def hostile_object(ctx):
    return {"obj": Hostile(), "list": [Hostile()]}


class HostileError(Exception):
    def __str__(self):
        raise RuntimeError("str exploded")

    __repr__ = __str__


@register("tests.hostile_error")
def hostile_error(ctx):
    raise HostileError(Hostile())


@register("tests.async_sleep")
async def async_sleep(ctx):
    import asyncio

    await asyncio.sleep(float((ctx.payload or {}).get("seconds", 2)))
    return "slept"


from . import engines  # noqa: E402,F401  (task/command callbacks: tests/test_dispatch.py)
