"""The bounds of what a schedule may hold: durations in seconds (one table that
``Schedule.clean()`` and ``save()`` enforce and that the engine clamps to when it reads a
row written behind ``save()``, :mod:`.state.bounds`) and the size of its metadata. Pure: no
imports.
"""

from __future__ import annotations

#: Longest base delay of the retry backoff (one day).
BACKOFF_BASE_MAX_SECONDS = 86400.0
#: Longest backoff delay (30 days).
BACKOFF_CAP_MAX_SECONDS = 30 * 86400.0
#: Longest ``timeout_seconds`` (7 days).
TIMEOUT_MAX_SECONDS = 7 * 86400.0
#: Longest ``misfire_grace_seconds`` (a year).
MISFIRE_GRACE_MAX_SECONDS = 366 * 86400

#: ``metadata``: at most this many keys, and string values of at most this many characters.
METADATA_MAX_KEYS = 50
METADATA_MAX_VALUE_CHARS = 500

#: (field, exclusive lower bound, inclusive upper bound) in seconds.
DURATION_BOUNDS = (
    ("backoff_base_seconds", -1e-9, BACKOFF_BASE_MAX_SECONDS),
    ("backoff_cap_seconds", -1e-9, BACKOFF_CAP_MAX_SECONDS),
    ("timeout_seconds", 0.0, TIMEOUT_MAX_SECONDS),
    ("misfire_grace_seconds", -1, MISFIRE_GRACE_MAX_SECONDS),
)
