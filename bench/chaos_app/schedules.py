"""The chaos soak's one callback, ``chaos.work``.

Every execution appends two lines to the side-effect log (``$CHAOS_LOG``, opened with
``O_APPEND`` and written with one ``write`` each, so lines from concurrent processes never
interleave)::

    start <idempotency_key> <attempt> <pid> <worker time>
    done <idempotency_key> <attempt> <ok|fail|skip> <pid> <worker time>

What an execution does is decided by a hash of ``(idempotency key, attempt)``, so a run
is reproducible and a retry may behave differently from the first attempt:

* 10 %: raise ``RuntimeError`` (failed, retried with backoff);
* 8 %: raise ``SkipRun`` (skipped: not a success);
* 5 %: sleep ``LEASE_SECONDS + 1.5`` s - past the lease, which the worker must keep renewing -
  then succeed;
* otherwise: sleep up to 0.3 s, then succeed.

A worker SIGKILLed mid-run leaves a ``start`` line without its ``done`` line.
``chaos.grouped`` (the schedules of a concurrency group) does the same and appends its
parent's pid to the ``start`` line.
"""

from __future__ import annotations

import hashlib
import os
import time

from django_durable_schedules import RetryRun, SkipRun, register

FAIL, SKIP, SLOW = 0.10, 0.18, 0.23


def draw(key: str, attempt: int) -> float:
    """A number in [0, 1) fixed by the occurrence's key and the attempt number."""
    digest = hashlib.sha256(f"{key}:{attempt}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _log(*fields: object) -> None:
    line = " ".join(str(f) for f in fields) + "\n"
    fd = os.open(os.environ["CHAOS_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


@register("chaos.work")
def work(ctx, *more: object):
    """Record the execution, then fail, skip, overrun the lease or succeed (see above)."""
    return _run(ctx, more, lambda r: 0.3 * (r - SLOW) / (1 - SLOW))


def _run(ctx, more: tuple[object, ...], nap):
    """``chaos.work``'s body: ``more`` ends the ``start`` line, ``nap(r)`` is the sleep of
    a run past :data:`SLOW` (``r`` its draw)."""
    key, attempt, pid = ctx.idempotency_key, ctx.attempt, os.getpid()
    _log("start", key, attempt, pid, f"{time.time():.3f}", *more)
    r = draw(key, attempt)
    if r < FAIL:
        _log("done", key, attempt, "fail", pid, f"{time.time():.3f}")
        raise RuntimeError("chaos: planned failure")
    if r < SKIP:
        _log("done", key, attempt, "skip", pid, f"{time.time():.3f}")
        raise SkipRun("chaos: planned skip")
    if r < SLOW:
        time.sleep(float(os.environ.get("CHAOS_LEASE_SECONDS", "4")) + 1.5)
    else:
        time.sleep(nap(r))
    _log("done", key, attempt, "ok", pid, f"{time.time():.3f}")
    return {"attempt": attempt}


@register("chaos.grouped")
def grouped(ctx):
    """``chaos.work`` for the schedules of a concurrency group (bench/chaos_groups.py): its
    ``start`` line also names the parent process (``os.getppid()``: the worker whose child
    runs it), so the audit can end a run its worker's SIGKILL or resume killed."""
    return work(ctx, os.getppid())


#: ``chaos.parallel``: past :data:`SLOW`, up to this bound of the draw the run takes
#: 2.5 to 3.5 s, longer than its schedule's interval (1 or 2 s: occurrences overlap and
#: ``max_parallel`` binds).
LONG = 0.53


@register("chaos.parallel")
def parallel(ctx):
    """``chaos.work`` for the ``overlap_policy="allow"`` schedules (bench/chaos_parallel.py):
    fails, skips and overruns its lease as ``chaos.work`` does; 30 % of the runs take 2.5
    to 3.5 s (past the interval, 1 or 2 s: they overlap), the rest up to 0.3 s. Its ``start``
    line names the parent process too (the worker of an isolated run)."""

    def nap(r: float) -> float:
        return 2.5 + (r - SLOW) / (LONG - SLOW) if r < LONG else 0.3 * (r - LONG) / (1 - LONG)

    return _run(ctx, (os.getppid(),), nap)


# --- poison outcomes (bench/chaos.py --poison) -----------------------------------------
# ``chaos.poison`` logs like ``chaos.work`` but reports values no receipt may hold as
# given: messages with NUL, lone surrogates and 20,000 characters, ``RetryRun`` delays of
# NaN, -1, inf and 1.8e12 (epoch milliseconds read as seconds), results with NUL and
# surrogate keys, NaN, a 400-digit int, a cycle and an object whose ``repr`` raises. The
# engine must receipt each attempt once, with valid text and a bounded next run.

#: (upper bound of the draw, what happens): the rest succeeds with a plain result.
POISON_PLAN = (
    (0.12, "error"),
    (0.20, "skip"),
    (0.28, "retry_nan"),
    (0.34, "retry_negative"),
    (0.37, "retry_inf"),
    (0.40, "retry_epoch_ms"),
    (0.55, "hostile_result"),
    (0.62, "object_result"),
)


class _Opaque:
    def __repr__(self):
        raise RuntimeError("repr exploded")

    __str__ = __repr__


def _poison_result():
    cycle = {"name": "cycle"}
    cycle["self"] = cycle
    return {
        "nul\x00key": "lone \ud800 surrogate",
        "\udfff": ["\x00" * 10, float("nan"), float("inf")],
        "big": 10**400,
        "cycle": cycle,
    }


@register("chaos.poison")
def poison(ctx):
    """Record the execution, then raise or return a poison value (see above)."""
    key, attempt, pid = ctx.idempotency_key, ctx.attempt, os.getpid()
    _log("start", key, attempt, pid, f"{time.time():.3f}")
    r = draw(key, attempt)
    what = next((name for bound, name in POISON_PLAN if r < bound), "plain")
    if what == "error":
        _log("done", key, attempt, "fail", pid, f"{time.time():.3f}")
        raise RuntimeError("chaos \x00 poison \ud800 " + "\udfff" * 20_000)
    if what == "skip":
        _log("done", key, attempt, "skip", pid, f"{time.time():.3f}")
        raise SkipRun("\x00" * 3 + "skip \udc80")
    if what.startswith("retry_"):
        after = {
            "retry_nan": float("nan"),
            "retry_negative": -1.0,
            "retry_inf": float("inf"),
            "retry_epoch_ms": 1.8e12,
        }[what]
        _log("done", key, attempt, "fail", pid, f"{time.time():.3f}")
        raise RetryRun(f"retry \x00 after {after}", after_seconds=after)
    _log("done", key, attempt, "ok", pid, f"{time.time():.3f}")
    if what == "hostile_result":
        return _poison_result()
    if what == "object_result":
        return {"obj": _Opaque(), "list": [_Opaque()]}
    return {"attempt": attempt}
