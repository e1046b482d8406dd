"""Concurrency groups in the chaos soak (bench/chaos.py ``--groups``, issue #28): two
groups, their schedules, and the audit of both limits from the callbacks' own records.

The load: ``chaos-capped`` (``max_running`` :data:`MAX_RUNNING`) and ``chaos-rated``
(``rate`` :data:`RATE`), each with ``--group-schedules`` interval schedules due every
second, of the callback ``chaos.grouped`` (``chaos.work``, whose ``start`` line also names
its parent, the worker). They have ``timeout_seconds`` (:data:`TIMEOUT_SECONDS`), so they
run in the workers' isolation children: a frozen worker's child is killed when the worker
resumes and finds its lease lost (``IsolationPool.stop``), and a SIGKILLed worker's child
dies with it (``PR_SET_PDEATHSIG``; checked: :func:`still_alive` 3 s after each SIGKILL,
reported as ``children_survived_sigkill``, and such a run is counted until its own end).

A run's interval is ``[start, end]`` from the side-effect log; a run without a ``done``
line ends at its worker's SIGKILL after its start (when no child survived), else at its
worker's resume (SIGCONT) plus the worker's renewal period (the child is stopped on the
worker's next renewal), else at the audit (``unended``). The limit counts runs that hold a
live lease: a run whose worker was frozen (SIGSTOP) while it ran held its lease at least
until ``freeze + lease - renew_every`` (the lease was last renewed at most ``renew_every``
before the freeze) and at most until ``freeze + lease``; the check cuts it at the first
(``live``), and the report also gives the maximum with the cut at the second
(``upper``) and with no cut (``wall``: the child ran on, unleased, until it was stopped).

Violations: ``group_over_max_running`` (more than ``max_running`` live runs of
``chaos-capped`` at one instant), ``group_claims_over_rate`` (more claims of
``chaos-rated`` than the rate's count in a window of the engine's ``rate_window``: the
rule the engine enforces; a claim handed back unrun, receipted ``released``, gave its place
back and is not counted: :func:`rate_claims`), ``group_started_late`` (a callback of
``chaos-rated`` whose ``start`` line is more than the rate's margin plus
:data:`START_SLACK_SECONDS` after its claim: the worker checks ``Claim.start_by`` just
before it calls the callback and hands a later run back unrun) and ``group_over_rate``
(more callback starts of ``chaos-rated`` than the rate's count in a window of the rate's
length less :data:`START_SLACK_SECONDS`). The last two are what the engine guarantees of
the callbacks' own starts: the checks keep the count in every window of the rate's length
(claims keep it over ``rate_window``, each check within the margin of its claim), and a
``start`` line follows its check by at most the slack, so the lines keep it over the
rate's length less the slack. The report also gives the most lines in a window of the
full length (``max_starts_per_window``).
Nothing lost: the soak's own audit covers every grouped schedule like every other.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

MAX_RUNNING = 2
RATE = "3/s"
TIMEOUT_SECONDS = 20.0  # > the slow callbacks' lease + 1.5 s: they must not time out
VIOLATIONS = (
    "group_over_max_running",
    "group_claims_over_rate",
    "group_started_late",
    "group_over_rate",
)
#: Reported, not violations: none left (``group_over_rate`` was one until the start
#: deadline, ``Claim.start_by``, and the worker's clock anchored before its reads).
FINDINGS: tuple[str, ...] = ()
#: How long after the worker's start-deadline check (``runner.run_claim``, in the run's
#: isolation child) the callback's ``start`` line may come: an INFO log line, the run's
#: context and the callback's first write, on a loaded 2-core host. Nothing bounds it
#: but the scheduler: a process stopped or starved between the check and the call
#: (SIGSTOP of the process that runs the callback, not of its worker) starts it late.
START_SLACK_SECONDS = 0.05


def create_grouped(common: dict[str, Any], count: int) -> None:
    """The two groups and ``count`` interval schedules (every 1 s) in each."""
    from django_durable_schedules import state
    from django_durable_schedules.models import ConcurrencyGroup

    capped = ConcurrencyGroup.objects.create(name="chaos-capped", max_running=MAX_RUNNING)
    rated = ConcurrencyGroup.objects.create(name="chaos-rated", rate=RATE)
    for group in (capped, rated):
        for i in range(count):
            state.create_schedule(
                name=f"{group.name}-{i:02}",
                kind="interval",
                interval_seconds=1,
                overlap_policy="buffer_one" if i % 2 else "skip",
                timeout_seconds=TIMEOUT_SECONDS,
                concurrency_group=group,
                **{**common, "callback": "chaos.grouped"},
            )


def children_of(pid: int) -> list[int]:
    """The live processes whose parent is ``pid`` (Linux ``/proc``; [] elsewhere)."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def still_alive(pids: list[int], within: float) -> list[int]:
    """Of ``pids``, the ones still alive (not zombies) after waiting up to ``within`` s."""
    deadline = time.monotonic() + within
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if _alive(p)]
        time.sleep(0.05)
    return alive


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def read_runs(log_path: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """``(key, attempt)`` -> ``{"start", "end", "pid", "ppid"}`` of the executions whose
    ``start`` line names a parent (``chaos.grouped``, ``chaos.parallel``; ``end`` None
    without a ``done`` line)."""
    runs: dict[tuple[str, int], dict[str, Any]] = {}
    if not log_path.exists():
        return runs
    for line in log_path.read_text().splitlines():
        f = line.split()
        if f[0] == "start" and len(f) >= 6:
            runs[(f[1], int(f[2]))] = {
                "start": float(f[4]),
                "end": None,
                "pid": int(f[3]),
                "ppid": int(f[5]),
            }
        elif f[0] == "done" and (f[1], int(f[2])) in runs:
            runs[(f[1], int(f[2]))]["end"] = float(f[5])
    return runs


def run_spans(
    run: dict[str, Any],
    events: list[tuple[float, str, int]],
    survivors: list[int],
    lease: float,
    renew_every: float,
    now: float,
) -> tuple[tuple[float, float], tuple[float, float], tuple[float, float], str]:
    """A run's ``live``, ``upper`` and ``wall`` intervals and how it ended (``done``,
    ``sigkill``, ``stopped_on_resume``, ``fenced_in_outage``, ``unended``); ``events``:
    the fleet's ``(wall time, "kill" | "stop" | "cont", worker pid)`` and the soak's
    ``(wall time, "outage" | "outage_end", 0)`` (the PostgreSQL restart: every worker).
    The worker is the run's ``pid`` (in process) or its ``ppid`` (an isolation child):
    events of either count.

    An outage cuts a lease as a freeze does: no renewal reaches the database, so the lease
    lapses ``lease`` after the last one (at most ``renew_every`` before the outage) unless
    the worker is back first, and another run may then be claimed beside this one. A run
    in a thread runs on (nothing can stop it); a run in a child is killed at its lease's
    deadline by its own thread (``IsolationPool``), leaving no ``done`` line: it ended by
    ``outage + lease`` at the latest (``fenced_in_outage``)."""
    mine = sorted((t, k) for t, k, pid in events if pid in (run["pid"], run["ppid"], 0))
    start, end = run["start"], run["end"]
    after = [(t, k) for t, k in mine if t >= start]
    how = "done"
    if end is None:
        kill = next((t for t, k in after if k == "kill"), None)
        cont = next((t for t, k in after if k == "cont"), None)
        outage = next((t for t, k in after if k == "outage"), None)
        if kill is not None and run["pid"] not in survivors:
            end, how = kill, "sigkill"
        elif cont is not None:
            end, how = cont + renew_every, "stopped_on_resume"
        elif outage is not None:
            end, how = outage + lease, "fenced_in_outage"
        else:
            end, how = now, "unended"
    # The freeze (or outage) that cuts the lease: one under way at the start, else the
    # first after it.
    freeze = None
    for t, k in mine:
        if t < start:
            freeze = t if k in ("stop", "outage") else None
    if freeze is None:
        freeze = next((t for t, k in after if k in ("stop", "outage") and t < end), None)
    low = end if freeze is None else min(end, freeze + lease - renew_every)
    high = end if freeze is None else min(end, freeze + lease)
    return (start, max(start, low)), (start, max(start, high)), (start, end), how


def max_overlap(intervals: list[tuple[float, float]]) -> tuple[int, float]:
    """The most intervals ``[start, end)`` open at one instant, and the first such instant."""
    edges = sorted([(s, 1) for s, _e in intervals] + [(e, -1) for _s, e in intervals])
    best, at, now = 0, 0.0, 0
    for t, step in edges:  # an end at t sorts before a start at t: touching is no overlap
        now += step
        if now > best:
            best, at = now, t
    return best, at


def max_in_window(starts: list[float], seconds: float) -> tuple[int, float]:
    """The most ``starts`` in one window ``[t, t + seconds)``, and its first start."""
    starts = sorted(starts)
    best, at, lo = 0, 0.0, 0
    for hi, t in enumerate(starts):
        while starts[lo] + seconds <= t:  # t outside [starts[lo], starts[lo] + seconds)
            lo += 1
        if hi - lo + 1 > best:
            best, at = hi - lo + 1, starts[lo]
    return best, at


def rate_claims(attempts: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Group name -> the claim instants (POSIX seconds) its rate counts, from attempt rows
    (``schedule__concurrency_group__name``, ``claimed_at``, ``receipt__status``): every
    claim but the ones handed back unrun (receipt ``released``: past the rate's start
    deadline, a worker draining, a child refusing a lost lease), whose place the
    completion gives back to the rate (``state.groups.unstart_groups``), so that a later
    claim may take it."""
    claimed: dict[str, list[float]] = defaultdict(list)
    for a in attempts:
        if a.get("receipt__status") != "released":
            claimed[a["schedule__concurrency_group__name"]].append(a["claimed_at"].timestamp())
    return claimed


def audit_groups(
    log_path: Path, events: list[tuple[float, str, int]], survivors: list[int], lease: float
) -> dict[str, Any]:
    """Check both groups' limits from the side-effect log and the fleet's ``events``
    (:func:`run_spans`: each run's spans, a freeze or the PostgreSQL restart cutting its
    lease); ``survivors``: isolation
    children still alive 3 s after their worker's SIGKILL. Returns ``violations``,
    ``examples`` and ``groups`` (the numbers, per group)."""
    from django_durable_schedules.conf import app_settings
    from django_durable_schedules.models import ConcurrencyGroup, RunAttempt
    from django_durable_schedules.models.groups import parse_rate
    from django_durable_schedules.state.group_rules import rate_margin, rate_window

    renew_every = min(app_settings.RENEW_EVERY_SECONDS, lease / 3)
    now = time.time()
    claims = list(
        RunAttempt.objects.filter(schedule__concurrency_group__isnull=False).values(
            "idempotency_key",
            "attempt",
            "schedule__concurrency_group__name",
            "claimed_at",
            "receipt__status",
        )
    )
    group_of = {(a["idempotency_key"], a["attempt"]): a for a in claims}
    claimed = rate_claims(claims)
    delays: dict[str, list[float]] = defaultdict(list)
    delay_of: dict[float, float] = {}  # a start -> how long after its claim
    live: dict[str, list[tuple[float, float]]] = defaultdict(list)
    upper: dict[str, list[tuple[float, float]]] = defaultdict(list)
    wall: dict[str, list[tuple[float, float]]] = defaultdict(list)
    starts: dict[str, list[float]] = defaultdict(list)
    ended_by: dict[str, int] = defaultdict(int)
    for key, run in read_runs(log_path).items():
        attempt = group_of.get(key)
        group = attempt["schedule__concurrency_group__name"] if attempt else "?"
        if attempt:
            delays[group].append(run["start"] - attempt["claimed_at"].timestamp())
            delay_of[run["start"]] = delays[group][-1]
        lo, hi, wa, how = run_spans(run, events, survivors, lease, renew_every, now)
        ended_by[how] += 1
        start = run["start"]
        live[group].append(lo)
        upper[group].append(hi)
        wall[group].append(wa)
        starts[group].append(start)

    counts: dict[str, int] = {n: 0 for n in (*VIOLATIONS, *FINDINGS)}
    examples: dict[str, list[Any]] = defaultdict(list)
    numbers: dict[str, Any] = {
        "runs_ended_by": dict(ended_by),
        "children_survived_sigkill": len(survivors),
        "renew_every_seconds": round(renew_every, 3),
    }
    for g in ConcurrencyGroup.objects.filter(name__startswith="chaos-").order_by("name"):
        late = sorted(delays[g.name])
        row: dict[str, Any] = {
            "executions": len(starts[g.name]),
            "claims": len(claimed[g.name]),
            "claims_released": sum(
                1
                for a in claims
                if a["schedule__concurrency_group__name"] == g.name
                and a["receipt__status"] == "released"
            ),
            "claim_to_start_seconds": {
                "median": round(late[len(late) // 2], 3) if late else None,
                "max": round(late[-1], 3) if late else None,
            },
        }
        if g.max_running:
            seen, at = max_overlap(live[g.name])
            row.update(
                max_running=g.max_running,
                max_concurrent_live=seen,
                max_concurrent_upper=max_overlap(upper[g.name])[0],
                max_concurrent_wall=max_overlap(wall[g.name])[0],
            )
            if seen > g.max_running:
                counts["group_over_max_running"] += 1
                examples["group_over_max_running"].append(f"{g.name}: {seen} live at {at:.3f}")
        if g.rate:
            rate = parse_rate(g.rate)
            assert rate is not None
            count, seconds = rate.count, rate.seconds
            span = seconds - START_SLACK_SECONDS  # the lines' window: see the docstring
            seen, at = max_in_window(starts[g.name], span)
            window = rate_window(seconds)
            allowed = rate_margin(seconds) + START_SLACK_SECONDS
            past = [d - rate_margin(seconds) for d in delays[g.name]]
            claims_seen = max_in_window(claimed[g.name], window)
            row.update(
                rate=g.rate,
                engine_window_seconds=rate_window(seconds),
                start_slack_seconds=START_SLACK_SECONDS,
                max_starts_per_window=max_in_window(starts[g.name], seconds)[0],
                max_starts_per_slack_window=seen,
                max_start_past_margin_seconds=round(max(past), 3) if past else None,
                max_starts_per_engine_window=max_in_window(starts[g.name], window)[0],
                max_claims_per_window=max_in_window(claimed[g.name], seconds)[0],
                max_claims_per_engine_window=claims_seen[0],
            )
            if claims_seen[0] > count:
                counts["group_claims_over_rate"] += 1
                examples["group_claims_over_rate"].append(
                    f"{g.name}: {claims_seen[0]} claims in {window} s from {claims_seen[1]:.3f}"
                )
            if late := [d for d in delays[g.name] if d > allowed]:
                counts["group_started_late"] += len(late)
                examples["group_started_late"].append(
                    f"{g.name}: {len(late)} callbacks started more than {allowed:.3f} s "
                    f"after their claims: {', '.join(f'{d:.3f} s' for d in sorted(late)[-5:])}"
                )
            if seen > count:
                counts["group_over_rate"] += 1
                examples["group_over_rate"].append(
                    f"{g.name}: {seen} starts in [{at:.3f}, {at + span:.3f}), each so "
                    "long after its claim: "
                    + ", ".join(
                        f"{delay_of.get(t, float('nan')):.3f} s"
                        for t in sorted(starts[g.name])
                        if at <= t < at + span
                    )
                )
        numbers[g.name] = row
    if os.environ.get("CHAOS_GROUPS_DUMP"):  # the intervals, to study a violation
        Path(os.environ["CHAOS_GROUPS_DUMP"]).write_text(repr(dict(live)))
    return {
        "violations": {n: counts.get(n, 0) for n in VIOLATIONS},
        "findings": {n: counts.get(n, 0) for n in FINDINGS},
        "examples": dict(examples),
        "groups": numbers,
    }
