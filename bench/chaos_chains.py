"""Chains in the chaos soak (bench/chaos.py ``--chains``, issue #30 item 1): three chains
of kind ``after`` schedules, and the audit of the chain slots against the run tables.

The load (links written directly with ``ScheduleLink.objects.create``; every step
``chaos.work``, so it fails, skips and overruns its lease like the rest of the soak):

* ``chaos-chain-a0`` (interval :data:`EVERY` s, 3 attempts) -> ``a1`` -> ``a2``;
* ``chaos-chain-b0`` (the same, one attempt: its planned failures and skips are final, so
  its downstream instants are counted ``missed``) -> ``b1`` -> ``b2``;
* ``chaos-chain-c0`` and ``chaos-chain-d0`` (the same grid: same interval and
  ``start_at``) -> ``c1`` (after both) -> ``c2``.

Step 1 waits :data:`WAIT_STEP1` s, step 2 :data:`WAIT_STEP2` s (``wait_seconds``).

Violations (:func:`judge_chains`, from plain rows; :func:`audit_chains` reads them), the
instants counted from the live grid only (origins ``scheduled``, ``buffered``,
``deferred``: a backfill, re-run or trigger is no instant of the grid):

* ``chain_instant_succeeded_twice``: a downstream instant (schedule, nominal
  ``scheduled_for``) with more than one ``succeeded``/``enqueued`` receipt;
* ``chain_ran_before_upstreams``: a downstream attempt that ran (any receipt but
  ``missed``/``degraded`` at the claim) claimed before every upstream had a success
  receipt for its instant (``claimed_at`` < the upstream's earliest success
  ``finished_at``, or no such success at all);
* ``chain_slot_undecided``: a chain slot ``run`` without a receipted attempt of the
  downstream for the instant, or ``missed`` without a ``missed`` receipt ``UpstreamNotDone``
  for it (its deadline more than :data:`END_MARGIN` s before the workers were stopped); or
  still open (``waiting``/``ready``) after more than :data:`END_MARGIN` s of time after its
  deadline during which its downstream was free. The engine settles a slot only on a
  downstream that is free (no lease, no retry waiting: ``Schedule.chain_free_q``; one
  occurrence at a time, docs/concepts.md "Chaining"), so a downstream busy with an earlier
  instant (a run past its lease, a frozen worker's lease until it is recovered, retries and
  their backoff) holds its expired slots undecided that long: the busy time is each of
  its occurrences from its first attempt's claim to its last attempt's receipt (open ones,
  and a retry still waiting at the stop, to the stop);
* ``chain_ready_stalled``: a slot that became ready (its last upstream's success
  receipt's ``finished_at``) and stayed unclaimed (to its ``finished_at`` when ``run``, to
  the stop when still ``ready``) for more than :data:`READY_BOUND` s of time during which
  its downstream was free (the busy time as above).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import datetime, timedelta
from typing import Any

EVERY = 3  # the roots' interval (seconds)
WAIT_STEP1 = 6  # wait_seconds of the first step below a root
WAIT_STEP2 = 10  # of the second
END_MARGIN = 10.0  # seconds of a free downstream an expired slot may stay open (and the drain)
READY_BOUND = 15.0  # seconds a ready slot may wait while its downstream is free
LIVE = frozenset({"scheduled", "buffered", "deferred"})  # chain_rules.CHAIN_ORIGINS
SUCCESS = frozenset({"succeeded", "enqueued"})
NOT_RUN = frozenset({"missed", "degraded"})  # receipted at the claim, never started
VIOLATIONS = (
    "chain_instant_succeeded_twice",
    "chain_ran_before_upstreams",
    "chain_slot_undecided",
    "chain_ready_stalled",
)


def create_chains(common: dict[str, Any]) -> None:
    """The four roots (every :data:`EVERY` s from a whole second 2 s ahead, one grid) and
    their six downstream schedules, linked (see the module docstring)."""
    from django_durable_schedules import state
    from django_durable_schedules.models import Schedule, ScheduleLink

    start = (state.db_now() + timedelta(seconds=2)).replace(microsecond=0)
    root = {"kind": "interval", "interval_seconds": EVERY, "start_at": start}
    rows = {
        name: state.create_schedule(name=f"chaos-chain-{name}", **root, **{**common, **more})
        for name, more in (("a0", {}), ("b0", {"max_attempts": 1}), ("c0", {}), ("d0", {}))
    }
    for chain, ups in (("a", ["a0"]), ("b", ["b0"]), ("c", ["c0", "d0"])):
        for step, wait in ((1, WAIT_STEP1), (2, WAIT_STEP2)):
            name = f"{chain}{step}"
            # wait_seconds is not (yet) a field create_schedule takes: saved as the model
            rows[name] = Schedule(
                name=f"chaos-chain-{name}", kind="after", wait_seconds=wait, **common
            )
            rows[name].full_clean()
            rows[name].save()
            for up in ups:
                ScheduleLink.objects.create(downstream=rows[name], upstream=rows[up])
            ups = [name]


def _instant(a: dict[str, Any]) -> datetime:
    return a["nominal_for"] or a["scheduled_for"]


def free_seconds(start: datetime, end: datetime, busy: list[tuple[datetime, datetime]]) -> float:
    """Seconds of ``[start, end]`` covered by none of the ``busy`` intervals."""
    free, at = 0.0, start
    for b0, b1 in sorted(busy):
        if b1 <= at:
            continue
        if b0 >= end:
            break
        if b0 > at:
            free += (b0 - at).total_seconds()
        at = max(at, b1)
        if at >= end:
            return free
    return free + max(0.0, (end - at).total_seconds())


def busy_spans(
    attempts: list[dict[str, Any]], stopped_at: datetime, retry_waiting: bool = False
) -> list[tuple[datetime, datetime]]:
    """When one schedule's ``attempts`` (rows as :func:`judge_chains` takes) held it busy,
    so that no chain slot of it could be settled: each occurrence from its first attempt's
    ``claimed_at`` to its last receipt's ``finished_at`` (the gaps between its retries
    included; an open attempt to ``stopped_at``), attempts receipted at the claim
    (:data:`NOT_RUN`) left out. ``retry_waiting``: the schedule had a retry waiting at the
    stop, so its last occurrence runs to ``stopped_at``."""
    spans: dict[Any, list[datetime]] = {}
    for a in attempts:
        if a["receipt__status"] in NOT_RUN:
            continue
        end = a["receipt__finished_at"] or stopped_at
        span = spans.setdefault(a["occurrence"], [a["claimed_at"], end])
        span[0], span[1] = min(span[0], a["claimed_at"]), max(span[1], end)
    if retry_waiting and spans:
        spans[max(spans)][1] = stopped_at
    return [(b0, b1) for b0, b1 in spans.values()]


def judge_chains(
    links: list[tuple[Any, Any]],
    attempts: list[dict[str, Any]],
    slots: list[dict[str, Any]],
    stopped_at: datetime,
    names: dict[Any, str] | None = None,
    retry_waiting: set[Any] | frozenset[Any] = frozenset(),
) -> dict[str, Any]:
    """The four chain checks over plain rows: ``links`` ``(downstream id, upstream id)``;
    ``attempts`` with ``schedule_id``, ``occurrence``, ``attempt``, ``scheduled_for``,
    ``nominal_for``, ``claimed_at``, ``origin`` and their receipt's ``receipt__status``,
    ``receipt__finished_at``, ``receipt__error_type`` (None without one); ``slots`` with
    ``downstream_id``, ``scheduled_for``, ``deadline``, ``status``, ``finished_at``;
    ``stopped_at``: when the workers were told to stop (aware). ``names``: id -> name for
    the examples; ``retry_waiting``: the downstream ids with a retry waiting at the stop.
    Returns ``violations`` (count per name of :data:`VIOLATIONS`),
    ``examples`` (at most 5 each) and ``totals``."""
    names = names or {}
    counts: Counter[str] = Counter()
    examples: dict[str, list[str]] = defaultdict(list)

    def violation(name: str, example: str) -> None:
        counts[name] += 1
        if len(examples[name]) < 5:
            examples[name].append(example)

    def label(sid: Any, at: datetime) -> str:
        return f"{names.get(sid, sid)} @ {at.isoformat()}"

    upstreams: dict[Any, list[Any]] = defaultdict(list)
    for down, up in links:
        upstreams[down].append(up)
    by_schedule: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for a in attempts:
        by_schedule[a["schedule_id"]].append(a)
    # (schedule, instant) -> its earliest success's finished_at (what made slots ready; a
    # backfill slot's success is noted too, by its scheduled_for)
    success_at: dict[tuple[Any, datetime], datetime] = {}
    for a in attempts:
        if a["receipt__status"] in SUCCESS and (a["origin"] in LIVE or a["origin"] == "backfill"):
            key = (a["schedule_id"], _instant(a) if a["origin"] in LIVE else a["scheduled_for"])
            done = a["receipt__finished_at"]
            success_at[key] = min(done, success_at.get(key, done))

    for down in upstreams:
        live = [a for a in by_schedule[down] if a["origin"] in LIVE]
        won = Counter(_instant(a) for a in live if a["receipt__status"] in SUCCESS)
        for at, n in won.items():
            if n > 1:
                violation("chain_instant_succeeded_twice", f"{label(down, at)}: x{n}")
        for a in live:
            if a["receipt__status"] in NOT_RUN:
                continue
            at = _instant(a)
            for up in upstreams[down]:
                done = success_at.get((up, at))
                if done is None or done > a["claimed_at"]:
                    violation(
                        "chain_ran_before_upstreams",
                        f"{label(down, at)} #{a['occurrence']}.{a['attempt']} claimed "
                        f"{a['claimed_at'].isoformat()}, {names.get(up, up)} succeeded "
                        f"{done.isoformat() if done else 'never'}",
                    )

    cutoff = stopped_at - timedelta(seconds=END_MARGIN)
    busy = {
        down: busy_spans(by_schedule[down], stopped_at, down in retry_waiting) for down in upstreams
    }
    statuses: Counter[str] = Counter()
    waited: list[float] = []
    for s in slots:
        down, at = s["downstream_id"], s["scheduled_for"]
        statuses[s["status"]] += 1
        mine = [a for a in by_schedule[down] if a["origin"] in LIVE and _instant(a) == at]
        ok, note = True, ""
        if s["status"] in ("run", "missed") and s["deadline"] < cutoff:
            if s["status"] == "run":
                ok = any(a["receipt__status"] not in (None, *NOT_RUN) for a in mine)
            else:
                ok = any(
                    a["receipt__status"] == "missed"
                    and a["receipt__error_type"] == "UpstreamNotDone"
                    for a in mine
                )
        elif s["status"] not in ("run", "missed") and s["deadline"] < stopped_at:
            # open past its deadline: the engine settles it once its downstream is free
            expired = free_seconds(s["deadline"], stopped_at, busy.get(down, []))
            ok, note = expired <= END_MARGIN, f", {expired:.1f} s free after it"
        if not ok:
            violation(
                "chain_slot_undecided",
                f"{label(down, at)}: {s['status']}, deadline {s['deadline'].isoformat()}, "
                f"attempts {[(a['attempt'], a['receipt__status']) for a in mine]}{note}",
            )
        if s["status"] not in ("run", "ready"):
            continue
        dones = [success_at.get((up, at)) for up in upstreams[down]]
        if not dones or None in dones:
            continue  # run without its upstreams: chain_ran_before_upstreams says so
        ready_at = max(d for d in dones if d is not None)
        taken_at = s["finished_at"] if s["status"] == "run" else stopped_at
        free = free_seconds(ready_at, max(ready_at, taken_at), busy.get(down, []))
        waited.append(free)
        if free > READY_BOUND:
            violation(
                "chain_ready_stalled",
                f"{label(down, at)}: ready {ready_at.isoformat()}, {s['status']} "
                f"{taken_at.isoformat()}, {free:.1f} s with the downstream free",
            )
    waited.sort()
    return {
        "violations": {n: counts.get(n, 0) for n in VIOLATIONS},
        "examples": dict(examples),
        "totals": {
            "slots_by_status": dict(sorted(statuses.items())),
            "slots_judged_decided": sum(1 for s in slots if s["deadline"] < cutoff),
            "downstream_successes": sum(
                1
                for a in attempts
                if a["schedule_id"] in upstreams
                and a["origin"] in LIVE
                and a["receipt__status"] in SUCCESS
            ),
            "ready_to_claim_free_seconds": {
                "median": round(waited[len(waited) // 2], 3) if waited else None,
                "max": round(waited[-1], 3) if waited else None,
            },
        },
    }


def audit_chains(stopped_at: datetime) -> dict[str, Any]:
    """:func:`judge_chains` over the soak database's links, chain schedules' attempts
    (with their receipts) and chain slots; ``stopped_at``: when the workers were told to
    stop (aware)."""
    from django_durable_schedules.models import ChainSlot, RunAttempt, Schedule, ScheduleLink

    links = list(ScheduleLink.objects.values_list("downstream_id", "upstream_id"))
    ids = {i for pair in links for i in pair}
    attempts = list(
        RunAttempt.objects.filter(schedule_id__in=ids).values(
            "schedule_id",
            "schedule_name",
            "occurrence",
            "attempt",
            "scheduled_for",
            "nominal_for",
            "claimed_at",
            "origin",
            "receipt__status",
            "receipt__finished_at",
            "receipt__error_type",
        )
    )
    names = {a["schedule_id"]: a["schedule_name"] for a in attempts}
    retry_waiting = set(
        Schedule.objects.filter(pk__in=ids, retry_scheduled_for__isnull=False).values_list(
            "pk", flat=True
        )
    )
    slots = list(
        ChainSlot.objects.values(
            "downstream_id", "scheduled_for", "deadline", "status", "finished_at"
        )
    )
    return judge_chains(links, attempts, slots, stopped_at, names, retry_waiting)
