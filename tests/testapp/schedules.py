"""Callbacks the test suite needs (autodiscovered, also inside worker subprocesses)."""

import asyncio
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


# Open to owner-scoped API users (the API's scoping tests), at most every minute.
@register("tests.noop", owner_scoped=True, owner_min_interval=60)
def noop(ctx):
    return None


@register("tests.echo")
def echo(ctx):
    return {"payload": ctx.payload, "occurrence": ctx.occurrence, "attempt": ctx.attempt}


# A payload schema (issue #27: run now with overrides); open to owner-scoped API users.
@register(
    "tests.report",
    owner_scoped=True,
    owner_min_interval=60,
    payload_schema={
        "type": "object",
        "properties": {
            "region": {"type": "string", "description": "Where to report on."},
            "limit": {"type": "integer", "minimum": 1},
            "dry_run": {"type": "boolean"},
        },
    },
)
def report(ctx):
    return {"payload": ctx.payload}


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


@register("tests.slow_first")
def slow_first(ctx):
    """Occurrence 1 sleeps payload['seconds'] (default 2); every run records a side effect
    and returns its slot and lateness (the overlap tests read them from the receipt)."""
    if ctx.occurrence == 1:
        time.sleep(float((ctx.payload or {}).get("seconds", 2)))
    _record(ctx)
    return {"scheduled_for": ctx.scheduled_for.isoformat(), "lateness": ctx.lateness}


@register("tests.fail")
def fail(ctx):
    raise RuntimeError("boom")


@register("tests.partner_import")
def partner_import(ctx):
    """docs/tutorial.md's failing callback (step 6), for its screenshots."""
    raise RuntimeError(f"partner API answered 503 (attempt {ctx.attempt})")


@register("tests.first_attempt_fails")
def first_attempt_fails(ctx):
    """Records a side effect; its first attempt of an occurrence fails, later ones succeed
    (the re-run tests)."""
    _record(ctx)
    if ctx.attempt == 1:
        raise RuntimeError("first attempt fails")
    return {"occurrence": ctx.occurrence, "attempt": ctx.attempt, "key": ctx.idempotency_key}


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

# --- totality (tests/test_totality_properties.py, bench/chaos.py)
# ``tests.poison`` does what ``ctx.payload["poison"]`` says: raise a named exception, or
# return a built value. The spec is plain JSON (so a worker subprocess can be told too);
# text is given as code points, {"cps": [...], "times": n}, because NUL and lone
# surrogates cannot be stored in the payload column itself. Specs:
#   {"raise": NAME, "message": TEXT}            NAME in POISON_EXCEPTIONS
#   {"raise": NAME, "args": [VALUE, ...]}       (an exception whose args are not a str)
#   {"raise": "RetryRun", "message": TEXT, "after": NUMBER}
#   {"return": VALUE}
# NUMBER: ["float", "nan"], ["int", "1000...0"], ["bool", true], ["str", TEXT], ["none"].
# VALUE: ["none"], ["text", TEXT], ["num", NUMBER], ["list", [VALUE...]],
#   ["dict", [[VALUE, VALUE], ...]] (hashable keys only), ["cycle"], ["deep", n],
#   ["hostile"], ["bytes", TEXT], ["set"].


class PoisonBaseError(BaseException):
    """Not an ``Exception``: what a callback raises is still only that run's outcome."""


class PoisonStrError(Exception):
    def __str__(self):
        raise RuntimeError("str exploded")

    __repr__ = __str__


POISON_EXCEPTIONS = {
    "SkipRun": SkipRun,
    "RetryRun": RetryRun,
    "FailRun": FailRun,
    "RuntimeError": RuntimeError,
    "KeyError": KeyError,
    "UnicodeDecodeError": None,  # built below: it needs five arguments
    "SystemExit": SystemExit,
    "PoisonStrError": PoisonStrError,
    "PoisonBaseError": PoisonBaseError,
}


