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

#: Longest ``deadline_seconds`` (a year): each occurrence must succeed within it of its slot.
DEADLINE_MAX_SECONDS = 366 * 86400

#: Longest ``wait_seconds`` of a kind ``after`` schedule (31 days): how long after a nominal
#: instant it waits for its upstreams' successes before the instant is counted missed.
CHAIN_WAIT_MAX_SECONDS = 31 * 86400

#: Longest blackout window (``BlackoutWindow.duration_seconds``, 31 days): a freeze
#: longer than a month is a pause (``disable`` with ``until``), not a window.
BLACKOUT_MAX_SECONDS = 31 * 86400

#: Longest ``jitter_seconds`` (one day). ``Schedule.clean()`` also keeps it at most half the
#: shortest gap between slots; a larger value written behind ``save()`` is used clamped to
#: this bound (the claim, the planning of the next slot and the look-back for a jittered
#: slot all read the clamped value).
JITTER_MAX_SECONDS = 86400

#: The planning budget of a calendar rule (kind ``rrule``): the work python-dateutil may do
#: between two occurrences (or from where a search starts to the next one), in units of one
#: candidate time examined (a step of its walk costs 7 more): about 0.2 s of one core.
#: Counted, not timed, so the answer is the same on every machine: a rule over it is a field
#: error on ``rrule`` at save and a ``degraded`` schedule (paused with the reason) at the
#: claim. Only HOURLY, MINUTELY and SECONDLY rules whose BYHOUR/BYMINUTE/BYSECOND pick few
#: times on days far apart come near it (dateutil steps through every hour, minute or
#: second of each day in between); written with FREQ=DAILY or coarser they cost a few steps.
RRULE_PLAN_MAX_STEPS = 1_000_000

#: ``metadata``: at most this many keys, and string values of at most this many characters.
METADATA_MAX_KEYS = 50
METADATA_MAX_VALUE_CHARS = 500

#: (field, exclusive lower bound, inclusive upper bound) in seconds.
DURATION_BOUNDS = (
    ("backoff_base_seconds", -1e-9, BACKOFF_BASE_MAX_SECONDS),
    ("backoff_cap_seconds", -1e-9, BACKOFF_CAP_MAX_SECONDS),
    ("timeout_seconds", 0.0, TIMEOUT_MAX_SECONDS),
    ("misfire_grace_seconds", -1, MISFIRE_GRACE_MAX_SECONDS),
    ("jitter_seconds", -1, JITTER_MAX_SECONDS),
    ("deadline_seconds", 0, DEADLINE_MAX_SECONDS),
)

# -- concurrency groups (issue #28) --

#: How long a group found at ``max_running`` is skipped before a claim counts it again,
#: unless one of its runs finishes first (which clears ``full_until`` at once), in seconds.
RECHECK_SECONDS = 5.0
#: A rate's window is lengthened by this share of itself (at most
#: :data:`RATE_MARGIN_MAX_SECONDS`): the margin for a callback starting after its claim.
RATE_MARGIN = 0.1
RATE_MARGIN_MAX_SECONDS = 1.0
#: The longest a claim ever holds a group back by its rate: the longest window (an hour)
#: and its margin, in seconds. A ``rate_until`` later than now plus this (or a
#: ``full_until`` later than now plus :data:`RECHECK_SECONDS`) was written behind
#: ``save()``: it holds nothing, and the next claim that reads the group writes its own
#: (:meth:`.models.ConcurrencyGroup.holding_q`).
RATE_HOLD_MAX_SECONDS = 3600 + RATE_MARGIN_MAX_SECONDS

#: Most occurrences of one ``overlap_policy="allow"`` schedule running at once
#: (``Schedule.max_parallel``, 1..100; a value written behind ``save()`` is read clamped).
MAX_PARALLEL_MAX = 100
