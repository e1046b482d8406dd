"""Retries and jitter: the backoff delay before a retry and a schedule's deterministic
jitter offset, in seconds."""

from __future__ import annotations

import hashlib
import math


def backoff_seconds(attempt: int, base: float, cap: float) -> float:
    """Delay in seconds before retry number ``attempt`` (1 = the first retry):
    ``min(cap, base * 2 ** (attempt - 1))``. Never overflows, whatever ``attempt``.
    Raises ``ValueError`` if ``attempt < 1`` or ``base``/``cap`` is negative."""
    if attempt < 1:
        raise ValueError("attempt must be at least 1")
    if base < 0 or cap < 0:
        raise ValueError("base and cap must not be negative")
    if base == 0:
        return 0.0
    if attempt > 2048:  # 2 ** 2047 overflows a float whatever the base
        return float(cap)
    try:
        delay = math.ldexp(float(base), attempt - 1)
    except OverflowError:
        return float(cap)
    return float(min(cap, delay))


def jitter_offset(key: str, max_seconds: int) -> int:
    """A deterministic offset in ``[0, max_seconds]`` seconds derived from the SHA-256 of
    ``key`` (stable across processes and Python versions, unlike ``hash()``); 0 when
    ``max_seconds`` is 0. Raises ``ValueError`` for a negative ``max_seconds``."""
    if max_seconds < 0:
        raise ValueError("max_seconds must not be negative")
    if max_seconds == 0:
        return 0
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % (max_seconds + 1)
