"""The benches' own judgements (bench/ is not a package: its scripts are imported from
there): what makes ``claim_plan.py`` call the claim's plan bounded, and how
``throughput.py`` counts the CPU of the workers' PostgreSQL backends."""

import sys
from pathlib import Path

import pytest

from .bench_modules import import_bench

(
    claim_plan,
    claim_plan_chains,
    claim_plan_groups,
    throughput,
    memory_soak,
) = import_bench(
    "claim_plan",
    "claim_plan_chains",
    "claim_plan_groups",
    "throughput",
    "memory_soak",
)


def _scan(node_type: str, relation: str, **more):
    return {"Node Type": node_type, "Relation Name": relation, "Actual Rows": 100, **more}


def _claim_plan(schedule_scan: dict) -> list[dict]:
    """The claim's plan as PostgreSQL 15 printed it at 10 M schedules (trimmed): Limit ->
    LockRows -> the schedule table's scan, whose per-row EXISTS on the calendar links is a
    SubPlan (a Seq Scan while the link table is empty)."""
    link = _scan(
        "Seq Scan",
        "durable_schedules_schedule_exclusion_calendars",
        **{"Parent Relationship": "SubPlan", "Actual Rows": 0},
    )
    return [
        {
            "Execution Time": 0.35,
            "Plan": {
                "Node Type": "Limit",
                "Shared Hit Blocks": 203,
                "Plans": [
                    {
                        "Node Type": "LockRows",
                        "Parent Relationship": "Outer",
                        "Plans": [{**schedule_scan, "Plans": [link]}],
                    }
                ],
            },
        }
    ]


def test_a_seq_scan_in_the_calendar_subplan_leaves_the_claim_bounded():
    index = _scan(
        "Index Scan",
        "durable_schedules_schedule",
        **{"Index Name": "dds_sched_claim_idx", "Parent Relationship": "Outer"},
    )
    found = claim_plan.summarize(_claim_plan(index))
    assert found["index_scan"] is True
    assert found["subplan_scans"] == [
        "Seq Scan on durable_schedules_schedule_exclusion_calendars: 0 rows x 1 loops"
    ]
    assert found["rows_read_by_scans"] == 100 and found["shared_buffers"] == 203


def test_a_seq_scan_of_the_schedule_table_is_still_unbounded():
    seq = _scan("Seq Scan", "durable_schedules_schedule", **{"Parent Relationship": "Outer"})
    assert claim_plan.summarize(_claim_plan(seq))["index_scan"] is False


def test_a_chain_statement_is_bounded_unless_it_scans_the_schedules_or_the_chain_slots():
    """``chains_due``: a Seq Scan of the links (the live read's uncorrelated EXISTS, which
    stops at the first link) is listed, not held against the plan; one of the schedules or
    of the chain slots anywhere in the plan is."""
    index = _scan(
        "Index Scan",
        "durable_schedules_schedule",
        **{"Index Name": "dds_sched_claim_idx", "Parent Relationship": "Outer"},
    )
    doc = _claim_plan(index)
    doc[0]["Plan"]["Plans"].append(
        _scan("Seq Scan", "durable_schedules_schedulelink", **{"Parent Relationship": "InitPlan"})
    )
    found = claim_plan.summarize(doc)
    assert found["seq_scans"] == [
        "durable_schedules_schedule_exclusion_calendars",
        "durable_schedules_schedulelink",
    ]
    assert claim_plan_chains.bounded(found) is True
    slots = _scan("Seq Scan", "durable_schedules_chainslot", **{"Parent Relationship": "SubPlan"})
    doc[0]["Plan"]["Plans"].append(slots)
    assert claim_plan_chains.bounded(claim_plan.summarize(doc)) is False


def test_the_wake_up_is_judged_apart_from_the_claims_group_statements():
    """``groups_due``: the idle worker's wake-up statements are no statement of the claim's
    groups (their p99s are not added to the claim's), and one that reads a held backlog
    through is unbounded like a claim's read (100,014 rows read past: the engine before
    ``state/wakeup_due.py``)."""
    assert claim_plan_groups.is_group_statement("wakeup_1") is False
    assert claim_plan_groups.is_group_statement("read_2") is True
    backlog = {"seq_scans": [], "rows_read_by_scans": 5, "rows_filtered_by_scans": 100_014}
    assert claim_plan_groups.bounded(backlog, 100_000, 100) is False
    ranges = {"seq_scans": [], "rows_read_by_scans": 13, "rows_filtered_by_scans": 12}
    assert claim_plan_groups.bounded(ranges, 100_000, 100) is True


def test_backends_opened_during_the_round_count_whole_and_ended_ones_are_counted():
    cpu_now = {10: 5.0, 12: 0.3}  # 10 was there at the start (at 4.0); 12 opened later
    used, gone = throughput.backend_cpu_since(
        {10: 4.0, 11: 2.0}, [10, 12], cpu=lambda pids: sum(cpu_now[p] for p in pids)
    )
    assert used == pytest.approx(1.3)
    assert gone == 1  # 11 ended: its CPU of the round is unknown


def test_memory_soak_summary_reads_a_plateau_and_a_climb():
    """``memory_soak.summarize``: start, end, max and the least-squares slope of the
    second half of the samples (MiB per minute): start-up growth is left out."""
    plateau = [{"minutes": m, "rss_mib": 80.0 + (5.0 if m < 2 else 6.0)} for m in range(8)]
    summary = memory_soak.summarize(plateau)
    assert summary["start_mib"] == 85.0 and summary["end_mib"] == 86.0
    assert summary["max_mib"] == 86.0 and summary["slope_mib_per_min"] == 0.0
    climb = [{"minutes": m, "rss_mib": 76.0 + 1.25 * m} for m in range(26)]
    assert memory_soak.summarize(climb)["slope_mib_per_min"] == 1.25
    assert memory_soak.summarize([])["slope_mib_per_min"] is None
    assert memory_soak.slope_per_minute([(1.0, 5.0)]) == 0.0


def test_memory_soak_counts_a_process_threads_and_children():
    """The soak samples the worker's ``Threads`` and child processes from ``/proc`` (a
    thread per overrunning callback, or children replaced at hard timeouts, would show
    there); a process that is gone reads 0. Linux only."""
    import os
    import subprocess
    import threading

    if not Path("/proc/self/status").exists():
        pytest.skip("no /proc")
    pid = os.getpid()
    release = threading.Event()
    extra = threading.Thread(target=release.wait, daemon=True)
    before = memory_soak.status_field(pid, "Threads")
    extra.start()
    try:
        assert memory_soak.status_field(pid, "Threads") == before + 1
    finally:
        release.set()
        extra.join()
    assert memory_soak.rss_kib(pid) > 0
    children = memory_soak.children_of(pid)
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        assert memory_soak.children_of(pid) == children + 1
    finally:
        child.communicate(b"")
    assert memory_soak.status_field(child.pid, "Threads") == 0  # reaped: gone
    samples = [{"minutes": m, "rss_mib": 60.0, "threads": 30 + m % 3} for m in range(6)]
    assert memory_soak.summarize(samples)["max_threads"] == 32