def poison_text(spec):
    if isinstance(spec, str):
        return spec
    return "".join(chr(c) for c in spec.get("cps", [])) * int(spec.get("times", 1))


def poison_number(spec):
    kind = spec[0]
    if kind == "float":
        return float(spec[1])
    if kind == "int":
        return int(spec[1])
    if kind == "bool":
        return bool(spec[1])
    if kind == "str":
        return poison_text(spec[1])
    return None


def poison_value(spec):
    kind, args = spec[0], spec[1:]
    if kind == "text":
        return poison_text(args[0])
    if kind == "num":
        return poison_number(args[0])
    if kind == "list":
        return [poison_value(v) for v in args[0]]
    if kind == "dict":
        return {poison_value(k): poison_value(v) for k, v in args[0]}
    if kind == "cycle":
        a = {"name": "a", "list": [1]}
        a["self"] = a
        a["list"].append(a["list"])
        return a
    if kind == "deep":
        value = []
        for _ in range(int(args[0])):
            value = [value]
        return value
    if kind == "hostile":
        return {"obj": Hostile(), "list": [Hostile()]}
    if kind == "bytes":
        return poison_text(args[0]).encode("utf-8", "surrogatepass")
    if kind == "set":
        return {1, 2, 3}
    return None


def poison_exception(spec):
    name = spec["raise"]
    message = poison_text(spec.get("message", ""))
    if name == "RetryRun":
        return RetryRun(message, after_seconds=poison_number(spec.get("after", ["none"])))
    if name == "UnicodeDecodeError":
        return UnicodeDecodeError("utf-8", b"\xff", 0, 1, message)
    cls = POISON_EXCEPTIONS[name]
    if "args" in spec:
        return cls(*[poison_value(v) for v in spec["args"]])
    return cls(message)


@register("tests.poison")
def poison(ctx):
    """Raise or return what ``ctx.payload["poison"]`` says (see above)."""
    spec = (ctx.payload or {}).get("poison") or {"return": ["none"]}
    if "raise" in spec:
        raise poison_exception(spec)
    return poison_value(spec["return"])


# --- worker recovery (tests/test_worker_recovery.py, tests/test_callback_connections.py)


@register("tests.recovery.nap")
def recovery_nap(ctx):
    """Waits until the file payload['after_file'] exists (when given; at most 60 s), then
    sleeps payload['seconds']. Never touches the database: it can finish during an outage."""
    payload = ctx.payload or {}
    if payload.get("after_file"):
        deadline = time.monotonic() + 60
        while not os.path.exists(payload["after_file"]) and time.monotonic() < deadline:
            time.sleep(0.01)
    time.sleep(float(payload.get("seconds", 1)))
    return "napped"


@register("tests.txleak.atomic")
def txleak_atomic(ctx):
    """Enters ``transaction.atomic()`` and never leaves it, after writing a side effect."""
    from django.db import transaction

    transaction.atomic().__enter__()
    _record(ctx)
    return "left an atomic block open"


@register("tests.txleak.autocommit_off")
def txleak_autocommit_off(ctx):
    """Turns autocommit off, writes a side effect and never commits."""
    from django.db import connection

    connection.set_autocommit(False)
    _record(ctx)
    return "left autocommit off"


