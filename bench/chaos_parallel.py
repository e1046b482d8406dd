"""``overlap_policy="allow"`` in the chaos soak (bench/chaos.py ``--parallel``, issue #28
item 4): schedules whose occurrences run side by side, up to ``max_parallel``, each with
its own lease (``OccurrenceLease``), and the audit of that limit and of their slots.

The load (:data:`SCHEDULES`): interval schedules from a whole second 2 s ahead,
``max_attempts`` 1 (an occurrence is never retried), of the callback ``chaos.parallel``
(bench/chaos_app/schedules.py: fails 10 %, skips 8 %, overruns its lease 5 %, takes 2.5 to
3.5 s - past the interval, so occurrences overlap and the limit binds - 30 %):
``chaos-par-0`` (``max_parallel`` 2) and ``chaos-par-1`` (3), every 2 s with ``priority``
:data:`PRIORITY` (claimed before the soak's backlog of due rows, so their claims keep to
the grid and the limit binds; a row held at its limit never holds up the others; every
second they took a quarter of the soak's claims, and two of six rounds so, at a load
average of 9 to 10, failed ``healthy_stalled``); every second without priority, ``chaos-par-2`` (2, with
``timeout_seconds``: each run in an isolation child, which runs on while its worker is
frozen and is stopped when the worker resumes and finds its lease lost) and ``chaos-par-end`` (2, ``end_at`` half-way through the soak: its whole grid is judged).

What the engine guarantees, and so what the audit counts: a claim admits an occurrence
while fewer than ``max_parallel`` occurrence leases of its schedule are live (unexpired)
at the claim's instant. A run whose lease lapsed (its worker frozen by SIGSTOP, or
SIGKILLed) no longer counts, and another may start beside it, though the lapsed run's
callback may still run (a frozen worker's isolation child runs on until the worker
resumes; an in-process run resumes with its worker and finishes, its outcome fenced
``lease_expired``). So the check of the callbacks' own records, like the one of
``max_running`` in bench/chaos_groups.py, counts each run as holding its lease from its
``start`` line to its ``done`` line (without one: its worker's SIGKILL, else the worker's
resume plus the renewal period, else the PostgreSQL restart plus the lease, else the
audit), cut, when its worker was frozen or the database restarted during the run, at
``freeze + lease - renew_every`` (the lease was last renewed at most ``renew_every``
before; :func:`chaos_groups.run_spans`): ``live``. The report also gives the maximum with the
cut at ``freeze + lease`` (``upper``) and with no cut (``wall``: what ran, leased or not).

Violations (:func:`judge_parallel` over plain rows; :func:`audit_parallel` reads them):

* ``parallel_over_max``: more ``live`` runs of one schedule at one instant than its
  ``max_parallel``;
* ``parallel_claims_over_max``: the same from the engine's own records: at an
  occurrence's ``claimed_at``, more occurrences of its schedule (itself included) claimed
  at or before it whose receipt's ``finished_at`` is after it than ``max_parallel``. Each
  such run's lease was live over ``[claimed_at, finished_at]`` (a completion whose lease
  had lapsed is receipted ``lease_expired``); ``lease_expired`` runs are left out (their
  lease lapsed at an instant no row records), so the figure is a lower bound of what the
  claim counted;
* ``parallel_occurrence_claimed_twice`` (an occurrence with more than one attempt, or an
  attempt numbered other than 1: never retried) and ``parallel_occurrence_receipted_twice``;
* ``parallel_slot_unaccounted`` / ``parallel_slot_counted_twice``: the grid's slots decided
  so far (``start_at`` up to ``next_run_at`` exclusive; to ``end_at`` inclusive once
  completed) against the occurrences run (attempts but those receipted ``missed``,
  ``released`` or ``degraded``, which ``missed_count`` counts) plus ``missed_count``:
  every slot run or counted, once;
* ``parallel_lease_left_by_drain``: an ``OccurrenceLease`` left once the workers were
  stopped, held by a worker that drained (not one the chaos SIGKILLed or one that
  crashed), and ``parallel_leases_left``: any left after the soak's lease recovery;
* ``parallel_schedule_stuck``: an ``allow`` schedule left ``active`` with no next run
  (its grid ended: it completes when the last occurrence ends, whatever the outcome).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from chaos_groups import max_overlap, read_runs, run_spans

PRIORITY = 5
#: ``(name, interval seconds, max_parallel, priority, isolated, ends half-way)``.
SCHEDULES = (
    ("chaos-par-0", 2, 2, PRIORITY, False, False),
    ("chaos-par-1", 2, 3, PRIORITY, False, False),
    ("chaos-par-2", 1, 2, 0, True, False),
    ("chaos-par-end", 1, 2, 0, False, True),
)
TIMEOUT_SECONDS = 20.0  # chaos-par-2: > the slow runs' lease + 1.5 s
GRID = frozenset({"scheduled", "deferred", "buffered"})  # the live grid's origins
COUNTED = frozenset({"missed", "released", "degraded"})  # in missed_count, not run
VIOLATIONS = (
    "parallel_over_max",
    "parallel_claims_over_max",
    "parallel_occurrence_claimed_twice",
    "parallel_occurrence_receipted_twice",
    "parallel_slot_unaccounted",
    "parallel_slot_counted_twice",
    "parallel_lease_left_by_drain",
    "parallel_leases_left",
    "parallel_schedule_stuck",
)


def create_parallel(common: dict[str, Any], duration: float) -> None:
    """The :data:`SCHEDULES` (see the module docstring); ``duration``: the soak's, in
    seconds (``chaos-par-end`` ends half-way)."""
    from django_durable_schedules import state

    start = (state.db_now() + timedelta(seconds=2)).replace(microsecond=0)
    for name, every, limit, priority, isolated, ends in SCHEDULES:
        more: dict[str, Any] = {}
        if isolated:
            more["timeout_seconds"] = TIMEOUT_SECONDS
        if ends:
            more["end_at"] = start + timedelta(seconds=int(duration / 2))
        state.create_schedule(
            name=name,
            kind="interval",
            interval_seconds=every,
            start_at=start,
            overlap_policy="allow",
            max_parallel=limit,
            priority=priority,
            **{**common, "callback": "chaos.parallel", "max_attempts": 1, **more},
        )


def _ts(value: datetime) -> float:
    return value.timestamp()


def grid_slots(row: dict[str, Any]) -> int | None:
    """How many slots of the interval grid of ``row`` (``start_at``, ``interval_seconds``,
    ``end_at``, ``next_run_at``, ``status``) are decided: those before ``next_run_at``,
    or every one to ``end_at`` (inclusive) once the grid ended; None when it cannot be told
    (paused, no ``start_at``)."""
    start, every = row["start_at"], row["interval_seconds"]
    if start is None or not every:
        return None
    if row["next_run_at"] is not None:
        return max(0, math.ceil((row["next_run_at"] - start).total_seconds() / every))
    if row["status"] in ("completed", "active") and row["end_at"] is not None:
        return int((row["end_at"] - start).total_seconds() // every) + 1
    return None


def judge_parallel(
    schedules: list[dict[str, Any]],
    attempts: list[dict[str, Any]],
    receipts: list[dict[str, Any]],
    runs: dict[tuple[str, int], dict[str, Any]],
    events: list[tuple[float, str, int]],
    survivors: list[int],
    lease: float,
    renew_every: float,
    now: float,
) -> dict[str, Any]:
    """The checks over plain rows: ``schedules`` (``id``, ``name``, ``max_parallel``,
    ``start_at``, ``end_at``, ``interval_seconds``, ``next_run_at``, ``status``,
    ``missed_count``) of the ``allow`` schedules; their ``attempts`` (``id``,
    ``schedule_id``, ``occurrence``, ``attempt``, ``idempotency_key``, ``origin``,
    ``claimed_at``) and ``receipts`` (``attempt_id``, ``schedule_id``, ``occurrence``,
    ``status``, ``finished_at``); ``runs`` from :func:`read_runs`; the fleet's ``events``;
    ``survivors``: isolation children alive 3 s after their worker's SIGKILL; ``lease``
    and ``renew_every`` in seconds; ``now``: POSIX seconds. Returns ``violations``,
    ``examples`` and ``schedules`` (the figures of each)."""
    counts: Counter[str] = Counter()
    examples: dict[str, list[str]] = defaultdict(list)

    def violation(name: str, example: str, n: int = 1) -> None:
        counts[name] += n
        if len(examples[name]) < 5:
            examples[name].append(example)

    by_schedule: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for a in attempts:
        by_schedule[a["schedule_id"]].append(a)
    receipts_of: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for r in receipts:
        receipts_of[r["attempt_id"]].append(r)
    figures: dict[str, Any] = {}
    for row in schedules:
        name, limit, mine = row["name"], row["max_parallel"], by_schedule[row["id"]]
        per_occurrence = Counter(a["occurrence"] for a in mine)
        for o, n in sorted(per_occurrence.items()):
            if n > 1:
                violation("parallel_occurrence_claimed_twice", f"{name} #{o}: {n} attempts")
        for a in mine:
            if a["attempt"] != 1:
                violation("parallel_occurrence_claimed_twice", f"{name} #{a['occurrence']}: "
                          f"attempt {a['attempt']}")  # fmt: skip
        receipted = Counter(r["occurrence"] for r in receipts if r["schedule_id"] == row["id"])
        for o, n in sorted(receipted.items()):
            if n > 1:
                violation("parallel_occurrence_receipted_twice", f"{name} #{o}: {n} receipts")

        live, upper, wall, ended = [], [], [], Counter()
        for a in mine:
            run = runs.get((a["idempotency_key"], a["attempt"]))
            if run is None:
                continue
            lo, hi, wa, how = run_spans(run, events, survivors, lease, renew_every, now)
            live.append(lo)
            upper.append(hi)
            wall.append(wa)
            ended[how] += 1
        seen, at = max_overlap(live)
        if seen > limit:
            violation("parallel_over_max", f"{name}: {seen} live at {at:.3f} (max {limit})")

        held: list[tuple[Any, float, float]] = []  # (attempt, claimed, receipted)
        for a in mine:
            got = receipts_of[a["id"]]
            status = got[0]["status"] if got else None
            if status in ("lease_expired", "missed", "degraded"):
                continue
            done = _ts(got[0]["finished_at"]) if got else now
            held.append((a["id"], _ts(a["claimed_at"]), done))
        most = at_limit = 0
        for a in mine:
            got = receipts_of[a["id"]]
            if got and got[0]["status"] in ("missed", "degraded"):
                continue
            c = _ts(a["claimed_at"])
            n = 1 + sum(1 for aid, s, e in held if aid != a["id"] and s <= c < e)
            most = max(most, n)
            at_limit += n == limit
            if n > limit:
                violation(
                    "parallel_claims_over_max",
                    f"{name} #{a['occurrence']} claimed {a['claimed_at'].isoformat()} "
                    f"with {n - 1} others leased (max {limit})",
                )

        if row["status"] == "active" and row["next_run_at"] is None:
            violation("parallel_schedule_stuck", f"{name}: active with no next run")
        slots = grid_slots(row)
        run_count = 0
        for a in mine:
            got = receipts_of[a["id"]]
            if a["origin"] in GRID and not (got and got[0]["status"] in COUNTED):
                run_count += 1
        if slots is not None:
            accounted = run_count + row["missed_count"]
            if accounted < slots:
                violation(
                    "parallel_slot_unaccounted",
                    f"{name}: {slots} slots, {run_count} run + {row['missed_count']} counted",
                    slots - accounted,
                )
            elif accounted > slots:
                violation(
                    "parallel_slot_counted_twice",
                    f"{name}: {slots} slots, {run_count} run + {row['missed_count']} counted",
                    accounted - slots,
                )
        claims = sorted(_ts(a["claimed_at"]) for a in mine)
        gaps = [b - a for a, b in zip(claims, claims[1:], strict=False)]
        figures[name] = {
            "max_parallel": limit,
            "status": row["status"],
            "occurrences": len(mine),
            "receipts_by_status": dict(
                sorted(Counter(r["status"] for a in mine for r in receipts_of[a["id"]]).items())
            ),
            "missed_count": row["missed_count"],
            "grid_slots_decided": slots,
            "occurrences_run": run_count,
            "max_concurrent_live": seen,
            "max_concurrent_upper": max_overlap(upper)[0],
            "max_concurrent_wall": max_overlap(wall)[0],
            "max_leased_at_a_claim": most,
            "claims_at_the_limit": at_limit,
            "max_claim_gap_seconds": round(max(gaps), 3) if gaps else None,
            "runs_ended_by": dict(ended),
        }
    return {
        "violations": {n: counts.get(n, 0) for n in VIOLATIONS},
        "examples": dict(examples),
        "schedules": figures,
    }


def leases_held() -> list[dict[str, Any]]:
    """The occurrence leases in the database: ``{"schedule", "occurrence", "worker"}``
    each (``worker`` from the attempt holding the lease's token, None without one)."""
    from django_durable_schedules.models import OccurrenceLease, RunAttempt

    leases = list(OccurrenceLease.objects.values("schedule__name", "occurrence", "lease_token"))
    workers = dict(
        RunAttempt.objects.filter(lease_token__in=[x["lease_token"] for x in leases]).values_list(
            "lease_token", "worker"
        )
    )
    return [
        {
            "schedule": x["schedule__name"],
            "occurrence": x["occurrence"],
            "worker": workers.get(x["lease_token"]),
        }
        for x in leases
    ]


def audit_parallel(
    log_path: Path,
    events: list[tuple[float, str, int]],
    survivors: list[int],
    lease: float,
    after_drain: list[dict[str, Any]],
    chaos_stopped: set[str],
) -> dict[str, Any]:
    """:func:`judge_parallel` over the soak database's ``allow`` schedules, plus the
    leases: ``after_drain`` (:func:`leases_held` once the workers were stopped, before the
    lease recovery) and ``chaos_stopped`` (the worker ids SIGKILLed or crashed: their
    leases are the recovery's)."""
    import time

    from django_durable_schedules.conf import app_settings
    from django_durable_schedules.models import RunAttempt, RunReceipt, Schedule

    rows = list(
        Schedule.objects.filter(overlap_policy="allow").values(
            "id",
            "name",
            "max_parallel",
            "start_at",
            "end_at",
            "interval_seconds",
            "next_run_at",
            "status",
            "missed_count",
        )
    )
    ids = [r["id"] for r in rows]
    attempts = list(
        RunAttempt.objects.filter(schedule_id__in=ids).values(
            "id", "schedule_id", "occurrence", "attempt", "idempotency_key", "origin", "claimed_at"
        )
    )
    receipts = list(
        RunReceipt.objects.filter(schedule_id__in=ids).values(
            "attempt_id", "schedule_id", "occurrence", "status", "finished_at"
        )
    )
    renew_every = min(app_settings.RENEW_EVERY_SECONDS, lease / 3)
    result = judge_parallel(
        rows,
        attempts,
        receipts,
        read_runs(log_path),
        events,
        survivors,
        lease,
        renew_every,
        time.time(),
    )
    counts, examples = result["violations"], result["examples"]
    for x in after_drain:
        if x["worker"] not in chaos_stopped:
            counts["parallel_lease_left_by_drain"] += 1
            examples.setdefault("parallel_lease_left_by_drain", []).append(x)
    left = leases_held()
    counts["parallel_leases_left"] = len(left)
    if left:
        examples["parallel_leases_left"] = left[:5]
    result["leases_after_drain"] = len(after_drain)
    return result