@register("tests.txleak.raw_begin")
def txleak_raw_begin(ctx):
    """Opens a transaction with a raw ``BEGIN`` (Django still says autocommit), writes a
    side effect and never commits."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("BEGIN")
    _record(ctx)
    return "left a raw BEGIN open"


@register("tests.txleak.atomic_then_fail")
def txleak_atomic_then_fail(ctx):
    """Enters ``transaction.atomic()``, writes, then raises (a failure that also leaks)."""
    from django.db import transaction

    transaction.atomic().__enter__()
    _record(ctx)
    raise RuntimeError("failed inside an open transaction")


# --- the previous run (tests/test_previous_run.py)

#: What each run of ``tests.previous`` saw as ``ctx.previous`` (in this process).
PREVIOUS_SEEN: list = []


@register("tests.previous")
def previous_run(ctx):
    """The docs' import -> aggregate: adds ``payload["rows"]`` (default 1) to the total of
    the previous successful run's result, and says which run that was. ``payload``:
    ``{"skip": [occurrences], "fail": [occurrences]}`` skip or fail (first attempt only)
    those occurrences."""
    PREVIOUS_SEEN.append((ctx.occurrence, ctx.attempt, ctx.previous))
    p = ctx.payload or {}
    if ctx.occurrence in p.get("skip", ()):
        raise SkipRun("nothing new")
    if ctx.occurrence in p.get("fail", ()) and ctx.attempt == 1:
        raise RuntimeError("the first attempt fails")
    prev = ctx.previous
    total = prev.result.get("total", 0) if prev is not None and isinstance(prev.result, dict) else 0
    return {
        "total": total + p.get("rows", 1),
        "after": None if prev is None else prev.occurrence,
        "since": None if prev is None else prev.scheduled_for.isoformat(),
    }


# --- bad values (tests/test_bad_values.py, tests/test_bad_values_worker.py)

_BAD_TEXT = {
    "surrogate": "lone surrogate \ud800 here",
    "nul": "a NUL \x00 byte",
    "both": "\x00\udfff" * 3,
}


@register("tests.badvalue.outcome")
def badvalue_outcome(ctx):
    """Does what ``ctx.payload`` says with a value no database stores as it is:
    ``{"raise": "error"|"skip"|"retry"|"fail", "text": "surrogate"|"nul"|"both",
    "after": <after_seconds, or "inf"/"-inf"/"nan">}`` or ``{"return": "surrogate"|"nul"}``."""
    p = ctx.payload or {}
    text = _BAD_TEXT.get(p.get("text", ""), "plain")
    after = p.get("after")
    if isinstance(after, str):
        after = float(after)
    if "return" in p:
        return {_BAD_TEXT[p["return"]]: [_BAD_TEXT[p["return"]], float("nan")]}
    kind = p.get("raise", "error")
    if kind == "skip":
        raise SkipRun(text)
    if kind == "retry":
        raise RetryRun(text, after_seconds=after)
    if kind == "fail":
        raise FailRun(text)
    raise RuntimeError(text)


@register("tests.badvalue.lock_own_row")
def badvalue_lock_own_row(ctx):
    """Locks its own schedule row (SELECT ... FOR UPDATE) for payload['seconds'] (default
    6), then records a side effect."""
    from django.db import transaction

    from django_durable_schedules.models import Schedule

    with transaction.atomic():
        Schedule.objects.select_for_update().get(pk=ctx.schedule_id)
        time.sleep(float((ctx.payload or {}).get("seconds", 6)))
    _record(ctx)
    return "held my own row"


# --- hard timeouts (tests/test_hard_timeouts.py)


@register("tests.hang")
def hang(ctx):
    """Records a side effect (with its pid), then sleeps payload['seconds'] (default 600),
    holding no database connection: a sync callback only a timeout can stop."""
    from django.db import connection

    _record(ctx)
    connection.close()
    time.sleep(float((ctx.payload or {}).get("seconds", 600)))
    return "woke up"


@register("tests.hang_spin")
def hang_spin(ctx):
    """Records a side effect, then spins in C holding the GIL (a catastrophically
    backtracking regular expression): no thread, signal or asyncio can interrupt it."""
    import re

    _record(ctx)
    re.match(r"(a+)+$", "a" * 40 + "b")
    return "matched"


@register("tests.hang_exit")
def hang_exit(ctx):
    """Records a side effect, then ends its process at once with exit code 3."""
    _record(ctx)
    os._exit(3)


@register("tests.hang_leak")
def hang_leak(ctx):
    """Returns at once but leaves a non-daemon thread running (forever)."""
    import threading

    threading.Thread(target=threading.Event().wait, name="leaked-by-callback").start()
    _record(ctx)
    return "leaked a thread"


@register("tests.hang_gil")
def hang_gil(ctx):
    """Records a side effect (with its pid), then sleeps payload['seconds'] (default 600) in
    a C call that holds the GIL (libc ``sleep`` through ``ctypes.PyDLL``): no other thread
    of its process runs meanwhile, and no signal handler either."""
    import ctypes

    from django.db import connection

    _record(ctx)
    connection.close()
    ctypes.PyDLL(None).sleep(int((ctx.payload or {}).get("seconds", 600)))
    return "woke up"


@register("tests.hang_grandchild")
def hang_grandchild(ctx):
    """Starts a ``sleep 600`` grandchild (sharing the process's file descriptors, as
    ``os.system("... &")`` would), writes its pid to payload['pid_file'], records a side
    effect, then either hangs (time.sleep) or, with payload['die'], kills its own process
    (SIGKILL)."""
    import signal
    import subprocess

    from django.db import connection

    payload = ctx.payload or {}
    grandchild = subprocess.Popen(["sleep", "600"], close_fds=False)
    with open(payload["pid_file"], "w") as f:
        f.write(str(grandchild.pid))
    _record(ctx)
    connection.close()
    if payload.get("die"):
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(600)
    return "woke up"


@register("tests.retry_unpicklable")
def retry_unpicklable(ctx):
    """Asks for a retry after a delay that cannot be pickled (a lambda)."""
    _record(ctx)
    raise RetryRun("try again", after_seconds=lambda: 5)  # type: ignore[arg-type]


#: A value only a local variable of the failing frame holds: a receipt, an API answer, an
#: admin page or the shell must never show it (issue 26, item 3).
LEAKY_SECRET = "hunter2-XYZ"


def charge_card(ctx):
    secret = LEAKY_SECRET  # a local of the failing frame: never in a traceback
    fields = {"currency": "EUR", "token": secret}
    return fields["amount"]  # KeyError('amount'): the message does not hold the secret


@register("tests.leaky_fail")
def leaky_fail(ctx):
    return charge_card(ctx)


async def async_charge_card(ctx):
    secret = LEAKY_SECRET
    fields = {"token": secret}
    await asyncio.sleep(0)
    return fields["amount"]


@register("tests.async_leaky_fail")
async def async_leaky_fail(ctx):
    return await async_charge_card(ctx)


@register("tests.span")
def span(ctx):
    """Sleeps payload['seconds'] (default 0.2) and appends ``name occurrence attempt start
    end pid`` (POSIX seconds, the worker host's clock) to the file payload['path']: the
    callbacks' own record of when each run started and ended (one short ``O_APPEND``
    write per run, whole lines from every process)."""
    started = time.time()
    time.sleep(float(ctx.payload.get("seconds", 0.2)))
    line = f"{ctx.schedule_name} {ctx.occurrence} {ctx.attempt} {started} {time.time()} {os.getpid()}\n"
    fd = os.open(ctx.payload["path"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
    return None


@register("tests.lease_span")
def lease_span(ctx):
    """Appends "start <attempt> <pid>" to payload['path'], sleeps payload['seconds'] on the
    first attempt (0.2 s on later ones), then appends "end <attempt> <pid>" (the lost-lease
    tests: a run killed midway never writes its end line)."""
    payload = ctx.payload or {}
    path = payload["path"]
    with open(path, "a") as f:
        f.write(f"start {ctx.attempt} {os.getpid()}\n")
    time.sleep(float(payload.get("seconds", 2)) if ctx.attempt == 1 else 0.2)
    with open(path, "a") as f:
        f.write(f"end {ctx.attempt} {os.getpid()}\n")
    return "spanned"
